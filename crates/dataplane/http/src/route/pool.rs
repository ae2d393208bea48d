//! Route targets: pools with their ready members and round-robin cursor.

use super::budget::RetryBudget;
use crate::metrics::PoolMetrics;
use crate::upstream::Endpoint;
use arc_swap::ArcSwap;
use portico_model::{PoolId, PoolSettings};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a matched route does with a request.
#[derive(Debug, Clone)]
pub enum Target {
    /// Forward to a member of the pool.
    Pool(Arc<PoolState>),
    /// Answer with this status without contacting any backend (a `Reject` policy).
    Reject(u16),
    /// Answer with this redirect status to the same URL over HTTPS.
    RedirectToHttps(u16),
}

/// One pool as the data plane sees it: its members (swapped whole when only endpoints change)
/// and a shared round-robin cursor.
#[derive(Debug)]
pub struct PoolState {
    id: PoolId,
    name: String,
    /// The load balancer whose listener first named the pool, as the access log shows it.
    load_balancer: Arc<str>,
    /// The upstream of each ready member, with its idle connections.
    endpoints: ArcSwap<Vec<Arc<Endpoint>>>,
    /// Shared with the previous configuration's state for this pool id, so that re-applying
    /// (e.g. when scaling) does not restart the rotation.
    cursor: Arc<AtomicUsize>,
    pub(crate) metrics: PoolMetrics,
    /// The pool's settings from its Ingress's annotations.
    pub(crate) settings: PoolSettings,
    /// Shared with the previous configuration's state for this pool id, as the cursor is.
    pub(crate) budget: Arc<Mutex<RetryBudget>>,
}

impl PoolState {
    pub(crate) fn new(
        id: PoolId,
        name: &str,
        load_balancer: Arc<str>,
        endpoints: Vec<Arc<Endpoint>>,
        cursor: Arc<AtomicUsize>,
        metrics: PoolMetrics,
        (settings, budget): (PoolSettings, Arc<Mutex<RetryBudget>>),
    ) -> Self {
        PoolState {
            id,
            name: name.to_owned(),
            load_balancer,
            endpoints: ArcSwap::from_pointee(endpoints),
            cursor,
            metrics,
            settings,
            budget,
        }
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
        self.endpoints.load().iter().map(|e| e.addr()).collect()
    }

    /// Replaces the members: requests routed from now on use the new ones.
    pub(crate) fn set_endpoints(&self, endpoints: Vec<Arc<Endpoint>>) {
        self.endpoints.store(Arc::new(endpoints));
    }

    pub(crate) fn cursor(&self) -> &Arc<AtomicUsize> {
        &self.cursor
    }

    /// The next member in round-robin order, or `None` when no member is ready.
    pub fn next_member(&self) -> Option<SocketAddr> {
        self.next_endpoint().map(|e| e.addr())
    }

    pub(crate) fn next_endpoint(&self) -> Option<Arc<Endpoint>> {
        let endpoints = self.endpoints.load();
        next_index(&self.cursor, endpoints.len()).map(|i| endpoints[i].clone())
    }

    /// The member for the next try of a request that already tried `tried`: the next in
    /// rotation that is not among them, or `None` when every member was tried. (With the
    /// balancer's `choose(request, exclude)` this becomes a call to it.)
    pub(crate) fn untried(&self, tried: &[SocketAddr]) -> Option<Arc<Endpoint>> {
        let endpoints = self.endpoints.load();
        let len = endpoints.len();
        // From where the rotation stands, without moving it: the next request still gets
        // the member after the one that failed.
        let start = self.cursor.load(Ordering::Relaxed) % len.max(1);
        let mut rotation = (0..len).map(|k| &endpoints[(start + k) % len]);
        rotation.find(|e| !tried.contains(&e.addr())).cloned()
    }

    /// How many members a request may try in all: the pool's tries (0: every member), never
    /// more than there are members.
    pub(crate) fn max_tries(&self) -> usize {
        let members = self.endpoints.load().len().max(1);
        match usize::try_from(self.settings.tries()).unwrap_or(usize::MAX) {
            0 => members,
            tries => tries.min(members),
        }
    }
}

fn next_index(cursor: &AtomicUsize, len: usize) -> Option<usize> {
    match len {
        0 => None,
        n => Some(cursor.fetch_add(1, Ordering::Relaxed) % n),
    }
}
