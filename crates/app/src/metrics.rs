use portico_model::{Diagnostic, Severity};
use portico_translate::Objects;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    lb: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SeverityLabel {
    severity: String,
}

/// Control-plane gauges: objects by kind, diagnostics by severity, and the store as an agent
/// sees it.
#[derive(Clone)]
pub(crate) struct AppMetrics {
    objects: Family<KindLabel, Gauge>,
    diagnostics: Family<SeverityLabel, Gauge>,
    store_connected: Gauge,
    store_revision: Gauge,
    transitions: Family<TransitionLabels, Counter>,
    placement_changes: Counter,
}

impl AppMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = AppMetrics {
            objects: Family::default(),
            diagnostics: Family::default(),
            store_connected: Gauge::default(),
            store_revision: Gauge::default(),
            transitions: Family::default(),
            placement_changes: Counter::default(),
        };
        registry.register(
            "portico_ha_transitions",
            "Active-standby transitions of this agent by load balancer and new role (active: it added the addresses; standby: it removed them)",
            m.transitions.clone(),
        );
        registry.register(
            "portico_placement_changes",
            "Load balancers placed on another pair of agents (each bumps the epoch)",
            m.placement_changes.clone(),
        );
        registry.register(
            "portico_store_connected",
            "1 while the agent reaches its store; 0 while it serves its last state without it",
            m.store_connected.clone(),
        );
        registry.register(
            "portico_store_revision",
            "The store revision the agent serves",
            m.store_revision.clone(),
        );
        registry.register(
            "portico_objects",
            "Source objects by kind",
            m.objects.clone(),
        );
        registry.register(
            "portico_diagnostics",
            "Diagnostics by severity",
            m.diagnostics.clone(),
        );
        m
    }

    /// `n` load balancers got a new placement.
    pub(crate) fn placement_changed(&self, n: usize) {
        self.placement_changes.inc_by(n as u64);
    }

    /// What the agent's feedback says about its store.
    pub(crate) fn observe_store(&self, connected: bool, revision: u64) {
        self.store_connected.set(i64::from(connected));
        self.store_revision
            .set(i64::try_from(revision).unwrap_or(i64::MAX));
    }

    /// This agent became `to` (`active` or `standby`) for load balancer `lb`.
    pub(crate) fn ha_transition(&self, lb: portico_model::LoadBalancerId, to: &str) {
        let labels = TransitionLabels {
            lb: lb.to_string(),
            to: to.to_owned(),
        };
        self.transitions.get_or_create(&labels).inc();
    }

    pub(crate) fn observe<'a>(
        &self,
        objects: &Objects,
        diagnostics: impl Iterator<Item = &'a Diagnostic>,
    ) {
        let counts = [
            ("Ingress", objects.ingresses.len()),
            ("IngressClass", objects.ingress_classes.len()),
            ("Service", objects.services.len()),
            ("EndpointSlice", objects.endpoint_slices.len()),
            ("Endpoints", objects.endpoints.len()),
            ("Secret", objects.secrets.len()),
        ];
        for (kind, n) in counts {
            self.objects
                .get_or_create(&KindLabel { kind: kind.into() })
                .set(n as i64);
        }
        let (mut errors, mut warnings) = (0, 0);
        for d in diagnostics {
            match d.severity {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
            }
        }
        for (severity, n) in [("error", errors), ("warning", warnings)] {
            let label = SeverityLabel {
                severity: severity.into(),
            };
            self.diagnostics.get_or_create(&label).set(n);
        }
    }
}

/// The haproxy provider's counters, read at each scrape.
#[derive(Debug)]
pub(crate) struct HaproxyCollector(pub(crate) std::sync::Arc<portico_provider_haproxy::Counters>);

impl prometheus_client::collector::Collector for HaproxyCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use std::sync::atomic::Ordering::Relaxed;
        let counters = [
            (
                "portico_haproxy_reloads",
                "haproxy reloads (a new worker on a new configuration), every attempt",
                self.0.reloads.load(Relaxed),
            ),
            (
                "portico_haproxy_runtime_updates",
                "Changes haproxy took through its runtime API alone, without a reload (route map entries, servers' addresses, weights and states)",
                self.0.runtime_updates.load(Relaxed),
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            let metric = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        Ok(())
    }
}
