//! The `haproxy` provider: plans every haproxy load balancer of each model and hands each one
//! to its instance; instances of load balancers that are gone are stopped.

use crate::PROVIDER;
use crate::instance::{Binary, Instance};
use crate::plan::{PlanSettings, plan};
use crate::status::Statuses;
use portico_model::{Diagnostic, LoadBalancerId, Model, PoolId};
use portico_provider::{Certificates, Provider, Status};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

/// Everything the provider is told at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub plan: PlanSettings,
    pub binary: Binary,
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
    certificates: Mutex<Certificates>,
}

impl std::fmt::Debug for HaproxyProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaproxyProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl HaproxyProvider {
    /// Makes the self-signed certificate that TLS handshakes get when nothing else fits. The
    /// state directory is created (0700) with the first load balancer.
    pub fn new(settings: Settings) -> Result<Self, StartError> {
        let fallback = portico_tls::self_signed(&["portico.invalid"])
            .map_err(|e| StartError::Certificate(e.to_string()))?;
        Ok(HaproxyProvider {
            binary: Arc::new(settings.binary.clone()),
            settings,
            fallback: Arc::new(fallback.pem()),
            instances: Mutex::new(BTreeMap::new()),
            statuses: Statuses::new(),
            certificates: Mutex::new(Certificates::new()),
        })
    }

    /// Stops every haproxy and removes their directories.
    pub async fn shutdown(&self) {
        let instances = std::mem::take(&mut *self.lock_instances());
        for instance in instances.into_values() {
            instance.stop().await;
        }
    }

    fn lock_instances(&self) -> std::sync::MutexGuard<'_, BTreeMap<LoadBalancerId, Instance>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Provider for HaproxyProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn apply(&self, model: &Model, certificates: &Certificates) -> Vec<Diagnostic> {
        *self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = certificates.clone();
        let (planned, diagnostics) = plan(model, certificates, &self.settings.plan, &self.fallback);
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
                Instance::start(p.dir.clone(), self.binary.clone(), reporter)
            });
            instance.set(Arc::new(p.desired));
        }
        diagnostics
    }

    /// Renders again: servers whose readiness or weight changed go through the runtime API,
    /// added or removed members through a reload.
    fn update_members(&self, model: &Model, _pools: &HashSet<PoolId>) {
        let certificates = self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let _ = self.apply(model, &certificates);
    }

    fn status(&self) -> Status {
        self.statuses.status()
    }

    fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        Some(self.statuses.subscribe())
    }
}
