use crate::{PoolHealthView, Snapshot, routes};
use arc_swap::ArcSwap;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Admin connections open at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 64;
/// Reading a request head, and waiting for the next one on a kept-alive connection.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest an admin connection lives, whatever it does.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// Shared state of the admin API: the current snapshot, the metrics registry and the `Host`
/// names it answers besides loopback names and IP addresses.
pub struct Admin {
    pub snapshot: ArcSwap<Snapshot>,
    pub registry: Arc<Registry>,
    pub(crate) hosts: Vec<String>,
    /// Reads the data planes' pool health at each `GET /api/v1/pools`; none: an empty list.
    pools: std::sync::OnceLock<PoolHealthSource>,
}

/// What `GET /api/v1/pools` calls.
pub type PoolHealthSource = Box<dyn Fn() -> Vec<PoolHealthView> + Send + Sync>;

impl Admin {
    pub fn new(registry: Arc<Registry>) -> Arc<Self> {
        Admin::with_hosts(registry, Vec::new())
    }

    /// Like [`Admin::new`], also answering requests whose `Host` is one of `hosts`
    /// (`--admin-host`). A request for any other name is refused (421): a web page in an
    /// operator's browser cannot read the API through a DNS name it rebinds to 127.0.0.1.
    pub fn with_hosts(registry: Arc<Registry>, hosts: Vec<String>) -> Arc<Self> {
        let hosts = hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect();
        Arc::new(Admin {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            registry,
            hosts,
            pools: std::sync::OnceLock::new(),
        })
    }

    /// Sets where `GET /api/v1/pools` reads pool health (once; later calls are ignored).
    pub fn set_pool_health(&self, source: PoolHealthSource) {
        let _ = self.pools.set(source);
    }

    /// The data planes' pool health now.
    pub fn pool_health(&self) -> Vec<PoolHealthView> {
        self.pools.get().map(|f| f()).unwrap_or_default()
    }

    /// Serves `snapshot` from now on. Its `applied_at` is now when its generation is new,
    /// else the time the generation was first published (unless the caller set one).
    pub fn publish(&self, mut snapshot: Snapshot) {
        if snapshot.applied_at.is_none() {
            let current = self.snapshot.load();
            snapshot.applied_at = match current.applied_at {
                Some(t) if current.generation == snapshot.generation => Some(t),
                _ => Some(std::time::SystemTime::now()),
            };
        }
        self.snapshot.store(Arc::new(snapshot));
    }
}

/// Serves the admin API on `listener` until `shutdown` turns true: at most
/// [`MAX_CONNECTIONS`] at once, each closed when its request head takes longer than
/// [`HEADER_TIMEOUT`] (idle keep-alive included) and after [`CONNECTION_LIFETIME`] at most.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>, mut shutdown: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        let Ok((stream, peer)) = accepted else {
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "admin connection refused: {MAX_CONNECTIONS} are open");
            continue;
        };
        let admin = admin.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = service_fn(move |req| {
                let admin = admin.clone();
                async move { Ok::<_, std::convert::Infallible>(routes::handle(&admin, req)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                Ok(Err(e)) => tracing::debug!(error = %e, "admin connection ended with an error"),
                Err(_) => tracing::debug!(%peer, "admin connection closed at its lifetime"),
                Ok(Ok(())) => {}
            }
        });
    }
}
