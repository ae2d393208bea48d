//! Map keys whose policies have conditions (header, query parameter, method, cookie
//! matches) or split requests by weight: such a key maps to a group, `=g<n>`, whose frontend
//! lines try its policies in the proxy's order and set `txn.route` to the first one that
//! holds.
//!
//! A group holds every policy the proxy would try for a request reaching its key, not only
//! the key's own: a request that matches the exact key `host/a` matches the prefix keys
//! `host/` (and any `host/x/` with `x` above `a`) too, and one whose longest prefix key is
//! `host/a/` matches the shorter ones. So a group's chain is its key's entries, then those of
//! each shorter prefix key of the tier that begins it, longest first, up to the first
//! policy without conditions. When none holds, the request goes on to the next host tier, as
//! in the proxy.
//!
//! A split draws once per request (`txn.draw`, haproxy's `rand`); each share takes the
//! draws, modulo the total weight, of its range.

use super::routes::{Entry, Maps, Table, empty, map_name};
use portico_model::ListenerId;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The line that draws the number splits compare against.
pub(super) const DRAW: &str = "    http-request set-var(txn.draw) rand\n";

/// The groups of one listener: each tier's lines, and whether a split needs the draw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Groups {
    lines: BTreeMap<&'static str, String>,
    pub draws: bool,
    /// The suffixes of the listener's Gateway API wildcards, longest first.
    pub suffixes: Vec<String>,
}

impl Groups {
    /// The lines that resolve the groups of `tier`, after its lookups: nothing without
    /// groups.
    pub fn lines(&self, tier: &str) -> String {
        match self.lines.get(tier) {
            Some(lines) => format!(
                "{lines}    http-request unset-var(txn.route) if {{ var(txn.route) -m beg = }}\n"
            ),
            None => String::new(),
        }
    }
}

impl Groups {
    /// Adds suffixes that have no map entries (the lines of regex hosts), keeping the order.
    pub(super) fn add_suffixes<'a>(&mut self, more: impl Iterator<Item = &'a str>) {
        self.suffixes.extend(more.map(str::to_owned));
        self.suffixes
            .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        self.suffixes.dedup();
    }
}

/// The maps of `listener`'s table and the lines of its groups.
pub fn resolve(table: &Table, listener: ListenerId) -> (Maps, Groups) {
    let mut maps = Maps::new();
    empty(&mut maps, listener);
    let mut groups = Groups::default();
    let mut numbers: BTreeMap<(&str, Vec<Entry>), usize> = BTreeMap::new();
    for tier in ["host", "suffix", "wild", "any"] {
        let prefix_file = map_name(listener, tier, "prefix");
        let no_prefixes = BTreeMap::new();
        let prefixes = table.get(&prefix_file).unwrap_or(&no_prefixes);
        for kind in ["exact", "prefix"] {
            let file = map_name(listener, tier, kind);
            let Some(keys) = table.get(&file) else {
                continue;
            };
            for (key, entries) in keys {
                let value = match entries.first().and_then(Entry::value) {
                    Some(value) => value.to_owned(),
                    None => {
                        let chain = chain(key, entries, prefixes);
                        let next = numbers.len();
                        let n = *numbers.entry((tier, chain.clone())).or_insert(next);
                        if n == next {
                            let lines = groups.lines.entry(tier).or_default();
                            groups.draws |= write_group(lines, n, &chain);
                        }
                        format!("=g{n}")
                    }
                };
                maps.entry(file.clone())
                    .or_default()
                    .insert(key.clone(), value);
            }
        }
    }
    groups.suffixes = suffixes(&maps, listener);
    if !groups.suffixes.is_empty() {
        for kind in ["exact", "prefix"] {
            maps.entry(map_name(listener, "suffix", kind)).or_default();
        }
    }
    (maps, groups)
}

/// The distinct suffixes of the keys of `listener`'s suffix maps, longest first.
fn suffixes(maps: &Maps, listener: ListenerId) -> Vec<String> {
    let files = ["exact", "prefix"].map(|kind| maps.get(&map_name(listener, "suffix", kind)));
    let keys = files.into_iter().flatten().flat_map(|m| m.keys());
    let hosts = keys.filter_map(|k| k.split_once('/')?.0.strip_prefix("*."));
    let mut out: Vec<String> = hosts.map(str::to_owned).collect();
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out.dedup();
    out
}

/// The entries a request reaching `key` may take, in order, up to the first final one: the
/// key's own, then those of each shorter key of `prefixes` that begins it.
fn chain(key: &str, own: &[Entry], prefixes: &BTreeMap<String, Vec<Entry>>) -> Vec<Entry> {
    let shorter = (key.char_indices().rev())
        .filter(|&(i, c)| c == '/' && i + 1 < key.len())
        .filter_map(|(i, _)| prefixes.get(&key[..=i]).map(Vec::as_slice));
    let mut chain = Vec::new();
    for entry in std::iter::once(own).chain(shorter).flatten() {
        chain.push(entry.clone());
        if entry.is_final() {
            break;
        }
    }
    chain
}

/// Group `n`'s lines; whether one of them compares the draw.
fn write_group(s: &mut String, n: usize, chain: &[Entry]) -> bool {
    let mut draws = false;
    for entry in chain {
        let total: u64 = entry.shares.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut start = 0u64;
        for (value, weight) in entry.shares.iter().filter(|(_, w)| *w > 0) {
            let draw = if entry.shares.len() > 1 {
                draws = true;
                let end = start + u64::from(*weight) - 1;
                format!(" {{ var(txn.draw),mod({total}) -m int {start}:{end} }}")
            } else {
                String::new()
            };
            start += u64::from(*weight);
            let when = &entry.when;
            let when = if when.is_empty() {
                String::new()
            } else {
                format!(" {when}")
            };
            let _ = writeln!(
                s,
                "    http-request set-var(txn.route) str({value}) if {{ var(txn.route) -m str =g{n} }}{when}{draw}"
            );
        }
    }
    draws
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::routes::add;
    use portico_model::matching::{HostMatch, PathMatch};

    fn when(entry: &str, value: &str) -> Entry {
        Entry {
            when: entry.to_owned(),
            shares: vec![(value.to_owned(), 1)],
        }
    }

    #[test]
    fn a_conditional_key_falls_back_to_the_shorter_prefixes_of_its_tier() {
        let l = ListenerId::derive("l");
        let mut table = Table::new();
        let h = HostMatch::Exact("a.test".into());
        add(
            &mut table,
            l,
            &h,
            &PathMatch::prefix("/"),
            &Entry::plain("root"),
        )
        .unwrap();
        let v1 = when("{ req.fhdr(x) -m str v1 }", "v1");
        add(&mut table, l, &h, &PathMatch::prefix("/a/b"), &v1).unwrap();
        let (maps, groups) = resolve(&table, l);
        let exact = &maps[&map_name(l, "host", "exact")];
        let prefix = &maps[&map_name(l, "host", "prefix")];
        assert_eq!(exact["a.test/"], "root");
        assert_eq!(exact["a.test/a/b"], "=g0");
        assert_eq!(prefix["a.test/a/b/"], "=g0", "the same chain: one group");
        assert_eq!(
            groups.lines("host"),
            "    http-request set-var(txn.route) str(v1) if { var(txn.route) -m str =g0 } { req.fhdr(x) -m str v1 }\n\
             \x20   http-request set-var(txn.route) str(root) if { var(txn.route) -m str =g0 }\n\
             \x20   http-request unset-var(txn.route) if { var(txn.route) -m beg = }\n"
        );
        assert_eq!(groups.lines("any"), "");
        assert!(!groups.draws);
    }

    #[test]
    fn shares_take_ranges_of_the_draw_and_weight_zero_none() {
        let l = ListenerId::derive("l");
        let mut table = Table::new();
        let split = Entry {
            when: String::new(),
            shares: vec![("a".into(), 3), ("z".into(), 0), ("b".into(), 1)],
        };
        add(
            &mut table,
            l,
            &HostMatch::Any,
            &PathMatch::Exact("/s".into()),
            &split,
        )
        .unwrap();
        let (maps, groups) = resolve(&table, l);
        assert_eq!(maps[&map_name(l, "any", "exact")]["/s"], "=g0");
        assert!(groups.draws);
        let lines = groups.lines("any");
        assert!(
            lines.contains(
                "str(a) if { var(txn.route) -m str =g0 } { var(txn.draw),mod(4) -m int 0:2 }"
            ),
            "{lines}"
        );
        assert!(
            lines.contains(
                "str(b) if { var(txn.route) -m str =g0 } { var(txn.draw),mod(4) -m int 3:3 }"
            ),
            "{lines}"
        );
        assert!(!lines.contains("str(z)"), "{lines}");
    }

    /// haproxy's evaluation of the maps and the group lines of one listener, written out:
    /// per tier, the exact key else the longest prefix key; a group's lines set the route to
    /// the first value whose terms the request satisfies (`holds`), and undo it when none does.
    fn haproxy_route(
        maps: &Maps,
        groups: &Groups,
        host: &str,
        path: &str,
        holds: &dyn Fn(&str) -> bool,
    ) -> Option<String> {
        let l = ListenerId::derive("l");
        let mut keys = vec![("host", format!("{host}{path}"))];
        if let Some(s) = portico_model::matching::wildcard_suffix(host) {
            keys.push(("wild", format!("*.{s}{path}")));
        }
        keys.push(("any", path.to_owned()));
        for (tier, key) in keys {
            let exact = maps[&map_name(l, tier, "exact")].get(&key);
            let prefixes = &maps[&map_name(l, tier, "prefix")];
            let longest = (prefixes.iter())
                .filter(|(k, _)| key.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
                .map(|(_, v)| v);
            let Some(mut route) = exact.or(longest).cloned() else {
                continue;
            };
            for line in groups.lines(tier).lines() {
                if line.contains("unset-var(txn.route)") {
                    if route.starts_with('=') {
                        route.clear();
                    }
                    continue;
                }
                let (value, rest) = line
                    .split_once("str(")
                    .unwrap()
                    .1
                    .split_once(") if { var(txn.route) -m str ")
                    .unwrap();
                let (group, when) = rest.split_once(" }").unwrap();
                let terms: Vec<String> = (when.split("} {"))
                    .map(|t| t.trim_matches([' ', '{', '}']).to_owned())
                    .filter(|t| !t.is_empty())
                    .collect();
                if route == group && terms.iter().all(|t| holds(t)) {
                    route = value.to_owned();
                }
            }
            if !route.is_empty() {
                return Some(route);
            }
        }
        None
    }

    proptest::proptest! {
        /// Maps and group lines choose what the proxy's ordered first match chooses, for any
        /// set of policies with header conditions over a few hosts and nested paths.
        #[test]
        fn groups_choose_what_the_proxy_chooses(
            policies in proptest::collection::vec((0..5usize, 0..6usize, proptest::bool::ANY, 0..4usize), 1..10),
            requests in proptest::collection::vec((0..4usize, 0..8usize, 0..4usize), 1..20),
        ) {
            use portico_model::{CompareType, L7Policy, L7Rule, L7RuleId, RuleType};
            let hosts = ["a.x.test", "b.x.test"];
            let paths = ["/", "/a", "/a/b", "/ab", "/a/b/c", "/b"];
            let mut model: Vec<L7Policy> = Vec::new();
            for (n, (h, p, exact, headers)) in policies.iter().enumerate() {
                let rule = |rule_type, compare_type, key: Option<&str>, value: &str| L7Rule {
                    id: L7RuleId::derive(&format!("{n}{value}{key:?}")),
                    rule_type,
                    compare_type,
                    key: key.map(str::to_owned),
                    value: value.to_owned(),
                };
                let mut rules = vec![];
                match h {
                    0 | 1 => rules.push(rule(RuleType::HostName, CompareType::EqualTo, None, hosts[*h])),
                    2 => rules.push(rule(RuleType::HostName, CompareType::WildcardLabel, None, "x.test")),
                    _ => {}
                }
                let compare = if *exact { CompareType::EqualTo } else { CompareType::PathPrefix };
                rules.push(rule(RuleType::Path, compare, None, paths[*p]));
                for (bit, name) in [(1, "h1"), (2, "h2")] {
                    if headers & bit != 0 {
                        rules.push(rule(RuleType::Header, CompareType::EqualTo, Some(name), "1"));
                    }
                }
                model.push(L7Policy {
                    id: portico_model::L7PolicyId::derive(&n.to_string()),
                    action: portico_model::PolicyAction::Reject { status: 403 },
                    rules,
                    source: std::sync::Arc::new(portico_model::ObjectRef::new("HTTPRoute", "default", &n.to_string())),
                    precedence: u32::try_from(n).unwrap(),
                    options: None,
                });
            }
            let mut model: Vec<_> = model.into_iter().map(std::sync::Arc::new).collect();
            portico_model::order::sort(&mut model);
            let l = ListenerId::derive("l");
            let mut table = Table::new();
            for policy in &model {
                let (host, path) = portico_model::matching::reduce(&policy.rules).unwrap();
                let entry = Entry {
                    when: super::super::conditions::when(&policy.rules).unwrap(),
                    shares: vec![(policy.source.name.clone(), 1)],
                };
                add(&mut table, l, &host, &path, &entry).unwrap();
            }
            let (maps, groups) = resolve(&table, l);
            let request_hosts = ["a.x.test", "b.x.test", "c.x.test", "other"];
            let request_paths = ["/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/a/bc", "/b/"];
            for (h, p, headers) in requests {
                let (host, path) = (request_hosts[h], request_paths[p]);
                let has = |name: &str| (name == "h1" && headers & 1 != 0) || (name == "h2" && headers & 2 != 0);
                let holds = |term: &str| ["h1", "h2"].iter().any(|n| has(n) && term.starts_with(&format!("req.fhdr({n})")));
                let proxy = model.iter().find(|policy| {
                    use portico_model::matching::{conditions, prefix_matches, wildcard_suffix, Field, HostMatch, PathMatch};
                    let (h, p) = portico_model::matching::reduce(&policy.rules).unwrap();
                    let host_ok = match h {
                        HostMatch::Any => true,
                        HostMatch::Exact(e) => e == host,
                        HostMatch::Wildcard(s) => wildcard_suffix(host) == Some(s.as_str()),
                        HostMatch::Suffix(_) => false,
                    };
                    let path_ok = match p {
                        PathMatch::Exact(e) => e == path,
                        PathMatch::Prefix(v) => prefix_matches(&v, path),
                        PathMatch::Regex(_) => false,
                    };
                    let conditions_ok = conditions(&policy.rules).all(|c| matches!(c.field, Field::Header(n) if has(n)));
                    host_ok && path_ok && conditions_ok
                }).map(|policy| policy.source.name.clone());
                proptest::prop_assert_eq!(
                    haproxy_route(&maps, &groups, host, path, &holds),
                    proxy,
                    "{} {} {}", host, path, headers
                );
            }
        }
    }
}
