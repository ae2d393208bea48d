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
//! - host `WildcardSuffix` (the Gateway API's wildcards): one or more labels precede the
//!   suffix (`*.foo.com` matches `bar.foo.com` and `baz.bar.foo.com`, not `foo.com`);
//! - path `EqualTo`: the whole path (without query), case-sensitive; `/foo` ≠ `/foo/`;
//! - path `PathPrefix`: element-wise on `/`, trailing slashes ignored on both sides: `/foo`
//!   matches `/foo`, `/foo/` and `/foo/bar`, not `/foobar`; `/` matches every path. The
//!   translator maps Ingress `ImplementationSpecific` to this comparison.
//! - path `Regex`: the regular expression matches from the path's start, case-insensitively
//!   (`/foo` matches `/FOObar`): ingress-nginx's `use-regex` locations. Compiled once per
//!   pattern; one that does not compile matches nothing.
//!
//! - header `EqualTo` (key: the header name): some field of that name has exactly the value;
//!   header `Regex`: some field's value matches (as a path regex does: from its start,
//!   case-insensitively);
//! - query `EqualTo` / `Regex` (key: the parameter name): the first parameter of that name;
//! - method `EqualTo`: the request method;
//! - cookie `EqualTo` (key: the cookie name): the first cookie of that name in a `Cookie`
//!   field has exactly the value (canary Ingresses).
//!
//! A rule whose comparison does not fit its type (a host `PathPrefix`) never matches. A
//! `RedirectToPools` policy draws one of its pools per request, by weight (`split.rs`).
//!
//! HTTP and TERMINATED_HTTPS listeners compile into separate route sets (the translator gives
//! the HTTP listener redirects where the HTTPS one forwards); both share one state per pool.
//!
//! [`compile`] turns that ordered list into hash maps — exact host, wildcard suffix and
//! host-less path tables, each with exact paths and prefixes — whose lookups give the same
//! answer as the ordered evaluation, for any order (a property test checks this); policies
//! with header conditions are walked in order beside the maps. Each host's table ranks its
//! policies among themselves and is kept from the previous table while they are the same
//! pointers in the same relative order (`per_host.rs`), so a change to one host's policies
//! compiles that host's table alone. With the
//! translator's order (longest path first, Exact before Prefix, exact hosts before wildcards
//! before host-less rules) that is the Ingress precedence.

mod balance;
pub(crate) mod budget;
mod check;
mod compile;
mod condition;
pub(crate) mod filters;
mod fxhash;
mod host;
mod options;
mod passthrough;
mod path;
mod per_host;
mod pool;
mod reduce;
#[cfg(test)]
mod reuse_tests;
mod split;

pub use balance::{Health, Outcome, Pick, RequestInfo};
pub(crate) use balance::{MemberLabels, MemberMetrics};
pub(crate) use check::ensure_checks;
pub(crate) use compile::{Compiler, ready_members};
pub use compile::{PROVIDER, compile};
pub use condition::{RequestHeaders, RouteRequest};
pub(crate) use options::CompiledErrors;
pub use options::{RouteOptions, rewrite};
pub use passthrough::{Passthrough, SniTarget};
pub use pool::{PoolState, Target};
pub(crate) use split::Action;

use fxhash::FxMap;
pub(crate) use host::normalize_host;
use per_host::Routes;
use portico_model::PoolId;
use std::sync::Arc;

/// An immutable, compiled routing configuration: the routes of the HTTP listeners and those
/// of the TERMINATED_HTTPS listeners, over one set of pools.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Shared: a table whose listeners of one protocol are those of the previous table
    /// (the same policies, by pointer, over the same pool states) takes its routes as they are;
    /// otherwise it takes the previous routes' host tables whose policies are unchanged.
    http: Arc<Routes>,
    https: Arc<Routes>,
    pools: FxMap<PoolId, Arc<PoolState>>,
    /// The basic-auth Secrets' entries the routes were compiled with.
    credentials: portico_model::Credentials,
    /// The rate limiters of the routes, by settings (carried into the next table).
    limiters: FxMap<portico_model::RateLimit, Arc<crate::ratelimit::Limiter>>,
    /// The SNI hosts of the TERMINATED_HTTPS listeners whose TLS is not terminated.
    passthrough: Passthrough,
}

impl RouteTable {
    /// The target on the HTTP listeners for a request without header fields, from its raw
    /// host (as in the `Host` header, port allowed) and its path without query; `None` means
    /// 404.
    pub fn route(&self, host: &str, path: &str) -> Option<&Target> {
        self.route_request(false, host, path, &())
    }

    /// Like [`RouteTable::route`], on the TERMINATED_HTTPS listeners.
    pub fn route_https(&self, host: &str, path: &str) -> Option<&Target> {
        self.route_request(true, host, path, &())
    }

    /// Like [`RouteTable::route`] (`https`: [`RouteTable::route_https`]), with the request's
    /// header fields for the policies that have header conditions.
    pub fn route_request(
        &self,
        https: bool,
        host: &str,
        path: &str,
        headers: &dyn RequestHeaders,
    ) -> Option<&Target> {
        self.action(https, host, path, headers).map(Action::target)
    }

    /// What the matching policy does, before a split draws its share.
    pub(crate) fn action(
        &self,
        https: bool,
        host: &str,
        path: &str,
        headers: &dyn RequestHeaders,
    ) -> Option<&Action> {
        let routes = if https { &self.https } else { &self.http };
        routes.action(host, path, headers)
    }

    /// The pool with this id, if any route or default targets it.
    pub fn pool(&self, id: PoolId) -> Option<&Arc<PoolState>> {
        self.pools.get(&id)
    }

    /// Whether this table serves exactly `other`'s pool states (the same ids, by pointer).
    pub(crate) fn same_pools(&self, other: &RouteTable) -> bool {
        self.pools.len() == other.pools.len()
            && (self.pools.iter())
                .all(|(id, s)| other.pools.get(id).is_some_and(|o| Arc::ptr_eq(o, s)))
    }

    /// The names of the pools this table serves.
    pub(crate) fn pool_names(&self) -> impl Iterator<Item = &str> {
        self.pools.values().map(|p| p.name())
    }

    /// The pool that takes the unterminated TLS stream of `server_name`, if it passes through.
    pub fn passthrough(&self, server_name: &str) -> Option<&Arc<PoolState>> {
        match self.passthrough.find(server_name) {
            Some(SniTarget::Pass(pool)) => Some(pool),
            _ => None,
        }
    }

    /// Where the TLS stream of `server_name` goes (raw, terminated, or nowhere), if it is
    /// routed by SNI rather than served as HTTPS.
    pub fn sni_target(&self, server_name: &str) -> Option<&SniTarget> {
        self.passthrough.find(server_name)
    }

    /// Whether some host is routed by SNI (passed through, or terminated and sent on as a
    /// stream): only then are ClientHellos read before the handshake.
    pub fn has_passthrough(&self) -> bool {
        !self.passthrough.is_empty()
    }

    /// The pools this table serves.
    pub fn pools(&self) -> impl Iterator<Item = &Arc<PoolState>> {
        self.pools.values()
    }
}
