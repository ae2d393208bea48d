use super::*;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::{
    Ingress, IngressClass, IngressLoadBalancerIngress, IngressLoadBalancerStatus, IngressStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use portico_status::IngressView;
use portico_translate::{KeptIngress, KeptService, StatusSeen};
use std::sync::Arc;

fn ip(a: &str) -> LoadBalancerAddress {
    LoadBalancerAddress {
        ip: Some(a.to_owned()),
        hostname: None,
    }
}

fn meta(namespace: Option<&str>, name: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_owned),
        name: Some(name.to_owned()),
        uid: Some(uid.to_owned()),
        resource_version: Some("7".to_owned()),
        ..ObjectMeta::default()
    }
}

fn ingress(name: &str, status: &[&str]) -> Arc<KeptIngress> {
    let entries = status
        .iter()
        .map(|a| IngressLoadBalancerIngress {
            ip: Some((*a).to_owned()),
            ..IngressLoadBalancerIngress::default()
        })
        .collect();
    let ingress = Ingress {
        metadata: meta(Some("shop"), name, &format!("uid-{name}")),
        status: Some(IngressStatus {
            load_balancer: Some(IngressLoadBalancerStatus {
                ingress: Some(entries),
            }),
        }),
        ..Ingress::default()
    };
    Arc::new(ingress.into())
}

fn objects() -> Objects {
    let mut o = Objects::default();
    for (name, status) in [
        ("web", vec![]),
        ("idle", vec![]),
        ("other", vec!["10.9.9.9"]),
    ] {
        std::sync::Arc::make_mut(&mut o.ingresses)
            .insert(ObjectKey::new("shop", name), ingress(name, &status));
    }
    std::sync::Arc::make_mut(&mut o.ingress_classes).insert(
        "portico".to_owned(),
        Arc::new(IngressClass {
            metadata: meta(None, "portico", "uid-class"),
            ..IngressClass::default()
        }),
    );
    std::sync::Arc::make_mut(&mut o.secrets).insert(
        ObjectKey::new("shop", "tls"),
        Arc::new(Secret {
            metadata: meta(Some("shop"), "tls", "uid-secret"),
            ..Secret::default()
        }),
    );
    o
}

fn view(name: &str, owned: bool, addresses: Vec<LoadBalancerAddress>) -> IngressView {
    let d = Diagnostic::warning(ObjectRef::new("Ingress", "shop", name), "spec", "odd");
    let (ns, n) = ("shop".to_owned(), name.to_owned());
    IngressView::new(ns, n, None, owned, addresses, vec![d])
}

fn snapshot() -> Snapshot {
    Snapshot {
        ingresses: vec![
            view("web", true, vec![ip("10.0.0.1")]),
            view("idle", true, vec![]),
            view("other", false, vec![]),
            view("undecodable", false, vec![]),
        ]
        .into(),
        diagnostics: vec![
            Diagnostic::error(ObjectRef::new("Secret", "shop", "tls"), "data", "bad key"),
            Diagnostic::error(ObjectRef::new("IngressClass", "", "portico"), "", "x"),
            Diagnostic::error(ObjectRef::new("Service", "shop", "gone"), "", "missing"),
            Diagnostic::error(ObjectRef::new("File", "", "a.yaml"), "", "parse"),
        ],
        ..Snapshot::default()
    }
}

fn find<'a>(r: &'a Report, name: &str) -> &'a StatusReport {
    let found = r.ingresses.iter().find(|i| i.key.name == name);
    found.unwrap_or_else(|| panic!("no report for {name}"))
}

#[test]
fn owned_served_ingress_wants_the_publish_addresses() {
    let r = report(&objects(), &snapshot(), &[ip("10.0.0.1")], "");
    let web = find(&r, "web");
    assert!(web.owned);
    assert_eq!(web.desired.to_vec(), vec![ip("10.0.0.1")]);
    assert_eq!(web.observed.to_vec(), vec![]);
    assert_eq!(web.uid.as_deref(), Some("uid-web"));
    assert_eq!(web.resource_version.as_deref(), Some("7"));
    assert_eq!(r.publish, vec![ip("10.0.0.1")]);
}

/// The report once web's status write (the publish address, version 8) came back through the
/// watch as a status-only update, noted apart.
fn report_after_web_was_written() -> Report {
    let mut o = objects();
    let written = ingress("web", &["10.0.0.1"]);
    let seen = StatusSeen {
        resource_version: Some("8".to_owned()),
        status: written.status.clone(),
    };
    Arc::make_mut(&mut o.ingress_seen).insert(ObjectKey::new("shop", "web"), Arc::new(seen));
    report(&o, &snapshot(), &[ip("10.0.0.1")], "")
}

#[test]
fn a_status_only_update_noted_apart_is_what_is_observed() {
    let r = report_after_web_was_written();
    let web = find(&r, "web");
    assert_eq!(web.observed.to_vec(), vec![ip("10.0.0.1")]);
    assert_eq!(web.resource_version.as_deref(), Some("8"));
    assert_eq!(web.uid.as_deref(), Some("uid-web"));
    // The others are read from their objects.
    assert_eq!(find(&r, "other").observed.to_vec(), vec![ip("10.9.9.9")]);
    assert_eq!(find(&r, "other").resource_version.as_deref(), Some("7"));
}

#[test]
fn owned_unserved_and_foreign_ingresses_want_no_addresses() {
    let r = report(&objects(), &snapshot(), &[ip("10.0.0.1")], "");
    let idle = find(&r, "idle");
    assert!(idle.owned && idle.desired.is_empty());
    let other = find(&r, "other");
    assert!(!other.owned && other.desired.is_empty());
    assert_eq!(other.observed.to_vec(), vec![ip("10.9.9.9")]);
}

#[test]
fn ingresses_only_the_snapshot_knows_are_left_out() {
    let r = report(&objects(), &snapshot(), &[], "");
    let names: Vec<_> = r.ingresses.iter().map(|i| i.key.name.as_str()).collect();
    assert_eq!(names, ["idle", "other", "web"]);
}

#[test]
fn diagnostics_reference_kubernetes_objects_with_their_uid() {
    let r = report(&objects(), &snapshot(), &[], "");
    let secret = r
        .diagnostics
        .iter()
        .find(|d| d.diagnostic.object.kind == "Secret");
    let secret = secret.map(|d| &d.regarding);
    assert_eq!(
        secret,
        Some(&ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Secret".to_owned()),
            namespace: Some("shop".to_owned()),
            name: Some("tls".to_owned()),
            uid: Some("uid-secret".to_owned()),
            ..ObjectReference::default()
        })
    );
}

#[test]
fn cluster_scoped_and_unknown_objects_get_a_reference_without_namespace_or_uid() {
    let r = report(&objects(), &snapshot(), &[], "");
    let by_kind = |k: &str| {
        r.diagnostics
            .iter()
            .find(|d| d.diagnostic.object.kind == k)
            .map(|d| d.regarding.clone())
    };
    let class = by_kind("IngressClass").unwrap_or_default();
    assert_eq!(class.namespace, None);
    assert_eq!(class.api_version.as_deref(), Some("networking.k8s.io/v1"));
    assert_eq!(class.uid.as_deref(), Some("uid-class"));
    let gone = by_kind("Service").unwrap_or_default();
    assert_eq!(gone.uid, None);
    assert_eq!(gone.name.as_deref(), Some("gone"));
}

#[test]
fn file_diagnostics_are_not_reported() {
    let r = report(&objects(), &snapshot(), &[], "");
    assert!(
        r.diagnostics
            .iter()
            .all(|d| d.diagnostic.object.kind != "File")
    );
    // 4 Ingress warnings (one per view, "undecodable" included) + Secret, class, Service.
    assert_eq!(r.diagnostics.len(), 7);
}

#[test]
fn duplicate_diagnostics_are_reported_once() {
    let mut s = snapshot();
    let again = s.diagnostics[0].clone();
    s.diagnostics.push(again);
    let r = report(&objects(), &s, &[], "");
    assert_eq!(r.diagnostics.len(), 7);
}

#[test]
fn empty_inputs_give_an_empty_report() {
    let r = report(&Objects::default(), &Snapshot::default(), &[], "");
    assert_eq!(r, Report::default());
}

#[test]
fn services_portico_serves_want_their_load_balancers_addresses() {
    use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
    let mut o = objects();
    for (name, observed) in [("dns", Some("10.0.0.5")), ("plain", None)] {
        let ingress = observed.map(|a| LoadBalancerIngress {
            ip: Some(a.to_owned()),
            ..LoadBalancerIngress::default()
        });
        let service = k8s_openapi::api::core::v1::Service {
            metadata: meta(Some("shop"), name, &format!("uid-{name}")),
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(ingress.into_iter().collect()),
                }),
                ..ServiceStatus::default()
            }),
            ..Default::default()
        };
        std::sync::Arc::make_mut(&mut o.services).insert(
            ObjectKey::new("shop", name),
            Arc::new(KeptService::from(service)),
        );
    }
    let mut snap = snapshot();
    let view = |a: &[&str]| a.iter().map(|a| ip(a)).collect();
    snap.services = vec![portico_status::ServiceView::new(
        "shop".into(),
        "dns".into(),
        view(&["10.0.0.9", "203.0.113.4"]),
    )];
    let r = report(&o, &snap, &[ip("10.0.0.1")], "");
    // Only the Service with a view (Portico's) is reported; "plain" is somebody else's.
    assert_eq!(r.services.len(), 1, "{:?}", r.services);
    let dns = &r.services[0];
    assert_eq!(dns.kind, StatusKind::Service);
    assert_eq!(dns.key, ObjectKey::new("shop", "dns"));
    assert_eq!(dns.desired.to_vec(), view(&["10.0.0.9", "203.0.113.4"]));
    assert_eq!(dns.observed.to_vec(), view(&["10.0.0.5"]));
    assert_eq!(dns.uid.as_deref(), Some("uid-dns"));
}

#[test]
fn entries_with_the_same_addresses_share_one_list() {
    let r = report_after_web_was_written();
    let web = find(&r, "web");
    assert!(Arc::ptr_eq(&web.desired, &web.observed), "{web:?}");
    // idle and other, one after the other, both want no address.
    let (idle, other) = (find(&r, "idle"), find(&r, "other"));
    assert!(Arc::ptr_eq(&idle.desired, &other.desired));
    assert_eq!(other.observed.to_vec(), vec![ip("10.9.9.9")]);
}
