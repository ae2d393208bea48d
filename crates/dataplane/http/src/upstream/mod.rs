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
mod tls;

pub(crate) use body::UpstreamBody;
pub(crate) use endpoint::{Endpoint, IdleBudget, SendFailed, UpstreamError};

use crate::tls::CaBySecret;
use portico_model::{PoolProtocol, UpstreamTls};
use portico_tls::CaBundle;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// An endpoint's identity: address, protocol, TLS settings and the CA bundle verified against
/// (pools that verify differently do not share connections).
type Key = (
    SocketAddr,
    PoolProtocol,
    Option<UpstreamTls>,
    Option<Arc<CaBundle>>,
);

/// Endpoints by address, so that a new configuration reuses the idle connections of the
/// previous one. Consulted only when a route table is compiled, never per request.
#[derive(Debug)]
pub(crate) struct Endpoints {
    by_addr: Mutex<HashMap<Key, Weak<Endpoint>>>,
    /// The CA bundles verifying pools name, as last set.
    ca: Mutex<CaBySecret>,
    /// The idle connections all of them keep.
    budget: Arc<IdleBudget>,
}

impl Default for Endpoints {
    /// Idle connections bounded per endpoint only.
    fn default() -> Self {
        Endpoints::new(usize::MAX)
    }
}

impl Endpoints {
    /// Endpoints that keep at most `max_idle` idle connections between them.
    pub(crate) fn new(max_idle: usize) -> Self {
        Endpoints {
            by_addr: Mutex::default(),
            ca: Mutex::default(),
            budget: IdleBudget::new(max_idle),
        }
    }

    /// The endpoint for `addr` in `protocol` (with `tls` for TLS protocols): the live one if
    /// any configuration still uses it, else new.
    pub(crate) fn get(
        &self,
        addr: SocketAddr,
        protocol: PoolProtocol,
        tls: Option<&UpstreamTls>,
    ) -> Arc<Endpoint> {
        let tls = tls.filter(|_| protocol.is_tls());
        let ca = tls
            .filter(|t| t.verify)
            .and_then(|t| t.ca.as_ref())
            .and_then(|ca| {
                let bundles = self.ca.lock().unwrap_or_else(PoisonError::into_inner);
                bundles.get(ca).cloned()
            });
        let key = (addr, protocol, tls.cloned(), ca.clone());
        let mut map = self.by_addr.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = map.get(&key).and_then(Weak::upgrade) {
            return live;
        }
        let endpoint = Endpoint::new(addr, protocol, tls, ca.as_deref());
        let endpoint = Arc::new(endpoint.with_budget(self.budget.clone()));
        map.insert(key, Arc::downgrade(&endpoint));
        endpoint
    }

    /// The CA bundles endpoints made from now on verify against.
    pub(crate) fn set_ca_bundles(&self, bundles: &CaBySecret) {
        let mut ca = self.ca.lock().unwrap_or_else(PoisonError::into_inner);
        if *ca != *bundles {
            *ca = bundles.clone();
        }
    }

    /// How many endpoints are known (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_addr.lock().map_or(0, |m| m.len())
    }

    /// Forgets endpoints no configuration uses any more (their connections are already gone).
    pub(crate) fn prune(&self) {
        let mut map = self.by_addr.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, weak| weak.strong_count() > 0);
        // After most members went (every object deleted), the table gives its room back.
        if map.capacity() > 4 * map.len().max(64) {
            map.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_use_keeps_its_endpoint_and_an_unused_one_is_pruned() {
        let endpoints = Endpoints::default();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let first = endpoints.get(addr, PoolProtocol::Http, None);
        assert!(Arc::ptr_eq(
            &first,
            &endpoints.get(addr, PoolProtocol::Http, None)
        ));
        assert!(!Arc::ptr_eq(
            &first,
            &endpoints.get(addr, PoolProtocol::H2c, None)
        ));
        drop(first);
        endpoints.prune();
        assert!(endpoints.by_addr.lock().unwrap().is_empty());
    }

    #[test]
    fn pruning_most_endpoints_gives_the_tables_room_back() {
        let endpoints = Endpoints::default();
        let addr = |i: u32| SocketAddr::from((std::net::Ipv4Addr::from(0x7f01_0000 + i), 80));
        let all: Vec<_> = (0..5000)
            .map(|i| endpoints.get(addr(i), PoolProtocol::Http, None))
            .collect();
        let kept: Vec<_> = all.iter().take(10).cloned().collect();
        drop(all);
        endpoints.prune();
        let map = endpoints.by_addr.lock().unwrap();
        assert_eq!(map.len(), 10);
        assert!(map.capacity() < 1000, "capacity {}", map.capacity());
        drop(map);
        assert!(Arc::ptr_eq(
            &kept[0],
            &endpoints.get(addr(0), PoolProtocol::Http, None)
        ));
    }

    /// However many endpoints, the idle connections they keep between them stay within the
    /// budget; a reused connection or a dropped endpoint gives its share back.
    #[tokio::test]
    async fn idle_connections_of_all_endpoints_stay_within_the_budget() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connect = || tokio::net::TcpStream::connect(addr);
        let endpoints = Endpoints::new(2);
        let a = endpoints.get(addr, PoolProtocol::Http, None);
        let b = endpoints.get(addr, PoolProtocol::H2c, None);
        a.checkin_raw(connect().await.unwrap());
        a.checkin_raw(connect().await.unwrap());
        b.checkin_raw(connect().await.unwrap());
        assert_eq!(endpoints.budget.held(), 2);
        assert!(b.checkout_raw().is_none(), "closed when it came back");
        assert!(a.checkout_raw().is_some());
        assert_eq!(endpoints.budget.held(), 1);
        b.checkin_raw(connect().await.unwrap());
        assert_eq!(endpoints.budget.held(), 2);
        drop(a);
        assert_eq!(endpoints.budget.held(), 1, "a's last one closed with it");
    }

    #[test]
    fn a_verifying_pool_keeps_its_endpoint_until_its_ca_bundle_changes() {
        use portico_model::ObjectRef;
        let endpoints = Endpoints::default();
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let secret = ObjectRef::new("Secret", "ns", "ca");
        let tls = UpstreamTls {
            verify: true,
            ca: Some(secret.clone()),
            server_name: Some("web.ns.svc".into()),
            sni: false,
            subject_alt_names: vec![],
        };
        let bundle = |name: &str| {
            let ca = portico_tls::generate::Authority::new(name).unwrap();
            let bundle = CaBundle::from_pem(ca.cert_pem().as_bytes()).unwrap();
            CaBySecret::from([(secret.clone(), Arc::new(bundle))])
        };
        let get = || endpoints.get(addr, PoolProtocol::Https, Some(&tls));
        let unknown = get();
        let first_bundle = bundle("first");
        endpoints.set_ca_bundles(&first_bundle);
        let first = get();
        assert!(!Arc::ptr_eq(&unknown, &first));
        // The same content in a new map (as a new desired state brings it).
        let copied: CaBySecret = (first_bundle.iter())
            .map(|(k, v)| (k.clone(), Arc::new(CaBundle::clone(v))))
            .collect();
        endpoints.set_ca_bundles(&copied);
        assert!(
            Arc::ptr_eq(&first, &get()),
            "an unchanged bundle keeps the endpoint"
        );
        endpoints.set_ca_bundles(&bundle("second"));
        assert!(
            !Arc::ptr_eq(&first, &get()),
            "a new bundle gets a new endpoint"
        );
    }
}
