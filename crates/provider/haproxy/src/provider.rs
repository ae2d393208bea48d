//! The `haproxy` provider: plans every haproxy load balancer of each model and hands each one
//! to its instance; instances of load balancers that are gone are stopped.

use crate::PROVIDER;
use crate::instance::{Binary, Instance, MASTER_SOCKET};
use crate::plan::{PlanSettings, plan};
use crate::status::Statuses;
use portico_model::{Diagnostic, LoadBalancerId, Model, PoolId};
use portico_provider::{CaBundles, Certificates, Provider, Status};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

/// Everything the provider is told at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub plan: PlanSettings,
    pub binary: Binary,
    /// Where the provider counts what it does (shared with the metrics).
    pub counters: Arc<Counters>,
}

/// What every haproxy of the provider did, counted since start.
#[derive(Debug, Default)]
pub struct Counters {
    /// Reloads through the master CLI (every attempt, failed ones too).
    pub reloads: AtomicU64,
    /// Changes applied through the runtime API alone (route map entries, servers).
    pub runtime_updates: AtomicU64,
}

/// Why the provider cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot make the fallback certificate: {0}")]
    Certificate(String),
}

pub struct HaproxyProvider {
    settings: Settings,
    binary: Arc<Binary>,
    fallback: Arc<Vec<u8>>,
    instances: Mutex<BTreeMap<LoadBalancerId, Instance>>,
    statuses: Arc<Statuses>,
    certificates: Mutex<(Certificates, CaBundles)>,
}

impl std::fmt::Debug for HaproxyProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaproxyProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl HaproxyProvider {
    /// Makes the self-signed certificate that TLS handshakes get when nothing else fits, and
    /// removes what a killed Portico left in the state directory ([`remove_stale`]). The state
    /// directory is created (0700) with the first load balancer.
    pub fn new(settings: Settings) -> Result<Self, StartError> {
        let fallback = portico_tls::self_signed(&["portico.invalid"])
            .map_err(|e| StartError::Certificate(e.to_string()))?;
        remove_stale(&settings.plan.root);
        Ok(HaproxyProvider {
            binary: Arc::new(settings.binary.clone()),
            settings,
            fallback: Arc::new(fallback.pem()),
            instances: Mutex::new(BTreeMap::new()),
            statuses: Statuses::new(),
            certificates: Mutex::default(),
        })
    }

    /// Stops every haproxy and removes their directories.
    pub async fn shutdown(&self) {
        let instances = std::mem::take(&mut *self.lock_instances());
        // All at once: each may wait for its requests in flight up to the shutdown timeout.
        let stopping: Vec<_> = (instances.into_values())
            .map(|instance| tokio::spawn(instance.stop()))
            .collect();
        for stopped in stopping {
            let _ = stopped.await;
        }
    }

    /// Every server of every haproxy this provider runs, as its runtime API shows it now
    /// (blocking: a local socket per load balancer, 500 ms at most each).
    pub fn server_states(&self) -> Vec<crate::servers::ServerState> {
        let ids: Vec<LoadBalancerId> = self.lock_instances().keys().copied().collect();
        let root = &self.settings.plan.root;
        ids.iter()
            .flat_map(|id| crate::servers::query(&root.join(id.to_string())))
            .collect()
    }

    fn lock_instances(&self) -> std::sync::MutexGuard<'_, BTreeMap<LoadBalancerId, Instance>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes the load-balancer directories under `root` that no running haproxy serves: those
/// a Portico killed with SIGKILL could not clean up (its haproxy died with it). A directory
/// whose master socket still accepts a connection belongs to a live haproxy (another Portico
/// on the same state directory) and is left alone. Returns the directories removed.
pub fn remove_stale(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return vec![];
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let master = crate::files::socket(&dir, MASTER_SOCKET);
        let live = std::os::unix::net::UnixStream::connect(master).is_ok();
        if !is_dir || live {
            continue;
        }
        portico_statedir::remove_socket_alias(&dir);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "removed a stale haproxy directory");
                removed.push(dir);
            }
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot remove a stale haproxy directory");
            }
        }
    }
    removed
}

impl Provider for HaproxyProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn apply(
        &self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
    ) -> Vec<Diagnostic> {
        *self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = (certificates.clone(), ca_bundles.clone());
        let settings = &self.settings.plan;
        let (planned, diagnostics) =
            plan(model, certificates, ca_bundles, settings, &self.fallback);
        let mut instances = self.lock_instances();
        let keep: HashSet<LoadBalancerId> = planned.iter().map(|p| p.id).collect();
        let gone: Vec<LoadBalancerId> = instances
            .keys()
            .filter(|id| !keep.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(instance) = instances.remove(&id) {
                tracing::info!(load_balancer = %id, "stopping haproxy: the load balancer is gone");
                tokio::spawn(instance.stop());
            }
        }
        for p in planned {
            let instance = instances.entry(p.id).or_insert_with(|| {
                let reporter = self.statuses.reporter(p.id, p.object.clone());
                let timeout = self.settings.plan.limits.shutdown_timeout;
                Instance::start(
                    p.dir.clone(),
                    self.binary.clone(),
                    reporter,
                    timeout,
                    self.settings.counters.clone(),
                )
            });
            instance.set(Arc::new(p.desired));
        }
        diagnostics
    }

    /// Renders again: servers whose readiness or weight changed go through the runtime API,
    /// added or removed members through a reload.
    fn update_members(&self, model: &Model, _pools: &HashSet<PoolId>) {
        let (certificates, ca_bundles) = self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let _ = self.apply(model, &certificates, &ca_bundles);
    }

    fn status(&self) -> Status {
        self.statuses.status()
    }

    fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        Some(self.statuses.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_directories_go_and_a_live_haproxys_stays() {
        let root = tempfile::tempdir().unwrap();
        let stale = root.path().join("11111111-1111-5111-8111-111111111111");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("haproxy.conf"), "global\n").unwrap();
        std::fs::write(stale.join("default.pem"), "key").unwrap();
        // A dead master socket (nobody listens) is stale too.
        drop(std::os::unix::net::UnixListener::bind(stale.join(MASTER_SOCKET)).unwrap());
        let live = root.path().join("22222222-2222-5222-8222-222222222222");
        std::fs::create_dir_all(&live).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(live.join(MASTER_SOCKET)).unwrap();
        let file = root.path().join("not-a-directory");
        std::fs::write(&file, "x").unwrap();

        assert_eq!(remove_stale(root.path()), vec![stale.clone()]);
        assert!(!stale.exists());
        assert!(live.join(MASTER_SOCKET).exists());
        assert!(file.exists());
        assert!(remove_stale(&root.path().join("missing")).is_empty());
    }
}
