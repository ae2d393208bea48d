//! The controller's side of the pipeline (kube-manager and svc-monitor's roles): a source's
//! objects → compile → the desired state for the store; and the agents' feedback → what the
//! admin API and Ingress status show.

use crate::compile::{Compiled, Compiler};
use crate::metrics::AppMetrics;
use crate::snapshot::build_snapshot;
use portico_admin::{LoadBalancerAddress, Snapshot};
use portico_model::LoadBalancerId;
use portico_store::Feedback;
use portico_translate::{Config, Loaded};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Compiles each new load and keeps the result for the next one.
#[derive(Debug)]
pub struct Controller {
    compiler: Compiler,
    compiled: Option<Compiled>,
}

impl Controller {
    pub fn new(config: Config) -> Self {
        Controller {
            compiler: Compiler::new(config),
            compiled: None,
        }
    }

    /// Compiles `loaded`; returns the load it supersedes, for its owner to free.
    pub fn compile(&mut self, loaded: Arc<Loaded>, metrics: &AppMetrics) -> Option<Arc<Loaded>> {
        let (compiled, retired) = self.compiler.compile(loaded, self.compiled.take());
        metrics.observe(&compiled.loaded.objects, compiled.diagnostics());
        for d in compiled.diagnostics() {
            tracing::debug!(diagnostic = %d, "diagnostic");
        }
        tracing::info!(
            ingresses = compiled.loaded.objects.ingresses.len(),
            diagnostics = compiled.diagnostics().count(),
            "configuration compiled"
        );
        self.compiled = Some(compiled);
        retired
    }

    /// The last compile's result.
    pub fn compiled(&self) -> Option<&Compiled> {
        self.compiled.as_ref()
    }

    /// Publishes [`Controller::snapshot`] to the admin API and, with Kubernetes, hands the
    /// report to `source`'s writer.
    pub(crate) fn publish(
        &self,
        source: &crate::source::Source,
        admin: &portico_admin::Admin,
        revision: u64,
        feedback: &BTreeMap<String, Feedback>,
        publish: &[LoadBalancerAddress],
    ) {
        let Some(snapshot) = self.snapshot(revision, feedback, publish) else {
            return;
        };
        if let Some(compiled) = &self.compiled {
            source.report(&compiled.loaded.objects, &snapshot, publish);
        }
        admin.publish(snapshot);
    }

    /// What the admin API shows: the compiled state at store revision `revision`, with Ingress
    /// addresses only where an agent serves the Ingress's load balancer, ready once every
    /// agent serves, and the agents' problems.
    pub fn snapshot(
        &self,
        revision: u64,
        feedback: &BTreeMap<String, Feedback>,
        publish: &[LoadBalancerAddress],
    ) -> Option<Snapshot> {
        let compiled = self.compiled.as_ref()?;
        let served: HashSet<LoadBalancerId> = feedback
            .values()
            .flat_map(|f| f.served.iter().copied())
            .collect();
        let model = compiled.desired.model.clone();
        let mut snapshot = build_snapshot(
            revision,
            &compiled.loaded.diagnostics,
            &compiled.translation,
            model.clone(),
            publish,
        );
        for ingress in &mut snapshot.ingresses {
            let class = ingress.ingress_class_name.as_deref();
            let lb = class.and_then(|c| {
                model
                    .load_balancers
                    .iter()
                    .find(|lb| lb.ingress_class() == Some(c))
            });
            if !lb.is_some_and(|lb| served.contains(&lb.id)) {
                ingress.status.load_balancer.ingress.clear();
            }
        }
        snapshot.ready = !feedback.is_empty() && feedback.values().all(|f| f.ready);
        let agents = feedback
            .values()
            .flat_map(|f| f.diagnostics.iter().cloned());
        snapshot.diagnostics.extend(agents);
        snapshot.diagnostics.sort();
        snapshot.diagnostics.dedup();
        Some(snapshot)
    }
}
