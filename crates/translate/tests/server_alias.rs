//! `server-alias`: more names for an Ingress's hosts, routed by every route of the host.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use serde_json::{Value, json};
use support::{findings, ingress, routes, rule, service, translate_values};

fn with_alias(mut doc: Value, alias: &str) -> Value {
    doc["metadata"]["annotations"] = json!({"nginx.ingress.kubernetes.io/server-alias": alias});
    doc
}

#[test]
fn an_alias_routes_every_path_of_its_host_and_a_taken_name_is_ignored() {
    let shop = json!({"rules": [rule("shop.com", &[("/", "Prefix", "web")])]});
    let api = json!({"rules": [rule("shop.com", &[("/api", "Prefix", "api")])]});
    let other = json!({"rules": [rule("other.com", &[("/", "Prefix", "web")])]});
    let mut docs = vec![
        with_alias(
            ingress("default", "shop", Some("2026-01-01T00:00:00Z"), shop),
            "www.shop.com, other.com, *.shop.net",
        ),
        ingress("default", "api", None, api),
        ingress("default", "other", None, other),
    ];
    docs.extend(service("default", "web", "10.0.0.1"));
    docs.extend(service("default", "api", "10.0.0.2"));
    let t = translate_values(docs);
    let r = |h: &str, p: &str, s: &str| (h.to_owned(), p.to_owned(), format!("default_{s}_80"));
    assert_eq!(
        routes(&t),
        [
            r("other.com", "/", "web"),
            r("shop.com", "/api", "api"),
            r("shop.com", "/", "web"),
            r("www.shop.com", "/api", "api"),
            r("www.shop.com", "/", "web"),
            r("shop.net", "/api", "api"),
            r("shop.net", "/", "web"),
        ]
    );
    let f = findings(&t.diagnostics);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].1,
        "metadata.annotations[nginx.ingress.kubernetes.io/server-alias]"
    );
}
