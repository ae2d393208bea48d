//! Hosts whose paths are regular expressions (ingress-nginx's `use-regex` and
//! `rewrite-target`, which turn every path of their host into one; the Gateway API's
//! `RegularExpression` path matches) cannot be looked up in haproxy's route maps. Every
//! policy of such a host (whatever its own path's kind) becomes one frontend line instead,
//! in the listener's evaluation order, which sets the route when its host, path and
//! conditions hold: `path -m reg -i` for an expression (from the path's start,
//! case-insensitively, as the proxy matches it), `-m str` for an exact path and an anchored
//! expression of the escaped prefix for a prefix. A tier's lines come before its map lookups:
//! a regex host has no map entries, so the order between them does not matter, and a request
//! no line takes falls to the next tier as the proxy's does.
//!
//! Expressions are kept to the syntax PCRE2 and the regex crate read alike
//! ([`super::conditions::regex`]). A weighted split (a canary's weight, weighted backendRefs)
//! is a line per share, each taking its range of the request's draw, as the maps' groups do.

use super::policy::Refused;
use super::routes::Entry;
use crate::quote;
use portico_model::matching::{HostMatch, PathMatch, reduce};
use portico_model::{L7Policy, Listener};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The regex hosts of one listener and the lines of their policies, per tier (`host`,
/// `wild`, `any`, and each Gateway API suffix).
#[derive(Debug, Default)]
pub(super) struct RegexRoutes {
    hosts: BTreeSet<HostKey>,
    lines: BTreeMap<Tier, String>,
    /// Whether a line compares the draw (`txn.draw`).
    pub(super) draws: bool,
}

/// A host match as an ordered key.
type HostKey = (u8, String);

/// Where a line goes: a tier of [`super::routes`], or a suffix's lookups.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Tier {
    Named(&'static str),
    Suffix(String),
}

fn host_key(host: &HostMatch) -> HostKey {
    match host {
        HostMatch::Exact(h) => (0, h.clone()),
        HostMatch::Wildcard(s) => (1, s.clone()),
        HostMatch::Suffix(s) => (2, s.clone()),
        HostMatch::Any => (3, String::new()),
    }
}

/// Why a policy of a regex host got no line.
#[derive(Debug)]
pub(super) enum NotWritten {
    /// Its path expression, or a split.
    Refused(Refused),
    /// A value that cannot be written at all.
    Unmappable,
}

impl RegexRoutes {
    /// The hosts of `listener` that have a policy with a regular-expression path.
    pub(super) fn of(listener: &Listener) -> Self {
        let reduced = listener.policies.iter().filter_map(|p| reduce(&p.rules));
        let hosts = reduced
            .filter(|(_, path)| matches!(path, PathMatch::Regex(_)))
            .map(|(host, _)| host_key(&host))
            .collect();
        RegexRoutes {
            hosts,
            lines: BTreeMap::new(),
            draws: false,
        }
    }

    /// Whether `host`'s policies are lines here rather than map entries.
    pub(super) fn takes(&self, host: &HostMatch) -> bool {
        self.hosts.contains(&host_key(host))
    }

    /// The line of `policy` (host and path reduced), which takes requests to `entry`.
    pub(super) fn add(
        &mut self,
        policy: &L7Policy,
        (host, path): (&HostMatch, &PathMatch),
        entry: &Entry,
    ) -> Result<(), NotWritten> {
        let field = field(policy);
        let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~' | b'.');
        let values = entry.shares.iter().map(|(v, _)| v);
        if values
            .into_iter()
            .any(|v| v.is_empty() || !v.bytes().all(plain))
        {
            return Err(NotWritten::Unmappable);
        }
        let word = |s: &str| quote::word(s).map_err(|_| NotWritten::Unmappable);
        let (tier, host_term) = match host {
            // A host holding `/` is never the request's (as in the maps).
            HostMatch::Exact(h) if h.contains('/') => return Ok(()),
            HostMatch::Exact(h) => (
                Tier::Named("host"),
                format!(" {{ var(txn.host) -m str {} }}", word(h)?),
            ),
            // `txn.route_wild` is `*.` + the host less its first label + the path.
            HostMatch::Wildcard(s) => (
                Tier::Named("wild"),
                format!(
                    " {{ var(txn.route_wild) -m beg {} }}",
                    word(&format!("*.{s}/"))?
                ),
            ),
            // Set only while the host ends with `.<suffix>` (see `routes::suffix_lines`).
            HostMatch::Suffix(s) => (
                Tier::Suffix(s.clone()),
                " { var(txn.route_sfx) -m found }".to_owned(),
            ),
            HostMatch::Any => (Tier::Named("any"), String::new()),
        };
        let path_term = match path {
            PathMatch::Regex(p) => {
                let anchored = super::conditions::regex(field, p).map_err(NotWritten::Refused)?;
                format!(" {{ path -m reg -i {} }}", word(&anchored)?)
            }
            PathMatch::Exact(p) => format!(" {{ path -m str {} }}", word(p)?),
            PathMatch::Prefix(p) if p == "/" => String::new(),
            PathMatch::Prefix(p) => {
                let anchored = format!("^{}(/|$)", super::rewrite::escape(p));
                format!(" {{ path -m reg {} }}", word(&anchored)?)
            }
        };
        let when = if entry.when.is_empty() {
            String::new()
        } else {
            format!(" {}", entry.when)
        };
        let lines = self.lines.entry(tier).or_default();
        let total: u64 = entry.shares.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut start = 0u64;
        for (value, weight) in entry.shares.iter().filter(|(_, w)| *w > 0) {
            let draw = if entry.shares.len() > 1 {
                self.draws = true;
                let end = start + u64::from(*weight) - 1;
                format!(" {{ var(txn.draw),mod({total}) -m int {start}:{end} }}")
            } else {
                String::new()
            };
            start += u64::from(*weight);
            let _ = writeln!(
                lines,
                "    http-request set-var(txn.route) str({value}) if !{{ var(txn.route) -m found }}{host_term}{path_term}{when}{draw}"
            );
        }
        Ok(())
    }

    /// The lines of tier `tier` (`host`, `wild` or `any`).
    pub(super) fn lines(&self, tier: &'static str) -> &str {
        self.lines
            .get(&Tier::Named(tier))
            .map_or("", String::as_str)
    }

    /// The lines of the Gateway API suffix `suffix`.
    pub(super) fn suffix_lines(&self, suffix: &str) -> &str {
        self.lines
            .get(&Tier::Suffix(suffix.to_owned()))
            .map_or("", String::as_str)
    }

    /// The suffixes that have lines.
    pub(super) fn suffixes(&self) -> impl Iterator<Item = &str> {
        self.lines.keys().filter_map(|t| match t {
            Tier::Suffix(s) => Some(s.as_str()),
            Tier::Named(_) => None,
        })
    }
}

/// What a refused path is called on its object: the annotation, or the Gateway API's match.
fn field(policy: &L7Policy) -> &'static str {
    if policy.source.kind == "HTTPRoute" {
        "RegularExpression path match"
    } else {
        "path on a use-regex host"
    }
}
