//! The watched kinds: how each one is keyed and where it lives in [`Objects`].

use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use portico_gateway::{
    Gateway, GatewayClass, GatewayClassStatus, GatewayStatus, GrpcRoute, HttpRoute, ListenerSet,
    ListenerSetStatus, ReferenceGrant, RouteStatus, TcpRoute, TlsRoute, UdpRoute,
};
use portico_translate::{CompactSlice, KeptIngress, KeptService, ObjectKey, Objects, StatusSeen};
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
    GatewayClass,
    Gateway,
    HttpRoute,
    ReferenceGrant,
    TcpRoute,
    UdpRoute,
    TlsRoute,
    ListenerSet,
    GrpcRoute,
    Namespace,
}

impl Kind {
    pub const ALL: [Kind; 15] = [
        Kind::Ingress,
        Kind::IngressClass,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
        Kind::GatewayClass,
        Kind::Gateway,
        Kind::HttpRoute,
        Kind::ReferenceGrant,
        Kind::TcpRoute,
        Kind::UdpRoute,
        Kind::TlsRoute,
        Kind::ListenerSet,
        Kind::GrpcRoute,
        Kind::Namespace,
    ];

    /// Whether a change of this kind can change which Secrets are referenced.
    pub(crate) fn names_secrets(self) -> bool {
        matches!(
            self,
            Kind::Ingress
                | Kind::IngressClass
                | Kind::GatewayClass
                | Kind::Gateway
                | Kind::ListenerSet
        )
    }
}

/// A watched Kubernetes kind.
pub(crate) trait Watched:
    Resource<DynamicType = ()> + Clone + PartialEq + DeserializeOwned + Debug + Send + Sync + 'static
{
    const KIND: Kind;
    type Key: Ord + Clone + Debug + Send + Sync + 'static;
    /// What is kept of an object of this kind: the object itself, or a compact form.
    type Stored: PartialEq + Debug + Send + Sync + 'static;
    /// The key of this object in its map.
    fn key(&self) -> Self::Key;
    /// What is kept of this object (after [`slim`]).
    fn store(self) -> Self::Stored;
    /// Whether a kept object and its replacement serve the same (see [`same_for_serving`]).
    fn same_for_serving(old: &Self::Stored, new: &Self::Stored) -> bool;
    /// This kind's map in `objects` (shared: `Arc::make_mut` it to change it).
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<Self::Key, Arc<Self::Stored>>>;
    /// For Secrets, the key as a Secret key: they are kept only while referenced.
    fn secret(_key: &Self::Key) -> Option<&ObjectKey> {
        None
    }
    /// For kinds whose status the report reads: notes what a status-only update of the kept
    /// object `key` changed (see [`StatusSeen`]).
    fn note_status(_objects: &mut Objects, _key: &Self::Key, _update: Self::Stored) {}
    /// Forgets the note about `key`: the kept object was replaced or removed.
    fn forget_status(_objects: &mut Objects, _key: &Self::Key) {}
    /// Forgets every note of the kind: it was listed again, each object with its status.
    fn forget_statuses(_objects: &mut Objects) {}
}

/// What `kubectl apply` keeps in an annotation: the whole object as last applied, again.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what the API server and kubectl add to every object and nothing in Portico reads:
/// `managedFields` (often larger than the spec) and kubectl's last-applied copy of the object.
/// Kept objects stay as small as the manifests they came from.
pub(crate) fn slim<K: Watched>(mut object: K) -> K {
    slim_meta(object.meta_mut());
    object
}

/// [`slim`] on an object's metadata.
pub(crate) fn slim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Whether `new` differs from `old` only where nothing served is read: the resource version
/// and managed fields. (Ingresses and Services, kept compact, also leave out their status:
/// Portico writes it itself, each write comes back as a watch event, and at 10,000 Ingresses
/// rerunning the pipeline for each kept the leader busy for minutes after it became ready.)
fn same_for_serving<K: Watched>(old: &K, new: &K) -> bool {
    let unserved = |object: &K| {
        let mut object = object.clone();
        let meta = object.meta_mut();
        meta.resource_version = None;
        meta.managed_fields = None;
        object
    };
    unserved(old) == unserved(new)
}

fn namespaced<K: Resource>(object: &K) -> ObjectKey {
    ObjectKey::of(object.meta())
}

/// A kind kept as it is.
macro_rules! kept_whole {
    () => {
        type Stored = Self;
        fn store(self) -> Self {
            self
        }
        fn same_for_serving(old: &Self, new: &Self) -> bool {
            same_for_serving(old, new)
        }
    };
}

/// A kind kept compact, whose status Portico writes and the report reads: a status-only
/// update is noted beside the kept object (see [`StatusSeen`]).
macro_rules! compact_with_status {
    ($ty:ty, $stored:ty, $kind:expr, $field:ident, $seen:ident) => {
        impl Watched for $ty {
            const KIND: Kind = $kind;
            type Key = ObjectKey;
            type Stored = $stored;
            fn key(&self) -> ObjectKey {
                namespaced(self)
            }
            fn store(self) -> $stored {
                <$stored>::from(self)
            }
            fn same_for_serving(old: &$stored, new: &$stored) -> bool {
                old.same_for_serving(new)
            }
            fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<ObjectKey, Arc<$stored>>> {
                &mut objects.$field
            }
            fn note_status(objects: &mut Objects, key: &ObjectKey, update: $stored) {
                let seen = StatusSeen {
                    resource_version: update.metadata.resource_version,
                    status: update.status,
                };
                Arc::make_mut(&mut objects.$seen).insert(key.clone(), Arc::new(seen));
            }
            fn forget_status(objects: &mut Objects, key: &ObjectKey) {
                if objects.$seen.contains_key(key) {
                    Arc::make_mut(&mut objects.$seen).remove(key);
                }
            }
            fn forget_statuses(objects: &mut Objects) {
                if !objects.$seen.is_empty() {
                    objects.$seen = Arc::default();
                }
            }
        }
    };
}

// Kept compact (`KeptIngress`).
compact_with_status!(Ingress, KeptIngress, Kind::Ingress, ingresses, ingress_seen);
// Kept compact (`KeptService`): the whole spec only for a Service of type LoadBalancer.
compact_with_status!(Service, KeptService, Kind::Service, services, service_seen);

/// Kept compact ([`CompactSlice`]): 50,000 endpoints as k8s-openapi objects were the largest
/// item of the heap. The compact form has no resource version to ignore.
impl Watched for EndpointSlice {
    const KIND: Kind = Kind::EndpointSlice;
    type Key = ObjectKey;
    type Stored = CompactSlice;
    fn key(&self) -> ObjectKey {
        namespaced(self)
    }
    fn store(self) -> CompactSlice {
        CompactSlice::from(self)
    }
    fn same_for_serving(old: &CompactSlice, new: &CompactSlice) -> bool {
        old == new
    }
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<ObjectKey, Arc<CompactSlice>>> {
        &mut objects.endpoint_slices
    }
}

impl Watched for Secret {
    const KIND: Kind = Kind::Secret;
    type Key = ObjectKey;
    kept_whole!();
    fn key(&self) -> ObjectKey {
        namespaced(self)
    }
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<ObjectKey, Arc<Self>>> {
        &mut objects.secrets
    }
    fn secret(key: &ObjectKey) -> Option<&ObjectKey> {
        Some(key)
    }
}

impl Watched for IngressClass {
    const KIND: Kind = Kind::IngressClass;
    type Key = String;
    kept_whole!();
    fn key(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<String, Arc<Self>>> {
        &mut objects.ingress_classes
    }
}

/// Whether two objects' metadata are the same but for the resource version and the managed
/// fields (which a status write changes). Every other field is compared: the destructuring
/// names each, so a field added to `ObjectMeta` must be decided on here.
pub(crate) fn same_meta_for_serving(old: &ObjectMeta, new: &ObjectMeta) -> bool {
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = old;
    generation == &new.generation
        && name == &new.name
        && namespace == &new.namespace
        && labels == &new.labels
        && annotations == &new.annotations
        && creation_timestamp == &new.creation_timestamp
        && deletion_grace_period_seconds == &new.deletion_grace_period_seconds
        && deletion_timestamp == &new.deletion_timestamp
        && finalizers == &new.finalizers
        && generate_name == &new.generate_name
        && owner_references == &new.owner_references
        && self_link == &new.self_link
        && uid == &new.uid
}

/// A Gateway API kind, watched as dynamic objects ([`crate::gateway_api`]): what the source
/// needs to take the echo of a status write without decoding the whole object
/// ([`crate::state::State::echo`]).
pub(crate) trait GatewayApi: Watched<Stored = Self> + k8s_openapi::Resource {
    /// The kind's status (`IgnoredAny` for a kind without one).
    type Status: DeserializeOwned;
    /// The key of the object with this metadata.
    fn key_of(meta: &ObjectMeta) -> Self::Key;
    /// The version the object was read in.
    fn read_in(&self) -> &str;
    fn set_status(&mut self, status: Option<Self::Status>);
}

/// The Gateway API kinds, kept whole. An update of the status or resource version only (at
/// scale, mostly the echoes of our own status writes) replaces the kept object without being a
/// change: rerunning the pipeline for each echo made the status of 2,000 routes take minutes.
/// The next snapshot (the next change, or the resync) carries it to the status report.
macro_rules! gateway_api {
    ($ty:ty, $status:ty, $kind:expr, $key:ty, $key_of:expr, $field:ident) => {
        impl Watched for $ty {
            const KIND: Kind = $kind;
            type Key = $key;
            type Stored = Self;
            fn key(&self) -> $key {
                $key_of(&self.metadata)
            }
            fn store(self) -> Self {
                self
            }
            fn same_for_serving(old: &Self, new: &Self) -> bool {
                // Compared in place: an echo is not copied (at 10,000 routes, 10,000 echoes).
                old.api_version == new.api_version
                    && old.kind == new.kind
                    && same_meta_for_serving(&old.metadata, &new.metadata)
                    && old.spec == new.spec
            }
            fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<$key, Arc<Self>>> {
                &mut objects.$field
            }
            fn note_status(objects: &mut Objects, key: &$key, update: Self) {
                Arc::make_mut(&mut objects.$field).insert(key.clone(), Arc::new(update));
            }
        }

        impl GatewayApi for $ty {
            type Status = $status;
            fn key_of(meta: &ObjectMeta) -> $key {
                $key_of(meta)
            }
            fn read_in(&self) -> &str {
                &self.api_version
            }
            fn set_status(&mut self, status: Option<$status>) {
                self.status = status;
            }
        }
    };
}

gateway_api!(
    Gateway,
    GatewayStatus,
    Kind::Gateway,
    ObjectKey,
    ObjectKey::of,
    gateways
);
gateway_api!(
    TcpRoute,
    RouteStatus,
    Kind::TcpRoute,
    ObjectKey,
    ObjectKey::of,
    tcp_routes
);
gateway_api!(
    UdpRoute,
    RouteStatus,
    Kind::UdpRoute,
    ObjectKey,
    ObjectKey::of,
    udp_routes
);
gateway_api!(
    TlsRoute,
    RouteStatus,
    Kind::TlsRoute,
    ObjectKey,
    ObjectKey::of,
    tls_routes
);
gateway_api!(
    ListenerSet,
    ListenerSetStatus,
    Kind::ListenerSet,
    ObjectKey,
    ObjectKey::of,
    listener_sets
);
gateway_api!(
    GrpcRoute,
    RouteStatus,
    Kind::GrpcRoute,
    ObjectKey,
    ObjectKey::of,
    grpc_routes
);
gateway_api!(
    HttpRoute,
    RouteStatus,
    Kind::HttpRoute,
    ObjectKey,
    ObjectKey::of,
    http_routes
);
gateway_api!(
    GatewayClass,
    GatewayClassStatus,
    Kind::GatewayClass,
    String,
    |meta: &ObjectMeta| meta.name.clone().unwrap_or_default(),
    gateway_classes
);

/// No status: kept as it is.
impl Watched for ReferenceGrant {
    const KIND: Kind = Kind::ReferenceGrant;
    type Key = ObjectKey;
    kept_whole!();
    fn key(&self) -> ObjectKey {
        namespaced(self)
    }
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<ObjectKey, Arc<Self>>> {
        &mut objects.reference_grants
    }
}

/// No status: an update with the same metadata (generation included) changes nothing kept.
impl GatewayApi for ReferenceGrant {
    type Status = serde::de::IgnoredAny;
    fn key_of(meta: &ObjectMeta) -> ObjectKey {
        ObjectKey::of(meta)
    }
    fn read_in(&self) -> &str {
        &self.api_version
    }
    fn set_status(&mut self, _: Option<serde::de::IgnoredAny>) {}
}

/// Namespaces, for their labels (listeners' `allowedRoutes.namespaces.selector`): read as
/// metadata only ([`crate::gateway_api`]) and kept as their name and labels, nothing else.
impl Watched for Namespace {
    const KIND: Kind = Kind::Namespace;
    type Key = String;
    type Stored = Self;
    fn key(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }
    fn store(self) -> Self {
        compact_namespace(self)
    }
    fn same_for_serving(old: &Self, new: &Self) -> bool {
        old == new
    }
    fn map(objects: &mut Objects) -> &mut Arc<BTreeMap<String, Arc<Self>>> {
        &mut objects.namespaces
    }
}

/// What is kept of a Namespace: its name and labels.
pub(crate) fn compact_namespace(namespace: Namespace) -> Namespace {
    let meta = namespace.metadata;
    Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: meta.name,
            labels: meta.labels.filter(|l| !l.is_empty()),
            ..Default::default()
        },
        ..Namespace::default()
    }
}
