//! Routing: which pool serves a request, from its host and path.
//!
//! The answer is defined by the model: the listener's policies are evaluated in order and the
//! first policy whose rules all match decides; otherwise the listener's `default_pool`;
//! otherwise nothing (404). Rules compare:
//!
//! - host `EqualTo`: the request host, lower-cased, without port or trailing dot, equals the
//!   value (`[::1]:8080` is the host `[::1]`);
//! - host `WildcardLabel`: the value is the suffix after `*.`, and exactly one non-empty label
//!   precedes it (`*.foo.com` matches `bar.foo.com`, not `baz.bar.foo.com` nor `foo.com`);
//! - path `EqualTo`: the whole path (without query), case-sensitive; `/foo` ≠ `/foo/`;
//! - path `PathPrefix`: element-wise on `/`, trailing slashes ignored on both sides: `/foo`
//!   matches `/foo`, `/foo/` and `/foo/bar`, not `/foobar`; `/` matches every path. The
//!   translator maps Ingress `ImplementationSpecific` to this comparison.
//! - path `Regex`: the regular expression matches from the path's start, case-insensitively
//!   (`/foo` matches `/FOObar`): ingress-nginx's `use-regex` locations. Compiled once per
//!   pattern; one that does not compile matches nothing.
//!
//! A rule whose comparison does not fit its type (a host `PathPrefix`) never matches.
//!
//! HTTP and TERMINATED_HTTPS listeners compile into separate route sets (the translator gives
//! the HTTP listener redirects where the HTTPS one forwards); both share one state per pool.
//!
//! [`compile`] turns that ordered list into hash maps — exact host, wildcard suffix and
//! host-less path tables, each with exact paths and prefixes — whose lookups give the same
//! answer as the ordered evaluation, for any order (a property test checks this). With the
//! translator's order (longest path first, Exact before Prefix, exact hosts before wildcards
//! before host-less rules) that is the Ingress precedence.

mod balance;
pub(crate) mod budget;
mod check;
mod compile;
mod fxhash;
mod host;
mod options;
mod path;
mod pool;
mod reduce;

pub use balance::{Health, Outcome, Pick, RequestInfo};
pub(crate) use balance::{MemberLabels, MemberMetrics};
pub(crate) use check::ensure_checks;
pub(crate) use compile::{Compiler, ready_members};
pub use compile::{PROVIDER, compile};
pub use options::{RouteOptions, rewrite};
pub use pool::{PoolState, Target};

use fxhash::FxMap;
pub(crate) use host::normalize_host;
use host::wildcard_suffix;
use path::PathTable;
use portico_model::PoolId;
use std::sync::Arc;

/// An immutable, compiled routing configuration: the routes of the HTTP listeners and those
/// of the TERMINATED_HTTPS listeners, over one set of pools.
#[derive(Debug, Default)]
pub struct RouteTable {
    http: Routes,
    https: Routes,
    pools: FxMap<PoolId, Arc<PoolState>>,
}

/// The compiled policies of the listeners of one protocol.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    exact_hosts: FxMap<Box<str>, PathTable>,
    wildcard_hosts: FxMap<Box<str>, PathTable>,
    any_host: PathTable,
    /// Policy targets by rank (the policy's position in the merged evaluation order).
    targets: Vec<Target>,
    default: Option<Target>,
}

impl RouteTable {
    /// The target on the HTTP listeners for a request, from its raw host (as in the `Host`
    /// header, port allowed) and its path without query; `None` means 404.
    pub fn route(&self, host: &str, path: &str) -> Option<&Target> {
        self.http.route(host, path)
    }

    /// Like [`RouteTable::route`], on the TERMINATED_HTTPS listeners.
    pub fn route_https(&self, host: &str, path: &str) -> Option<&Target> {
        self.https.route(host, path)
    }

    /// The pool with this id, if any route or default targets it.
    pub fn pool(&self, id: PoolId) -> Option<&Arc<PoolState>> {
        self.pools.get(&id)
    }

    /// The names of the pools this table serves.
    pub(crate) fn pool_names(&self) -> impl Iterator<Item = &str> {
        self.pools.values().map(|p| p.name())
    }

    /// The pools this table serves.
    pub fn pools(&self) -> impl Iterator<Item = &Arc<PoolState>> {
        self.pools.values()
    }
}

impl Routes {
    fn route(&self, host: &str, path: &str) -> Option<&Target> {
        let host = normalize_host(host);
        match self.table_for(&host).lookup(path) {
            Some(rank) => self.targets.get(rank as usize),
            None => self.default.as_ref(),
        }
    }

    fn table_for(&self, host: &str) -> &PathTable {
        if let Some(table) = self.exact_hosts.get(host) {
            return table;
        }
        let wildcard = wildcard_suffix(host).and_then(|s| self.wildcard_hosts.get(s));
        wildcard.unwrap_or(&self.any_host)
    }
}
