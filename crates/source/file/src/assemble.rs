//! The objects of all files → one `Objects`, the later file winning on duplicates.

use crate::object::{Kind, Object};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Secret};
use k8s_openapi::api::networking::v1::IngressClass;
use portico_gateway::{BackendTlsPolicy, ListenerSet, TcpRoute, TlsRoute, UdpRoute};
use portico_gateway::{Gateway, GatewayClass, GrpcRoute, HttpRoute, ReferenceGrant};
use portico_model::{Diagnostic, ObjectRef};
use portico_translate::{CompactSlice, KeptIngress, KeptService, ObjectKey, Objects};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// A set of kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KindSet(u32);

impl KindSet {
    pub(crate) const ALL: KindSet = KindSet((1 << Kind::ALL.len()) - 1);

    fn bit(kind: Kind) -> u32 {
        1 << kind as u8
    }

    pub(crate) fn insert(&mut self, kind: Kind) {
        self.0 |= Self::bit(kind);
    }

    pub(crate) fn contains(self, kind: Kind) -> bool {
        self.0 & Self::bit(kind) != 0
    }

    pub(crate) fn union(&mut self, other: KindSet) {
        self.0 |= other.0;
    }

    /// The kinds of `objects`.
    pub(crate) fn of(objects: &[Object]) -> KindSet {
        let mut set = KindSet::default();
        objects.iter().for_each(|o| set.insert(o.known_kind()));
        set
    }

    /// The kinds whose objects differ between two versions of one file: another object, another
    /// value or another order of that kind's objects.
    pub(crate) fn changed(old: &[Object], new: &[Object]) -> KindSet {
        let mut changed = KindSet::default();
        for kind in Kind::ALL {
            let mut a = old.iter().filter(|o| o.known_kind() == kind);
            let mut b = new.iter().filter(|o| o.known_kind() == kind);
            let same = loop {
                match (a.next(), b.next()) {
                    (None, None) => break true,
                    (Some(a), Some(b)) if a.same(b) => {}
                    _ => break false,
                }
            };
            if !same {
                changed.insert(kind);
            }
        }
        changed
    }
}

/// What the last assembly built, for the next one to reuse: a kind whose objects did not change
/// keeps its map (shared, not copied).
#[derive(Debug, Default)]
pub(crate) struct Previous {
    pub(crate) objects: Objects,
    /// Kinds with a key defined twice: always rebuilt, for their warnings.
    pub(crate) duplicated: KindSet,
}

/// Builds `Objects` from each file's objects, in file order. An object defined twice (same
/// kind, namespace and name) keeps its later definition, and a warning names both origins.
///
/// A kind that is not in `dirty` and had no duplicate in `previous` keeps `previous`'s map: a
/// change to one file rebuilds only the maps of the kinds that file changed. The Ingress map
/// is also rebuilt when the IngressClasses changed, because admission gave its Ingresses the
/// default class (see `Catalog::assemble`).
///
/// Objects are shared, so a rebuilt map costs a pointer copy and a key per object: each kind's
/// objects are sorted by key (a stable sort, so equal keys stay in file order and runs already
/// in order cost one pass) and the map is built from the sorted runs at once, which is several
/// times cheaper than inserting 20,000 objects one by one. Origins are only turned into text
/// for the (rare) duplicates.
pub(crate) fn assemble(
    files: &[(&Path, &[Object])],
    previous: &Previous,
    dirty: KindSet,
) -> (Objects, Vec<Diagnostic>, KindSet) {
    let mut rebuild = dirty;
    rebuild.union(previous.duplicated);
    if rebuild.contains(Kind::IngressClass) {
        rebuild.insert(Kind::Ingress);
    }
    let mut kinds = Kinds::default();
    for (file, (_, file_objects)) in files.iter().enumerate() {
        for (position, object) in file_objects.iter().enumerate() {
            if rebuild.contains(object.known_kind()) {
                kinds.push(object, (file, position));
            }
        }
    }
    let mut built = Built {
        rebuild,
        duplicates: Vec::new(),
        duplicated: KindSet::default(),
    };
    let old = &previous.objects;
    let objects = Objects {
        ingresses: built.kind(Kind::Ingress, &old.ingresses, kinds.ingresses),
        ingress_classes: built.kind(
            Kind::IngressClass,
            &old.ingress_classes,
            kinds.ingress_classes,
        ),
        services: built.kind(Kind::Service, &old.services, kinds.services),
        endpoint_slices: built.kind(
            Kind::EndpointSlice,
            &old.endpoint_slices,
            kinds.endpoint_slices,
        ),
        endpoints: built.kind(Kind::Endpoints, &old.endpoints, kinds.endpoints),
        secrets: built.kind(Kind::Secret, &old.secrets, kinds.secrets),
        gateway_classes: built.kind(
            Kind::GatewayClass,
            &old.gateway_classes,
            kinds.gateway_classes,
        ),
        gateways: built.kind(Kind::Gateway, &old.gateways, kinds.gateways),
        http_routes: built.kind(Kind::HttpRoute, &old.http_routes, kinds.http_routes),
        grpc_routes: built.kind(Kind::GrpcRoute, &old.grpc_routes, kinds.grpc_routes),
        reference_grants: built.kind(
            Kind::ReferenceGrant,
            &old.reference_grants,
            kinds.reference_grants,
        ),
        // Every object in a file is kept whole, its status included.
        ingress_seen: Arc::default(),
        service_seen: Arc::default(),
        tcp_routes: built.kind(Kind::TcpRoute, &old.tcp_routes, kinds.tcp_routes),
        udp_routes: built.kind(Kind::UdpRoute, &old.udp_routes, kinds.udp_routes),
        tls_routes: built.kind(Kind::TlsRoute, &old.tls_routes, kinds.tls_routes),
        listener_sets: built.kind(Kind::ListenerSet, &old.listener_sets, kinds.listener_sets),
        backend_tls_policies: built.kind(
            Kind::BackendTlsPolicy,
            &old.backend_tls_policies,
            kinds.backend_tls_policies,
        ),
        config_maps: built.kind(Kind::ConfigMap, &old.config_maps, kinds.config_maps),
        namespaces: built.kind(Kind::Namespace, &old.namespaces, kinds.namespaces),
    };
    let Built {
        mut duplicates,
        duplicated,
        ..
    } = built;
    // In the order the later definitions come in the files.
    duplicates.sort_by_key(|(_, later)| *later);
    let diagnostics = duplicates
        .into_iter()
        .map(|(earlier, later)| {
            let object = files[later.0].1[later.1].object_ref();
            duplicate(object, files[earlier.0].0, files[later.0].0)
        })
        .collect();
    (objects, diagnostics, duplicated)
}

/// The maps of one assembly, and the duplicates found building them.
struct Built {
    rebuild: KindSet,
    duplicates: Vec<(Origin, Origin)>,
    duplicated: KindSet,
}

impl Built {
    /// `kind`'s map: built from `entries`, or `old` when the kind is not rebuilt.
    fn kind<K: Ord, V>(
        &mut self,
        kind: Kind,
        old: &Arc<BTreeMap<K, Arc<V>>>,
        entries: Entries<K, V>,
    ) -> Arc<BTreeMap<K, Arc<V>>> {
        if !self.rebuild.contains(kind) {
            return Arc::clone(old);
        }
        let before = self.duplicates.len();
        let map = build(entries, &mut self.duplicates);
        if self.duplicates.len() > before {
            self.duplicated.insert(kind);
        }
        Arc::new(map)
    }
}

/// Where an object is defined: the file's index and the object's position in it.
type Origin = (usize, usize);

type Entries<K, V> = Vec<(K, Arc<V>, Origin)>;

/// Every object by kind, with its key and origin, in file order.
#[derive(Default)]
struct Kinds {
    ingresses: Entries<ObjectKey, KeptIngress>,
    ingress_classes: Entries<String, IngressClass>,
    services: Entries<ObjectKey, KeptService>,
    endpoint_slices: Entries<ObjectKey, CompactSlice>,
    endpoints: Entries<ObjectKey, Endpoints>,
    secrets: Entries<ObjectKey, Secret>,
    gateway_classes: Entries<String, GatewayClass>,
    gateways: Entries<ObjectKey, Gateway>,
    http_routes: Entries<ObjectKey, HttpRoute>,
    grpc_routes: Entries<ObjectKey, GrpcRoute>,
    reference_grants: Entries<ObjectKey, ReferenceGrant>,
    tcp_routes: Entries<ObjectKey, TcpRoute>,
    udp_routes: Entries<ObjectKey, UdpRoute>,
    tls_routes: Entries<ObjectKey, TlsRoute>,
    listener_sets: Entries<ObjectKey, ListenerSet>,
    backend_tls_policies: Entries<ObjectKey, BackendTlsPolicy>,
    config_maps: Entries<ObjectKey, ConfigMap>,
    namespaces: Entries<String, Namespace>,
}

impl Kinds {
    fn push(&mut self, object: &Object, origin: Origin) {
        let (namespace, name) = object.names();
        let name = name.to_owned();
        let key = |name| ObjectKey {
            namespace: namespace.to_owned(),
            name,
        };
        match object {
            Object::Ingress(_, o) => self.ingresses.push((key(name), o.clone(), origin)),
            Object::IngressClass(o) => self.ingress_classes.push((name, o.clone(), origin)),
            Object::Service(_, o) => self.services.push((key(name), o.clone(), origin)),
            Object::EndpointSlice(o) => self.endpoint_slices.push((key(name), o.clone(), origin)),
            Object::Endpoints(o) => self.endpoints.push((key(name), o.clone(), origin)),
            Object::Secret(o) => self.secrets.push((key(name), o.clone(), origin)),
            Object::GatewayClass(o) => self.gateway_classes.push((name, o.clone(), origin)),
            Object::Gateway(o) => self.gateways.push((key(name), o.clone(), origin)),
            Object::HttpRoute(o) => self.http_routes.push((key(name), o.clone(), origin)),
            Object::GrpcRoute(o) => self.grpc_routes.push((key(name), o.clone(), origin)),
            Object::ReferenceGrant(o) => {
                self.reference_grants.push((key(name), o.clone(), origin));
            }
            Object::TcpRoute(o) => self.tcp_routes.push((key(name), o.clone(), origin)),
            Object::UdpRoute(o) => self.udp_routes.push((key(name), o.clone(), origin)),
            Object::TlsRoute(o) => self.tls_routes.push((key(name), o.clone(), origin)),
            Object::ListenerSet(o) => self.listener_sets.push((key(name), o.clone(), origin)),
            Object::BackendTlsPolicy(o) => {
                self.backend_tls_policies
                    .push((key(name), o.clone(), origin));
            }
            Object::ConfigMap(o) => self.config_maps.push((key(name), o.clone(), origin)),
            Object::Namespace(o) => self.namespaces.push((name, o.clone(), origin)),
        }
    }
}

/// One kind's map: the last definition of each key wins; each replaced definition is recorded
/// in `duplicates` as (the definition replaced, the one replacing it).
fn build<K: Ord, V>(
    mut entries: Entries<K, V>,
    duplicates: &mut Vec<(Origin, Origin)>,
) -> BTreeMap<K, Arc<V>> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept: Vec<(K, Arc<V>, Origin)> = Vec::with_capacity(entries.len());
    for entry in entries {
        match kept.last_mut() {
            Some(last) if last.0 == entry.0 => {
                duplicates.push((last.2, entry.2));
                *last = entry;
            }
            _ => kept.push(entry),
        }
    }
    // Sorted and without equal keys: the map is built in one pass.
    kept.into_iter().map(|(k, v, _)| (k, v)).collect()
}

fn duplicate(object: ObjectRef, first: &Path, second: &Path) -> Diagnostic {
    let (first, second) = (first.display().to_string(), second.display().to_string());
    let message = if first == second {
        format!("defined twice in {first}; the later definition is used")
    } else {
        format!("defined in {first} and again in {second}; the one in {second} is used")
    };
    Diagnostic::warning(object, "", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_documents;
    use portico_model::Severity;

    fn service(namespace: &str, name: &str, port: u16) -> Object {
        let text = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{ports: [{{port: {port}}}]}}\n"
        );
        parse_documents("test", &text).objects.remove(0)
    }

    fn assemble_all(files: &[(&Path, &[Object])]) -> (Objects, Vec<Diagnostic>) {
        let (objects, diagnostics, _) = assemble(files, &Previous::default(), KindSet::ALL);
        (objects, diagnostics)
    }

    fn port(objects: &Objects, name: &str) -> i32 {
        let service = &objects.services[&ObjectKey::new("default", name)];
        service.spec.ports[0].port
    }

    #[test]
    fn the_later_file_wins_and_a_warning_names_both_files() {
        let a = [service("default", "web", 80)];
        let b = [service("default", "web", 8080)];
        let (objects, diagnostics) =
            assemble_all(&[(Path::new("a.yaml"), &a[..]), (Path::new("b.yaml"), &b[..])]);
        assert_eq!(port(&objects, "web"), 8080);
        assert_eq!(diagnostics.len(), 1);
        let d = &diagnostics[0];
        assert_eq!(d.severity, Severity::Warning);
        assert_eq!(d.object, ObjectRef::new("Service", "default", "web"));
        assert!(
            d.message.contains("a.yaml") && d.message.contains("b.yaml"),
            "{d}"
        );
    }

    #[test]
    fn same_name_in_other_namespaces_is_no_duplicate() {
        let a = [service("default", "web", 80), service("other", "web", 81)];
        let (objects, diagnostics) = assemble_all(&[(Path::new("a.yaml"), &a[..])]);
        assert_eq!(objects.services.len(), 2);
        assert!(diagnostics.is_empty());
    }

    #[test]
    fn three_definitions_keep_the_last_and_each_replacement_is_named_in_file_order() {
        let a = [service("default", "zeta", 1), service("default", "web", 80)];
        let b = [
            service("default", "web", 81),
            service("default", "alpha", 2),
        ];
        let c = [service("default", "web", 82)];
        let files = [
            (Path::new("a.yaml"), &a[..]),
            (Path::new("b.yaml"), &b[..]),
            (Path::new("c.yaml"), &c[..]),
        ];
        let (objects, diagnostics) = assemble_all(&files);
        assert_eq!(port(&objects, "web"), 82);
        assert_eq!((port(&objects, "zeta"), port(&objects, "alpha")), (1, 2));
        let keys: Vec<_> = objects.services.keys().map(|k| k.name.as_str()).collect();
        assert_eq!(keys, ["alpha", "web", "zeta"]);
        let messages: Vec<_> = diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "defined in a.yaml and again in b.yaml; the one in b.yaml is used",
                "defined in b.yaml and again in c.yaml; the one in c.yaml is used",
            ]
        );
    }

    #[test]
    fn a_duplicate_inside_one_file_keeps_the_later_document() {
        let a = [service("default", "web", 80), service("default", "web", 81)];
        let (objects, diagnostics) = assemble_all(&[(Path::new("a.yaml"), &a[..])]);
        assert_eq!(port(&objects, "web"), 81);
        assert!(diagnostics[0].message.contains("twice in a.yaml"));
    }
}
