use portico_model::{Diagnostic, Severity};
use portico_translate::Objects;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SeverityLabel {
    severity: String,
}

/// Control-plane gauges: objects by kind and diagnostics by severity.
#[derive(Clone)]
pub(crate) struct AppMetrics {
    objects: Family<KindLabel, Gauge>,
    diagnostics: Family<SeverityLabel, Gauge>,
}

impl AppMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let m = AppMetrics {
            objects: Family::default(),
            diagnostics: Family::default(),
        };
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
