//! Upstream connections: one [`Endpoint`] per member address and protocol, each with its own
//! pool of idle HTTP/1.1 connections (hyper's `client::conn`) or, for h2c pools, one shared
//! HTTP/2 connection (`h2c.rs`), shared across configuration generations.
//!
//! Why not hyper-util's pooled client: its per-request costs (a pool keyed by hashed
//! scheme + authority behind one lock, a checkout future, a task spawned per response to wait
//! for the connection to become idle again) showed up in the profile of the proxy benchmark.
//! Here the member already *is* the pool key, a connection goes back to its endpoint when the
//! response body ends, and nothing is spawned per request.

mod body;
mod endpoint;
mod h2c;
mod io;

pub(crate) use body::UpstreamBody;
pub(crate) use endpoint::{Endpoint, SendFailed, UpstreamError};

use portico_model::PoolProtocol;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Endpoints by address, so that a new configuration reuses the idle connections of the
/// previous one. Consulted only when a route table is compiled, never per request.
#[derive(Debug, Default)]
pub(crate) struct Endpoints {
    by_addr: Mutex<HashMap<(SocketAddr, PoolProtocol), Weak<Endpoint>>>,
}

impl Endpoints {
    /// The endpoint for `addr` in `protocol`: the live one if any configuration still uses it,
    /// else new.
    pub(crate) fn get(&self, addr: SocketAddr, protocol: PoolProtocol) -> Arc<Endpoint> {
        let mut map = self.by_addr.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = map.get(&(addr, protocol)).and_then(Weak::upgrade) {
            return live;
        }
        let endpoint = Arc::new(Endpoint::new(addr, protocol));
        map.insert((addr, protocol), Arc::downgrade(&endpoint));
        endpoint
    }

    /// Forgets endpoints no configuration uses any more (their connections are already gone).
    pub(crate) fn prune(&self) {
        let mut map = self.by_addr.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, weak| weak.strong_count() > 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_use_keeps_its_endpoint_and_an_unused_one_is_pruned() {
        let endpoints = Endpoints::default();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let first = endpoints.get(addr, PoolProtocol::Http);
        assert!(Arc::ptr_eq(
            &first,
            &endpoints.get(addr, PoolProtocol::Http)
        ));
        assert!(!Arc::ptr_eq(
            &first,
            &endpoints.get(addr, PoolProtocol::H2c)
        ));
        drop(first);
        endpoints.prune();
        assert!(endpoints.by_addr.lock().unwrap().is_empty());
    }
}
