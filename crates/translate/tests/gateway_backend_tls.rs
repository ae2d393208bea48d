//! BackendTLSPolicy → the upstream TLS of the pools of the Service ports it governs, and the
//! policies' verdicts per Gateway (conflicts, invalid and unresolved CA references); the CA
//! bundles of the ConfigMaps policies name.
#![allow(clippy::unwrap_used)]

mod support;

use portico_model::{ObjectRef, Pool, PoolProtocol, UpstreamTls};
use portico_tls::generate::Authority;
use portico_translate::gateway::Condition;
use portico_translate::{
    Certificates, Config, Memo, ObjectKey, Previous, Translation, certificates,
    translate_incremental,
};

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: https, port: 443}, {name: h2, port: 8443, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: shop}
data: {ca.crt: "x"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{path: {value: /a}}]
    backendRefs: [{name: web, port: 443}]
  - matches: [{path: {value: /b}}]
    backendRefs: [{name: web, port: 8443}]
  - matches: [{path: {value: /c}}]
    backendRefs: [{name: plain, port: 80}]
"#;

fn policy(name: &str, created: &str, target: &str, validation: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {name}, namespace: shop, creationTimestamp: '{created}'}}\nspec:\n  targetRefs: [{target}]\n  validation: {validation}\n"
    )
}

const WEB: &str = "{group: '', kind: Service, name: web}";
const GOOD: &str =
    "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: web.example}";
/// Another hostname with the same CA.
const OTHER: &str =
    "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: other.example}";
const OLD: &str = "2026-01-01T00:00:00Z";
const NEW: &str = "2026-01-02T00:00:00Z";

fn translate_docs(docs: &[String]) -> Translation {
    support::translate_yaml(&format!("{BASE}{}", docs.concat()))
}

fn pool<'a>(t: &'a Translation, service: &str, port: &str) -> &'a Pool {
    let pools = t.model.load_balancers.iter().flat_map(|lb| &lb.pools);
    let mut found = pools.filter(|p| p.service.name == service && p.service_port == port);
    found.next().expect("the pool")
}

/// The upstream TLS of the pool of `service`'s `port`.
fn upstream_tls(t: &Translation, service: &str, port: &str) -> portico_model::UpstreamTls {
    let tls = pool(t, service, port).settings.upstream_tls.clone();
    tls.expect("the pool speaks TLS")
}

/// `type=status/reason` of the policy's conditions for Gateway shop/edge.
fn verdict(t: &Translation, name: &str) -> Vec<String> {
    let entries = &t.gateways.backend_tls_policies[&ObjectKey::new("shop", name)];
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].0, ObjectKey::new("shop", "edge"));
    conditions(&entries[0].1)
}

fn conditions(c: &[Condition]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

const HOLDS: [&str; 2] = ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"];

#[test]
fn a_governed_service_port_speaks_verified_tls_with_the_policys_ca_and_hostname() {
    let t = translate_docs(&[policy("web", OLD, WEB, GOOD)]);
    let https = pool(&t, "web", "443");
    assert_eq!(https.protocol, PoolProtocol::Https);
    let expected = UpstreamTls {
        verify: true,
        ca: Some(ObjectRef::new("ConfigMap", "shop", "ca")),
        server_name: Some("web.example".to_owned()),
        sni: true,
        subject_alt_names: vec![],
    };
    assert_eq!(https.settings.upstream_tls.as_ref(), Some(&expected));
    // A port whose appProtocol says HTTP/2 speaks it over TLS.
    assert_eq!(pool(&t, "web", "8443").protocol, PoolProtocol::H2);
    let plain = pool(&t, "plain", "80");
    assert_eq!(
        (plain.protocol, &plain.settings.upstream_tls),
        (PoolProtocol::Http, &None)
    );
    assert_eq!(verdict(&t, "web"), HOLDS);
}

#[test]
fn a_policy_naming_the_port_wins_over_an_older_one_for_the_whole_service() {
    let section = "{group: '', kind: Service, name: web, sectionName: https}";
    let t = translate_docs(&[
        policy("whole", OLD, WEB, OTHER),
        policy("port", NEW, section, GOOD),
    ]);
    let tls = upstream_tls(&t, "web", "443");
    assert_eq!(tls.server_name.as_deref(), Some("web.example"));
    // The whole-Service policy still governs the other port.
    let h2 = upstream_tls(&t, "web", "8443");
    assert_eq!(h2.server_name.as_deref(), Some("other.example"));
    assert_eq!(verdict(&t, "port"), HOLDS);
    // In effect on a port, so accepted; conflicted only where it governs no port at all.
    assert_eq!(verdict(&t, "whole"), HOLDS);
    let by_name = "{group: '', kind: Service, name: web, sectionName: h2}";
    let t = translate_docs(&[
        policy("whole", OLD, WEB, OTHER),
        policy("port", NEW, section, GOOD),
        policy("h2", NEW, by_name, GOOD),
    ]);
    assert_eq!(
        verdict(&t, "whole"),
        [
            "Accepted=false/Conflicted",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
}

#[test]
fn of_two_equal_policies_the_older_governs_and_the_newer_is_conflicted() {
    let t = translate_docs(&[
        policy("b-old", OLD, WEB, GOOD),
        policy("a-new", NEW, WEB, OTHER),
    ]);
    let tls = upstream_tls(&t, "web", "443");
    assert_eq!(tls.server_name.as_deref(), Some("web.example"));
    assert_eq!(verdict(&t, "b-old"), HOLDS);
    assert_eq!(verdict(&t, "a-new")[0], "Accepted=false/Conflicted");
}

#[test]
fn bad_ca_references_are_refused_in_status_and_still_verify() {
    let missing =
        "{caCertificateRefs: [{group: '', kind: ConfigMap, name: nope}], hostname: web.example}";
    let t = translate_docs(&[policy("web", OLD, WEB, missing)]);
    assert_eq!(
        verdict(&t, "web"),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/InvalidCACertificateRef"
        ]
    );
    // Fails closed: verification stays on with a CA that cannot load (502), never plaintext.
    let tls = upstream_tls(&t, "web", "443");
    assert!(tls.verify);

    let kind = "{caCertificateRefs: [{group: example.com, kind: Bundle, name: ca}], hostname: web.example}";
    let t = translate_docs(&[policy("web", OLD, WEB, kind)]);
    assert_eq!(
        verdict(&t, "web"),
        ["Accepted=true/Accepted", "ResolvedRefs=false/InvalidKind"]
    );

    let system = "{wellKnownCACertificates: System, hostname: web.example}";
    let t = translate_docs(&[policy("web", OLD, WEB, system)]);
    assert_eq!(verdict(&t, "web")[0], "Accepted=false/Invalid");
}

#[test]
fn a_policy_for_a_service_no_route_of_ours_uses_gets_no_entry() {
    let unused = "{group: '', kind: Service, name: elsewhere}";
    let t = translate_docs(&[policy("web", OLD, unused, GOOD)]);
    assert!(t.gateways.backend_tls_policies.is_empty());
}

#[test]
fn the_ca_bundle_of_a_named_config_map_is_loaded_and_a_bad_one_is_a_warning() {
    let authority = Authority::new("policy test CA").unwrap();
    let pem: String = (authority.cert_pem().lines())
        .map(|l| format!("    {l}\n"))
        .collect();
    let good = format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: good-ca, namespace: shop}}\ndata:\n  ca.crt: |\n{pem}"
    );
    let by_good =
        "{caCertificateRefs: [{group: '', kind: ConfigMap, name: good-ca}], hostname: web.example}";
    let plain = "{group: '', kind: Service, name: plain}";
    let yaml = format!(
        "{BASE}{good}{}{}",
        policy("web", OLD, WEB, by_good),
        policy("plain", OLD, plain, GOOD)
    );
    let objects = support::load(&yaml);
    let config = Config::default();
    let t = portico_translate::translate(&objects, &config);
    let certs = certificates(&objects, &t, &config, &Certificates::default());
    let loaded: Vec<&ObjectRef> = certs.ca.keys().collect();
    assert_eq!(loaded, [&ObjectRef::new("ConfigMap", "shop", "good-ca")]);
    let warned: Vec<String> = (certs.diagnostics.iter())
        .map(|d| format!("{} {}", d.object, d.field))
        .collect();
    assert_eq!(
        warned,
        ["BackendTLSPolicy shop/plain spec.validation.caCertificateRefs[0]"]
    );
}

#[test]
fn a_ca_secret_added_later_resolves_the_policy_in_an_incremental_translation() {
    let by_secret =
        "{caCertificateRefs: [{group: '', kind: Secret, name: ca-secret}], hostname: web.example}";
    let before = support::load(&format!("{BASE}{}", policy("web", OLD, WEB, by_secret)));
    let secret = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: ca-secret, namespace: shop}\nstringData: {ca.crt: x}\n";
    let after = support::load(&format!(
        "{BASE}{}{secret}",
        policy("web", OLD, WEB, by_secret)
    ));
    let config = Config::default();
    let mut memo = Memo::default();
    let first = translate_incremental(&before, &config, None, &mut memo);
    assert_eq!(
        verdict(&first, "web")[1],
        "ResolvedRefs=false/InvalidCACertificateRef"
    );
    let previous = Previous {
        objects: &before,
        model: &first.model,
    };
    let second = translate_incremental(&after, &config, Some(previous), &mut memo);
    assert_eq!(verdict(&second, "web"), HOLDS);
}

#[test]
fn subject_alt_names_are_required_instead_of_the_hostname_and_invalid_ones_fail_closed() {
    use portico_model::SubjectAltName;
    let sans = "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: web.example, subjectAltNames: [{type: Hostname, hostname: web.internal}, {type: URI, uri: 'spiffe://cluster.local/ns/shop/sa/web'}]}";
    let t = translate_docs(&[policy("web", OLD, WEB, sans)]);
    let tls = upstream_tls(&t, "web", "443");
    assert_eq!(tls.server_name.as_deref(), Some("web.example"), "still SNI");
    assert_eq!(
        tls.subject_alt_names,
        [
            SubjectAltName::Hostname("web.internal".into()),
            SubjectAltName::Uri("spiffe://cluster.local/ns/shop/sa/web".into()),
        ]
    );
    assert_eq!(verdict(&t, "web"), HOLDS);
    // A URI entry without its uri: not accepted, and the port fails closed (a name no
    // certificate carries).
    let bad = "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: web.example, subjectAltNames: [{type: URI, hostname: web.internal}]}";
    let t = translate_docs(&[policy("web", OLD, WEB, bad)]);
    assert_eq!(
        verdict(&t, "web"),
        ["Accepted=false/Invalid", "ResolvedRefs=true/ResolvedRefs"]
    );
    let entries = &t.gateways.backend_tls_policies[&ObjectKey::new("shop", "web")];
    let message = &entries[0].1[0].message;
    assert!(
        message.starts_with("spec.validation.subjectAltNames[0].uri"),
        "{message}"
    );
    let tls = upstream_tls(&t, "web", "443");
    assert_eq!(
        tls.subject_alt_names,
        [SubjectAltName::Hostname(String::new())]
    );
}
