//! Path matching: one table of exact paths and element-wise prefixes per host, and the
//! host's regular expressions (ingress-nginx's `use-regex`), tried in rank order.

use super::fxhash::FxMap;
pub(crate) use portico_model::matching::PathMatch;
use regex::Regex;

/// The paths of one host, each mapped to the best (lowest) policy rank that matches it.
#[derive(Debug, Default, Clone)]
pub(crate) struct PathTable {
    /// Exact path → best rank among the exact rule and every prefix that matches the path.
    exact: FxMap<Box<str>, u32>,
    /// Normalized prefix → best rank among this prefix and every shorter prefix above it.
    prefix: FxMap<Box<str>, u32>,
    /// Regular expressions by rank, best first (most hosts have none). One that did not
    /// compile is left out: it matches nothing.
    regexes: Vec<(Regex, u32)>,
}

/// Every prefix a request path can match, longest first, ending with `/`.
fn candidates(path: &str) -> impl Iterator<Item = &str> {
    let trimmed = path.trim_end_matches('/');
    let inner = trimmed
        .char_indices()
        .rev()
        .filter(|&(i, c)| c == '/' && i > 0)
        .map(move |(i, _)| &trimmed[..i]);
    std::iter::once(trimmed)
        .filter(|t| !t.is_empty())
        .chain(inner)
        .chain(std::iter::once("/"))
}

impl PathTable {
    /// Builds a table from (path, rank) entries; on equal paths the lowest rank wins.
    /// `regex` gives the compiled expression of a pattern (compiled once per pattern for every
    /// host's table).
    pub(crate) fn build<'a>(
        entries: impl IntoIterator<Item = (&'a PathMatch, u32)>,
        regex: &dyn Fn(&str) -> Option<Regex>,
    ) -> Self {
        let mut table = PathTable::default();
        for (path, rank) in entries {
            let (map, key) = match path {
                PathMatch::Exact(p) => (&mut table.exact, p),
                PathMatch::Prefix(p) => (&mut table.prefix, p),
                PathMatch::Regex(p) => {
                    table.regexes.extend(regex(p).map(|r| (r, rank)));
                    continue;
                }
            };
            let best = map.entry(key.as_str().into()).or_insert(rank);
            *best = (*best).min(rank);
        }
        table.regexes.sort_by_key(|(_, rank)| *rank);
        table.resolve();
        table
    }

    /// Folds shorter prefixes into longer ones, so a lookup can stop at its first hit. Only
    /// the entries whose rank changes are copied out (most tables have none).
    fn resolve(&mut self) {
        let better = |map: &FxMap<Box<str>, u32>, best: &dyn Fn(&str) -> Option<u32>| {
            (map.iter())
                .filter_map(|(key, &rank)| {
                    best(key).filter(|&b| b < rank).map(|b| (key.clone(), b))
                })
                .collect::<Vec<_>>()
        };
        for (key, best) in better(&self.prefix, &|key| self.walk_prefixes(key)) {
            self.prefix.insert(key, best);
        }
        for (key, best) in better(&self.exact, &|key| self.lookup_prefix(key)) {
            self.exact.insert(key, best);
        }
    }

    /// The minimum rank over every prefix entry matching `path`, whether folded yet or not.
    fn walk_prefixes(&self, path: &str) -> Option<u32> {
        candidates(path)
            .filter_map(|c| self.prefix.get(c).copied())
            .min()
    }

    fn lookup_prefix(&self, path: &str) -> Option<u32> {
        candidates(path).find_map(|c| self.prefix.get(c).copied())
    }

    /// The best rank matching `path`, if any.
    pub(crate) fn lookup(&self, path: &str) -> Option<u32> {
        let plain = match self.exact.get(path) {
            Some(&rank) => Some(rank),
            None => self.lookup_prefix(path),
        };
        // A regular expression wins when it ranks before the plain match.
        let mut better = self
            .regexes
            .iter()
            .take_while(|(_, rank)| plain.is_none_or(|p| *rank < p));
        better
            .find(|(re, _)| re.is_match(path))
            .map_or(plain, |(_, rank)| Some(*rank))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(path: &str) -> Vec<&str> {
        candidates(path).collect()
    }

    #[test]
    fn candidates_walk_element_boundaries_longest_first() {
        assert_eq!(all("/a/b/c"), ["/a/b/c", "/a/b", "/a", "/"]);
        assert_eq!(all("/a/b/"), ["/a/b", "/a", "/"]);
        assert_eq!(all("/"), ["/"]);
        assert_eq!(all(""), ["/"]);
        assert_eq!(all("/a//b"), ["/a//b", "/a/", "/a", "/"]);
    }

    #[test]
    fn shorter_prefix_with_lower_rank_wins_over_longer_one() {
        let (a, b) = (PathMatch::prefix("/"), PathMatch::prefix("/a"));
        let table = PathTable::build([(&a, 0), (&b, 1)], &|_| None);
        assert_eq!(table.lookup("/a/x"), Some(0));
    }

    #[test]
    fn a_regex_wins_only_when_it_ranks_before_the_plain_match() {
        let compile = |p: &str| super::super::options::path_regex(p, true);
        let (long, plain, short) = (
            PathMatch::Regex("/foo/bar/[a-z]{3}".into()),
            PathMatch::Exact("/foo/bar/bar".into()),
            PathMatch::Regex("/foo".into()),
        );
        let table = PathTable::build([(&long, 0), (&plain, 1), (&short, 2)], &compile);
        // ingress-nginx's documented caveat: the longer regex takes the exact path.
        assert_eq!(table.lookup("/foo/bar/bar"), Some(0));
        assert_eq!(table.lookup("/FOO/bar/baz"), Some(0));
        assert_eq!(table.lookup("/foox"), Some(2));
        assert_eq!(table.lookup("/x/foo"), None);
        let table = PathTable::build([(&plain, 0), (&short, 1)], &compile);
        assert_eq!(table.lookup("/foo/bar/bar"), Some(0));
    }
}
