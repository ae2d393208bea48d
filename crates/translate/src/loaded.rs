use crate::Objects;
use portico_model::Diagnostic;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// What a source reports: the objects, what was wrong with them, and the files they were read
/// from (none for the Kubernetes API).
#[derive(Clone, Default)]
pub struct Loaded {
    pub objects: Objects,
    pub diagnostics: Vec<Diagnostic>,
    /// Shared: a reload that lists the same files hands over the same list.
    pub files: Arc<Vec<PathBuf>>,
}

/// Counts only: `Objects`' own Debug would print Secret data.
impl fmt::Debug for Loaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.objects;
        f.debug_struct("Loaded")
            .field("ingresses", &o.ingresses.len())
            .field("ingress_classes", &o.ingress_classes.len())
            .field("services", &o.services.len())
            .field("endpoint_slices", &o.endpoint_slices.len())
            .field("endpoints", &o.endpoints.len())
            .field("secrets", &o.secrets.len())
            .field("gateway_classes", &o.gateway_classes.len())
            .field("gateways", &o.gateways.len())
            .field("http_routes", &o.http_routes.len())
            .field("grpc_routes", &o.grpc_routes.len())
            .field("tcp_routes", &o.tcp_routes.len())
            .field("udp_routes", &o.udp_routes.len())
            .field("tls_routes", &o.tls_routes.len())
            .field("listener_sets", &o.listener_sets.len())
            .field("backend_tls_policies", &o.backend_tls_policies.len())
            .field("config_maps", &o.config_maps.len())
            .field("namespaces", &o.namespaces.len())
            .field("reference_grants", &o.reference_grants.len())
            .field("diagnostics", &self.diagnostics)
            .field("files", &self.files)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectKey;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    #[test]
    fn debug_output_never_shows_secret_data() {
        let secret = Secret {
            data: Some([("key".to_owned(), ByteString(b"hunter2".to_vec()))].into()),
            string_data: Some([("other".to_owned(), "swordfish".to_owned())].into()),
            ..Secret::default()
        };
        let mut loaded = Loaded::default();
        std::sync::Arc::make_mut(&mut loaded.objects.secrets)
            .insert(ObjectKey::new("a", "s"), std::sync::Arc::new(secret));
        let printed = format!("{loaded:?}");
        assert!(printed.contains("secrets: 1"), "{printed}");
        assert!(
            !printed.contains("hunter2") && !printed.contains("104, 117"),
            "{printed}"
        );
        assert!(!printed.contains("swordfish"), "{printed}");
    }
}
