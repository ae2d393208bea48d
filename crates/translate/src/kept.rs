//! The Ingress and the Service as Portico keeps them ([`KeptIngress`], [`KeptService`]): what
//! translation, admission and the status report read, in a form sized to what it holds.
//!
//! k8s-openapi's `Ingress` takes 584 bytes whatever it holds (`ObjectMeta` alone is 360, a
//! dozen optional fields), and each path 176 (a backend has room for a whole resource
//! reference). At 10,000 Ingresses of one rule and two paths, the decoded objects were about
//! 14 MB of the heap. Sources decode the full object, so that a malformed field is reported as
//! before, then keep this: about 200 bytes for the object and 88 per path.
//!
//! A Service is 824 bytes as k8s-openapi decodes it, its spec alone 416, although most
//! Services set a type and a port or two. [`KeptService`] keeps those, and the whole spec only
//! for a Service of type LoadBalancer, the one kind whose other fields Portico reads (the L4
//! provider).
//!
//! Field names follow the API's, so that what reads `ingress.spec.rules` or
//! `ingress.metadata.annotations` reads the same here. What changes: lists that the API leaves
//! out are empty (no reader tells an absent list from an empty one), strings are boxed to their
//! length, and the metadata keeps only what is read (the name and namespace are the key's).

use crate::ObjectKey;
use k8s_openapi::api::core::v1::{
    Service, ServicePort, ServiceSpec, ServiceStatus, TypedLocalObjectReference,
};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressStatus, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;

/// An Ingress as kept. See the module.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptIngress {
    pub metadata: KeptMeta,
    pub spec: KeptIngressSpec,
    pub status: Option<IngressStatus>,
}

/// The metadata of a kept Ingress or Service that anything reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptMeta {
    /// Events about the object name it.
    pub uid: Option<String>,
    /// The status report's precondition.
    pub resource_version: Option<String>,
    /// Which of two objects that claim the same route or address is older.
    pub creation_timestamp: Option<Time>,
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `spec` of a kept Ingress; an Ingress without one has the empty spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptIngressSpec {
    pub ingress_class_name: Option<String>,
    pub default_backend: Option<Box<KeptBackend>>,
    pub rules: Box<[KeptRule]>,
    pub tls: Box<[IngressTLS]>,
}

/// `spec.rules[i]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptRule {
    pub host: Option<Box<str>>,
    /// `http.paths`; `None` when the rule has no `http`.
    pub http: Option<Box<[KeptPath]>>,
}

/// `spec.rules[i].http.paths[j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptPath {
    pub path: Option<Box<str>>,
    pub path_type: PathType,
    pub backend: KeptBackend,
}

/// `pathType`, with any other value kept as written (admission names it in its error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathType {
    Exact,
    Prefix,
    ImplementationSpecific,
    Other(Box<str>),
}

impl PathType {
    pub fn as_str(&self) -> &str {
        match self {
            PathType::Exact => "Exact",
            PathType::Prefix => "Prefix",
            PathType::ImplementationSpecific => "ImplementationSpecific",
            PathType::Other(other) => other,
        }
    }
}

impl From<String> for PathType {
    fn from(written: String) -> Self {
        match written.as_str() {
            "Exact" => PathType::Exact,
            "Prefix" => PathType::Prefix,
            "ImplementationSpecific" => PathType::ImplementationSpecific,
            _ => PathType::Other(written.into_boxed_str()),
        }
    }
}

/// A backend: a Service port, or a resource reference (kept whole: rare, and unsupported).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptBackend {
    pub service: Option<KeptServiceBackend>,
    pub resource: Option<Box<TypedLocalObjectReference>>,
}

/// `backend.service`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptServiceBackend {
    pub name: Box<str>,
    pub port: Option<KeptBackendPort>,
}

/// `backend.service.port`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptBackendPort {
    pub name: Option<Box<str>>,
    pub number: Option<i32>,
}

impl KeptIngress {
    /// Whether `self` and `other` serve the same: they differ at most in what the API server
    /// changes on every write (the resource version) and in the status, which Portico writes
    /// and never serves from.
    pub fn same_for_serving(&self, other: &KeptIngress) -> bool {
        self.spec == other.spec && self.metadata.same_for_serving(&other.metadata)
    }

    /// The rules, with their paths (`http.paths`, empty without `http`).
    pub fn paths(&self) -> impl Iterator<Item = (&KeptRule, &[KeptPath])> {
        let rules = self.spec.rules.iter();
        rules.map(|rule| (rule, rule.http.as_deref().unwrap_or_default()))
    }

    /// The Ingress `key` again from what is kept of it: what a source would have to hold to
    /// keep this (lists the API left out come back empty, or absent where they were empty).
    pub fn to_ingress(&self, key: &ObjectKey) -> Ingress {
        let spec = &self.spec;
        Ingress {
            metadata: self.metadata.to_meta(key),
            spec: Some(IngressSpec {
                ingress_class_name: spec.ingress_class_name.clone(),
                default_backend: spec.default_backend.as_deref().map(KeptBackend::to_backend),
                rules: list(spec.rules.iter().map(KeptRule::to_rule).collect()),
                tls: list(spec.tls.to_vec()),
            }),
            status: self.status.clone(),
        }
    }
}

/// A list the API leaves out when empty.
fn list<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

impl KeptRule {
    fn to_rule(&self) -> IngressRule {
        IngressRule {
            host: self.host.as_deref().map(str::to_owned),
            http: self.http.as_ref().map(|paths| HTTPIngressRuleValue {
                paths: paths.iter().map(KeptPath::to_path).collect(),
            }),
        }
    }
}

impl KeptPath {
    fn to_path(&self) -> HTTPIngressPath {
        HTTPIngressPath {
            path: self.path.as_deref().map(str::to_owned),
            path_type: self.path_type.as_str().to_owned(),
            backend: self.backend.to_backend(),
        }
    }
}

impl KeptBackend {
    fn to_backend(&self) -> IngressBackend {
        IngressBackend {
            resource: self.resource.as_deref().cloned(),
            service: self.service.as_ref().map(|s| IngressServiceBackend {
                name: s.name.to_string(),
                port: s.port.as_ref().map(|p| ServiceBackendPort {
                    name: p.name.as_deref().map(str::to_owned),
                    number: p.number,
                }),
            }),
        }
    }
}

impl From<Ingress> for KeptIngress {
    /// Takes the strings it keeps out of `ingress` rather than copying them.
    fn from(ingress: Ingress) -> Self {
        KeptIngress {
            metadata: ingress.metadata.into(),
            spec: ingress.spec.map(KeptIngressSpec::from).unwrap_or_default(),
            status: ingress.status,
        }
    }
}

impl From<IngressSpec> for KeptIngressSpec {
    fn from(spec: IngressSpec) -> Self {
        KeptIngressSpec {
            ingress_class_name: spec.ingress_class_name,
            default_backend: spec.default_backend.map(|b| Box::new(b.into())),
            rules: spec
                .rules
                .into_iter()
                .flatten()
                .map(KeptRule::from)
                .collect(),
            tls: spec.tls.unwrap_or_default().into_boxed_slice(),
        }
    }
}

impl From<IngressRule> for KeptRule {
    fn from(rule: IngressRule) -> Self {
        KeptRule {
            host: rule.host.map(String::into_boxed_str),
            http: rule
                .http
                .map(|http| http.paths.into_iter().map(KeptPath::from).collect()),
        }
    }
}

impl From<HTTPIngressPath> for KeptPath {
    fn from(path: HTTPIngressPath) -> Self {
        KeptPath {
            path: path.path.map(String::into_boxed_str),
            path_type: path.path_type.into(),
            backend: path.backend.into(),
        }
    }
}

impl From<IngressBackend> for KeptBackend {
    fn from(backend: IngressBackend) -> Self {
        KeptBackend {
            service: backend.service.map(KeptServiceBackend::from),
            resource: backend.resource.map(Box::new),
        }
    }
}

impl From<IngressServiceBackend> for KeptServiceBackend {
    fn from(service: IngressServiceBackend) -> Self {
        KeptServiceBackend {
            name: service.name.into_boxed_str(),
            port: service.port.map(KeptBackendPort::from),
        }
    }
}

impl From<ServiceBackendPort> for KeptBackendPort {
    fn from(port: ServiceBackendPort) -> Self {
        KeptBackendPort {
            name: port.name.map(String::into_boxed_str),
            number: port.number,
        }
    }
}

/// A Service as kept. See the module.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptService {
    pub metadata: KeptMeta,
    pub spec: KeptServiceSpec,
    pub status: Option<ServiceStatus>,
}

/// `spec` of a kept Service; a Service without one has the empty spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptServiceSpec {
    pub type_: Option<String>,
    pub ports: Box<[ServicePort]>,
    /// The whole spec (its ports too) of a Service of type LoadBalancer; none for others.
    pub load_balancer: Option<Box<ServiceSpec>>,
}

impl KeptService {
    /// Whether `self` and `other` serve the same: as for [`KeptIngress::same_for_serving`].
    pub fn same_for_serving(&self, other: &KeptService) -> bool {
        self.spec == other.spec && self.metadata.same_for_serving(&other.metadata)
    }

    /// The spec of a Service of type LoadBalancer.
    pub fn load_balancer(&self) -> Option<&ServiceSpec> {
        self.spec.load_balancer.as_deref()
    }

    /// The Service `key` again from what is kept of it (as [`KeptIngress::to_ingress`]).
    pub fn to_service(&self, key: &ObjectKey) -> Service {
        let spec = self
            .load_balancer()
            .cloned()
            .unwrap_or_else(|| ServiceSpec {
                type_: self.spec.type_.clone(),
                ports: list(self.spec.ports.to_vec()),
                ..ServiceSpec::default()
            });
        Service {
            metadata: self.metadata.to_meta(key),
            spec: Some(spec),
            status: self.status.clone(),
        }
    }
}

impl From<ObjectMeta> for KeptMeta {
    fn from(meta: ObjectMeta) -> Self {
        KeptMeta {
            uid: meta.uid,
            resource_version: meta.resource_version,
            creation_timestamp: meta.creation_timestamp,
            annotations: meta.annotations,
        }
    }
}

impl KeptMeta {
    /// Equal but for the resource version, which the API server changes on every write.
    fn same_for_serving(&self, other: &KeptMeta) -> bool {
        self.uid == other.uid
            && self.creation_timestamp == other.creation_timestamp
            && self.annotations == other.annotations
    }

    fn to_meta(&self, key: &ObjectKey) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(key.namespace.clone()),
            name: Some(key.name.clone()),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            creation_timestamp: self.creation_timestamp.clone(),
            annotations: self.annotations.clone(),
            ..ObjectMeta::default()
        }
    }
}

impl From<Service> for KeptService {
    /// Takes the type and ports out of `service` rather than copying them; a Service of type
    /// LoadBalancer keeps a copy of its whole spec besides.
    fn from(service: Service) -> Self {
        let spec = service.spec.unwrap_or_default();
        let load_balancer = spec.type_.as_deref() == Some("LoadBalancer");
        let load_balancer = load_balancer.then(|| Box::new(spec.clone()));
        KeptService {
            metadata: service.metadata.into(),
            spec: KeptServiceSpec {
                type_: spec.type_,
                ports: spec.ports.unwrap_or_default().into_boxed_slice(),
                load_balancer,
            },
            status: service.status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(value: serde_json::Value) -> Ingress {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_kept_ingress_keeps_what_translation_reads() {
        let kept = KeptIngress::from(ingress(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u-1",
                         "resourceVersion": "7", "generation": 3,
                         "creationTimestamp": "2024-01-01T00:00:00Z",
                         "labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {
                "ingressClassName": "portico",
                "defaultBackend": {"service": {"name": "fallback", "port": {"name": "http"}}},
                "tls": [{"hosts": ["shop.example"], "secretName": "shop-tls"}],
                "rules": [
                    {"host": "shop.example", "http": {"paths": [
                        {"path": "/", "pathType": "Prefix",
                         "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                        {"path": "/x", "pathType": "Sideways",
                         "backend": {"resource": {"kind": "Bucket", "name": "b"}}},
                    ]}},
                    {"host": "bare.example"},
                ],
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        })));
        assert_eq!(kept.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("7"));
        assert!(kept.metadata.creation_timestamp.is_some());
        assert_eq!(kept.metadata.annotations.as_ref().unwrap()["a"], "b");
        assert_eq!(kept.spec.ingress_class_name.as_deref(), Some("portico"));
        let default = kept.spec.default_backend.as_ref().unwrap();
        let port = default.service.as_ref().unwrap().port.as_ref().unwrap();
        assert_eq!((port.name.as_deref(), port.number), (Some("http"), None));
        assert_eq!(kept.spec.tls[0].secret_name.as_deref(), Some("shop-tls"));
        let [(rule, paths), (bare, none)] = kept.paths().collect::<Vec<_>>()[..] else {
            panic!("two rules: {kept:?}");
        };
        assert_eq!(rule.host.as_deref(), Some("shop.example"));
        assert_eq!(paths[0].path.as_deref(), Some("/"));
        assert_eq!(paths[0].path_type, PathType::Prefix);
        let service = paths[0].backend.service.as_ref().unwrap();
        assert_eq!(&*service.name, "web");
        assert_eq!(service.port.as_ref().unwrap().number, Some(80));
        assert_eq!(paths[1].path_type.as_str(), "Sideways");
        assert_eq!(paths[1].backend.resource.as_ref().unwrap().kind, "Bucket");
        assert!(paths[1].backend.service.is_none());
        assert_eq!(
            (bare.host.as_deref(), bare.http.is_none()),
            (Some("bare.example"), true)
        );
        assert!(none.is_empty());
        let status = kept
            .status
            .as_ref()
            .unwrap()
            .load_balancer
            .as_ref()
            .unwrap();
        assert_eq!(
            status.ingress.as_ref().unwrap()[0].ip.as_deref(),
            Some("192.0.2.1")
        );
    }

    #[test]
    fn a_kept_ingress_gives_back_the_ingress_it_keeps() {
        let written = ingress(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u-1",
                         "resourceVersion": "7", "annotations": {"a": "b"}},
            "spec": {
                "ingressClassName": "portico",
                "defaultBackend": {"resource": {"kind": "Bucket", "name": "b"}},
                "tls": [{"hosts": ["shop.example"]}],
                "rules": [
                    {"host": "shop.example", "http": {"paths": [
                        {"path": "/", "pathType": "Exact",
                         "backend": {"service": {"name": "web", "port": {"name": "http"}}}},
                    ]}},
                    {},
                ],
            },
        }));
        let key = ObjectKey::new("shop", "web");
        assert_eq!(KeptIngress::from(written.clone()).to_ingress(&key), written);
    }

    #[test]
    fn an_ingress_without_spec_is_kept_with_the_empty_spec() {
        let kept = KeptIngress::from(ingress(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web"},
        })));
        assert_eq!(kept.spec, KeptIngressSpec::default());
    }

    #[test]
    fn only_the_version_and_the_status_do_not_count_for_serving() {
        let base = serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u-1",
                         "resourceVersion": "7", "annotations": {"a": "b"}},
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
        });
        let kept = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut value = base.clone();
            change(&mut value);
            KeptIngress::from(ingress(value))
        };
        let old = kept(&|_| {});
        let status_only = kept(&|v| {
            v["metadata"]["resourceVersion"] = "8".into();
            v["status"] = serde_json::json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}});
        });
        assert!(old.same_for_serving(&status_only));
        let annotated = kept(&|v| v["metadata"]["annotations"]["a"] = "c".into());
        assert!(!old.same_for_serving(&annotated));
        let respec = kept(&|v| {
            v["spec"]["defaultBackend"]["service"]["port"]["number"] = 81.into();
        });
        assert!(!old.same_for_serving(&respec));
        let recreated = kept(&|v| v["metadata"]["uid"] = "u-2".into());
        assert!(!old.same_for_serving(&recreated));
    }

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_kept_service_keeps_its_type_and_ports_and_the_whole_spec_only_for_a_load_balancer() {
        let cluster = KeptService::from(service(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u-1",
                         "resourceVersion": "7", "annotations": {"a": "b"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "sessionAffinity": "None",
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080,
                                "appProtocol": "kubernetes.io/h2c"}]},
        })));
        assert_eq!(cluster.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(cluster.metadata.annotations.as_ref().unwrap()["a"], "b");
        assert_eq!(cluster.spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(cluster.spec.ports.len(), 1);
        assert_eq!(cluster.spec.ports[0].port, 80);
        assert_eq!(
            cluster.spec.ports[0].app_protocol.as_deref(),
            Some("kubernetes.io/h2c")
        );
        assert!(cluster.load_balancer().is_none());
        let written = serde_json::json!({
            "metadata": {"namespace": "shop", "name": "lb"},
            "spec": {"type": "LoadBalancer", "loadBalancerClass": "portico.dev/l4",
                     "loadBalancerIP": "192.0.2.7",
                     "ports": [{"port": 53, "protocol": "UDP"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}},
        });
        let lb = KeptService::from(service(written.clone()));
        assert_eq!(lb.load_balancer(), service(written.clone()).spec.as_ref());
        let key = ObjectKey::new("shop", "lb");
        assert_eq!(lb.to_service(&key), service(written));
        let key = ObjectKey::new("shop", "web");
        let web = cluster.to_service(&key);
        assert_eq!(KeptService::from(web), cluster);
        assert_eq!(lb.spec.ports[0].protocol.as_deref(), Some("UDP"));
        assert!(lb.status.is_some());
    }

    #[test]
    fn only_the_version_and_the_status_of_a_service_do_not_count_for_serving() {
        let kept = |version: &str, port: i32, ip: Option<&str>| {
            let status =
                ip.map(|ip| serde_json::json!({"loadBalancer": {"ingress": [{"ip": ip}]}}));
            KeptService::from(service(serde_json::json!({
                "metadata": {"namespace": "shop", "name": "lb", "resourceVersion": version},
                "spec": {"type": "LoadBalancer", "ports": [{"port": port}]},
                "status": status,
            })))
        };
        let old = kept("1", 80, None);
        assert!(old.same_for_serving(&kept("2", 80, Some("192.0.2.1"))));
        assert!(!old.same_for_serving(&kept("2", 81, None)));
    }
}
