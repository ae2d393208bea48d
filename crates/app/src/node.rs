//! What runs on a node for its agent: the listeners (bound by the built-in proxy, or checked
//! free for haproxy), the provider registry and the admin API.

use crate::error::AppError;
use crate::metrics::AppMetrics;
use crate::providers::HaproxySettings;
use crate::types::{Bound, ListenSettings, NodeSettings};
use portico_admin::Admin;
use portico_dataplane_http::{AccessLog, Destination, ProxyMetrics};
use portico_provider::{Registry, SocketKind, Sockets};
use portico_provider_haproxy::HaproxyProvider;
use portico_provider_proxy::ProxyProvider;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A started node: its registry (to hand to an agent), admin API and metrics.
pub(crate) struct Node {
    pub(crate) registry: Registry,
    pub(crate) admin: Arc<Admin>,
    pub(crate) metrics: AppMetrics,
    pub(crate) bound: Bound,
    haproxy: Arc<HaproxyProvider>,
    tasks: Vec<JoinHandle<()>>,
    /// When the shutdown signal came (set by the drain task) and the grace period after it.
    signalled: Arc<std::sync::OnceLock<tokio::time::Instant>>,
    grace: std::time::Duration,
    admin_stop: watch::Sender<bool>,
    /// Opens the admin API's listener when it was handed over (it waits for the first state).
    admin_open: Arc<watch::Sender<bool>>,
    /// True once the first desired state is applied.
    serving: Arc<watch::Sender<bool>>,
    /// The state directory's lock, held for the process's life.
    pub(crate) lock: Arc<portico_statedir::Lock>,
    /// Every listening socket of this process, for an upgrade.
    pub(crate) sockets: Arc<Sockets>,
    proxy: Arc<ProxyProvider>,
    /// Set once a successor serves this process's sockets: the shutdown that follows stops
    /// accepting at once (the admin API too) and readiness stays as it is.
    handed_over: Arc<std::sync::atomic::AtomicBool>,
    shutdown_timeout: std::time::Duration,
}

/// What a process started by an upgrade received from its predecessor.
#[derive(Debug, Default)]
pub(crate) struct Inherited {
    /// The state directory's lock file, holding the lock.
    pub(crate) lock: Option<std::os::fd::OwnedFd>,
    pub(crate) sockets: Arc<Sockets>,
}

/// A listener for `key`: handed over by the predecessor, or bound now; registered for the
/// next upgrade.
async fn listener(
    sockets: &Sockets,
    what: &'static str,
    key: (SocketKind, SocketAddr),
) -> Result<(TcpListener, bool), AppError> {
    let addr = key.1;
    let (listener, inherited) = match sockets.take(key) {
        Some(fd) => {
            let std = std::net::TcpListener::from(fd);
            let failed = |source| AppError::Bind { what, addr, source };
            std.set_nonblocking(true).map_err(failed)?;
            (TcpListener::from_std(std).map_err(failed)?, true)
        }
        None => (bind(what, addr).await?, false),
    };
    sockets.listening(key, &listener);
    Ok((listener, inherited))
}

pub(crate) async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AppError::Bind { what, addr, source })
}

impl Node {
    /// Binds the listeners and the admin API and starts serving them (nothing is routed until
    /// the registry is given a model).
    pub(crate) async fn start(
        listen: &ListenSettings,
        state: &NodeSettings,
        haproxy: &HaproxySettings,
        shutdown: &watch::Receiver<bool>,
        inherited: Inherited,
    ) -> Result<Node, AppError> {
        // haproxy's configurations and keys, sockets and the agent's cache live there; no
        // other process may write or clean them up while this one runs.
        portico_statedir::ensure_private_dir(&state.state_dir)?;
        let lock = match inherited.lock {
            Some(file) => portico_statedir::adopt(&state.state_dir, file)?,
            None => portico_statedir::lock(&state.state_dir)?,
        };
        let lock = Arc::new(lock);
        let sockets = inherited.sockets;
        let (http, https) = if listen.haproxy_listens {
            // A running haproxy to adopt holds the ports already.
            let root = state.haproxy_root();
            let adopting = portico_provider_haproxy::running_under(&root);
            check_haproxy_listen("HTTP traffic (--http-listen)", listen.http_listen, adopting)
                .await?;
            check_haproxy_listen(
                "HTTPS traffic (--https-listen)",
                listen.https_listen,
                adopting,
            )
            .await?;
            (None, None)
        } else {
            let http = (SocketKind::Http, listen.http_listen);
            let http = listener(&sockets, "HTTP traffic (--http-listen)", http)
                .await?
                .0;
            let https = (SocketKind::Https, listen.https_listen);
            let https = listener(&sockets, "HTTPS traffic (--https-listen)", https)
                .await?
                .0;
            (Some(http), Some(https))
        };
        let admin = (SocketKind::Admin, listen.admin_listen);
        let (admin_listener, admin_inherited) =
            listener(&sockets, "the admin API (--admin-listen)", admin).await?;
        let local = |l: Option<&TcpListener>, fallback| {
            l.and_then(|l| l.local_addr().ok()).unwrap_or(fallback)
        };
        let bound = Bound {
            http: local(http.as_ref(), listen.http_listen),
            https: local(https.as_ref(), listen.https_listen),
            admin: local(Some(&admin_listener), listen.admin_listen),
        };
        let mut prometheus = prometheus_client::registry::Registry::default();
        let proxy_metrics = ProxyMetrics::new(&mut prometheus);
        let metrics = AppMetrics::new(&mut prometheus);
        let Logging {
            access,
            haproxy_socket,
            mut tasks,
        } = start_access_log(&listen.access_log, state, &mut prometheus, shutdown)?;
        let haproxy_counters = Arc::new(portico_provider_haproxy::Counters::default());
        prometheus.register_collector(Box::new(crate::metrics::HaproxyCollector(
            haproxy_counters.clone(),
        )));
        let admin = Admin::with_hosts(Arc::new(prometheus), listen.admin_hosts.clone());
        let default_binds = listen.haproxy_listens.then_some((bound.http, bound.https));
        let (proxy, proxy_tasks) = ProxyProvider::new(
            proxy_metrics,
            listen.limits,
            access,
            http.zip(https),
            sockets.clone(),
            shutdown,
        );
        tasks.extend(proxy_tasks);
        let proxy = Arc::new(proxy);
        let health = Arc::downgrade(&proxy);
        let (registry, haproxy) = crate::providers::registry(
            proxy.clone(),
            (state, haproxy),
            default_binds,
            listen,
            haproxy_socket,
            haproxy_counters,
            lock.clone(),
        )?;
        let haproxy_health = Arc::downgrade(&haproxy);
        admin.set_pool_health(Box::new(move || {
            let mut pools = health
                .upgrade()
                .map(|proxy| crate::providers::pool_health(&proxy))
                .unwrap_or_default();
            if let Some(haproxy) = haproxy_health.upgrade() {
                pools.extend(crate::providers::haproxy_pool_health(&haproxy));
            }
            pools
        }));
        // The admin API outlives the grace period, so that /readyz can answer 503 meanwhile.
        let (admin_stop, admin_stopped) = watch::channel(false);
        // A handed-over admin API waits for the first state, as the other listeners do: the
        // predecessor answers meanwhile.
        let admin_open = Arc::new(watch::Sender::new(!admin_inherited));
        let mut opened = admin_open.subscribe();
        let admin_task = portico_admin::serve(admin_listener, admin.clone(), admin_stopped);
        tasks.push(tokio::spawn(async move {
            if opened.wait_for(|open| *open).await.is_ok() {
                admin_task.await;
            }
        }));
        let signalled = Arc::new(std::sync::OnceLock::new());
        let handed_over = Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(fail_readiness(
            admin.clone(),
            (signalled.clone(), handed_over.clone()),
            shutdown.clone(),
        ));
        // Once shutting down, a listener that closes must close its socket: the duplicates
        // kept for an upgrade go.
        let (kept, mut stopping) = (sockets.clone(), shutdown.clone());
        tokio::spawn(async move {
            let _ = stopping.wait_for(|s| *s).await;
            kept.forget_all();
        });
        Ok(Node {
            registry,
            admin,
            metrics,
            bound,
            haproxy,
            tasks,
            signalled,
            grace: listen.limits.shutdown_grace,
            admin_stop,
            admin_open,
            serving: Arc::new(watch::Sender::new(false)),
            lock,
            sockets,
            proxy,
            handed_over,
            shutdown_timeout: listen.limits.shutdown_timeout,
        })
    }

    /// The first desired state is applied: a handed-over admin API starts accepting, and the
    /// handed-over sockets no load balancer took close.
    pub(crate) fn first_state_applied(&self) -> impl Fn() + Send + 'static {
        let (open, sockets) = (self.admin_open.clone(), self.sockets.clone());
        let serving = self.serving.clone();
        move || {
            open.send_replace(true);
            sockets.close_unclaimed();
            serving.send_replace(true);
        }
    }

    /// Turns true once the first desired state is applied.
    pub(crate) fn serving(&self) -> watch::Receiver<bool> {
        self.serving.subscribe()
    }

    /// A successor serves this process's sockets: the shutdown to come stops accepting at once
    /// and keeps readiness as it is (see [`ProxyProvider::hand_over`]).
    pub(crate) fn hand_over_switch(&self) -> impl FnOnce() + Send + 'static {
        let (flag, proxy) = (self.handed_over.clone(), self.proxy.clone());
        move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            proxy.hand_over();
        }
    }

    /// Set once a successor serves this process's sockets.
    pub(crate) fn handed_over(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.handed_over.clone()
    }

    fn is_handed_over(&self) -> bool {
        self.handed_over.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// /readyz answers 503 from now on (called again once nothing else publishes), unless a
    /// successor serves the same sockets.
    pub(crate) fn unready(&self) {
        if !self.is_handed_over() {
            unready(&self.admin);
        }
    }

    /// Waits for the listeners to close (after shutdown) and stops haproxy once the grace
    /// period has passed (the built-in proxy counts its own). After a hand-over the admin API
    /// closes at once, and `l4` TCP connections are waited for up to the shutdown timeout.
    pub(crate) async fn stop(self) {
        self.unready();
        let handed_over = self.is_handed_over();
        // The VIPs' listeners drain beside the default ones, over the same grace period.
        let vips = self.proxy.stop_vips();
        if !handed_over {
            let since = self.signalled.get().copied();
            let since = since.unwrap_or_else(tokio::time::Instant::now);
            tokio::time::sleep_until(since + self.grace).await;
        }
        self.admin_stop.send_replace(true);
        // After a hand-over haproxy keeps running: the successor adopts it.
        self.haproxy.shutdown(handed_over).await;
        for task in self.tasks.into_iter().chain(vips) {
            let _ = task.await;
        }
        if handed_over {
            let flows = async {
                while portico_provider_l4::tcp_flows() > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            if tokio::time::timeout(self.shutdown_timeout, flows)
                .await
                .is_err()
            {
                let left = portico_provider_l4::tcp_flows();
                tracing::warn!(
                    left,
                    "closing l4 connections still open after the shutdown timeout"
                );
            }
        }
    }
}

/// On the shutdown signal: readiness fails at once, so that load balancers stop sending new
/// connections while the data planes still serve for the grace period.
/// After a hand-over, readiness stays: the successor answers on the same sockets.
async fn fail_readiness(
    admin: Arc<Admin>,
    (signalled, handed_over): (
        Arc<std::sync::OnceLock<tokio::time::Instant>>,
        Arc<std::sync::atomic::AtomicBool>,
    ),
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = shutdown.wait_for(|s| *s).await;
    let _ = signalled.set(tokio::time::Instant::now());
    if handed_over.load(std::sync::atomic::Ordering::SeqCst) {
        tracing::info!("handed over: draining connections");
        return;
    }
    unready(&admin);
    tracing::info!("shutting down: readiness fails, draining connections");
}

fn unready(admin: &Admin) {
    let mut snapshot = portico_admin::Snapshot::clone(&admin.snapshot.load());
    snapshot.ready = false;
    let line = "shutting down".to_owned();
    if !snapshot.detail.contains(&line) {
        snapshot.detail.insert(0, line);
    }
    admin.publish(snapshot);
}

/// The access log's writer and, when it is on, the socket haproxy sends its lines to (and
/// the task that reads it).
fn start_access_log(
    destination: &Destination,
    state: &NodeSettings,
    prometheus: &mut prometheus_client::registry::Registry,
    shutdown: &watch::Receiver<bool>,
) -> Result<Logging, AppError> {
    let failed = |what: String| move |source| AppError::AccessLog { what, source };
    let access =
        AccessLog::start(destination, prometheus).map_err(failed(format!("{destination:?}")))?;
    if !access.is_on() {
        return Ok(Logging {
            access,
            haproxy_socket: None,
            tasks: Vec::new(),
        });
    }
    crate::access_log::prepare(&state.state_dir)
        .map_err(failed(state.state_dir.display().to_string()))?;
    let socket = crate::access_log::socket_path(&state.state_dir);
    let task = crate::access_log::forward(socket.clone(), access.clone(), shutdown.clone())
        .map_err(failed(socket.display().to_string()))?;
    Ok(Logging {
        access,
        haproxy_socket: Some(socket),
        tasks: vec![task],
    })
}

/// The access log's writer, haproxy's socket (when the log is on) and the task reading it.
struct Logging {
    access: AccessLog,
    haproxy_socket: Option<std::path::PathBuf>,
    tasks: Vec<JoinHandle<()>>,
}

/// haproxy needs a fixed port that is free now (it binds it itself, later), unless a running
/// haproxy is adopted (`adopting`: it listens there).
async fn check_haproxy_listen(
    what: &'static str,
    addr: SocketAddr,
    adopting: bool,
) -> Result<(), AppError> {
    if addr.port() == 0 {
        let reason = "port 0 cannot be handed to haproxy: choose a port".to_owned();
        return Err(AppError::Listen { what, addr, reason });
    }
    if !adopting {
        drop(bind(what, addr).await?);
    }
    Ok(())
}
