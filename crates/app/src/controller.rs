//! The controller's side of the pipeline (kube-manager and svc-monitor's roles): a source's
//! objects → compile → the desired state for the store; and the agents' feedback → what the
//! admin API and Ingress status show.

use crate::compile::{Compiled, Compiler};
use crate::metrics::AppMetrics;
use crate::placement::Placer;
use crate::snapshot::build_snapshot;
use foldhash::{HashMap, HashMapExt, HashSet};
use portico_admin::{LoadBalancerAddress, Snapshot};
use portico_model::{LoadBalancer, LoadBalancerId, Placement};
use portico_store::Feedback;
use portico_translate::{Allocations, Config, Loaded};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Compiles each new load and keeps the result for the next one.
#[derive(Debug)]
pub struct Controller {
    compiler: Compiler,
    compiled: Option<Compiled>,
    placer: Placer,
    /// Who holds each load balancer's claim (`ha/<lb>`) now: the admin API shows the holder
    /// as active, which after a failover is the placed standby.
    holders: BTreeMap<LoadBalancerId, String>,
}

impl Controller {
    pub fn new(config: Config) -> Self {
        Controller {
            compiler: Compiler::new(config),
            compiled: None,
            placer: Placer::default(),
            holders: BTreeMap::new(),
        }
    }

    /// The claims' holders as the store has them now.
    pub(crate) fn set_holders(&mut self, holders: BTreeMap<LoadBalancerId, String>) {
        self.holders = holders;
    }

    /// The load balancers placed on agents.
    pub(crate) fn placed(&self) -> impl Iterator<Item = LoadBalancerId> + '_ {
        self.placer.placements().keys().copied()
    }

    /// Takes the addresses and placements the store holds (what the last leader decided) as
    /// the previous ones, and compiles the last load again with them.
    pub(crate) fn seed(
        &mut self,
        allocations: Allocations,
        placements: BTreeMap<LoadBalancerId, Placement>,
        metrics: &AppMetrics,
    ) {
        self.compiler.seed(allocations);
        self.placer.seed(placements);
        if let Some(previous) = self.compiled.take() {
            let loaded = previous.loaded.clone();
            drop(previous);
            self.compiled = Some(self.compiler.compile(loaded, None).0);
        }
        self.place(metrics);
    }

    /// The agents registered now (their feedback); whether a placement changed.
    pub(crate) fn set_agents(
        &mut self,
        feedback: &BTreeMap<String, Feedback>,
        metrics: &AppMetrics,
    ) -> bool {
        self.placer.set_agents(feedback) && self.place(metrics) > 0
    }

    /// Places the compiled load balancers and records the placements in the desired state;
    /// how many changed.
    fn place(&mut self, metrics: &AppMetrics) -> usize {
        let Some(compiled) = &mut self.compiled else {
            return 0;
        };
        let changed = (self.placer).place(&compiled.desired.model, &compiled.selectors);
        if changed > 0 {
            metrics.placement_changed(changed);
            tracing::info!(changed, "load balancers placed");
        }
        compiled.desired.placements = self.placer.placements().clone();
        changed
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
        self.place(metrics);
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
        let ingress_states = compiled.translation.ingresses.iter();
        let served_ingresses: HashSet<(&str, &str)> = ingress_states
            .filter(|s| s.served)
            .map(|s| (s.key.namespace.as_str(), s.key.name.as_str()))
            .collect();
        let mut dedicated = HashMap::new();
        let mut shared = HashMap::new();
        for lb in &model.load_balancers {
            match lb.ingress_class() {
                Some(class) => shared.insert(class, lb),
                None => {
                    dedicated.insert((lb.origin.namespace.as_str(), lb.origin.name.as_str()), lb)
                }
            };
        }
        for ingress in &mut snapshot.ingresses {
            let key = (ingress.namespace.as_str(), ingress.name.as_str());
            let class = ingress.ingress_class_name.as_deref();
            let lb = (dedicated.get(&key).copied())
                .or_else(|| class.and_then(|c| shared.get(c).copied()));
            let addresses = &mut ingress.status.load_balancer.ingress;
            match lb {
                Some(lb) if served.contains(&lb.id) => {
                    if served_ingresses.contains(&key) {
                        with_addresses(addresses, lb);
                    }
                }
                _ => addresses.clear(),
            }
        }
        snapshot.services = (model.load_balancers.iter())
            .filter(|lb| lb.origin.kind == "Service")
            .map(|lb| {
                let mut addresses = vec![];
                if served.contains(&lb.id) {
                    with_addresses(&mut addresses, lb);
                }
                let (namespace, name) = (lb.origin.namespace.clone(), lb.origin.name.clone());
                portico_admin::ServiceView::new(namespace, name, addresses)
            })
            .collect();
        snapshot
            .services
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        snapshot.placements = Arc::new(crate::failover::as_held(
            self.placer.placements().clone(),
            |id| self.holders.get(id).cloned(),
        ));
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

/// The load balancer's VIP and floating IP first, then the published addresses (without
/// repeating one).
fn with_addresses(addresses: &mut Vec<LoadBalancerAddress>, lb: &LoadBalancer) {
    let own = [lb.vip, lb.floating_ip].into_iter().flatten();
    let mut all: Vec<LoadBalancerAddress> = own
        .map(|ip| LoadBalancerAddress {
            ip: Some(ip.to_string()),
            hostname: None,
        })
        .collect();
    for a in addresses.drain(..) {
        if !all.contains(&a) {
            all.push(a);
        }
    }
    *addresses = all;
}
