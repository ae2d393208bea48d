//! Provider `proxy`: the built-in L7 proxy (`portico-dataplane-http`) as a driver. Each load
//! balancer's listeners bind its VIP and ports; load balancers without a VIP share the node's
//! default listeners (`--http-listen`, `--https-listen`). Load balancers bound to the same
//! address and port are served together, their routes merged by host (one route table per
//! address). A listener that cannot bind is an error on the load balancer's IngressClass; the
//! others are served.
//!
//! It depends on the model, the provider trait and the HTTP data plane; not on Kubernetes
//! types, sources or other data planes.

mod place;

pub use place::{Bind, place};

use portico_dataplane_http::{AccessLog, Health, HeavyLane, Proxy, ProxyMetrics};
use portico_model::{Diagnostic, Limits, LoadBalancer, Model, PoolId};
use portico_provider::{CaBundles, Certificates, Provider, SocketKind, Sockets};
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The provider type.
pub const PROVIDER: &str = portico_dataplane_http::PROVIDER;

/// One address pair being served: its proxy and, for a VIP, the listeners' stop switch.
struct Served {
    proxy: Arc<Proxy>,
    /// Dropped (or set) to close a VIP's listeners; none for the default listeners.
    stop: Option<watch::Sender<bool>>,
    /// A VIP's addresses (HTTP, HTTPS), unregistered from `sockets` when it closes.
    vip: Option<(SocketAddr, SocketAddr, Arc<Sockets>)>,
    /// A VIP's listeners' tasks, which end once their connections drained.
    tasks: Vec<JoinHandle<()>>,
}

/// The built-in proxy as a provider.
pub struct ProxyProvider {
    metrics: ProxyMetrics,
    limits: Limits,
    /// Shared by every proxy this provider starts.
    access: AccessLog,
    /// Where the TLS handshakes of every proxy this provider starts take turns (one runtime).
    lane: Arc<HeavyLane>,
    /// The default listeners' addresses, when the proxy serves them.
    defaults: Option<(SocketAddr, SocketAddr)>,
    served: Mutex<BTreeMap<Bind, Served>>,
    /// The VIPs' listening sockets are registered there (and taken from there when handed
    /// over by a predecessor).
    sockets: Arc<Sockets>,
    /// The basic-auth entries the next `apply` hands its proxies.
    credentials: Mutex<portico_provider::Credentials>,
}

impl ProxyProvider {
    /// A provider whose load balancers without a VIP are served on `defaults` (HTTP, HTTPS)
    /// until `shutdown`; with `defaults` none (haproxy binds them), such load balancers are
    /// not served.
    /// Also returns the default listeners' tasks, which end once their connections drained.
    /// Every request is logged to `access` (see [`AccessLog`]).
    pub fn new(
        metrics: ProxyMetrics,
        limits: Limits,
        access: AccessLog,
        defaults: Option<(TcpListener, TcpListener)>,
        sockets: Arc<Sockets>,
        shutdown: &watch::Receiver<bool>,
    ) -> (Self, Vec<JoinHandle<()>>) {
        let mut tasks = Vec::new();
        let mut served = BTreeMap::new();
        let mut addresses = None;
        let lane = Arc::new(HeavyLane::for_current_runtime());
        if let Some((http, https)) = defaults {
            let proxy = Proxy::with_access_log(metrics.clone(), limits, access.clone());
            proxy.share_heavy_lane(lane.clone());
            let local = |l: &TcpListener| l.local_addr().ok();
            if let (Some(h), Some(s)) = (local(&http), local(&https)) {
                addresses = Some((h, s));
            }
            let quic = (addresses.filter(|_| proxy.serves_h3()))
                .and_then(|(_, https)| quic_socket(&sockets, https));
            tasks.push(tokio::spawn(proxy.clone().serve(http, shutdown.clone())));
            tasks.push(tokio::spawn(proxy.clone().serve_https(
                https,
                quic,
                shutdown.clone(),
            )));
            let stop = None;
            served.insert(
                Bind::Default,
                Served {
                    proxy,
                    stop,
                    vip: None,
                    tasks: Vec::new(),
                },
            );
        }
        let provider = ProxyProvider {
            credentials: Mutex::default(),
            metrics,
            limits,
            access,
            lane,
            defaults: addresses,
            served: Mutex::new(served),
            sockets,
        };
        (provider, tasks)
    }

    /// A successor process serves the same sockets: every proxy's shutdown stops accepting at
    /// once (see [`Proxy::hand_over`]).
    pub fn hand_over(&self) {
        let served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        served.values().for_each(|s| s.proxy.hand_over());
    }

    /// The process stops: every VIP's listeners stop now (at once after a hand-over: the
    /// successor accepts on the same sockets) and drain as the default listeners do, tunnels
    /// included until the shutdown timeout; the returned tasks end once they have.
    pub fn stop_vips(&self) -> Vec<JoinHandle<()>> {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let mut tasks = Vec::new();
        for s in served.values_mut() {
            if let Some(stop) = &s.stop {
                stop.send_replace(true);
            }
            tasks.append(&mut s.tasks);
        }
        tasks
    }

    /// Where this provider registers its listening sockets (shared with the node's other
    /// listeners).
    pub fn sockets(&self) -> Arc<Sockets> {
        self.sockets.clone()
    }

    /// A VIP's listener: handed over by the predecessor, or bound now.
    fn vip_listener(&self, kind: SocketKind, addr: SocketAddr) -> std::io::Result<TcpListener> {
        let listener = match self.sockets.take((kind, addr)) {
            Some(fd) => {
                let listener = std::net::TcpListener::from(fd);
                listener.set_nonblocking(true)?;
                TcpListener::from_std(listener)?
            }
            None => TcpListener::from_std(portico_provider::bind_nonlocal_tcp(addr)?)?,
        };
        self.sockets.listening((kind, addr), &listener);
        Ok(listener)
    }

    /// Binds a VIP's listeners and starts serving them with a new proxy.
    fn start_vip(&self, http_addr: SocketAddr, https_addr: SocketAddr) -> std::io::Result<Served> {
        let http = self.vip_listener(SocketKind::VipHttp, http_addr)?;
        let https = match self.vip_listener(SocketKind::VipHttps, https_addr) {
            Ok(l) => l,
            Err(e) => {
                self.sockets.closed((SocketKind::VipHttp, http_addr));
                return Err(e);
            }
        };
        // A VIP that is dropped closes its listeners at once (its address may be bound again
        // right away, see `Served`'s drop); its connections drain as the process's do.
        let proxy = Proxy::with_access_log(self.metrics.clone(), self.limits, self.access.clone());
        proxy.share_heavy_lane(self.lane.clone());
        let quic = (proxy.serves_h3())
            .then(|| quic_socket(&self.sockets, https_addr))
            .flatten();
        let (stop, stopped) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(proxy.clone().serve(http, stopped.clone())),
            tokio::spawn(proxy.clone().serve_https(https, quic, stopped)),
        ];
        Ok(Served {
            proxy,
            stop: Some(stop),
            vip: Some((http_addr, https_addr, self.sockets.clone())),
            tasks,
        })
    }
}

/// The UDP socket of HTTP/3 beside the HTTPS listener on `addr`: handed over by the
/// predecessor, or bound now; none (a warning) when the port is taken: HTTPS is served all
/// the same.
fn quic_socket(sockets: &Sockets, addr: SocketAddr) -> Option<std::net::UdpSocket> {
    let key = (SocketKind::Quic, addr);
    let socket = match sockets.take(key) {
        Some(fd) => std::net::UdpSocket::from(fd),
        None => match portico_provider::bind_nonlocal_udp(addr) {
            Ok(socket) => socket,
            Err(error) => {
                tracing::warn!(%addr, %error, "HTTP/3 not served: its UDP port cannot be bound");
                return None;
            }
        },
    };
    if let Err(error) = socket.set_nonblocking(true) {
        tracing::warn!(%addr, %error, "HTTP/3 not served");
        return None;
    }
    sockets.listening(key, &socket);
    Some(socket)
}

/// One served pool and its members' health.
#[derive(Debug, Clone)]
pub struct PoolHealth {
    pub id: PoolId,
    pub name: String,
    pub members: Vec<(SocketAddr, Health)>,
}

impl ProxyProvider {
    /// Every served pool's members and their health now, by pool name.
    pub fn pool_health(&self) -> Vec<PoolHealth> {
        let served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for s in served.values() {
            let table = s.proxy.table();
            for pool in table.pools() {
                if seen.insert(pool.id()) {
                    out.push(PoolHealth {
                        id: pool.id(),
                        name: pool.name().to_owned(),
                        members: pool.health(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

impl Provider for ProxyProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn apply(
        &self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
    ) -> Vec<Diagnostic> {
        let mut diagnostics = Vec::new();
        let credentials = (self.credentials.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let groups = place(model, self.defaults);
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        // Address pairs no load balancer needs any more close (the default ones stay).
        served.retain(|bind, _| *bind == Bind::Default || groups.contains_key(bind));
        for (bind, lbs) in &groups {
            if !served.contains_key(bind) {
                let started = match bind {
                    Bind::Default => Err(std::io::Error::other(
                        "the default listeners are served by haproxy (--provider haproxy): give the IngressClass a VIP (portico.dev/vip)",
                    )),
                    Bind::Vip { http, https } => self.start_vip(*http, *https),
                };
                match started {
                    Ok(s) => {
                        served.insert(*bind, s);
                    }
                    Err(e) => {
                        diagnostics.extend(lbs.iter().map(|lb| not_bound(lb, bind, &e)));
                        continue;
                    }
                }
            }
            if let Some(s) = served.get(bind) {
                let part = Model {
                    load_balancers: lbs.iter().map(|lb| (*lb).clone()).collect(),
                };
                s.proxy.set_certificates(&part, certificates);
                s.proxy.set_ca_bundles(ca_bundles);
                s.proxy.set_credentials(&credentials);
                s.proxy.apply(&part);
            }
        }
        // The default proxy serves nothing when no load balancer is bound there: no route,
        // and no certificate (its SNI map would otherwise keep serving the last Secrets'
        // certificates, and keep their material alive, after they were deleted).
        if !groups.contains_key(&Bind::Default)
            && let Some(s) = served.get(&Bind::Default)
        {
            let nothing = Model::default();
            s.proxy.set_certificates(&nothing, certificates);
            s.proxy.set_ca_bundles(ca_bundles);
            s.proxy.apply(&nothing);
        }
        diagnostics
    }

    fn set_credentials(&self, credentials: &portico_provider::Credentials) {
        let mut own = (self.credentials.lock()).unwrap_or_else(PoisonError::into_inner);
        own.clone_from(credentials);
    }

    fn update_members(&self, model: &Model, pools: &HashSet<PoolId>) {
        let served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let changed: Vec<_> = (model.load_balancers.iter())
            .flat_map(|lb| &lb.pools)
            .filter(|p| pools.contains(&p.id))
            .collect();
        for s in served.values() {
            s.proxy.update_members(changed.iter().map(|p| &***p));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            // The listeners close at once, as after a hand-over; the connections are asked
            // to close for the grace period.
            self.proxy.hand_over();
            stop.send_replace(true);
        }
        if let Some((http, https, sockets)) = &self.vip {
            sockets.closed((SocketKind::VipHttp, *http));
            sockets.closed((SocketKind::VipHttps, *https));
            sockets.closed((SocketKind::Quic, *https));
        }
    }
}

fn not_bound(lb: &LoadBalancer, bind: &Bind, error: &std::io::Error) -> Diagnostic {
    let class = lb.origin.clone();
    let message = format!(
        "load balancer {} is not served: cannot listen on {bind}: {error}",
        lb.name
    );
    Diagnostic::error(class, "metadata.annotations[portico.dev/vip]", message)
}
