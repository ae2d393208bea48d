use k8s_openapi::api::core::v1::{Endpoints, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use std::collections::BTreeMap;
use std::fmt;

/// Namespace and name of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The facts a source reports: every object of the kinds Portico reads, keyed by identity.
/// IngressClasses are cluster-scoped and keyed by name.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub ingresses: BTreeMap<ObjectKey, Ingress>,
    pub ingress_classes: BTreeMap<String, IngressClass>,
    pub services: BTreeMap<ObjectKey, Service>,
    pub endpoint_slices: BTreeMap<ObjectKey, EndpointSlice>,
    pub endpoints: BTreeMap<ObjectKey, Endpoints>,
    pub secrets: BTreeMap<ObjectKey, Secret>,
}
