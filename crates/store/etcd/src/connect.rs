//! Reaching etcd: connecting again and again until it answers, telling the health meanwhile.

use crate::{Etcd, EtcdConfig};
use portico_store::StoreHealth;
use std::time::Duration;
use tokio::sync::watch;

/// Pause between attempts to reach etcd.
pub const RETRY: Duration = Duration::from_millis(250);
/// The longest pause between attempts to connect.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Connects, retrying until it works or `shutdown`.
pub async fn connect(
    config: &EtcdConfig,
    health: &watch::Sender<StoreHealth>,
    mut shutdown: watch::Receiver<bool>,
) -> Option<Etcd> {
    let mut pause = RETRY;
    loop {
        match Etcd::connect(config.clone()).await {
            Ok(etcd) => return Some(etcd),
            Err(e) => {
                tracing::warn!("cannot reach etcd: {e}");
                let detail = e.to_string();
                health.send_replace(StoreHealth {
                    connected: false,
                    detail,
                });
            }
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|s| *s) => return None,
        }
        pause = (pause * 2).min(MAX_RETRY);
    }
}
