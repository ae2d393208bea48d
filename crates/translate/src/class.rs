//! Which class an Ingress belongs to, and which classes are ours.

use crate::KeptIngress;
use crate::{
    Config, LEGACY_CLASS_ANNOTATION, ObjectKey, Objects, PROVIDER_ANNOTATION, TOPOLOGY_ANNOTATION,
};
use k8s_openapi::api::networking::v1::IngressClass;
use portico_model::{Diagnostic, LoadBalancer, ObjectRef};
use std::collections::BTreeSet;

/// `spec.ingressClassName`, else the deprecated `kubernetes.io/ingress.class` annotation.
pub(crate) fn ingress_class(ingress: &KeptIngress) -> Option<&str> {
    let field = ingress.spec.ingress_class_name.as_deref();
    let annotations = ingress.metadata.annotations.as_ref();
    let annotation = annotations.and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
    field
        .or(annotation.map(String::as_str))
        .filter(|c| !c.is_empty())
}

fn is_ours(class: &IngressClass, config: &Config) -> bool {
    let controller = class.spec.as_ref().and_then(|s| s.controller.as_deref());
    controller == Some(config.controller.as_str())
}

/// The class a load balancer serves: its IngressClass (shared topology), or its Ingress's class
/// (dedicated topology).
pub(crate) fn class_of<'a>(lb: &'a LoadBalancer, objects: &'a Objects) -> Option<&'a str> {
    if let Some(class) = lb.ingress_class() {
        return Some(class);
    }
    if lb.origin.kind != "Ingress" {
        return None;
    }
    let key = ObjectKey::new(&lb.origin.namespace, &lb.origin.name);
    objects.ingresses.get(&key).and_then(|i| ingress_class(i))
}

/// Classes whose IngressClass names our controller, plus `config.ingress_class`.
pub(crate) fn owned_classes(objects: &Objects, config: &Config) -> BTreeSet<String> {
    let mut owned: BTreeSet<String> = objects
        .ingress_classes
        .iter()
        .filter(|(_, class)| is_ours(class, config))
        .map(|(name, _)| name.clone())
        .collect();
    owned.insert(config.ingress_class.clone());
    owned
}

/// Classes that get a load balancer: an IngressClass of ours exists, or an owned Ingress uses it.
pub(crate) fn load_balancer_classes<'a>(
    objects: &Objects,
    config: &Config,
    used: impl Iterator<Item = &'a str>,
) -> BTreeSet<String> {
    let mut classes: BTreeSet<String> = objects
        .ingress_classes
        .iter()
        .filter(|(_, class)| is_ours(class, config))
        .map(|(name, _)| name.clone())
        .collect();
    classes.extend(used.map(str::to_owned));
    classes
}

/// How a class's Ingresses map to load balancers (`portico.dev/topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Topology {
    /// One load balancer for the class; every Ingress becomes policies on it (Kuryr).
    #[default]
    Shared,
    /// One load balancer per Ingress (Contrail).
    Dedicated,
}

/// The IngressClass's `portico.dev/topology` annotation; a bad value is an error on the
/// IngressClass naming the annotation, and the class stays shared.
pub(crate) fn topology(objects: &Objects, class: &str) -> (Topology, Option<Diagnostic>) {
    let annotations = objects
        .ingress_classes
        .get(class)
        .and_then(|c| c.metadata.annotations.as_ref());
    match annotations.and_then(|a| a.get(TOPOLOGY_ANNOTATION)) {
        None => (Topology::Shared, None),
        Some(v) if v.trim() == "shared" => (Topology::Shared, None),
        Some(v) if v.trim() == "dedicated" => (Topology::Dedicated, None),
        Some(v) => {
            let object = ObjectRef::new("IngressClass", "", class);
            let field = format!("metadata.annotations[{TOPOLOGY_ANNOTATION}]");
            let message =
                format!("{v:?} is not a topology (shared or dedicated); the class stays shared");
            (
                Topology::Shared,
                Some(Diagnostic::error(object, field, message)),
            )
        }
    }
}

/// The IngressClass's `portico.dev/provider` annotation, else the configured default.
pub(crate) fn provider(objects: &Objects, class: &str, config: &Config) -> String {
    let annotations = objects
        .ingress_classes
        .get(class)
        .and_then(|c| c.metadata.annotations.as_ref());
    let annotated = annotations.and_then(|a| a.get(PROVIDER_ANNOTATION));
    annotated.unwrap_or(&config.default_provider).clone()
}

/// The IngressClass annotation that turns HTTP/3 off for the class's load balancers.
pub const HTTP3_ANNOTATION: &str = "portico.dev/http3";

/// Whether the class's load balancers serve HTTP/3 beside their HTTPS listener (`--http3`
/// decides whether it is served at all): not when the class says `portico.dev/http3:
/// "false"`; another value than `"true"` or `"false"` is a warning on the class and changes
/// nothing.
pub(crate) fn http3(objects: &Objects, class: &str, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let annotations = objects
        .ingress_classes
        .get(class)
        .and_then(|c| c.metadata.annotations.as_ref());
    match annotations
        .and_then(|a| a.get(HTTP3_ANNOTATION))
        .map(String::as_str)
    {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => {
            let field = format!("metadata.annotations[{HTTP3_ANNOTATION}]");
            let message = format!("invalid value {other:?}: must be \"true\" or \"false\"");
            let object = ObjectRef::new("IngressClass", "", class);
            diagnostics.push(Diagnostic::warning(object, field, message));
            true
        }
    }
}

/// The Secrets a source must keep: those named by `spec.tls` of Ingresses whose class is ours,
/// in the Ingress's namespace, their upstream CA Secrets (`proxy-ssl-secret`), the
/// `certificateRefs` of our Gateways' listeners, and the `--default-certificate` Secret. A Kubernetes source
/// keeps only these in memory (Secrets are the largest objects and mostly not ours).
pub fn referenced_secrets(objects: &Objects, config: &Config) -> BTreeSet<ObjectKey> {
    let owned = owned_classes(objects, config);
    let mut secrets: BTreeSet<ObjectKey> = config.default_certificate.iter().cloned().collect();
    for (key, ingress) in objects.ingresses.iter() {
        if !ingress_class(ingress).is_some_and(|c| owned.contains(c)) {
            continue;
        }
        let names = ingress.spec.tls.iter();
        let names = names.filter_map(|t| t.secret_name.as_deref().filter(|n| !n.is_empty()));
        secrets.extend(names.map(|name| ObjectKey::new(&key.namespace, name)));
        if let Some((_, ca)) = crate::annotations::ca_secret(ingress, &key.namespace) {
            secrets.insert(ObjectKey::new(&ca.namespace, &ca.name));
        }
        if let Some((_, auth, _)) = crate::annotations::basic_secret(ingress, &key.namespace) {
            secrets.insert(ObjectKey::new(&auth.namespace, &auth.name));
        }
    }
    secrets.extend(crate::gateway::referenced_secrets(objects, config));
    secrets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeptIngressSpec;
    use k8s_openapi::api::networking::v1::IngressTLS;
    use std::sync::Arc;

    fn ingress(class: Option<&str>, secrets: &[&str]) -> Arc<KeptIngress> {
        let tls = secrets
            .iter()
            .map(|s| IngressTLS {
                secret_name: Some((*s).to_owned()),
                hosts: None,
            })
            .collect();
        Arc::new(KeptIngress {
            spec: KeptIngressSpec {
                ingress_class_name: class.map(str::to_owned),
                tls,
                ..KeptIngressSpec::default()
            },
            ..KeptIngress::default()
        })
    }

    #[test]
    fn only_owned_ingresses_their_ca_and_auth_secrets_and_the_default_certificate_reference_secrets()
     {
        let mut objects = Objects::default();
        let mut ours = Arc::unwrap_or_clone(ingress(Some("portico"), &["a", "", "b"]));
        let nginx = |k: &str, v: &str| (format!("nginx.ingress.kubernetes.io/{k}"), v.to_owned());
        ours.metadata.annotations = Some(
            [
                nginx("proxy-ssl-secret", "ns/upstream-ca"),
                nginx("auth-type", "basic"),
                nginx("auth-secret", "users"),
            ]
            .into(),
        );
        std::sync::Arc::make_mut(&mut objects.ingresses)
            .insert(ObjectKey::new("ns", "ours"), Arc::new(ours));
        let mut theirs = Arc::unwrap_or_clone(ingress(Some("nginx"), &["c"]));
        theirs.metadata.annotations = Some(
            [(
                "portico.dev/proxy-ssl-secret".to_owned(),
                "their-ca".to_owned(),
            )]
            .into(),
        );
        let theirs = Arc::new(theirs);
        std::sync::Arc::make_mut(&mut objects.ingresses)
            .insert(ObjectKey::new("ns", "theirs"), theirs);
        let classless = ingress(None, &["d"]);
        std::sync::Arc::make_mut(&mut objects.ingresses)
            .insert(ObjectKey::new("other", "none"), classless);
        let config = Config {
            default_certificate: Some(ObjectKey::new("system", "default-tls")),
            ..Config::default()
        };
        let got: Vec<String> = referenced_secrets(&objects, &config)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "ns/a",
                "ns/b",
                "ns/upstream-ca",
                "ns/users",
                "system/default-tls"
            ]
        );
    }

    #[test]
    fn our_gateways_certificate_refs_are_referenced_secrets() {
        use portico_gateway::{Gateway, GatewayClass};
        let class = |name: &str, controller: &str| -> GatewayClass {
            let class = serde_json::json!({"metadata": {"name": name},
                "spec": {"controllerName": controller}});
            serde_json::from_value(class).unwrap()
        };
        let gateway = |class: &str, refs: serde_json::Value| -> Gateway {
            let gateway = serde_json::json!({"metadata": {"namespace": "ns", "name": class},
                "spec": {"gatewayClassName": class, "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP"},
                    {"name": "https", "port": 443, "protocol": "HTTPS",
                     "tls": {"certificateRefs": refs}}]}});
            serde_json::from_value(gateway).unwrap()
        };
        let mut objects = Objects::default();
        let classes = std::sync::Arc::make_mut(&mut objects.gateway_classes);
        classes.insert(
            "ours".into(),
            Arc::new(class("ours", crate::config::GATEWAY_CONTROLLER_NAME)),
        );
        classes.insert("theirs".into(), Arc::new(class("theirs", "example.com/gw")));
        let refs = serde_json::json!([{"name": "a"}, {"name": "b", "namespace": "certs"},
            {"name": "c", "kind": "ConfigMap", "group": ""}]);
        let gateways = std::sync::Arc::make_mut(&mut objects.gateways);
        gateways.insert(
            ObjectKey::new("ns", "ours"),
            Arc::new(gateway("ours", refs)),
        );
        let theirs = gateway("theirs", serde_json::json!([{"name": "x"}]));
        gateways.insert(ObjectKey::new("ns", "theirs"), Arc::new(theirs));
        let got: Vec<String> = referenced_secrets(&objects, &Config::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["certs/b", "ns/a"]);
    }
}
