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

/// The maps of `listener`'s table and the lines of its groups.
pub fn resolve(table: &Table, listener: ListenerId) -> (Maps, Groups) {
    let mut maps = Maps::new();
    empty(&mut maps, listener);
    let mut groups = Groups::default();
    let mut numbers: BTreeMap<(&str, Vec<Entry>), usize> = BTreeMap::new();
    for tier in ["host", "wild", "any"] {
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
    (maps, groups)
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
}
