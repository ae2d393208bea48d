use super::*;
use portico_gateway::{Gateway, GatewayClass, HttpRoute};
use serde_json::json;
use std::sync::Arc;

const OURS: &str = "portico.dev/gateway-controller";

fn condition(type_: &str, status: &str, reason: &str, time: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "",
        "lastTransitionTime": time, "observedGeneration": 1})
}

fn class(name: &str, controller: &str, conditions: Value) -> GatewayClass {
    serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1",
        "metadata": {"name": name, "uid": format!("u-{name}"), "resourceVersion": "5"},
        "spec": {"controllerName": controller}, "status": {"conditions": conditions}}))
    .unwrap()
}

fn gateway(name: &str, class: &str, status: Value) -> Gateway {
    serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1beta1",
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": "7"},
        "spec": {"gatewayClassName": class, "listeners": []}, "status": status}))
    .unwrap()
}

fn route(parents: Value) -> HttpRoute {
    serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1",
        "metadata": {"namespace": "ns", "name": "r", "resourceVersion": "9"},
        "spec": {"parentRefs": [{"name": "a"}, {"name": "b"}]},
        "status": {"parents": parents}}))
    .unwrap()
}

fn parent(gateway: &str, controller: &str, conditions: Value) -> Value {
    json!({"parentRef": {"name": gateway}, "controllerName": controller, "conditions": conditions})
}

fn objects(classes: &[GatewayClass], gateways: &[Gateway], routes: &[HttpRoute]) -> Objects {
    let mut objects = Objects::default();
    for c in classes {
        let name = c.metadata.name.clone().unwrap();
        Arc::make_mut(&mut objects.gateway_classes).insert(name, Arc::new(c.clone()));
    }
    for g in gateways {
        let key = ObjectKey::of(&g.metadata);
        Arc::make_mut(&mut objects.gateways).insert(key, Arc::new(g.clone()));
    }
    for r in routes {
        let key = ObjectKey::of(&r.metadata);
        Arc::make_mut(&mut objects.http_routes).insert(key, Arc::new(r.clone()));
    }
    objects
}

fn accepted(time: &str) -> Value {
    json!([condition("Accepted", "True", "Accepted", time)])
}

#[test]
fn only_our_classes_and_gateways_are_written() {
    let seen = objects(
        &[
            class("ours", OURS, json!([])),
            class("theirs", "x.io/gw", json!([])),
        ],
        &[
            gateway("mine", "ours", json!({})),
            gateway("other", "theirs", json!({})),
        ],
        &[],
    );
    // Even where the desired objects say otherwise (a view older than the source's objects),
    // another controller's objects are left alone.
    let desired = Statuses {
        classes: vec![
            class("ours", OURS, accepted("2026-01-01T00:00:00Z")),
            class("theirs", "x.io/gw", accepted("2026-01-01T00:00:00Z")),
        ],
        gateways: vec![
            gateway(
                "mine",
                "ours",
                json!({"conditions": accepted("2026-01-01T00:00:00Z")}),
            ),
            gateway(
                "other",
                "theirs",
                json!({"conditions": accepted("2026-01-01T00:00:00Z")}),
            ),
        ],
        routes: vec![],
        grpc_routes: vec![],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    let written: Vec<_> = reports
        .iter()
        .map(|r| (r.kind, r.key.to_string()))
        .collect();
    assert_eq!(
        written,
        [
            (GatewayKind::GatewayClass, "/ours".to_owned()),
            (GatewayKind::Gateway, "ns/mine".to_owned())
        ]
    );
    let gateway = &reports[1];
    assert_eq!(
        gateway.api_version, "gateway.networking.k8s.io/v1beta1",
        "the version read"
    );
    let body = body_of(gateway);
    assert_eq!(body["metadata"], json!({"resourceVersion": "7"}));
    assert_eq!(body["status"]["conditions"][0]["reason"], "Accepted");
    assert_eq!(body_of(&reports[0])["metadata"]["uid"], "u-ours");
}

#[test]
fn a_status_that_says_the_same_is_not_written_and_keeps_its_times() {
    let old = "2026-01-01T00:00:00Z";
    let now = "2026-02-02T00:00:00Z";
    let seen = objects(&[class("ours", OURS, accepted(old))], &[], &[]);
    let same = Statuses {
        classes: vec![class("ours", OURS, accepted(now))],
        ..Statuses::default()
    };
    assert_eq!(gateway_reports(&seen, &same, OURS), []);
    // A changed condition status is written with the new time.
    let refused = json!([condition("Accepted", "False", "InvalidParameters", now)]);
    let changed = Statuses {
        classes: vec![class("ours", OURS, refused)],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &changed, OURS);
    assert_eq!(
        reports[0].status["conditions"][0]["lastTransitionTime"],
        now
    );
}

#[test]
fn a_field_no_longer_wanted_is_removed() {
    let addresses = json!({"addresses": [{"type": "IPAddress", "value": "10.0.0.1"}]});
    let seen = objects(
        &[class("ours", OURS, json!([]))],
        &[gateway("g", "ours", addresses)],
        &[],
    );
    let desired = Statuses {
        gateways: vec![gateway("g", "ours", json!({}))],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    assert_eq!(reports[0].status, json!({"addresses": null}));
}

#[test]
fn a_routes_parent_entries_of_other_controllers_are_kept() {
    let t = "2026-01-01T00:00:00Z";
    let theirs = parent("b", "x.io/gw", accepted(t));
    let stale = parent(
        "a",
        OURS,
        json!([condition("Accepted", "False", "Pending", t)]),
    );
    let seen = objects(&[], &[], &[route(json!([theirs, stale]))]);
    // The desired route shows an older copy of their entry: the observed one is written back.
    let mine = parent("a", OURS, accepted(t));
    let desired = Statuses {
        routes: vec![route(json!([parent("b", "x.io/gw", json!([])), mine]))],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, json!({"parents": [theirs, mine]}));
    assert_eq!(body_of(&reports[0])["metadata"]["resourceVersion"], "9");
    // Once ours says the same, nothing is written, whatever theirs says.
    let seen = objects(
        &[],
        &[],
        &[route(json!([parent("b", "x.io/gw", json!([])), mine]))],
    );
    assert_eq!(gateway_reports(&seen, &desired, OURS), []);
}

#[test]
fn a_write_is_not_repeated_while_the_source_lags_behind() {
    let seen = objects(&[class("ours", OURS, json!([]))], &[], &[]);
    let desired = Statuses {
        classes: vec![class("ours", OURS, accepted("2026-01-01T00:00:00Z"))],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    let mut ledger = GatewayLedger::default();
    assert_eq!(ledger.plan(&reports).len(), 1);
    ledger.written(&reports[0]);
    assert!(
        ledger.plan(&reports).is_empty(),
        "the source still shows the version written over"
    );
    let mut newer = reports.clone();
    newer[0].resource_version = Some("6".into());
    assert_eq!(
        ledger.plan(&newer).len(),
        1,
        "someone wrote since: written again"
    );
}

fn listener_set(name: &str, gateway: &str, status: Value) -> portico_gateway::ListenerSet {
    serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1",
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": "3"},
        "spec": {"parentRef": {"name": gateway}, "listeners": []}, "status": status}))
    .unwrap()
}

#[test]
fn listener_sets_of_our_gateways_are_written_once_and_others_never() {
    let mut seen = objects(
        &[
            class("ours", OURS, json!([])),
            class("theirs", "x.io/gw", json!([])),
        ],
        &[
            gateway("mine", "ours", json!({})),
            gateway("other", "theirs", json!({})),
        ],
        &[],
    );
    let said = json!({"conditions": accepted("2026-01-01T00:00:00Z")});
    for set in [
        listener_set("on-mine", "mine", json!({})),
        listener_set("on-other", "other", json!({})),
        listener_set("already", "mine", said.clone()),
    ] {
        let key = ObjectKey::of(&set.metadata);
        Arc::make_mut(&mut seen.listener_sets).insert(key, Arc::new(set));
    }
    let desired = Statuses {
        listener_sets: vec![
            listener_set("on-mine", "mine", said.clone()),
            listener_set("on-other", "other", said.clone()),
            listener_set("already", "mine", said),
        ],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    let written: Vec<_> = (reports.iter())
        .map(|r| (r.kind, r.key.to_string()))
        .collect();
    assert_eq!(
        written,
        [(GatewayKind::ListenerSet, "ns/on-mine".to_owned())]
    );
    assert_eq!(GatewayKind::ListenerSet.names().1, "listenersets");
    let body = body_of(&reports[0]);
    assert_eq!(body["status"]["conditions"][0]["reason"], "Accepted");
}

/// The patch body as JSON, as it is sent.
fn body_of(report: &GatewayStatusReport) -> serde_json::Value {
    serde_json::to_value(gateway_patch_body(report)).unwrap()
}

#[test]
fn a_routes_parent_entry_that_says_the_same_is_not_written_and_keeps_its_times() {
    let old = "2026-01-01T00:00:00Z";
    let now = "2026-02-02T00:00:00Z";
    let two = |accepted: &str, resolved: &str, time: &str| {
        json!([
            condition("Accepted", accepted, "Accepted", time),
            condition("ResolvedRefs", resolved, "ResolvedRefs", time)
        ])
    };
    let seen = objects(
        &[],
        &[],
        &[route(json!([parent("a", OURS, two("True", "True", old))]))],
    );
    // Computed again with a new time and the same statuses: nothing to write.
    let same = Statuses {
        routes: vec![route(json!([parent("a", OURS, two("True", "True", now))]))],
        ..Statuses::default()
    };
    assert_eq!(gateway_reports(&seen, &same, OURS), []);
    // Another reason, message or generation with the same status is written, at the old time.
    let mut reason = two("True", "True", now);
    reason[1]["reason"] = json!("Other");
    let desired = Statuses {
        routes: vec![route(json!([parent("a", OURS, reason)]))],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    let written = &reports[0].status["parents"][0]["conditions"];
    assert_eq!(written[1]["reason"], "Other");
    assert_eq!(written[1]["lastTransitionTime"], old);
    // One condition's status changed: written, that one at its new time, the other at its old.
    let desired = Statuses {
        routes: vec![route(json!([parent("a", OURS, two("True", "False", now))]))],
        ..Statuses::default()
    };
    let reports = gateway_reports(&seen, &desired, OURS);
    assert_eq!(reports.len(), 1);
    let written = &reports[0].status["parents"][0]["conditions"];
    assert_eq!(written[0]["lastTransitionTime"], old);
    assert_eq!(written[1]["lastTransitionTime"], now);
    // A parent entry more or less is written.
    let more = Statuses {
        routes: vec![route(json!([
            parent("a", OURS, two("True", "True", now)),
            parent("b", OURS, two("True", "True", now))
        ]))],
        ..Statuses::default()
    };
    assert_eq!(gateway_reports(&seen, &more, OURS).len(), 1);
}
