use k8s_openapi::api::core::v1::{Endpoints, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

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
///
/// Objects are shared (`Arc`), and so is each kind's map: a source keeps them between changes
/// and hands out a new `Objects` per change without copying the objects, or the maps of the
/// kinds, that did not change (`Arc::make_mut` copies a map that a previous `Objects` still
/// shares). A map shared with the previous `Objects` is unchanged: later stages compare maps by
/// pointer first.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub ingresses: Arc<BTreeMap<ObjectKey, Arc<Ingress>>>,
    pub ingress_classes: Arc<BTreeMap<String, Arc<IngressClass>>>,
    pub services: Arc<BTreeMap<ObjectKey, Arc<Service>>>,
    pub endpoint_slices: Arc<BTreeMap<ObjectKey, Arc<EndpointSlice>>>,
    pub endpoints: Arc<BTreeMap<ObjectKey, Arc<Endpoints>>>,
    pub secrets: Arc<BTreeMap<ObjectKey, Arc<Secret>>>,
}
