//! Route targets: pools with their members, member selection and health (`balance.rs`).

use super::balance::{Balance, Health, Outcome, Pick, RequestInfo};
use super::budget::RetryBudget;
use crate::metrics::PoolMetrics;
use crate::upstream::Endpoint;
use http::{HeaderMap, Uri};
use portico_model::{Pool, PoolId, PoolSettings};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// What a matched route does with a request.
#[derive(Debug, Clone)]
pub enum Target {
    /// Forward to a member of the pool.
    Pool(Arc<PoolState>),
    /// Forward to a member of the pool with the route's changes (rewrite, upstream `Host`,
    /// CORS): hyper's path serves these.
    Options(Arc<PoolState>, Arc<super::options::RouteOptions>),
    /// Answer with this status without contacting any backend (a `Reject` policy).
    Reject(u16),
    /// Answer with this redirect status to the same URL over HTTPS.
    RedirectToHttps(u16),
    /// Answer with this redirect status to this URL (one starting with `/`: on the request's
    /// own scheme and host).
    RedirectToUrl(u16, Arc<str>),
    /// Answer with a redirect whose `Location` is made from the request (Gateway API).
    Redirect(Arc<portico_model::Redirect>),
}

/// One pool as the data plane sees it: its members (swapped whole when only endpoints change),
/// their selection and health state.
#[derive(Debug)]
pub struct PoolState {
    id: PoolId,
    name: String,
    /// The load balancer whose listener first named the pool, as the access log shows it.
    load_balancer: Arc<str>,
    /// Shared with the previous configuration's state for this pool id, so that re-applying
    /// (e.g. when scaling) keeps the rotation, the latency averages and the members' health.
    balance: Arc<Balance>,
    pub(crate) metrics: PoolMetrics,
    /// Shared with the previous configuration's state for this pool id, as the cursor is.
    pub(crate) budget: Arc<Mutex<RetryBudget>>,
    /// A hash of the model pool (and load balancer name) this state was compiled from: the
    /// next compile reuses the state whole when its pool hashes the same. 0 once the members
    /// were replaced apart from a compile ([`crate::Proxy::update_members`]).
    fingerprint: AtomicU64,
    /// The model pool this state was compiled from: while the model still holds that very
    /// `Arc` (and the members were not replaced since), the state is reused without hashing
    /// the pool. Weak, so that the address cannot be reused by another pool meanwhile.
    origin: Weak<Pool>,
}

impl PoolState {
    pub(crate) fn new(
        id: PoolId,
        name: &str,
        load_balancer: Arc<str>,
        balance: Arc<Balance>,
        metrics: PoolMetrics,
        budget: Arc<Mutex<RetryBudget>>,
        (fingerprint, origin): (u64, Weak<Pool>),
    ) -> Self {
        PoolState {
            id,
            name: name.to_owned(),
            load_balancer,
            balance,
            metrics,
            budget,
            fingerprint: AtomicU64::new(fingerprint),
            origin,
        }
    }

    /// The pool's settings from its Ingress's annotations: its balance's (the pool id covers
    /// them, so a balance kept for the id has the same).
    pub(crate) fn settings(&self) -> &PoolSettings {
        &self.balance.settings
    }

    /// Compiled from `pool` itself (the same `Arc`) for `load_balancer`, with the members it
    /// was compiled with.
    pub(crate) fn built_from(&self, pool: &Arc<Pool>, load_balancer: &str) -> bool {
        self.fingerprint() != 0
            && std::ptr::eq(self.origin.as_ptr(), Arc::as_ptr(pool))
            && *self.load_balancer == *load_balancer
    }

    /// The hash of what this state was compiled from; 0 when unknown.
    pub(crate) fn fingerprint(&self) -> u64 {
        self.fingerprint.load(Ordering::Relaxed)
    }

    /// Replaces the members apart from a compile: the state no longer matches the model pool
    /// it was compiled from, so the next compile builds it again.
    pub(crate) fn set_members(&self, members: Vec<super::balance::MemberSpec>) {
        self.fingerprint.store(0, Ordering::Relaxed);
        self.balance.set_members(members);
    }

    pub fn id(&self) -> PoolId {
        self.id
    }

    /// The pool name, as used in metric labels.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the load balancer that first named the pool.
    pub fn load_balancer(&self) -> &str {
        &self.load_balancer
    }

    /// Ready members, in model order.
    pub fn members(&self) -> Vec<SocketAddr> {
        self.balance.endpoints().iter().map(|e| e.addr()).collect()
    }

    /// Whether the pool has no ready member at all (ingress-nginx's "no active endpoint").
    pub(crate) fn is_empty(&self) -> bool {
        self.balance.member_count() == 0
    }

    /// Each ready member's health: healthy, ejected (passive health) or failing its checks.
    pub fn health(&self) -> Vec<(SocketAddr, Health)> {
        self.balance.health()
    }

    /// See [`Balance::own_path_fits`].
    pub(crate) fn own_path_fits(&self) -> bool {
        self.balance.own_path_fits()
    }

    pub(crate) fn balance(&self) -> &Arc<Balance> {
        &self.balance
    }

    /// The member for one try of `request`: never one of `exclude` (the members this request
    /// already tried), never one out of rotation; by the pool's algorithm, or the member its
    /// affinity cookie names. `None` when no member may take it. The [`Pick`] counts as a
    /// request in flight on the member until it is given to [`PoolState::record`] (or
    /// dropped); its [`Pick::set_cookie`] goes on the response.
    pub fn choose(&self, request: &RequestInfo<'_>, exclude: &[SocketAddr]) -> Option<Pick> {
        self.balance.choose(request, exclude)
    }

    /// How the try of `pick` went: a success (any status below 500) or a failure (refused
    /// connection, reset, 5xx, timeout), for passive health and the latency average. Call it
    /// once per try, as soon as the response head (or the failure) is known.
    pub fn record(&self, pick: Pick, outcome: Outcome) {
        self.balance.record(pick, outcome);
    }

    /// The member the next request without key, cookie or history would get (tests).
    pub fn next_member(&self) -> Option<SocketAddr> {
        let headers = HeaderMap::new();
        let uri = Uri::from_static("/");
        let request = RequestInfo {
            headers: &headers,
            uri: &uri,
            client: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        self.choose(&request, &[]).map(|p| p.addr())
    }

    #[allow(dead_code)]
    pub(crate) fn endpoints(&self) -> Vec<Arc<Endpoint>> {
        self.balance.endpoints()
    }

    /// How many members a request may try in all: the pool's tries (0: every member), never
    /// more than there are members.
    pub(crate) fn max_tries(&self) -> usize {
        let members = self.balance.member_count().max(1);
        match usize::try_from(self.settings().tries()).unwrap_or(usize::MAX) {
            0 => members,
            tries => tries.min(members),
        }
    }
}
