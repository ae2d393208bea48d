//! Routing by maps, as haproxy-based Ingress controllers do: a listener's policies become
//! entries of six map files written beside haproxy.conf, so the configuration has a fixed
//! number of lines per listener however many Ingresses there are, and a change of routes
//! only changes map entries (which the runtime API can apply without a reload).
//!
//! The built-in proxy's evaluation order (`portico_model::order`): exact hosts, then wildcard
//! hosts, then host-less policies; within one, longer paths first and Exact before Prefix at
//! equal length. For one request only one exact host and one wildcard suffix can match, so
//! that order is, per host tier (exact host, `*.` + the host less its first label, none):
//!
//! 1. the whole path in the tier's `exact` map (`map_str`): an Exact path equal to it, else a
//!    Prefix equal to it (a Prefix `/foo` matches `/foo`);
//! 2. else the longest key of the tier's `prefix` map (`map_beg`, which haproxy resolves in a
//!    prefix tree: the longest matching key wins) that begins the path: a Prefix `/foo` is
//!    the key `/foo/`, so `/foo/bar` matches it and `/foobar` does not (Ingress v1's element
//!    boundary); the root `/` is the key `/`.
//!
//! Keys are the host (or `*.suffix`) followed by the path. A host holding `/` never matches a
//! host rule (as in the proxy, where no rule host holds one). Map files are read word by word
//! (no quoting): a key or value holding a space, a control byte, a non-ASCII byte or a
//! leading `#` cannot be written, and its policy is not served (an error on its Ingress).
//! Values are backend names of Portico's own making, followed by `~` and the policy's id when
//! the policy has lines of its own ([`super::policy`]), which test `txn.policy`.

use portico_model::ListenerId;
use portico_model::matching::{HostMatch, PathMatch};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Map file name → key → backend.
pub type Maps = BTreeMap<String, BTreeMap<String, String>>;

/// The three host tiers, in evaluation order, and the variable holding each one's key.
const TIERS: [(&str, &str); 3] = [
    ("host", "txn.route_host"),
    ("wild", "txn.route_wild"),
    ("any", "txn.route_path"),
];

/// The file name of one of a listener's maps: `routes-<listener>-<tier>-<exact|prefix>.map`.
pub fn map_name(listener: ListenerId, tier: &str, kind: &str) -> String {
    format!("routes-{listener}-{tier}-{kind}.map")
}

/// Whether `s` can be a map file word and a runtime API argument once escaped: visible ASCII
/// only, no leading `#`.
pub fn is_map_word(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('#') && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Lower-case letters, digits, `-` and `.`: a Gateway API wildcard's suffix the frontend may
/// name in a sample expression and an ACL pattern as it is.
fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// A key holds a byte a map cannot carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unmappable;

/// What one map key leads to: the policies there, in evaluation order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    /// ACL terms (`{ ... }`, space-separated) that must all hold; empty: none.
    pub when: String,
    /// Map values and their weights: one value takes every request, several split them by
    /// weight (none of weight 0).
    pub shares: Vec<(String, u32)>,
}

impl Entry {
    /// A policy without conditions that takes every request to `value`.
    pub fn plain(value: &str) -> Entry {
        Entry {
            when: String::new(),
            shares: vec![(value.to_owned(), 1)],
        }
    }

    /// Whether every request that reaches it stops here.
    pub fn is_final(&self) -> bool {
        self.when.is_empty()
    }

    /// The map value of a key whose first entry this is, when no frontend line is needed.
    pub fn value(&self) -> Option<&str> {
        match &self.shares[..] {
            [(value, _)] if self.is_final() => Some(value),
            _ => None,
        }
    }
}

/// Map file name → key → the entries there, in evaluation order ([`super::groups`] makes
/// the maps of it).
pub type Table = BTreeMap<String, BTreeMap<String, Vec<Entry>>>;

/// Empty maps for `listener` (every file exists, even when it has no entry).
pub fn empty<V: Default>(maps: &mut BTreeMap<String, V>, listener: ListenerId) {
    for (tier, _) in TIERS {
        for kind in ["exact", "prefix"] {
            maps.entry(map_name(listener, tier, kind)).or_default();
        }
    }
}

/// Adds one policy's entries; policies come in evaluation order, so an entry after a final
/// one at its key is never reached and is left out.
pub fn add(
    table: &mut Table,
    listener: ListenerId,
    host: &HostMatch,
    path: &PathMatch,
    entry: &Entry,
) -> Result<(), Unmappable> {
    let (tier, host) = match host {
        HostMatch::Exact(h) => ("host", h.clone()),
        HostMatch::Wildcard(s) => ("wild", format!("*.{s}")),
        HostMatch::Any => ("any", String::new()),
        // Looked up by name in the frontend (`str(*.<suffix>)`): a DNS name only.
        HostMatch::Suffix(s) if is_dns_name(s) => ("suffix", format!("*.{s}")),
        HostMatch::Suffix(_) => return Err(Unmappable),
    };
    let mut entries: Vec<(&str, String)> = Vec::new();
    match path {
        PathMatch::Exact(p) => entries.push(("exact", format!("{host}{p}"))),
        PathMatch::Prefix(p) => {
            entries.push(("exact", format!("{host}{p}")));
            let below = if p == "/" {
                format!("{host}/")
            } else {
                format!("{host}{p}/")
            };
            entries.push(("prefix", below));
        }
        // Regular expressions are not in haproxy's maps: the policies of their hosts are
        // frontend lines ([`super::regex`]) and never come here.
        PathMatch::Regex(_) => return Ok(()),
    }
    let values = entry.shares.iter().map(|(v, _)| v.as_str());
    if entries.iter().any(|(_, k)| !is_map_word(k)) || !values.into_iter().all(is_map_word) {
        return Err(Unmappable);
    }
    if host.contains('/') {
        // Never equal to a request's key (those hosts are not looked up).
        return Ok(());
    }
    for (kind, key) in entries {
        let map = table.entry(map_name(listener, tier, kind)).or_default();
        let at = map.entry(key).or_default();
        if !at.last().is_some_and(Entry::is_final) {
            at.push(entry.clone());
        }
    }
    Ok(())
}

/// The frontend lines that look a request up in `listener`'s maps and switch to the backend
/// found (`txn.host` is the normalized host). A key whose policies have conditions or
/// weights maps to a group (`=g<n>`), which `groups` resolves after its tier's lookups;
/// a group none of whose policies holds leaves the request to the next tier.
pub(super) fn frontend_lines(
    listener: ListenerId,
    groups: &super::groups::Groups,
    regex: &super::regex::RegexRoutes,
) -> String {
    let mut s = String::from(
        "    http-request set-var(txn.route_path) path\n\
         \x20   http-request set-var(txn.route_host) var(txn.host),concat(,txn.route_path) if !{ var(txn.host) -m sub / }\n\
         \x20   http-request set-var(txn.route_wild) var(txn.host),regsub('^[^.]+\\.','*.'),concat(,txn.route_path) if { var(txn.host) -m reg ^[^./]+\\.[^/]*$ }\n",
    );
    if groups.draws || regex.draws {
        s.push_str(super::groups::DRAW);
    }
    for (tier, var) in TIERS {
        s.push_str(regex.lines(tier));
        for (kind, converter) in [("exact", "map_str"), ("prefix", "map_beg")] {
            let _ = writeln!(
                s,
                "    http-request set-var(txn.route) var({var}),{converter}({}) if !{{ var(txn.route) -m found }} {{ var({var}) -m found }}",
                map_name(listener, tier, kind)
            );
        }
        s.push_str(&groups.lines(tier));
        if tier == "host" {
            s.push_str(&suffix_lines(listener, groups, regex));
        }
    }
    s.push_str("    http-request set-var(txn.policy) var(txn.route),field(2,~) if { var(txn.route) -m sub ~ }\n");
    s
}

/// The lookups of the Gateway API's wildcards (one or more labels before the suffix), after
/// the exact hosts and before the one-label wildcards, as in the proxy: per suffix the
/// listener has, longest first, the key `*.<suffix>` + path when the host ends with it.
fn suffix_lines(
    listener: ListenerId,
    groups: &super::groups::Groups,
    regex: &super::regex::RegexRoutes,
) -> String {
    let mut s = String::new();
    for suffix in &groups.suffixes {
        let _ = writeln!(
            s,
            "    http-request set-var(txn.route_sfx) str(*.{suffix}),concat(,txn.route_path) if !{{ var(txn.route) -m found }} {{ var(txn.host) -m end .{suffix} }} !{{ var(txn.host) -m beg . }} !{{ var(txn.host) -m sub / }}"
        );
        s.push_str(regex.suffix_lines(suffix));
        for (kind, converter) in [("exact", "map_str"), ("prefix", "map_beg")] {
            let _ = writeln!(
                s,
                "    http-request set-var(txn.route) var(txn.route_sfx),{converter}({}) if !{{ var(txn.route) -m found }} {{ var(txn.route_sfx) -m found }}",
                map_name(listener, "suffix", kind)
            );
        }
        s.push_str(&groups.lines("suffix"));
        s.push_str("    http-request unset-var(txn.route_sfx)\n");
    }
    s
}

/// The line that switches to the backend found (after the policies' own lines).
pub const USE_BACKEND: &str =
    "    use_backend %[var(txn.route),field(1,~)] if { var(txn.route) -m found }\n";

/// A map file's text: `key value` lines.
pub fn file_text(entries: &BTreeMap<String, String>) -> String {
    let mut s = String::with_capacity(entries.len() * 64);
    for (key, value) in entries {
        let _ = writeln!(s, "{key} {value}");
    }
    s
}

/// A map key or value as one runtime API argument: `;`, `\` and spaces escaped.
fn cli_word(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, ';' | '\\' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The largest runtime API line or payload sent at once (haproxy's buffer is 16 KiB).
const CHUNK: usize = 8 * 1024;

/// The runtime API commands that turn the running maps `old` into `new` (pure). Each string
/// is one exchange: removals and changes joined by `;`, additions as `add map <file> <<`
/// payloads, each under 8 KiB. `None` when a file is added or removed (a reload's job).
pub fn map_commands(old: &Maps, new: &Maps) -> Option<Vec<String>> {
    if !old.keys().eq(new.keys()) {
        return None;
    }
    let mut simple = Vec::new();
    let mut out = Vec::new();
    for (file, new_entries) in new {
        let old_entries = &old[file];
        let mut added = Vec::new();
        for (key, value) in old_entries {
            match new_entries.get(key) {
                None => simple.push(format!("del map {file} {}", cli_word(key))),
                Some(v) if v != value => {
                    simple.push(format!("set map {file} {} {}", cli_word(key), cli_word(v)))
                }
                Some(_) => {}
            }
        }
        for (key, value) in new_entries {
            if !old_entries.contains_key(key) {
                added.push(format!("{key} {value}\n"));
            }
        }
        let head = format!("add map {file} <<\n");
        let mut payload = head.clone();
        for line in added {
            if payload.len() + line.len() > CHUNK && payload.len() > head.len() {
                out.push(std::mem::replace(&mut payload, head.clone()));
            }
            payload.push_str(&line);
        }
        if payload.len() > head.len() {
            out.push(payload);
        }
    }
    let mut line = String::new();
    for command in simple {
        if !line.is_empty() && line.len() + command.len() + 1 > CHUNK {
            out.insert(0, std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(';');
        }
        line.push_str(&command);
    }
    if !line.is_empty() {
        out.insert(0, line);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds a plain policy to maps of plain values (through a table and its resolution).
    fn add(
        maps: &mut Maps,
        l: ListenerId,
        host: &HostMatch,
        path: &PathMatch,
        value: &str,
    ) -> Result<(), Unmappable> {
        let mut table = Table::new();
        for (file, keys) in maps.iter() {
            let at = table.entry(file.clone()).or_default();
            for (key, value) in keys {
                at.insert(key.clone(), vec![Entry::plain(value)]);
            }
        }
        super::add(&mut table, l, host, path, &Entry::plain(value))?;
        *maps = super::super::groups::resolve(&table, l).0;
        Ok(())
    }

    fn maps_of(policies: &[(HostMatch, PathMatch, &str)]) -> Maps {
        let l = ListenerId::derive("l");
        let mut maps = Maps::new();
        empty(&mut maps, l);
        for (h, p, b) in policies {
            add(&mut maps, l, h, p, b).unwrap();
        }
        maps
    }

    fn get<'a>(maps: &'a Maps, tier: &str, kind: &str) -> &'a BTreeMap<String, String> {
        &maps[&map_name(ListenerId::derive("l"), tier, kind)]
    }

    /// The lookup haproxy does with these maps, written out: the reference for the proxy's
    /// order in the tests below.
    fn route(maps: &Maps, host: &str, path: &str) -> Option<String> {
        let mut keys = vec![];
        if !host.contains('/') {
            keys.push(("host", format!("{host}{path}")));
        }
        if let Some(s) = portico_model::matching::wildcard_suffix(host)
            && !host.contains('/')
        {
            keys.push(("wild", format!("*.{s}{path}")));
        }
        keys.push(("any", path.to_owned()));
        for (tier, key) in keys {
            if let Some(b) = get(maps, tier, "exact").get(&key) {
                return Some(b.clone());
            }
            let longest = get(maps, tier, "prefix")
                .iter()
                .filter(|(k, _)| key.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len());
            if let Some((_, b)) = longest {
                return Some(b.clone());
            }
        }
        None
    }

    #[test]
    fn prefixes_match_whole_elements_and_the_longest_wins_exact_first() {
        let p = PathMatch::prefix;
        let e = |s: &str| PathMatch::Exact(s.into());
        let h = |s: &str| HostMatch::Exact(s.into());
        let maps = maps_of(&[
            (h("a.test"), e("/foo"), "exact"),
            (h("a.test"), p("/foo"), "prefix-foo"),
            (h("a.test"), p("/foo/bar/"), "prefix-foobar"),
            (h("a.test"), p("/"), "root"),
        ]);
        assert_eq!(route(&maps, "a.test", "/foo").as_deref(), Some("exact"));
        assert_eq!(
            route(&maps, "a.test", "/foo/").as_deref(),
            Some("prefix-foo")
        );
        assert_eq!(
            route(&maps, "a.test", "/foo/bar").as_deref(),
            Some("prefix-foobar")
        );
        assert_eq!(
            route(&maps, "a.test", "/foo/bar/baz").as_deref(),
            Some("prefix-foobar")
        );
        assert_eq!(route(&maps, "a.test", "/foobar").as_deref(), Some("root"));
        assert_eq!(route(&maps, "b.test", "/foo"), None);
        assert_eq!(get(&maps, "host", "prefix")["a.test/foo/"], "prefix-foo");
    }

    #[test]
    fn exact_hosts_before_wildcards_before_any_host() {
        let p = PathMatch::prefix;
        let maps = maps_of(&[
            (HostMatch::Exact("x.foo.com".into()), p("/a"), "exact-host"),
            (HostMatch::Wildcard("foo.com".into()), p("/"), "wildcard"),
            (HostMatch::Any, p("/"), "any"),
        ]);
        assert_eq!(
            route(&maps, "x.foo.com", "/a/b").as_deref(),
            Some("exact-host")
        );
        // The exact host has no match for /b: the wildcard has.
        assert_eq!(route(&maps, "x.foo.com", "/b").as_deref(), Some("wildcard"));
        // A wildcard covers exactly one label.
        assert_eq!(route(&maps, "y.x.foo.com", "/").as_deref(), Some("any"));
        assert_eq!(route(&maps, "foo.com", "/").as_deref(), Some("any"));
        assert_eq!(get(&maps, "wild", "prefix")["*.foo.com/"], "wildcard");
    }

    #[test]
    fn the_first_policy_keeps_a_key_and_unmappable_values_are_refused() {
        let l = ListenerId::derive("l");
        let mut maps = Maps::new();
        let (h, path) = (HostMatch::Exact("a".into()), PathMatch::Exact("/x".into()));
        add(&mut maps, l, &h, &path, "first").unwrap();
        add(&mut maps, l, &h, &path, "second").unwrap();
        assert_eq!(get(&maps, "host", "exact")["a/x"], "first");
        for bad in ["/a b", "/a\nb", "/é", "/a\tb"] {
            let path = PathMatch::Exact(bad.into());
            assert_eq!(
                add(&mut maps, l, &h, &path, "b"),
                Err(Unmappable),
                "{bad:?}"
            );
        }
        let hash = HostMatch::Exact("#a".into());
        assert_eq!(add(&mut maps, l, &hash, &path, "b"), Err(Unmappable));
    }

    #[test]
    fn runtime_commands_delete_change_and_add_with_escapes() {
        let l = ListenerId::derive("l");
        let mut old = Maps::new();
        empty(&mut old, l);
        let mut new = old.clone();
        let h = HostMatch::Exact("a".into());
        add(&mut old, l, &h, &PathMatch::Exact("/gone;x".into()), "b1").unwrap();
        add(&mut old, l, &h, &PathMatch::Exact("/moved".into()), "b1").unwrap();
        add(&mut new, l, &h, &PathMatch::Exact("/moved".into()), "b2").unwrap();
        add(&mut new, l, &h, &PathMatch::Exact("/new".into()), "b3").unwrap();
        let file = map_name(l, "host", "exact");
        assert_eq!(
            map_commands(&old, &new).unwrap(),
            [
                format!("del map {file} a/gone\\;x;set map {file} a/moved b2"),
                format!("add map {file} <<\na/new b3\n"),
            ]
        );
        assert_eq!(map_commands(&new, &new).unwrap(), Vec::<String>::new());
        assert_eq!(map_commands(&Maps::new(), &new), None);
    }

    #[test]
    fn many_additions_are_sent_in_chunks() {
        let l = ListenerId::derive("l");
        let mut old = Maps::new();
        empty(&mut old, l);
        let mut new = old.clone();
        for n in 0..1000 {
            let path = PathMatch::Exact(format!("/path/number/{n}"));
            add(&mut new, l, &HostMatch::Any, &path, "backend").unwrap();
        }
        let commands = map_commands(&old, &new).unwrap();
        assert!(commands.len() > 1);
        assert!(commands.iter().all(|c| c.len() <= CHUNK));
        let lines: usize = commands.iter().map(|c| c.lines().count() - 1).sum();
        assert_eq!(lines, 1000);
    }

    /// The proxy's evaluation: the first policy, in `portico_model::order`, whose host and
    /// path match.
    fn first_match(
        policies: &[(HostMatch, PathMatch, String)],
        host: &str,
        path: &str,
    ) -> Option<String> {
        use portico_model::matching::{prefix_matches, wildcard_suffix};
        policies.iter().find_map(|(h, p, b)| {
            let host_ok = match h {
                HostMatch::Any => true,
                HostMatch::Exact(e) => e == host,
                HostMatch::Wildcard(s) => wildcard_suffix(host) == Some(s.as_str()),
                HostMatch::Suffix(s) => portico_model::matching::suffix_matches(s, host),
            };
            let path_ok = match p {
                PathMatch::Exact(e) => e == path,
                PathMatch::Prefix(v) => prefix_matches(v, path),
                // Not in the maps (the generator makes none).
                PathMatch::Regex(_) => false,
            };
            (host_ok && path_ok).then(|| b.clone())
        })
    }

    proptest::proptest! {
        /// Map lookups choose what the proxy's ordered first match chooses, for any set of
        /// policies over a few hosts and nested paths.
        #[test]
        fn maps_choose_what_the_proxy_chooses(
            policies in proptest::collection::vec((0..6usize, 0..8usize, proptest::bool::ANY), 1..12),
            requests in proptest::collection::vec((0..5usize, 0..10usize), 1..20),
        ) {
            let hosts = ["a.x.test", "b.x.test", "x.test"];
            let paths = ["/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/b", "/a/b/"];
            let request_paths = ["/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/a/bc", "/b/", "/c", "/a/b/c/d"];
            let mut model: Vec<portico_model::L7Policy> = Vec::new();
            for (n, (h, p, exact)) in policies.iter().enumerate() {
                use portico_model::{CompareType, L7Rule, L7RuleId, RuleType};
                let rule = |rule_type, compare_type, value: &str| L7Rule {
                    id: L7RuleId::derive(&format!("{n}{value}")),
                    rule_type,
                    compare_type,
                    key: None,
                    value: value.to_owned(),
                };
                let mut rules = vec![];
                match h {
                    0..=2 => rules.push(rule(RuleType::HostName, CompareType::EqualTo, hosts[*h])),
                    3 | 4 => rules.push(rule(RuleType::HostName, CompareType::WildcardLabel, "x.test")),
                    _ => {}
                }
                let compare = if *exact { CompareType::EqualTo } else { CompareType::PathPrefix };
                rules.push(rule(RuleType::Path, compare, paths[*p]));
                model.push(portico_model::L7Policy {
                    id: portico_model::L7PolicyId::derive(&n.to_string()),
                    action: portico_model::PolicyAction::Reject { status: 403 },
                    rules,
                    source: std::sync::Arc::new(portico_model::ObjectRef::new("Ingress", "default", &n.to_string())),
                    precedence: 0,
                    options: None,
                });
            }
            let mut model: Vec<_> = model.into_iter().map(std::sync::Arc::new).collect();
            portico_model::order::sort(&mut model);
            let reduced: Vec<(HostMatch, PathMatch, String)> = model
                .iter()
                .filter_map(|p| {
                    let (h, path) = portico_model::matching::reduce(&p.rules)?;
                    Some((h, path, p.source.name.clone()))
                })
                .collect();
            let l = ListenerId::derive("l");
            let mut maps = Maps::new();
            empty(&mut maps, l);
            for (h, p, b) in &reduced {
                add(&mut maps, l, h, p, b).unwrap();
            }
            let request_hosts = ["a.x.test", "b.x.test", "x.test", "c.x.test", "other"];
            for (h, p) in requests {
                let (host, path) = (request_hosts[h], request_paths[p]);
                proptest::prop_assert_eq!(
                    route(&maps, host, path),
                    first_match(&reduced, host, path),
                    "{} {}", host, path
                );
            }
        }
    }
}
