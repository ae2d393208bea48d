//! The watched kinds: how each one is keyed and where it lives in [`Objects`].

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Resource;
use portico_translate::{ObjectKey, Objects};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

/// The kinds the source watches, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Ingress,
    IngressClass,
    Service,
    EndpointSlice,
    Secret,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Ingress,
        Kind::IngressClass,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
    ];

    /// Whether a change of this kind can change which Secrets are referenced.
    pub(crate) fn names_secrets(self) -> bool {
        matches!(self, Kind::Ingress | Kind::IngressClass)
    }
}

/// A watched Kubernetes kind.
pub(crate) trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    const KIND: Kind;
    type Key: Ord + Clone + Debug + Send + Sync + 'static;
    /// The key of this object in its map.
    fn key(&self) -> Self::Key;
    /// This kind's map in `objects`.
    fn map(objects: &mut Objects) -> &mut BTreeMap<Self::Key, Arc<Self>>;
    /// For Secrets, the key as a Secret key: they are kept only while referenced.
    fn secret(_key: &Self::Key) -> Option<&ObjectKey> {
        None
    }
}

fn namespaced<K: Resource>(object: &K) -> ObjectKey {
    let meta = object.meta();
    ObjectKey::new(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

macro_rules! namespaced_kind {
    ($ty:ty, $kind:expr, $field:ident) => {
        impl Watched for $ty {
            const KIND: Kind = $kind;
            type Key = ObjectKey;
            fn key(&self) -> ObjectKey {
                namespaced(self)
            }
            fn map(objects: &mut Objects) -> &mut BTreeMap<ObjectKey, Arc<Self>> {
                &mut objects.$field
            }
        }
    };
}

namespaced_kind!(Ingress, Kind::Ingress, ingresses);
namespaced_kind!(Service, Kind::Service, services);
namespaced_kind!(EndpointSlice, Kind::EndpointSlice, endpoint_slices);

impl Watched for Secret {
    const KIND: Kind = Kind::Secret;
    type Key = ObjectKey;
    fn key(&self) -> ObjectKey {
        namespaced(self)
    }
    fn map(objects: &mut Objects) -> &mut BTreeMap<ObjectKey, Arc<Self>> {
        &mut objects.secrets
    }
    fn secret(key: &ObjectKey) -> Option<&ObjectKey> {
        Some(key)
    }
}

impl Watched for IngressClass {
    const KIND: Kind = Kind::IngressClass;
    type Key = String;
    fn key(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }
    fn map(objects: &mut Objects) -> &mut BTreeMap<String, Arc<Self>> {
        &mut objects.ingress_classes
    }
}
