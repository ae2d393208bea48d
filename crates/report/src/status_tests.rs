use super::*;
use crate::report::{StatusKind, StatusReport};

fn ip(a: &str) -> LoadBalancerAddress {
    LoadBalancerAddress {
        ip: Some(a.to_owned()),
        hostname: None,
    }
}

fn ingress(name: &str, rv: &str, desired: &[&str], observed: &[&str]) -> StatusReport {
    StatusReport {
        kind: StatusKind::Ingress,
        key: ObjectKey::new("shop", name),
        uid: None,
        resource_version: Some(rv.to_owned()),
        owned: !desired.is_empty(),
        desired: desired.iter().map(|a| ip(a)).collect(),
        observed: observed.iter().map(|a| ip(a)).collect(),
    }
}

fn report(ingresses: Vec<StatusReport>) -> Report {
    Report {
        ingresses,
        services: vec![],
        diagnostics: vec![],
        publish: vec![ip("10.0.0.1")],
        gateway_api: vec![],
    }
}

fn names(patches: &[StatusPatch]) -> Vec<&str> {
    patches.iter().map(|p| p.key.name.as_str()).collect()
}

#[test]
fn a_differing_status_is_written() {
    let mut ledger = StatusLedger::default();
    let patches = ledger.plan(&report(vec![ingress("web", "1", &["10.0.0.1"], &[])]));
    assert_eq!(
        patches,
        vec![StatusPatch {
            kind: StatusKind::Ingress,
            key: ObjectKey::new("shop", "web"),
            addresses: vec![ip("10.0.0.1")].into(),
            uid: None,
            seen: Some("1".to_owned()),
        }]
    );
}

#[test]
fn an_equal_status_is_not_written() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &["10.0.0.1"], &["10.0.0.1"])]);
    assert!(ledger.plan(&r).is_empty());
}

#[test]
fn a_lagging_watch_does_not_cause_a_second_write() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &["10.0.0.1"], &[])]);
    for p in ledger.plan(&r) {
        ledger.written(p);
    }
    assert!(ledger.plan(&r).is_empty());
}

#[test]
fn a_status_overwritten_after_our_write_is_written_again() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &["10.0.0.1"], &[])]);
    for p in ledger.plan(&r) {
        ledger.written(p);
    }
    let later = report(vec![ingress("web", "3", &["10.0.0.1"], &["10.7.7.7"])]);
    assert_eq!(names(&ledger.plan(&later)), ["web"]);
}

#[test]
fn a_failed_write_is_planned_again() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &["10.0.0.1"], &[])]);
    assert_eq!(names(&ledger.plan(&r)), ["web"]);
    assert_eq!(names(&ledger.plan(&r)), ["web"]);
}

#[test]
fn our_publish_addresses_are_cleared_when_no_longer_owned() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &[], &["10.0.0.1"])]);
    let patches = ledger.plan(&r);
    assert_eq!(names(&patches), ["web"]);
    assert!(patches[0].addresses.is_empty());
}

#[test]
fn another_controllers_addresses_are_never_cleared() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("other", "1", &[], &["10.9.9.9"])]);
    assert!(ledger.plan(&r).is_empty());
}

#[test]
fn addresses_this_process_wrote_are_cleared_even_if_not_the_publish_addresses() {
    let mut ledger = StatusLedger::default();
    ledger.written(StatusPatch {
        kind: StatusKind::Ingress,
        key: ObjectKey::new("shop", "web"),
        addresses: vec![ip("10.5.5.5")].into(),
        uid: None,
        seen: Some("1".to_owned()),
    });
    let r = report(vec![ingress("web", "2", &[], &["10.5.5.5"])]);
    assert_eq!(names(&ledger.plan(&r)), ["web"]);
}

#[test]
fn a_clear_is_not_repeated_while_the_watch_lags() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "4", &[], &["10.0.0.1"])]);
    for p in ledger.plan(&r) {
        ledger.written(p);
    }
    assert!(ledger.plan(&r).is_empty());
}

#[test]
fn gone_ingresses_are_forgotten() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![ingress("web", "1", &["10.0.0.1"], &[])]);
    for p in ledger.plan(&r) {
        ledger.written(p);
    }
    ledger.plan(&report(vec![]));
    // Recreated with the same resourceVersion string: written again, not taken for a lag.
    assert_eq!(names(&ledger.plan(&r)), ["web"]);
}

#[test]
fn a_service_and_an_ingress_of_one_name_are_written_apart() {
    let mut ledger = StatusLedger::default();
    let service = StatusReport {
        kind: StatusKind::Service,
        ..ingress("web", "1", &["10.0.0.9"], &[])
    };
    let mut r = report(vec![ingress("web", "1", &["10.0.0.1"], &[])]);
    r.services.push(service);
    let patches = ledger.plan(&r);
    let kinds: Vec<_> = patches
        .iter()
        .map(|p| (p.kind, p.addresses[0].clone()))
        .collect();
    assert_eq!(
        kinds,
        [
            (StatusKind::Ingress, ip("10.0.0.1")),
            (StatusKind::Service, ip("10.0.0.9"))
        ]
    );
    for p in patches {
        ledger.written(p);
    }
    // The Service's write is remembered under its own kind: the lagging watch is not written
    // again, and a Service's clear of a status it wrote is planned.
    assert!(ledger.plan(&r).is_empty());
    r.services[0].desired = Arc::from([]);
    r.services[0].observed = vec![ip("10.0.0.9")].into();
    r.services[0].resource_version = Some("2".to_owned());
    let patches = ledger.plan(&r);
    assert_eq!(patches.len(), 1);
    assert_eq!(
        (patches[0].kind, patches[0].addresses.len()),
        (StatusKind::Service, 0)
    );
}

#[test]
fn patch_body_sets_addresses_or_removes_the_list() {
    let host = LoadBalancerAddress {
        ip: None,
        hostname: Some("lb.example".to_owned()),
    };
    assert_eq!(
        patch_body(None, &[ip("10.0.0.1"), host]),
        json!({"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb.example"}]}}})
    );
    assert_eq!(
        patch_body(None, &[]),
        json!({"status": {"loadBalancer": {"ingress": null}}})
    );
    assert_eq!(
        patch_body(Some("u-1"), &[]),
        json!({"metadata": {"uid": "u-1"}, "status": {"loadBalancer": {"ingress": null}}})
    );
}

#[test]
fn entries_written_with_the_same_addresses_share_one_list() {
    let mut ledger = StatusLedger::default();
    let r = report(vec![
        ingress("a", "1", &["10.0.0.1"], &[]),
        ingress("b", "1", &["10.0.0.1"], &[]),
        ingress("c", "1", &["10.0.0.2"], &[]),
    ]);
    for p in ledger.plan(&r) {
        ledger.written(p);
    }
    let list = |name| {
        ledger.ingresses[&ObjectKey::new("shop", name)]
            .addresses
            .clone()
    };
    assert!(Arc::ptr_eq(&list("a"), &list("b")));
    assert_eq!(*list("c"), [ip("10.0.0.2")]);
    // What was written is still known: the watch lags, nothing is written again.
    assert_eq!(names(&ledger.plan(&r)), Vec::<&str>::new());
}
