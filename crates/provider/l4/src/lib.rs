//! Provider `l4`: serves each load balancer's TCP and UDP listeners on its VIP (and floating IP)
//! and ports with the L4 data plane (`portico-dataplane-l4`). A change swaps the listeners'
//! targets without rebinding; listeners that are gone stop accepting and their flows drain. A load balancer
//! without a VIP is not served (a diagnostic says so): give Portico a `--vip-pool`.

pub use portico_dataplane_l4::{L4Limits, tcp_flows};
use portico_dataplane_l4::{Target, TcpHandle, UdpHandle, serve_tcp, serve_udp};
use portico_model::{
    Diagnostic, Listener, LoadBalancer, LoadBalancerId, Model, PolicyAction, PoolId, Protocol,
};
use portico_provider::{CaBundles, Certificates, Provider, SocketKind, Sockets};
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The provider type.
pub const KIND: &str = "l4";

#[derive(Debug)]
enum Handle {
    Tcp(TcpHandle),
    Udp(UdpHandle),
}

impl Handle {
    fn set(&self, target: Target) {
        match self {
            Handle::Tcp(h) => h.set(target),
            Handle::Udp(h) => h.set(target),
        }
    }
}

/// One bound listener and the pool it serves.
#[derive(Debug)]
struct Bound {
    handle: Handle,
    /// The load balancer served there.
    owner: LoadBalancerId,
    /// The pools its target is built from.
    pools: Vec<PoolId>,
    /// Where its socket is registered, until it closes.
    registered: (SocketKind, SocketAddr, Arc<Sockets>),
}

impl Drop for Bound {
    fn drop(&mut self) {
        let (kind, addr, sockets) = &self.registered;
        sockets.closed((*kind, *addr));
    }
}

/// The `l4` provider. `apply` must be called within a tokio runtime.
#[derive(Debug, Default)]
pub struct L4Provider {
    limits: L4Limits,
    /// By (protocol, address).
    bound: Mutex<HashMap<(Protocol, SocketAddr), Bound>>,
    /// The listening sockets are registered there (and taken from there when handed over by
    /// a predecessor).
    sockets: Arc<Sockets>,
}

impl L4Provider {
    pub fn new(limits: L4Limits, sockets: Arc<Sockets>) -> Self {
        L4Provider {
            limits,
            bound: Mutex::default(),
            sockets,
        }
    }

    fn bind(
        &self,
        protocol: Protocol,
        addr: SocketAddr,
        target: Target,
    ) -> std::io::Result<Handle> {
        let inherited = self.sockets.take((kind(protocol), addr));
        let handle = match protocol {
            Protocol::Udp => {
                let socket = match inherited {
                    Some(fd) => std::net::UdpSocket::from(fd),
                    None => portico_provider::bind_nonlocal_udp(addr)?,
                };
                self.sockets.listening((SocketKind::Udp, addr), &socket);
                serve_udp(socket, target, self.limits).map(Handle::Udp)
            }
            _ => {
                let listener = match inherited {
                    Some(fd) => std::net::TcpListener::from(fd),
                    None => portico_provider::bind_nonlocal_tcp(addr)?,
                };
                self.sockets.listening((SocketKind::Tcp, addr), &listener);
                serve_tcp(listener, target, self.limits).map(Handle::Tcp)
            }
        };
        if handle.is_err() {
            self.sockets.closed((kind(protocol), addr));
        }
        handle
    }
}

/// The kind of socket a listener of `protocol` is.
fn kind(protocol: Protocol) -> SocketKind {
    match protocol {
        Protocol::Udp => SocketKind::Udp,
        _ => SocketKind::Tcp,
    }
}

/// What a listener balances over: its default pool (a Service port: its affinity, source
/// ranges and PROXY header too), else the weighted pools of its one policy (a Gateway's
/// TCPRoute or UDPRoute), else nothing (every flow is refused).
fn target(lb: &LoadBalancer, listener: &Listener) -> Target {
    if let Some(id) = listener.default_pool {
        return Target::from_pool(lb.pool(id));
    }
    let shares: Vec<_> = (shares(listener).into_iter())
        .map(|(pool, weight)| (pool.and_then(|id| lb.pool(id)), weight))
        .collect();
    Target::from_shares(&shares)
}

/// The weighted pools a listener balances over.
fn shares(listener: &Listener) -> Vec<(Option<PoolId>, u32)> {
    let action = listener.policies.first().map(|p| &p.action);
    match (listener.default_pool, action) {
        (Some(id), _) => vec![(Some(id), 1)],
        (None, Some(PolicyAction::RedirectToPool { pool })) => vec![(Some(*pool), 1)],
        (None, Some(PolicyAction::RedirectToPools { pools })) => {
            pools.iter().map(|s| (s.pool, s.weight)).collect()
        }
        _ => Vec::new(),
    }
}

/// Each listener of `lb` on each of its addresses: the VIP, then the floating IP when it has
/// one (the same ports and targets, as the other providers bind both).
fn listeners_on(lb: &LoadBalancer, vip: IpAddr) -> impl Iterator<Item = (&Listener, IpAddr)> {
    let ips: Vec<IpAddr> = std::iter::once(vip).chain(lb.floating_ip).collect();
    ips.into_iter()
        .flat_map(move |ip| lb.listeners.iter().map(move |l| (l, ip)))
}

/// The pools [`target`] reads for `listener`.
fn pools_of(listener: &Listener) -> Vec<PoolId> {
    shares(listener)
        .into_iter()
        .filter_map(|(p, _)| p)
        .collect()
}

impl Provider for L4Provider {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn apply(
        &self,
        model: &Model,
        _certificates: &Certificates,
        _ca_bundles: &CaBundles,
    ) -> Vec<Diagnostic> {
        let mut diagnostics = Vec::new();
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        // Who asked first for each address this time (the compile step already settles
        // collisions between Services; this keeps a model from elsewhere from rebinding).
        let mut wanted: HashMap<(Protocol, SocketAddr), &portico_model::ObjectRef> = HashMap::new();
        for lb in &model.load_balancers {
            let Some(vip) = lb.vip else {
                diagnostics.push(Diagnostic::warning(
                    lb.origin.clone(),
                    "status.loadBalancer.ingress",
                    "not served: provider l4 needs a VIP (start Portico with --vip-pool)",
                ));
                continue;
            };
            for (listener, ip) in listeners_on(lb, vip) {
                if !matches!(listener.protocol, Protocol::Tcp | Protocol::Udp) {
                    if ip != vip {
                        continue;
                    }
                    diagnostics.push(Diagnostic::warning(
                        lb.origin.clone(),
                        format!("listener {}", listener.name),
                        "provider l4 serves TCP and UDP listeners only; skipped",
                    ));
                    continue;
                }
                let key = (listener.protocol, SocketAddr::new(ip, listener.port));
                let pools = pools_of(listener);
                if let Some(first) = wanted.get(&key) {
                    diagnostics.push(Diagnostic::warning(
                        lb.origin.clone(),
                        format!("listener {}", listener.name),
                        format!("{} is already served for {first}; not served", key.1),
                    ));
                    continue;
                }
                wanted.insert(key, &lb.origin);
                if let Some(existing) = bound.get_mut(&key) {
                    existing.handle.set(target(lb, listener));
                    existing.owner = lb.id;
                    existing.pools = pools;
                    continue;
                }
                match self.bind(key.0, key.1, target(lb, listener)) {
                    Ok(handle) => {
                        tracing::info!(lb = %lb.name, listener = %listener.name, addr = %key.1, "l4: listening");
                        bound.insert(
                            key,
                            Bound {
                                handle,
                                owner: lb.id,
                                pools,
                                registered: (kind(key.0), key.1, self.sockets.clone()),
                            },
                        );
                    }
                    Err(e) => diagnostics.push(Diagnostic::error(
                        lb.origin.clone(),
                        format!("listener {}", listener.name),
                        format!("cannot bind {}: {e}", key.1),
                    )),
                }
            }
        }
        bound.retain(|key, _| wanted.contains_key(key));
        diagnostics
    }

    fn update_members(&self, model: &Model, pools: &HashSet<PoolId>) {
        let bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        for lb in &model.load_balancers {
            let Some(vip) = lb.vip else { continue };
            for (listener, ip) in listeners_on(lb, vip) {
                let key = (listener.protocol, SocketAddr::new(ip, listener.port));
                let Some(existing) = bound.get(&key).filter(|b| b.owner == lb.id) else {
                    continue;
                };
                if existing.pools.iter().any(|p| pools.contains(p)) {
                    existing.handle.set(target(lb, listener));
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use portico_model::{Algorithm, ListenerId, Member, MemberId, ObjectRef, Pool, PoolProtocol};
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    /// A member that greets each connection with `name`.
    async fn member(name: &'static str) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = s.write_all(name.as_bytes()).await;
            }
        });
        addr
    }

    /// A load balancer `name` on 127.0.0.1 with one TCP listener on `port` to `member`.
    fn lb(name: &str, port: u16, member: SocketAddr) -> LoadBalancer {
        let id = LoadBalancerId::derive(name);
        let pool = Pool {
            id: PoolId::derive(&format!("{name}/pool")),
            name: name.to_owned(),
            service: ObjectRef::new("Service", "apps", name),
            service_port: "app".to_owned(),
            algorithm: Algorithm::default(),
            protocol: PoolProtocol::default(),
            settings: Default::default(),
            members: vec![Member {
                id: MemberId::derive(&format!("{name}/member")),
                address: member.ip(),
                port: member.port(),
                weight: 1,
                ready: true,
            }],
        };
        let listener = Listener {
            id: ListenerId::derive(&format!("{name}/listener")),
            name: format!("TCP:{port}"),
            protocol: Protocol::Tcp,
            port,
            policies: Vec::new(),
            default_pool: Some(pool.id),
            default_source: None,
            tls: None,
        };
        LoadBalancer {
            id,
            name: name.to_owned(),
            origin: ObjectRef::new("Service", "apps", name),
            provider: KIND.to_owned(),
            vip: Some([127, 0, 0, 1].into()),
            floating_ip: None,
            listeners: Arc::new(vec![listener]),
            pools: vec![Arc::new(pool)],
        }
    }

    async fn greeting(addr: SocketAddr) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test]
    async fn the_first_load_balancer_keeps_an_address_asked_twice_and_the_second_is_told() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (a, b) = (member("a").await, member("b").await);
        let model = Model {
            load_balancers: vec![lb("first", port, a), lb("second", port, b)],
        };
        let provider = L4Provider::default();
        let diagnostics = provider.apply(&model, &Default::default(), &Default::default());
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert_eq!(diagnostics[0].object.name, "second");
        assert!(
            diagnostics[0].message.contains("Service apps/first"),
            "{diagnostics:?}"
        );
        let addr = SocketAddr::new([127, 0, 0, 1].into(), port);
        assert_eq!(greeting(addr).await, "a");
        // A member change of the second's pool does not touch the first's listener.
        let pools = model.load_balancers.iter().flat_map(|l| &l.pools);
        provider.update_members(&model, &pools.map(|p| p.id).collect());
        assert_eq!(greeting(addr).await, "a");
    }
}
