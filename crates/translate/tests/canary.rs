//! Canary Ingresses (`canary: "true"`): a second Ingress for the same host and path becomes
//! the main route's alternative backend, as header, cookie and weight decisions in
//! ingress-nginx's order.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use portico_model::{CompareType, L7Policy, LoadBalancer, PolicyAction, RuleType};
use portico_translate::Translation;
use serde_json::{Value, json};
use support::{findings, ingress, rule, service, translate_values};

const NGINX: &str = "nginx.ingress.kubernetes.io/";

fn annotated(mut doc: Value, annotations: &[(&str, &str)]) -> Value {
    let map: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (format!("{NGINX}{k}"), json!(v)))
        .collect();
    doc["metadata"]["annotations"] = Value::Object(map);
    doc
}

/// `main` (older) and `canary` Ingresses for `h.com` `/` (services main and canary), with the
/// canary's annotations.
fn translate(canary: &[(&str, &str)]) -> Translation {
    let spec = |svc| json!({"rules": [rule("h.com", &[("/", "Prefix", svc)])]});
    let mut docs = vec![
        ingress(
            "default",
            "main",
            Some("2026-01-01T00:00:00Z"),
            spec("main"),
        ),
        annotated(
            ingress(
                "default",
                "canary",
                Some("2025-01-01T00:00:00Z"),
                spec("canary"),
            ),
            canary,
        ),
    ];
    docs.extend(service("default", "main", "10.0.0.1"));
    docs.extend(service("default", "canary", "10.0.0.2"));
    translate_values(docs)
}

/// Each HTTP policy as "condition -> action" in evaluation order.
fn decisions(t: &Translation) -> Vec<String> {
    let lb = &t.model.load_balancers[0];
    lb.listeners[0]
        .policies
        .iter()
        .map(|p| format!("{} -> {}", condition(p), action(lb, p)))
        .collect()
}

fn condition(p: &L7Policy) -> String {
    let extra: Vec<String> = (p.rules.iter())
        .filter(|r| matches!(r.rule_type, RuleType::Header | RuleType::Cookie))
        .map(|r| {
            let kind = if r.rule_type == RuleType::Cookie {
                "cookie"
            } else {
                "header"
            };
            let op = if r.compare_type == CompareType::Regex {
                "~"
            } else {
                "="
            };
            format!("{kind} {}{op}{}", r.key.as_deref().unwrap_or(""), r.value)
        })
        .collect();
    if extra.is_empty() {
        "*".to_owned()
    } else {
        extra.join(",")
    }
}

fn action(lb: &LoadBalancer, p: &L7Policy) -> String {
    let name = |id| {
        lb.pool(id)
            .expect("pool")
            .name
            .split('_')
            .nth(1)
            .unwrap()
            .to_owned()
    };
    match &p.action {
        PolicyAction::RedirectToPool { pool } => name(*pool),
        PolicyAction::RedirectToPools { pools } => (pools.iter())
            .map(|w| format!("{}:{}", name(w.pool.unwrap()), w.weight))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("{other:?}"),
    }
}

#[test]
fn header_then_cookie_then_weight_in_ingress_nginx_order() {
    let t = translate(&[
        ("canary", "true"),
        ("canary-by-header", "X-Canary"),
        ("canary-by-cookie", "canary"),
        ("canary-weight", "30"),
    ]);
    assert_eq!(
        decisions(&t),
        [
            "header x-canary=always -> canary",
            "header x-canary=never -> main",
            "cookie canary=always -> canary",
            "cookie canary=never -> main",
            "* -> main:70 canary:30",
        ]
    );
    // The model's order (what the store sorts merged listeners by) is the same.
    let policies = &t.model.load_balancers[0].listeners[0].policies;
    let mut sorted = policies.clone();
    portico_model::order::sort(&mut sorted);
    assert_eq!(sorted, *policies);
    // The canary is older, yet the main Ingress routes; nothing is reported.
    assert!(t.diagnostics.is_empty(), "{:?}", findings(&t.diagnostics));
}

#[test]
fn a_header_value_or_pattern_replaces_always_and_never() {
    let t = translate(&[
        ("canary", "true"),
        ("canary-by-header", "x-version"),
        ("canary-by-header-value", "v2"),
        ("canary-by-header-pattern", "^v[0-9]$"),
    ]);
    assert_eq!(
        decisions(&t),
        ["header x-version=v2 -> canary", "* -> main"]
    );
    let t = translate(&[
        ("canary", "true"),
        ("canary-by-header", "x-version"),
        ("canary-by-header-pattern", "^v[0-9]$"),
    ]);
    assert_eq!(
        decisions(&t),
        [
            "header x-version~(?s-i:.*?(?:^v[0-9]$)) -> canary",
            "* -> main"
        ]
    );
}

#[test]
fn the_weight_total_is_at_least_100_and_caps_the_weight() {
    let t = translate(&[
        ("canary", "true"),
        ("canary-weight", "5"),
        ("canary-weight-total", "1000"),
    ]);
    assert_eq!(decisions(&t), ["* -> main:995 canary:5"]);
    let t = translate(&[
        ("canary", "true"),
        ("canary-weight", "150"),
        ("canary-weight-total", "10"),
    ]);
    assert_eq!(decisions(&t), ["* -> main:0 canary:100"]);
}

#[test]
fn without_canary_true_the_second_ingress_is_an_ordinary_conflict() {
    let t = translate(&[("canary", "false"), ("canary-weight", "50")]);
    // The older Ingress wins the path; the other is reported.
    assert_eq!(decisions(&t), ["* -> canary"]);
    assert_eq!(findings(&t.diagnostics)[0].0, "main");
}

#[test]
fn a_canary_without_a_main_ingress_is_not_served_and_bad_values_are_reported() {
    let spec = json!({"rules": [rule("alone.com", &[("/", "Prefix", "canary")])]});
    let mut docs = vec![annotated(
        ingress("default", "alone", None, spec),
        &[
            ("canary", "true"),
            ("canary-weight", "lots"),
            ("canary-by-header-pattern", "("),
        ],
    )];
    docs.extend(service("default", "canary", "10.0.0.2"));
    let t = translate_values(docs);
    assert!(t.model.load_balancers[0].listeners[0].policies.is_empty());
    let text = format!("{:?}", t.diagnostics);
    for want in [
        "annotations[nginx.ingress.kubernetes.io/canary-weight]",
        "annotations[nginx.ingress.kubernetes.io/canary-by-header-pattern]",
        "no Ingress without the canary annotation routes host \\\"alone.com\\\"",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
}

#[test]
fn an_unservable_auth_url_refuses_the_main_route_and_its_canary() {
    let spec = json!({"rules": [rule("h.com", &[("/", "Prefix", "main")])]});
    let canary = json!({"rules": [rule("h.com", &[("/", "Prefix", "canary")])]});
    let mut docs = vec![
        annotated(
            ingress("default", "main", Some("2026-01-01T00:00:00Z"), spec),
            &[("auth-url", "https://auth.example/")],
        ),
        annotated(
            ingress("default", "canary", None, canary),
            &[("canary", "true"), ("canary-by-header", "x-canary")],
        ),
    ];
    docs.extend(service("default", "main", "10.0.0.1"));
    docs.extend(service("default", "canary", "10.0.0.2"));
    let t = translate_values(docs);
    assert_eq!(decisions(&t), ["* -> Reject { status: 503 }"]);
}
