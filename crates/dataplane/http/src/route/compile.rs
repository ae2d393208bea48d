//! Compiling the model's HTTP listeners into a [`RouteTable`].

use super::balance::{Balance, MemberSpec};
use super::budget::RetryBudget;
use super::options::RouteOptions;
use super::per_host::{PoolSet, Routes};
use super::pool::{PoolState, Target};
use super::split::{Action, Split};
use super::{FxMap, Passthrough, RouteTable, SniTarget};
use crate::metrics::{PoolMetrics, ProxyMetrics};
use crate::ratelimit::Limiter;
use crate::upstream::Endpoints;
use portico_model::{
    L7Policy, Listener, LoadBalancer, Model, PolicyAction, PolicyOptions, Pool, PoolId, Protocol,
    RateLimit, UpstreamTls,
};
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
        // two threads when there are many to compile.
        let named: Vec<Named<'_>> = lbs.iter().map(|lb| Named::of(lb)).collect();
        // The pools whose state is not the previous table's.
        let mut changed = PoolSet::default();
        for protocol in [Protocol::Http, Protocol::TerminatedHttps] {
            // Only the first default pool serves.
            let mut default = None;
            for (lb, named) in lbs.iter().zip(&named) {
                for listener in lb.listeners.iter().filter(|l| l.protocol == protocol) {
                    for policy in &listener.policies {
                        match (&policy.action, &policy.options) {
                            // Most policies: one pool, no options naming others.
                            (PolicyAction::RedirectToPool { pool }, None) => {
                                self.resolve(named, *pool, &mut changed);
                            }
                            _ => (policy.pools())
                                .for_each(|pool| self.resolve(named, pool, &mut changed)),
                        }
                    }
                    if let (None, Some(pool)) = (default, listener.default_pool) {
                        self.resolve(named, pool, &mut changed);
                        default = Some(pool);
                    }
                }
            }
        }
        let passthrough = self.passthrough(&lbs, &named);
        drop(named);
        let this = &self;
        let listeners = |protocol| -> Vec<&Listener> {
            let all = lbs.iter().flat_map(|lb| lb.listeners.iter());
            all.filter(|l| l.protocol == protocol).collect()
        };
        let (http, https) = (
            listeners(Protocol::Http),
            listeners(Protocol::TerminatedHttps),
        );
        // The previous routes are compiled over only with the same basic-auth entries.
        let over = self
            .previous
            .filter(|t| same_credentials(&t.credentials, &self.credentials));
        let changed = &changed;
        let routes = |listeners: &[&Listener], over: Option<&Arc<Routes>>| match over {
            Some(o) if o.made_of(listeners) && !names_any(listeners, changed) => o.clone(),
            _ => Arc::new(Routes::compile(
                this,
                listeners,
                over.map(|o| &**o),
                changed,
            )),
        };
        let policies: usize = (http.iter().chain(&https)).map(|l| l.policies.len()).sum();
        let (http, https) = if policies >= PARALLEL_POLICIES && over.is_none() {
            std::thread::scope(|scope| {
                let https = scope.spawn(|| routes(&https, None));
                let http = routes(&http, None);
                let https = https
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e));
                (http, https)
            })
        } else {
            (
                routes(&http, over.map(|t| &t.http)),
                routes(&https, over.map(|t| &t.https)),
            )
        };
        let limiters = super::per_host::limiters([&*http, &*https]);
        RouteTable {
            http,
            https,
            pools: self.pools,
            credentials: self.credentials,
            passthrough,
            limiters,
        }
    }

    /// Resolves pool `id` named by a listener of `lb` (see [`Compiler::pool`]); adds it to
    /// `changed` when its state is not the previous table's.
    fn resolve(&mut self, lb: &Named<'_>, id: PoolId, changed: &mut PoolSet) {
        if self.pools.contains_key(&id) {
            return;
        }
        let state = self.pool(lb, id);
        let previous = self.previous.and_then(|t| t.pools.get(&id));
        if !previous.is_some_and(|s| Arc::ptr_eq(s, &state)) {
            changed.insert(id);
        }
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

    /// What `policy` does, over the pools resolved before.
    pub(super) fn action(&self, policy: &L7Policy) -> Action {
        match &policy.action {
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
    pub(super) fn resolved(&self, id: PoolId) -> Target {
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

/// Whether a policy of `listeners` names one of `pools`.
fn names_any(listeners: &[&Listener], pools: &PoolSet) -> bool {
    let named = |l: &&Listener| {
        (l.default_pool.is_some_and(|id| pools.contains(&id)))
            || (l.policies.iter()).any(|p| p.pools().any(|id| pools.contains(&id)))
    };
    !pools.is_empty() && listeners.iter().any(named)
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
