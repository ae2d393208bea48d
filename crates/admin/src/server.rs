use crate::{PoolHealthView, Snapshot, routes};
use arc_swap::ArcSwap;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Shared state of the admin API: the current snapshot and the metrics registry.
pub struct Admin {
    pub snapshot: ArcSwap<Snapshot>,
    pub registry: Arc<Registry>,
    /// Reads the data planes' pool health at each `GET /api/v1/pools`; none: an empty list.
    pools: std::sync::OnceLock<PoolHealthSource>,
}

/// What `GET /api/v1/pools` calls.
pub type PoolHealthSource = Box<dyn Fn() -> Vec<PoolHealthView> + Send + Sync>;

impl Admin {
    pub fn new(registry: Arc<Registry>) -> Arc<Self> {
        Arc::new(Admin {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            registry,
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

    pub fn publish(&self, snapshot: Snapshot) {
        self.snapshot.store(Arc::new(snapshot));
    }
}

/// Serves the admin API on `listener` until `shutdown` turns true.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let admin = admin.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let admin = admin.clone();
                async move { Ok::<_, std::convert::Infallible>(routes::handle(&admin, req)) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                tracing::debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}
