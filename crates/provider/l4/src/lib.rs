//! Provider `l4`: serves each load balancer's TCP and UDP listeners on its VIP and ports with
//! the L4 data plane (`portico-dataplane-l4`). A change swaps the listeners' targets without
//! rebinding; listeners that are gone stop accepting and their flows drain. A load balancer
//! without a VIP is not served (a diagnostic says so): give Portico a `--vip-pool`.

pub use portico_dataplane_l4::L4Limits;
use portico_dataplane_l4::{Target, TcpHandle, UdpHandle, serve_tcp, serve_udp};
use portico_model::{Diagnostic, LoadBalancer, LoadBalancerId, Model, PoolId, Protocol};
use portico_provider::{CaBundles, Certificates, Provider};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Mutex;

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
    pool: Option<PoolId>,
}

/// The `l4` provider. `apply` must be called within a tokio runtime.
#[derive(Debug, Default)]
pub struct L4Provider {
    limits: L4Limits,
    /// By (protocol, address).
    bound: Mutex<HashMap<(Protocol, SocketAddr), Bound>>,
}

impl L4Provider {
    pub fn new(limits: L4Limits) -> Self {
        L4Provider {
            limits,
            bound: Mutex::default(),
        }
    }

    fn bind(
        &self,
        protocol: Protocol,
        addr: SocketAddr,
        target: Target,
    ) -> std::io::Result<Handle> {
        match protocol {
            Protocol::Udp => {
                let socket = std::net::UdpSocket::bind(addr)?;
                serve_udp(socket, target, self.limits).map(Handle::Udp)
            }
            _ => {
                let listener = std::net::TcpListener::bind(addr)?;
                serve_tcp(listener, target, self.limits).map(Handle::Tcp)
            }
        }
    }
}

fn target(lb: &LoadBalancer, pool: Option<PoolId>) -> Target {
    Target::from_pool(pool.and_then(|id| lb.pool(id)))
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
            for listener in lb.listeners.iter() {
                if !matches!(listener.protocol, Protocol::Tcp | Protocol::Udp) {
                    diagnostics.push(Diagnostic::warning(
                        lb.origin.clone(),
                        format!("listener {}", listener.name),
                        "provider l4 serves TCP and UDP listeners only; skipped",
                    ));
                    continue;
                }
                let key = (listener.protocol, SocketAddr::new(vip, listener.port));
                let pool = listener.default_pool;
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
                    existing.handle.set(target(lb, pool));
                    existing.owner = lb.id;
                    existing.pool = pool;
                    continue;
                }
                match self.bind(key.0, key.1, target(lb, pool)) {
                    Ok(handle) => {
                        tracing::info!(lb = %lb.name, listener = %listener.name, addr = %key.1, "l4: listening");
                        bound.insert(
                            key,
                            Bound {
                                handle,
                                owner: lb.id,
                                pool,
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
            for listener in lb.listeners.iter() {
                let key = (listener.protocol, SocketAddr::new(vip, listener.port));
                let Some(existing) = bound.get(&key).filter(|b| b.owner == lb.id) else {
                    continue;
                };
                if existing.pool.is_some_and(|p| pools.contains(&p)) {
                    existing.handle.set(target(lb, existing.pool));
                }
            }
        }
    }
}
