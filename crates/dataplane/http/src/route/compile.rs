//! Compiling the model's HTTP listeners into a [`RouteTable`].

use super::balance::{Balance, MemberSpec};
use super::budget::RetryBudget;
use super::condition::{Check, Guard};
use super::host::{suffixes, wildcard_suffix};
use super::options::RouteOptions;
use super::path::{PathEntry, PathMatch, PathTable};
use super::pool::{PoolState, Target};
use super::reduce::{HostMatch, reduce};
use super::split::{Action, Split};
use super::{FxMap, Passthrough, RouteTable, Routes, SniTarget};
use crate::metrics::{PoolMetrics, ProxyMetrics};
use crate::ratelimit::Limiter;
use crate::upstream::Endpoints;
use portico_model::{
    L7Policy, Listener, LoadBalancer, Model, PolicyAction, PolicyOptions, Pool, PoolId, Protocol,
    RateLimit, UpstreamTls,
};
use regex::Regex;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Instant;

/// The provider type this data plane serves.
pub const PROVIDER: &str = "proxy";

/// Compiles the HTTP and the TERMINATED_HTTPS listeners of every LoadBalancer of `model` (the
/// provider hands it only its own) into one route table.
///
/// Listeners of one protocol merge as if their policies were concatenated, LoadBalancers in id order: on equal
/// keys the first LoadBalancer wins, and the first `default_pool` found is the default.
pub fn compile(model: &Model) -> RouteTable {
    Compiler::new(None, None, &Endpoints::default()).compile(model)
}

/// Compilation state: the pools, plus what carries over from the previous table.
pub(crate) struct Compiler<'a> {
    previous: Option<&'a RouteTable>,
    metrics: Option<&'a ProxyMetrics>,
    endpoints: &'a Endpoints,
    pools: FxMap<PoolId, Arc<PoolState>>,
    /// The rate limiters the routes use; the previous table's are kept while their settings
    /// stand, so that a change elsewhere does not forget the clients' counts.
    limiters: Mutex<FxMap<RateLimit, Arc<Limiter>>>,
    /// The basic-auth Secrets' entries routes check against.
    credentials: portico_model::Credentials,
}

/// A load balancer's pools by id, and its name.
struct Named<'a> {
    pools: FxMap<PoolId, &'a Arc<Pool>>,
    name: Arc<str>,
}

/// From this many policies on, the HTTP and the HTTPS routes are compiled on two threads.
const PARALLEL_POLICIES: usize = 4096;

impl<'a> Named<'a> {
    fn of(lb: &'a LoadBalancer) -> Self {
        Named {
            pools: lb.pools.iter().map(|p| (p.id, p)).collect(),
            name: Arc::from(lb.name.as_str()),
        }
    }
}

/// The routes of one protocol's listeners being compiled: actions by rank, rules, the header
/// conditions of the policies that have some.
#[derive(Default)]
struct RoutesBuilder {
    targets: Vec<Action>,
    default: Option<Action>,
    entries: Vec<(HostMatch, PathMatch, u32)>,
    guards: FxMap<u32, Guard>,
    made_from: (Vec<Arc<L7Policy>>, Option<PoolId>),
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(
        previous: Option<&'a RouteTable>,
        metrics: Option<&'a ProxyMetrics>,
        endpoints: &'a Endpoints,
    ) -> Self {
        Compiler {
            previous,
            metrics,
            endpoints,
            pools: FxMap::default(),
            limiters: Mutex::default(),
            credentials: portico_model::Credentials::new(),
        }
    }

    /// This compiler with the basic-auth Secrets' entries its routes check against.
    pub(crate) fn with_credentials(mut self, credentials: portico_model::Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// The limiter of `settings`: this table's, else the previous table's, else a new one.
    fn limiter(&self, settings: &RateLimit) -> Arc<Limiter> {
        let mut limiters = self.limiters.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = || {
            self.previous
                .and_then(|t| t.limiters.get(settings))
                .cloned()
        };
        (limiters.entry(settings.clone()))
            .or_insert_with(|| kept().unwrap_or_else(|| Arc::new(Limiter::new(settings))))
            .clone()
    }

    pub(crate) fn compile(mut self, model: &Model) -> RouteTable {
        let mut lbs: Vec<&LoadBalancer> = model.load_balancers.iter().collect();
        lbs.sort_by_key(|lb| lb.id);
        // Every pool a listener names first (pools carry state over from the previous table),
        // in the order the routes name them: the first to name a pool gives it its load
        // balancer. Then the two protocols' routes, which only read the pools: side by side on
        // two threads when there are many.
        let named: Vec<Named<'_>> = lbs.iter().map(|lb| Named::of(lb)).collect();
        // Per protocol, whether every pool its routes name has the previous table's state.
        let mut same_pools = [true, true];
        for (i, protocol) in [Protocol::Http, Protocol::TerminatedHttps]
            .into_iter()
            .enumerate()
        {
            // Only the first default pool serves (see `add_listener`).
            let mut default = None;
            for (lb, named) in lbs.iter().zip(&named) {
                for listener in lb.listeners.iter().filter(|l| l.protocol == protocol) {
                    for policy in &listener.policies {
                        for pool in policy.pools() {
                            let state = self.pool(named, pool);
                            same_pools[i] &= self.kept(pool, &state);
                        }
                    }
                    if let (None, Some(pool)) = (&default, listener.default_pool) {
                        let state = self.pool(named, pool);
                        same_pools[i] &= self.kept(pool, &state);
                        default = Some(state);
                    }
                }
            }
        }
        let passthrough = self.passthrough(&lbs, &named);
        drop(named);
        let this = &self;
        let policies: usize = (lbs.iter().flat_map(|lb| lb.listeners.iter()))
            .map(|l| l.policies.len())
            .sum();
        let same_credentials = self
            .previous
            .is_some_and(|t| same_credentials(&t.credentials, &self.credentials));
        let reusable = |i: usize| same_pools[i] && same_credentials;
        let kept_http = (self.previous)
            .filter(|t| reusable(0) && t.http.made_of(&lbs, Protocol::Http))
            .map(|t| t.http.clone());
        let kept_https = (self.previous)
            .filter(|t| reusable(1) && t.https.made_of(&lbs, Protocol::TerminatedHttps))
            .map(|t| t.https.clone());
        let routes = |kept: Option<Arc<Routes>>, protocol| {
            kept.unwrap_or_else(|| Arc::new(this.routes(&lbs, protocol)))
        };
        let (http, https) =
            if policies >= PARALLEL_POLICIES && kept_http.is_none() && kept_https.is_none() {
                std::thread::scope(|scope| {
                    let https = scope.spawn(|| routes(kept_https, Protocol::TerminatedHttps));
                    let http = routes(kept_http, Protocol::Http);
                    let https = https
                        .join()
                        .unwrap_or_else(|e| std::panic::resume_unwind(e));
                    (http, https)
                })
            } else {
                let reused = kept_http.is_some() || kept_https.is_some();
                let http = routes(kept_http, Protocol::Http);
                let https = routes(kept_https, Protocol::TerminatedHttps);
                if reused {
                    // The kept routes' rate limiters carry over with them.
                    let mut limiters =
                        (this.limiters.lock()).unwrap_or_else(PoisonError::into_inner);
                    for (settings, limiter) in self.previous.iter().flat_map(|t| &t.limiters) {
                        (limiters.entry(settings.clone())).or_insert_with(|| limiter.clone());
                    }
                }
                (http, https)
            };
        RouteTable {
            http,
            https,
            pools: self.pools,
            credentials: self.credentials,
            passthrough,
            limiters: self
                .limiters
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// Whether `state`, the state of pool `id` in the table being compiled, is the previous
    /// table's.
    fn kept(&self, id: PoolId, state: &Arc<PoolState>) -> bool {
        (self.previous.and_then(|t| t.pools.get(&id))).is_some_and(|s| Arc::ptr_eq(s, state))
    }

    /// The SNI-routed hosts (passed through, or terminated and spliced) of the
    /// TERMINATED_HTTPS listeners, load balancers in id order: on a host in two, the first wins.
    fn passthrough(&mut self, lbs: &[&LoadBalancer], named: &[Named<'_>]) -> Passthrough {
        let mut passthrough = Passthrough::default();
        for (lb, named) in lbs.iter().zip(named) {
            let https = lb.listeners.iter();
            let https = https.filter(|l| l.protocol == Protocol::TerminatedHttps);
            for tls in https.filter_map(|l| l.tls.as_ref()) {
                for entry in &tls.passthrough {
                    let pool = self.pool(named, entry.pool);
                    let target = match entry.terminate {
                        true => SniTarget::Terminate(pool),
                        false => SniTarget::Pass(pool),
                    };
                    passthrough.insert(&entry.host, target);
                }
                // After the entries: a name an entry takes is not refused.
                for host in &tls.refused {
                    passthrough.insert(host, SniTarget::Refuse);
                }
            }
        }
        passthrough
    }

    /// The routes of the listeners of `protocol`, over the pools resolved before.
    fn routes(&self, lbs: &[&LoadBalancer], protocol: Protocol) -> Routes {
        let mut routes = RoutesBuilder::default();
        let listeners = lbs.iter().flat_map(|lb| lb.listeners.iter());
        let count = (listeners.filter(|l| l.protocol == protocol))
            .map(|l| l.policies.len())
            .sum();
        routes.targets.reserve_exact(count);
        routes.entries.reserve_exact(count);
        routes.made_from.0.reserve_exact(count);
        for lb in lbs {
            for listener in lb.listeners.iter().filter(|l| l.protocol == protocol) {
                self.add_listener(&mut routes, listener);
                routes.made_from.0.extend(listener.policies.iter().cloned());
                if routes.made_from.1.is_none() {
                    routes.made_from.1 = listener.default_pool;
                }
            }
        }
        routes.finish()
    }

    fn add_listener(&self, routes: &mut RoutesBuilder, listener: &Listener) {
        for policy in &listener.policies {
            let rank = u32::try_from(routes.targets.len()).unwrap_or(u32::MAX);
            let action = match &policy.action {
                PolicyAction::RedirectToPool { pool } => {
                    Action::One(self.with_options(*pool, policy.options.as_deref()))
                }
                PolicyAction::Reject { status } => Action::One(Target::Reject(*status)),
                PolicyAction::RedirectToHttps { status } => {
                    Action::One(Target::RedirectToHttps(*status))
                }
                PolicyAction::RedirectToUrl { status, url } => {
                    Action::One(Target::RedirectToUrl(*status, Arc::from(url.as_str())))
                }
                PolicyAction::RequestRedirect(redirect) => {
                    Action::One(Target::Redirect(Arc::new(redirect.clone())))
                }
                PolicyAction::RedirectToPools { pools } => {
                    let shares = pools.iter().map(|share| {
                        let options = share.options.as_deref().or(policy.options.as_deref());
                        let target = share
                            .pool
                            .map_or(Target::Reject(500), |p| self.with_options(p, options));
                        (target, share.weight)
                    });
                    Action::Split(Arc::new(Split::new(shares.collect())))
                }
            };
            routes.targets.push(action);
            if let Some((host, path)) = reduce(&policy.rules) {
                routes.entries.push((host, path, rank));
                let guard: Guard = portico_model::matching::conditions(&policy.rules)
                    .map(|condition| Check::compile(&condition))
                    .collect();
                if !guard.is_empty() {
                    routes.guards.insert(rank, guard);
                }
            }
        }
        if let (None, Some(pool)) = (&routes.default, listener.default_pool) {
            routes.default = Some(Action::One(self.resolved(pool)));
        }
    }

    /// The target of a pool with a policy's (or a share's) options, if it has any.
    fn with_options(&self, pool: PoolId, options: Option<&PolicyOptions>) -> Target {
        match (options, self.resolved(pool)) {
            (Some(options), Target::Pool(state)) => {
                let mirror = |id| self.pools.get(&id).cloned();
                let limiter = |settings: &RateLimit| self.limiter(settings);
                let compiled = RouteOptions::compile(options, &mirror, &limiter, &self.credentials);
                Target::Options(state, Arc::new(compiled))
            }
            (_, target) => target,
        }
    }

    /// The target of a pool resolved by [`Compiler::compile`]'s first pass (every pool a
    /// listener names is).
    fn resolved(&self, id: PoolId) -> Target {
        match self.pools.get(&id) {
            Some(state) => Target::Pool(state.clone()),
            None => Target::Reject(503),
        }
    }

    /// The state of a pool, shared by every policy naming it; a pool id missing from the
    /// LoadBalancer yields a pool without members (503).
    fn pool(&mut self, lb: &Named<'_>, id: PoolId) -> Arc<PoolState> {
        if let Some(state) = self.pools.get(&id) {
            return state.clone();
        }
        let origin = lb.pools.get(&id).copied();
        let previous = self.previous.and_then(|t| t.pools.get(&id));
        if let (Some(state), Some(origin)) = (previous, origin)
            && state.built_from(origin, &lb.name)
        {
            self.pools.insert(id, state.clone());
            return state.clone();
        }
        let pool = origin.map(|p| &**p);
        // The same pool as last time (members, settings, name, load balancer): its state as
        // it is, with no member list, settings or metric handles built again.
        let fingerprint = pool.map_or(0, |p| fingerprint(p, &lb.name));
        if let Some(state) = previous.filter(|s| fingerprint != 0 && s.fingerprint() == fingerprint)
        {
            self.pools.insert(id, state.clone());
            return state.clone();
        }
        let name = pool.map_or_else(|| id.to_string(), |p| p.name.clone());
        let members = pool
            .map(|p| ready_members(p, self.endpoints))
            .unwrap_or_default();
        // The pool id covers the algorithm and the settings: the same id, the same balance,
        // whose settings the state shares.
        let balance = previous.map(|p| p.balance().clone()).unwrap_or_else(|| {
            let member_metrics = self.metrics.map(|m| m.members(&name));
            let settings = pool.map(|p| p.settings.clone()).unwrap_or_default();
            Arc::new(match pool {
                Some(p) => Balance::new(
                    p.algorithm.clone(),
                    settings,
                    format!("{}.{}.svc", p.service.name, p.service.namespace),
                    member_metrics,
                ),
                None => Balance::new(Default::default(), settings, String::new(), None),
            })
        });
        balance.set_members(members);
        let budget = previous.map(|p| p.budget.clone()).unwrap_or_else(|| {
            let percent = balance.settings.retry_budget_percent();
            Arc::new(Mutex::new(RetryBudget::new(percent, Instant::now())))
        });
        // The same pool under the same name keeps its series (resolving them hashes labels).
        let kept = previous
            .filter(|p| p.name() == name)
            .map(|p| p.metrics.clone());
        let metrics = kept.unwrap_or_else(|| {
            self.metrics
                .map_or_else(PoolMetrics::detached, |m| m.pool(&name))
        });
        let state = Arc::new(PoolState::new(
            id,
            &name,
            lb.name.clone(),
            balance,
            metrics,
            budget,
            (fingerprint, origin.map(Arc::downgrade).unwrap_or_default()),
        ));
        self.pools.insert(id, state.clone());
        state
    }
}

type Entries<'a> = Vec<PathEntry<'a>>;

impl RoutesBuilder {
    fn finish(self) -> Routes {
        // Each regular expression compiled once, whatever number of host tables holds it.
        let mut compiled: FxMap<&str, Option<Regex>> = FxMap::default();
        for (_, path, _) in &self.entries {
            if let PathMatch::Regex(p) = path {
                compiled
                    .entry(p)
                    .or_insert_with(|| super::options::path_regex(p, true));
            }
        }
        let regex = |p: &str| compiled.get(p).cloned().flatten();
        let mut exact: FxMap<&str, Entries<'_>> = FxMap::default();
        let mut wildcard: FxMap<&str, Entries<'_>> = FxMap::default();
        let mut suffix: FxMap<&str, Entries<'_>> = FxMap::default();
        let mut any = Vec::new();
        for (host, path, rank) in &self.entries {
            let entry = (path, *rank, self.guards.contains_key(rank));
            match host {
                HostMatch::Any => any.push(entry),
                HostMatch::Exact(h) => exact.entry(h).or_default().push(entry),
                HostMatch::Wildcard(s) => wildcard.entry(s).or_default().push(entry),
                HostMatch::Suffix(s) => suffix.entry(s).or_default().push(entry),
            }
        }
        // The suffix wildcards' rules that a host with these suffixes matches.
        let via_suffixes = |names: &mut dyn Iterator<Item = &str>| -> Entries<'_> {
            names
                .filter_map(|s| suffix.get(s))
                .flatten()
                .copied()
                .collect()
        };
        // Each host's table also holds every rule that host would match through a wildcard or
        // through host-less rules, so a lookup consults exactly one table.
        let exact_hosts = exact.iter().map(|(host, own)| {
            let via_wildcard = wildcard_suffix(host).and_then(|s| wildcard.get(s));
            let via_suffix = via_suffixes(&mut suffixes(host));
            let rules = (own.iter().chain(via_wildcard.into_iter().flatten()))
                .chain(&via_suffix)
                .chain(&any);
            (Box::from(*host), PathTable::build(rules.copied(), &regex))
        });
        let exact_hosts = exact_hosts.collect();
        // `x.suffix` for one label x: under `*.suffix` and every shorter suffix wildcard.
        let wildcard_hosts = wildcard.iter().map(|(name, own)| {
            let via_suffix = via_suffixes(&mut std::iter::once(*name).chain(suffixes(name)));
            let rules = own.iter().chain(&via_suffix).chain(&any);
            (Box::from(*name), PathTable::build(rules.copied(), &regex))
        });
        let wildcard_hosts = wildcard_hosts.collect();
        let suffix_hosts = suffix.keys().map(|name| {
            let via_suffix = via_suffixes(&mut std::iter::once(*name).chain(suffixes(name)));
            let rules = via_suffix.iter().chain(&any);
            (Box::from(*name), PathTable::build(rules.copied(), &regex))
        });
        let suffix_hosts = suffix_hosts.collect();
        Routes {
            exact_hosts,
            wildcard_hosts,
            suffix_hosts,
            any_host: PathTable::build(any.iter().copied(), &regex),
            targets: self.targets,
            guards: self.guards,
            default: self.default,
            made_from: self.made_from,
        }
    }
}

impl Routes {
    /// Whether the listeners of `protocol` of `lbs` (in the order compiled) have exactly the
    /// policies (the same pointers, in the same order) and the default pool these routes were
    /// compiled from.
    fn made_of(&self, lbs: &[&LoadBalancer], protocol: Protocol) -> bool {
        let (policies, default) = &self.made_from;
        let listeners = lbs.iter().flat_map(|lb| lb.listeners.iter());
        let listeners = listeners.filter(|l| l.protocol == protocol);
        let mut first_default = None;
        let mut at = 0;
        for listener in listeners {
            let theirs = &listener.policies;
            let Some(ours) = policies.get(at..at + theirs.len()) else {
                return false;
            };
            if !ours.iter().zip(theirs).all(|(a, b)| Arc::ptr_eq(a, b)) {
                return false;
            }
            at += theirs.len();
            first_default = first_default.or(listener.default_pool);
        }
        at == policies.len() && first_default == *default
    }
}

/// Whether two sets of basic-auth entries are the same Secrets' same entries.
fn same_credentials(a: &portico_model::Credentials, b: &portico_model::Credentials) -> bool {
    a.len() == b.len()
        && (a.iter().zip(b))
            .all(|((ka, va), (kb, vb))| ka == kb && (Arc::ptr_eq(va, vb) || va == vb))
}

/// A hash of what a pool's state is compiled from, never 0 (0 means unknown). The hasher is
/// seeded per process, so pools cannot be written to collide.
fn fingerprint(pool: &Pool, load_balancer: &str) -> u64 {
    static STATE: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    STATE.hash_one((pool, load_balancer)).max(1)
}

/// The members that may receive traffic, with their weights and upstreams in the pool's
/// protocol.
pub(crate) fn ready_members(pool: &Pool, endpoints: &Endpoints) -> Vec<MemberSpec> {
    let tls = upstream_tls(pool);
    let ready = pool.members.iter().filter(|m| m.ready);
    ready
        .map(|m| MemberSpec {
            id: m.id,
            weight: m.weight,
            endpoint: endpoints.get(
                SocketAddr::new(m.address, m.port),
                pool.protocol,
                tls.as_ref(),
            ),
        })
        .collect()
}

/// The pool's upstream TLS settings, for TLS protocols: the server name defaults to the
/// Service's cluster name `service.namespace.svc`.
fn upstream_tls(pool: &Pool) -> Option<UpstreamTls> {
    if !pool.protocol.is_tls() {
        return None;
    }
    let mut tls = pool.settings.upstream_tls.clone().unwrap_or_default();
    if tls.server_name.is_none() {
        let service = &pool.service;
        tls.server_name = Some(format!("{}.{}.svc", service.name, service.namespace));
    }
    Some(tls)
}
