//! Route targets: pools with their ready members and round-robin cursor.

use crate::metrics::PoolMetrics;
use crate::upstream::Endpoint;
use portico_model::PoolId;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a matched route does with a request.
#[derive(Debug, Clone)]
pub enum Target {
    /// Forward to a member of the pool.
    Pool(Arc<PoolState>),
    /// Answer with this status without contacting any backend (a `Reject` policy).
    Reject(u16),
}

/// One pool as the data plane sees it: an immutable member list and a shared cursor.
#[derive(Debug)]
pub struct PoolState {
    id: PoolId,
    name: String,
    members: Vec<SocketAddr>,
    /// The upstream of each member (same order), with its idle connections.
    endpoints: Vec<Arc<Endpoint>>,
    /// Shared with the previous configuration's state for this pool id, so that re-applying
    /// (e.g. when scaling) does not restart the rotation.
    cursor: Arc<AtomicUsize>,
    pub(crate) metrics: PoolMetrics,
}

impl PoolState {
    pub(crate) fn new(
        id: PoolId,
        name: &str,
        endpoints: Vec<Arc<Endpoint>>,
        cursor: Arc<AtomicUsize>,
        metrics: PoolMetrics,
    ) -> Self {
        PoolState {
            id,
            name: name.to_owned(),
            members: endpoints.iter().map(|e| e.addr()).collect(),
            endpoints,
            cursor,
            metrics,
        }
    }

    pub fn id(&self) -> PoolId {
        self.id
    }

    /// The pool name, as used in metric labels.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ready members, in model order.
    pub fn members(&self) -> &[SocketAddr] {
        &self.members
    }

    pub(crate) fn cursor(&self) -> &Arc<AtomicUsize> {
        &self.cursor
    }

    /// The next member in round-robin order, or `None` when no member is ready.
    pub fn next_member(&self) -> Option<SocketAddr> {
        self.next_index().map(|i| self.members[i])
    }

    pub(crate) fn next_endpoint(&self) -> Option<&Arc<Endpoint>> {
        self.next_index().and_then(|i| self.endpoints.get(i))
    }

    fn next_index(&self) -> Option<usize> {
        match self.members.len() {
            0 => None,
            n => Some(self.cursor.fetch_add(1, Ordering::Relaxed) % n),
        }
    }
}
