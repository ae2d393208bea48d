//! TLS in the model: the TERMINATED_HTTPS listener, its SNI entries, HTTP → HTTPS redirects,
//! and the certificates loaded from Secrets.

mod support;

use portico_model::{
    CompareType, Diagnostic, L7Policy, Listener, ObjectRef, PolicyAction, Protocol, RuleType,
    Severity,
};
use portico_tls::generate::{Authority, Issued};
use portico_translate::{Certificates, Config, Objects, Translation, certificates, translate};
use serde_json::{Value, json};
use std::sync::Arc;
use support::{findings, ingress, load_values, rule, service};

fn tls_ingress(name: &str, created: &str, rules: Vec<Value>, tls: Value) -> Value {
    ingress(
        "shop",
        name,
        Some(created),
        json!({"rules": rules, "tls": tls}),
    )
}

fn web_rule(host: &str) -> Value {
    rule(host, &[("/", "Prefix", "web")])
}

fn secret(name: &str, issued: &Issued) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": name, "namespace": "shop"},
           "stringData": {"tls.crt": issued.chain_pem, "tls.key": issued.key_pem}})
}

fn objects(mut docs: Vec<Value>) -> Objects {
    docs.extend(service("shop", "web", "10.0.0.1"));
    load_values(docs)
}

fn run(objects: &Objects) -> Translation {
    translate(objects, &Config::default())
}

fn listener(t: &Translation, protocol: Protocol) -> &Listener {
    let lb = &t.model.load_balancers[0];
    let found = lb.listeners.iter().find(|l| l.protocol == protocol);
    found.expect("listener of that protocol")
}

fn sni(t: &Translation) -> Vec<(String, String)> {
    let tls = listener(t, Protocol::TerminatedHttps).tls.as_ref();
    let entries = tls.expect("TLS settings").sni.iter();
    entries
        .map(|e| (e.host.clone(), e.certificate.name.clone()))
        .collect()
}

fn host_of(p: &L7Policy) -> String {
    let host = p.rules.iter().find(|r| r.rule_type == RuleType::HostName);
    match host {
        Some(r) if r.compare_type == CompareType::WildcardLabel => format!("*.{}", r.value),
        Some(r) => r.value.clone(),
        None => String::new(),
    }
}

/// (host, path, redirects) of each HTTP policy, in evaluation order.
fn http_actions(t: &Translation) -> Vec<(String, String, bool)> {
    let http = listener(t, Protocol::Http);
    let path = |p: &L7Policy| {
        let r = p.rules.iter().find(|r| r.rule_type == RuleType::Path);
        r.map(|r| r.value.clone()).unwrap_or_default()
    };
    let redirects =
        |p: &L7Policy| matches!(p.action, PolicyAction::RedirectToHttps { status: 308 });
    http.policies
        .iter()
        .map(|p| (host_of(p), path(p), redirects(p)))
        .collect()
}

fn s(host: &str, secret: &str) -> (String, String) {
    (host.to_owned(), secret.to_owned())
}

#[test]
fn spec_tls_hosts_become_sni_entries_of_a_terminated_https_listener() {
    let t = run(&objects(vec![tls_ingress(
        "shop",
        "2026-01-01T00:00:00Z",
        vec![
            web_rule("a.shop.test"),
            web_rule("b.shop.test"),
            web_rule("*.wild.test"),
        ],
        json!([{"hosts": ["a.shop.test"], "secretName": "a-tls"},
               {"hosts": ["b.shop.test", "*.wild.test"], "secretName": "b-tls"}]),
    )]));
    assert_eq!(
        sni(&t),
        vec![
            s("*.wild.test", "b-tls"),
            s("a.shop.test", "a-tls"),
            s("b.shop.test", "b-tls")
        ]
    );
    let (http, https) = (
        listener(&t, Protocol::Http),
        listener(&t, Protocol::TerminatedHttps),
    );
    assert_eq!(
        (https.port, https.name.as_str()),
        (443, "TERMINATED_HTTPS:443")
    );
    assert_eq!(https.policies.len(), 3);
    assert_eq!(https.default_pool, http.default_pool);
    for p in &https.policies {
        assert!(
            matches!(p.action, PolicyAction::RedirectToPool { .. }),
            "{p:?}"
        );
    }
    let ids = |l: &Listener| l.policies.iter().map(|p| p.id).collect::<Vec<_>>();
    assert!(
        ids(http).iter().all(|id| !ids(https).contains(id)),
        "ids are per listener"
    );
    assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics);
}

#[test]
fn a_tls_entry_without_hosts_applies_to_the_rule_hosts() {
    let t = run(&objects(vec![tls_ingress(
        "shop",
        "2026-01-01T00:00:00Z",
        vec![
            web_rule("a.shop.test"),
            web_rule("b.shop.test"),
            rule("", &[("/", "Prefix", "web")]),
        ],
        json!([{"secretName": "shop-tls"}]),
    )]));
    assert_eq!(
        sni(&t),
        vec![s("a.shop.test", "shop-tls"), s("b.shop.test", "shop-tls")]
    );
}

#[test]
fn a_host_with_another_secret_keeps_the_older_ingress_certificate() {
    let t = run(&objects(vec![
        tls_ingress(
            "young",
            "2026-02-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([{"hosts": ["x.shop.test", "a.shop.test"], "secretName": "young-tls"}]),
        ),
        tls_ingress(
            "old",
            "2026-01-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([{"hosts": ["a.shop.test"], "secretName": "old-tls"}]),
        ),
        tls_ingress(
            "same",
            "2026-03-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([{"hosts": ["a.shop.test"], "secretName": "old-tls"}]),
        ),
    ]));
    assert_eq!(
        sni(&t),
        vec![s("a.shop.test", "old-tls"), s("x.shop.test", "young-tls")]
    );
    let warnings: Vec<_> = findings(&t.diagnostics)
        .into_iter()
        .filter(|f| f.1.starts_with("spec.tls"))
        .collect();
    assert_eq!(
        warnings,
        vec![(
            "young".to_owned(),
            "spec.tls[0].hosts[1]".to_owned(),
            Severity::Warning
        )]
    );
}

#[test]
fn http_requests_for_tls_hosts_redirect_and_others_stay() {
    let t = run(&objects(vec![tls_ingress(
        "shop",
        "2026-01-01T00:00:00Z",
        vec![
            web_rule("a.shop.test"),
            rule("a.wild.test", &[("/x", "Prefix", "web")]),
            web_rule("plain.test"),
            rule("", &[("/", "Prefix", "web")]),
        ],
        json!([{"hosts": ["a.shop.test", "*.wild.test"], "secretName": "tls"}]),
    )]));
    let row = |h: &str, p: &str, r| (h.to_owned(), p.to_owned(), r);
    assert_eq!(
        http_actions(&t),
        vec![
            row("a.shop.test", "/", true),
            // covered by the wildcard certificate
            row("a.wild.test", "/x", true),
            row("plain.test", "/", false),
            // the catch-all for the wildcard host, which had no root path
            row("*.wild.test", "/", true),
            row("", "/", false),
        ]
    );
    let http = listener(&t, Protocol::Http);
    let json = serde_json::to_value(http).unwrap();
    let positions: Vec<u64> = (json["policies"].as_array().unwrap().iter())
        .map(|p| p["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [0, 1, 2, 3, 4]);
}

#[test]
fn ssl_redirect_false_keeps_that_ingress_on_http() {
    let mut keep = tls_ingress(
        "keep",
        "2026-02-01T00:00:00Z",
        vec![rule("a.shop.test", &[("/api", "Prefix", "web")])],
        json!([]),
    );
    keep["metadata"]["annotations"] = json!({"portico.dev/ssl-redirect": "false"});
    let t = run(&objects(vec![
        keep,
        tls_ingress(
            "shop",
            "2026-01-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([{"hosts": ["a.shop.test"], "secretName": "tls"}]),
        ),
    ]));
    let row = |p: &str, r| ("a.shop.test".to_owned(), p.to_owned(), r);
    assert_eq!(http_actions(&t), vec![row("/api", false), row("/", true)]);
}

#[test]
fn an_opted_out_ingress_alone_adds_no_redirect() {
    let mut only = tls_ingress(
        "only",
        "2026-01-01T00:00:00Z",
        vec![web_rule("a.shop.test")],
        json!([{"hosts": ["a.shop.test", "b.shop.test"], "secretName": "tls"}]),
    );
    only["metadata"]["annotations"] = json!({"portico.dev/ssl-redirect": "False"});
    let t = run(&objects(vec![only]));
    assert_eq!(
        http_actions(&t),
        vec![("a.shop.test".to_owned(), "/".to_owned(), false)]
    );
    assert_eq!(sni(&t).len(), 2, "certificates are still served");
}

#[test]
fn an_invalid_ssl_redirect_value_is_reported_and_the_default_applies() {
    let mut bad = tls_ingress(
        "bad",
        "2026-01-01T00:00:00Z",
        vec![web_rule("a.shop.test")],
        json!([{"hosts": ["a.shop.test"], "secretName": "tls"}]),
    );
    bad["metadata"]["annotations"] = json!({"portico.dev/ssl-redirect": "yes please"});
    let t = run(&objects(vec![bad]));
    assert_eq!(
        http_actions(&t),
        vec![("a.shop.test".to_owned(), "/".to_owned(), true)]
    );
    let d = &t.diagnostics[0];
    assert_eq!(d.field, "metadata.annotations[portico.dev/ssl-redirect]");
    assert_eq!(d.severity, Severity::Warning);
    assert!(d.message.contains("\"yes please\""), "{d}");
}

#[test]
fn a_tls_host_served_by_the_default_backend_gets_a_catch_all_redirect() {
    let t = run(&objects(vec![ingress(
        "shop",
        "i",
        Some("2026-01-01T00:00:00Z"),
        json!({
        "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
        "tls": [{"hosts": ["a.shop.test"], "secretName": "tls"}]}),
    )]));
    assert_eq!(
        http_actions(&t),
        vec![("a.shop.test".to_owned(), "/".to_owned(), true)]
    );
    let https = listener(&t, Protocol::TerminatedHttps);
    assert!(https.policies.is_empty() && https.default_pool.is_some());
}

#[test]
fn the_default_certificate_is_a_reference_on_the_listener() {
    let config = Config {
        default_certificate: Some(portico_translate::ObjectKey::new("ops", "wildcard")),
        ..Config::default()
    };
    let plain = ingress(
        "shop",
        "i",
        None,
        json!({"rules": [web_rule("a.shop.test")]}),
    );
    let t = translate(&objects(vec![plain]), &config);
    let tls = listener(&t, Protocol::TerminatedHttps)
        .tls
        .clone()
        .unwrap_or_default();
    assert_eq!(
        tls.default_certificate,
        Some(ObjectRef::new("Secret", "ops", "wildcard"))
    );
}

// --- certificates: the key material ---

fn load_certs(objects: &Objects, previous: &Certificates) -> Certificates {
    certificates(objects, &run(objects), &Config::default(), previous)
}

fn warnings(certs: &Certificates) -> Vec<(String, String)> {
    let found = certs.diagnostics.iter();
    found
        .map(|d| (d.object.to_string(), d.field.clone()))
        .collect()
}

#[test]
fn usable_secrets_give_material_and_bad_ones_a_warning_on_their_ingress_field() {
    let ca = Authority::new("ca").unwrap();
    let (good, other) = (
        ca.issue(&["a.shop.test"]).unwrap(),
        ca.issue(&["b.shop.test"]).unwrap(),
    );
    let mismatched = Issued {
        key_pem: other.key_pem.clone(),
        ..good.clone()
    };
    let garbage = Issued {
        chain_pem: "not a certificate".into(),
        ..good.clone()
    };
    let objects = objects(vec![
        secret("good", &good),
        secret("mismatched", &mismatched),
        secret("garbage", &garbage),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nokey", "namespace": "shop"},
               "stringData": {"tls.crt": good.chain_pem}}),
        tls_ingress(
            "shop",
            "2026-01-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([
            {"hosts": ["a.shop.test"], "secretName": "good"},
            {"hosts": ["b.shop.test"], "secretName": "missing"},
            {"hosts": ["c.shop.test"], "secretName": "mismatched"},
            {"hosts": ["d.shop.test"], "secretName": "garbage"},
            {"hosts": ["e.shop.test"], "secretName": "nokey"}]),
        ),
    ]);
    let certs = load_certs(&objects, &Certificates::default());
    let names: Vec<_> = certs.material.keys().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let field = |i: usize| {
        (
            "Ingress shop/shop".to_owned(),
            format!("spec.tls[{i}].secretName"),
        )
    };
    assert_eq!(
        warnings(&certs),
        vec![field(1), field(2), field(3), field(4)]
    );
    let messages: Vec<&str> = certs
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages[0].contains("secret \"shop/missing\" not found"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("does not match the certificate"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("tls.crt holds no PEM certificate"),
        "{messages:?}"
    );
    assert!(
        messages[3].contains("no data key \"tls.key\""),
        "{messages:?}"
    );
    assert!(
        certs
            .diagnostics
            .iter()
            .all(|d| d.severity == Severity::Warning)
    );
    let all: String = certs
        .diagnostics
        .iter()
        .map(Diagnostic::to_string)
        .collect();
    let key_body = good.key_pem.lines().nth(1).unwrap_or_default();
    assert!(!all.contains(key_body), "a diagnostic quotes key material");
}

#[test]
fn base64_data_loads_like_string_data() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    let issued = Authority::new("ca")
        .unwrap()
        .issue(&["a.shop.test"])
        .unwrap();
    let data = [("tls.crt", &issued.chain_pem), ("tls.key", &issued.key_pem)]
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())));
    let typed = Secret {
        data: Some(data.into_iter().collect()),
        ..Secret::default()
    };
    let mut doc = serde_json::to_value(&typed).unwrap();
    doc["metadata"] = json!({"name": "tls", "namespace": "shop"});
    doc["apiVersion"] = json!("v1");
    doc["kind"] = json!("Secret");
    let objects = objects(vec![
        doc,
        tls_ingress(
            "shop",
            "2026-01-01T00:00:00Z",
            vec![web_rule("a.shop.test")],
            json!([{"secretName": "tls"}]),
        ),
    ]);
    let certs = load_certs(&objects, &Certificates::default());
    assert_eq!(certs.material.len(), 1, "{:?}", certs.diagnostics);
}

#[test]
fn an_unchanged_secret_keeps_its_material_and_a_changed_one_is_parsed_again() {
    let ca = Authority::new("ca").unwrap();
    let (first, second) = (
        ca.issue(&["a.shop.test"]).unwrap(),
        ca.issue(&["a.shop.test"]).unwrap(),
    );
    let ing = tls_ingress(
        "shop",
        "2026-01-01T00:00:00Z",
        vec![web_rule("a.shop.test")],
        json!([{"hosts": ["a.shop.test"], "secretName": "tls"}]),
    );
    let before = objects(vec![secret("tls", &first), ing.clone()]);
    let certs = load_certs(&before, &Certificates::default());
    let key = ObjectRef::new("Secret", "shop", "tls");
    let again = load_certs(&objects(vec![secret("tls", &first), ing.clone()]), &certs);
    assert!(Arc::ptr_eq(&certs.material[&key], &again.material[&key]));
    let rotated = load_certs(&objects(vec![secret("tls", &second), ing]), &again);
    assert_ne!(rotated.material[&key].leaf(), certs.material[&key].leaf());
}

#[test]
fn secrets_of_unserved_ingresses_are_not_loaded() {
    let issued = Authority::new("ca")
        .unwrap()
        .issue(&["a.shop.test"])
        .unwrap();
    let mut other = tls_ingress(
        "other",
        "2026-01-01T00:00:00Z",
        vec![web_rule("a.shop.test")],
        json!([{"secretName": "tls"}, {"secretName": "missing"}]),
    );
    other["spec"]["ingressClassName"] = json!("someone-else");
    let certs = load_certs(
        &objects(vec![secret("tls", &issued), other]),
        &Certificates::default(),
    );
    assert!(certs.material.is_empty() && certs.diagnostics.is_empty());
}

#[test]
fn a_missing_default_certificate_is_reported_on_its_secret() {
    let config = Config {
        default_certificate: Some(portico_translate::ObjectKey::new("ops", "default-tls")),
        ..Config::default()
    };
    let objects = objects(vec![]);
    let certs = certificates(
        &objects,
        &translate(&objects, &config),
        &config,
        &Certificates::default(),
    );
    assert_eq!(
        warnings(&certs),
        vec![("Secret ops/default-tls".to_owned(), String::new())]
    );
    assert!(certs.diagnostics[0].message.contains("self-signed"));
}

// --- CA bundles of proxy-ssl-secret ---

fn verifying_ingress(name: &str, host: &str, annotation: &str, ca: &str) -> Value {
    let mut value = ingress(
        "shop",
        name,
        Some("2026-01-01T00:00:00Z"),
        json!({"rules": [web_rule(host)]}),
    );
    value["metadata"]["annotations"] = json!({
        "nginx.ingress.kubernetes.io/backend-protocol": "HTTPS",
        "nginx.ingress.kubernetes.io/proxy-ssl-verify": "true",
        annotation: ca,
    });
    value
}

#[test]
fn ca_secrets_of_verifying_pools_give_bundles_and_unusable_ones_a_warning_on_the_annotation() {
    let ca = Authority::new("upstream ca").unwrap();
    let ca_secret = |name: &str, data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": "shop"}, "stringData": data})
    };
    let nginx = "nginx.ingress.kubernetes.io/proxy-ssl-secret";
    let portico = "portico.dev/proxy-ssl-secret";
    let objects = objects(vec![
        ca_secret("good", json!({"ca.crt": ca.cert_pem()})),
        ca_secret("nokey", json!({"tls.crt": ca.cert_pem()})),
        ca_secret(
            "garbage",
            json!({"ca.crt": "-----BEGIN CERTIFICATE-----\nc2VjcmV0\n-----END CERTIFICATE-----\n"}),
        ),
        verifying_ingress("a", "a.shop.test", nginx, "good"),
        verifying_ingress("b", "b.shop.test", portico, "missing"),
        verifying_ingress("c", "c.shop.test", nginx, "shop/nokey"),
        verifying_ingress("d", "d.shop.test", nginx, "garbage"),
    ]);
    let certs = load_certs(&objects, &Certificates::default());
    let bundles: Vec<_> = certs.ca.keys().map(ToString::to_string).collect();
    assert_eq!(bundles, ["Secret shop/good"]);
    assert_eq!(certs.ca.values().next().unwrap().len(), 1);
    let field = |ingress: &str, annotation: &str| {
        (
            format!("Ingress shop/{ingress}"),
            format!("metadata.annotations[{annotation}]"),
        )
    };
    assert_eq!(
        warnings(&certs),
        vec![field("b", portico), field("c", nginx), field("d", nginx)]
    );
    let messages: Vec<&str> = (certs.diagnostics.iter())
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages[0].contains("secret \"shop/missing\" not found"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("no data key \"ca.crt\""),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("ca.crt: certificate 1 cannot be parsed"),
        "{messages:?}"
    );
    assert!(messages.iter().all(|m| m.contains("(502)")), "{messages:?}");
    assert!(!messages.iter().any(|m| m.contains("c2VjcmV0")));

    // Unchanged Secrets keep their parsed bundle.
    let again = load_certs(&objects, &certs);
    assert!(Arc::ptr_eq(
        again.ca.values().next().unwrap(),
        certs.ca.values().next().unwrap()
    ));
}

#[test]
fn a_ca_secret_of_a_pool_that_does_not_verify_is_not_loaded() {
    let mut plain = verifying_ingress(
        "a",
        "a.shop.test",
        "nginx.ingress.kubernetes.io/proxy-ssl-secret",
        "missing",
    );
    plain["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-ssl-verify"] =
        json!("false");
    let certs = load_certs(&objects(vec![plain]), &Certificates::default());
    assert!(certs.ca.is_empty());
    assert!(certs.diagnostics.is_empty(), "{:?}", certs.diagnostics);
}

/// An Ingress of `hosts` sending `/api` to `api` and `/` to `web`, with `annotations`.
fn passthrough_ingress(name: &str, created: &str, hosts: &[&str], annotations: Value) -> Value {
    let paths = [("/api", "Prefix", "api"), ("/", "Prefix", "web")];
    let rules: Vec<Value> = hosts.iter().map(|h| rule(h, &paths)).collect();
    let mut doc = ingress("shop", name, Some(created), json!({"rules": rules}));
    doc["metadata"]["annotations"] = annotations;
    doc
}

/// (host, Service of the pool, source Ingress) of each passthrough entry.
fn passthrough(t: &Translation) -> Vec<(String, String, String)> {
    let lb = &t.model.load_balancers[0];
    let tls = listener(t, Protocol::TerminatedHttps).tls.as_ref();
    let entries = tls.expect("TLS settings").passthrough.iter();
    let service =
        |e: &portico_model::SniPassthrough| lb.pool(e.pool).expect("the pool").service.name.clone();
    entries
        .map(|e| (e.host.clone(), service(e), e.source.name.clone()))
        .collect()
}

fn young_ingress(annotations: Value) -> Value {
    let rules = json!([rule("b.test", &[("/v2", "Prefix", "api")])]);
    let mut doc = ingress(
        "shop",
        "young",
        Some("2026-02-01T00:00:00Z"),
        json!({"rules": rules}),
    );
    doc["metadata"]["annotations"] = annotations;
    doc
}

#[test]
fn ssl_passthrough_hosts_pass_to_the_pool_of_their_root_path_and_the_older_ingress_wins() {
    let on = |prefix: &str| json!({format!("{prefix}/ssl-passthrough"): "true"});
    let mut docs = vec![
        passthrough_ingress(
            "old",
            "2026-01-01T00:00:00Z",
            &["a.test", "b.test"],
            on("nginx.ingress.kubernetes.io"),
        ),
        // Paths of its own (the same paths would collide): its host's TLS is the older's.
        young_ingress(on("portico.dev")),
        passthrough_ingress("terminated", "2026-01-01T00:00:00Z", &["c.test"], json!({})),
    ];
    docs.extend(service("shop", "api", "10.0.0.2"));
    let t = run(&objects(docs));
    let entry = |h: &str, s: &str, i: &str| (h.to_owned(), s.to_owned(), i.to_owned());
    assert_eq!(
        passthrough(&t),
        [entry("a.test", "web", "old"), entry("b.test", "web", "old")]
    );
    let warned = t
        .diagnostics
        .iter()
        .find(|d| d.field.contains("ssl-passthrough"));
    let warned = warned.expect("the younger Ingress is warned");
    assert!(
        warned.message.contains("already passes through"),
        "{warned:?}"
    );
}

#[test]
fn ssl_passthrough_on_haproxy_is_served_without_a_warning() {
    let class = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": "h", "annotations": {"portico.dev/provider": "haproxy"}},
        "spec": {"controller": "portico.dev/ingress-controller"}});
    let mut doc = passthrough_ingress(
        "h",
        "2026-01-01T00:00:00Z",
        &["a.test"],
        json!({"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}),
    );
    doc["spec"]["ingressClassName"] = json!("h");
    let mut docs = vec![class, doc];
    docs.extend(service("shop", "api", "10.0.0.2"));
    let t = run(&objects(docs));
    let field = "metadata.annotations[nginx.ingress.kubernetes.io/ssl-passthrough]";
    let found = t.diagnostics.iter().find(|d| d.field == field);
    assert!(found.is_none(), "{found:?}");
    let lb = &t.model.load_balancers[0];
    let tls = lb
        .listeners
        .iter()
        .find_map(|l| l.tls.as_ref())
        .expect("an HTTPS listener");
    let hosts: Vec<_> = tls.passthrough.iter().map(|e| e.host.as_str()).collect();
    assert_eq!(hosts, ["a.test"]);
}
