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
    /// Policies with header conditions, by rank: they may not match a request whose path they
    /// match, so they stay out of the maps and are walked in rank order before the maps'
    /// answer (a table has few: only Gateway API rules with header matches).
    /// A regular expression's compiled form beside it (none: it did not compile).
    guarded: Vec<(PathMatch, Option<Regex>, u32)>,
    /// Regular expressions by rank, best first (most hosts have none). One that did not
    /// compile is left out: it matches nothing.
    regexes: Vec<(Regex, u32)>,
}

/// One entry of a table: a path, its policy's rank, whether the policy has header conditions.
pub(crate) type PathEntry<'a> = (&'a PathMatch, u32, bool);

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
    /// Builds a table from its entries; on equal paths the lowest unguarded rank wins.
    /// `regex` gives the compiled expression of a pattern (compiled once per pattern for every
    /// host's table).
    pub(crate) fn build<'a>(
        entries: impl IntoIterator<Item = PathEntry<'a>>,
        regex: &dyn Fn(&str) -> Option<Regex>,
    ) -> Self {
        let mut table = PathTable::default();
        for (path, rank, guarded) in entries {
            if guarded {
                let compiled = match path {
                    PathMatch::Regex(p) => regex(p),
                    _ => None,
                };
                table.guarded.push((path.clone(), compiled, rank));
                continue;
            }
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
        table.guarded.sort_by_key(|(_, _, rank)| *rank);
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

    /// The best rank matching `path`, if any, among the policies without header conditions
    /// and those whose conditions `accept` says hold.
    pub(crate) fn lookup(&self, path: &str, accept: &dyn Fn(u32) -> bool) -> Option<u32> {
        let plain = match self.exact.get(path) {
            Some(&rank) => Some(rank),
            None => self.lookup_prefix(path),
        };
        // A regular expression wins when it ranks before the plain match.
        let regex = (self.regexes.iter())
            .take_while(|(_, rank)| plain.is_none_or(|p| *rank < p))
            .find(|(re, _)| re.is_match(path))
            .map_or(plain, |(_, rank)| Some(*rank));
        // A guarded policy wins when it ranks before both and its conditions hold.
        let guarded = (self.guarded.iter())
            .take_while(|(_, _, rank)| regex.is_none_or(|p| *rank < p))
            .find(|(m, re, rank)| matches(m, re.as_ref(), path) && accept(*rank));
        guarded.map(|(_, _, rank)| *rank).or(regex)
    }
}

/// Whether a path rule matches a request path (the maps' semantics, one rule at a time); a
/// regular expression by its compiled form (none: it did not compile, and matches nothing).
fn matches(rule: &PathMatch, regex: Option<&Regex>, path: &str) -> bool {
    match rule {
        PathMatch::Exact(p) => p == path,
        PathMatch::Prefix(p) => portico_model::matching::prefix_matches(p, path),
        PathMatch::Regex(_) => regex.is_some_and(|re| re.is_match(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PathTable {
        fn lookup_plain(&self, path: &str) -> Option<u32> {
            self.lookup(path, &|_| true)
        }
    }

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
        let table = PathTable::build([(&a, 0, false), (&b, 1, false)], &|_| None);
        assert_eq!(table.lookup("/a/x", &|_| true), Some(0));
    }

    #[test]
    fn a_guarded_rule_wins_only_when_its_conditions_hold_and_its_rank_is_better() {
        let (guarded, plain) = (PathMatch::prefix("/a"), PathMatch::prefix("/"));
        let table = PathTable::build([(&guarded, 0, true), (&plain, 1, false)], &|_| None);
        assert_eq!(table.lookup("/a/x", &|_| true), Some(0));
        assert_eq!(table.lookup("/a/x", &|_| false), Some(1));
        assert_eq!(
            table.lookup("/b", &|_| true),
            Some(1),
            "its path must match"
        );
        let late = PathTable::build([(&plain, 0, false), (&guarded, 1, true)], &|_| None);
        assert_eq!(late.lookup("/a", &|_| true), Some(0));
    }

    #[test]
    fn a_regex_wins_only_when_it_ranks_before_the_plain_match() {
        let compile = |p: &str| super::super::options::path_regex(p, true);
        let (long, plain, short) = (
            PathMatch::Regex("/foo/bar/[a-z]{3}".into()),
            PathMatch::Exact("/foo/bar/bar".into()),
            PathMatch::Regex("/foo".into()),
        );
        let table = PathTable::build(
            [(&long, 0, false), (&plain, 1, false), (&short, 2, false)],
            &compile,
        );
        // ingress-nginx's documented caveat: the longer regex takes the exact path.
        assert_eq!(table.lookup_plain("/foo/bar/bar"), Some(0));
        assert_eq!(table.lookup_plain("/FOO/bar/baz"), Some(0));
        assert_eq!(table.lookup_plain("/foox"), Some(2));
        assert_eq!(table.lookup_plain("/x/foo"), None);
        let table = PathTable::build([(&plain, 0, false), (&short, 1, false)], &compile);
        assert_eq!(table.lookup_plain("/foo/bar/bar"), Some(0));
    }

    #[test]
    fn a_guarded_regex_matches_by_its_expression() {
        let compile = |p: &str| super::super::options::path_regex(p, true);
        let (guarded, plain) = (PathMatch::Regex("/v[0-9]+$".into()), PathMatch::prefix("/"));
        let table = PathTable::build([(&guarded, 0, true), (&plain, 1, false)], &compile);
        assert_eq!(table.lookup("/v2", &|_| true), Some(0));
        assert_eq!(table.lookup("/v2", &|_| false), Some(1));
        assert_eq!(table.lookup("/v2/x", &|_| true), Some(1));
    }
}
