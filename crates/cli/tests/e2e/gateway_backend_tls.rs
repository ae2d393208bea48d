//! BackendTLSPolicy on the real binary in file mode, with the built-in proxy and haproxy: an
//! HTTPRoute's backend governed by a policy is reached over TLS, its certificate verified
//! against the policy's CA (a ConfigMap's, or a Secret's) and hostname (sent as SNI); a wrong
//! hostname, a CA that did not sign the backend's certificate or a missing ConfigMap answer
//! 502, never plaintext; of two policies on one port the one naming the port wins, the other
//! is Conflicted; the policies' status says so.

use crate::conformance::Provider;
use crate::gateway_api::{HTTP, OURS, class, gateway, object, route};
use crate::get::get;
use crate::support::*;
use crate::upstreams::{ca_secret, tls_backend_with, tls_echo_with_ca};
use serde_json::Value;
use std::time::{Duration, Instant};

proxy_and_haproxy!(
    a_policys_ca_and_hostname_verify_the_backend_and_fail_closed,
    subject_alt_names_are_required_instead_of_the_hostname
);

/// The namespace of the backends' certificate (`web.up.svc`).
const NS: &str = "up";

/// A ConfigMap `name` holding `ca_pem` under `ca.crt`.
fn ca_config_map(name: &str, ca_pem: &str) -> String {
    let indented: String = ca_pem.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NS}\ndata:\n  ca.crt: |\n{indented}"
    )
}

/// A BackendTLSPolicy `name` (created at `created`) on `target`, trusting the CA of `ca`
/// (`Kind/name`), verifying `hostname`.
fn policy(name: &str, created: &str, target: &str, ca: (&str, &str), hostname: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {name}, namespace: {NS}, creationTimestamp: \"{created}\"}}\nspec:\n  targetRefs: [{target}]\n  validation:\n    caCertificateRefs: [{{group: \"\", kind: {}, name: {}}}]\n    hostname: {hostname}\n",
        ca.0, ca.1
    )
}

/// `type=status/reason` of our ancestor entries' conditions of policy `name`.
async fn policy_conditions(p: &Portico, name: &str) -> Vec<String> {
    let policy = object(p, "/api/v1/backendtlspolicies", NS, name).await;
    let ancestors = policy["status"]["ancestors"].as_array().cloned();
    let ours = ancestors.into_iter().flatten();
    let ours = ours.filter(|a| a["controllerName"] == OURS);
    let conditions = ours.flat_map(|a| a["conditions"].as_array().cloned().unwrap_or_default());
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    conditions
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

async fn wait_policy(p: &Portico, name: &str, want: &[&str]) {
    let start = Instant::now();
    loop {
        let got = policy_conditions(p, name).await;
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{name}: wanted {want:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_policys_ca_and_hostname_verify_the_backend_and_fail_closed(provider: Provider) {
    let m = Manifests::new();
    let (secure, ca_pem) = tls_echo_with_ca("secure").await;
    let stranger = portico_tls::generate::Authority::new("another CA").unwrap();
    let services = [
        "web",
        "bysecret",
        "wronghost",
        "stranger",
        "missing",
        "plain",
    ];
    let mut y = class("portico", OURS) + &gateway(NS, "gw", "portico", HTTP);
    for name in services {
        y.push_str(&service(NS, name, &ready(&[secure])));
        let spec = format!(
            "{{parentRefs: [{{name: gw}}], hostnames: [{name}.test], rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]}}"
        );
        y.push_str(&route(NS, name, &spec));
    }
    y.push_str(&ca_config_map("upstream-ca", &ca_pem));
    y.push_str(&ca_secret("upstream-ca-secret", &ca_pem));
    y.push_str(&ca_config_map("other-ca", stranger.cert_pem()));
    let old = "2026-01-01T00:00:00Z";
    let new = "2026-01-02T00:00:00Z";
    let good = ("ConfigMap", "upstream-ca");
    let section = "{group: \"\", kind: Service, name: web, sectionName: http}";
    y.push_str(&policy("web", new, section, good, "web.up.svc"));
    // Older but for the whole Service: the policy naming the port wins; this one would fail.
    let whole = "{group: \"\", kind: Service, name: web}";
    y.push_str(&policy("web-whole", old, whole, good, "wrong.up.svc"));
    let target = |name: &str| format!("{{group: \"\", kind: Service, name: {name}}}");
    let by_secret = ("Secret", "upstream-ca-secret");
    y.push_str(&policy(
        "bysecret",
        old,
        &target("bysecret"),
        by_secret,
        "web.up.svc",
    ));
    y.push_str(&policy(
        "wronghost",
        old,
        &target("wronghost"),
        good,
        "other.up.svc",
    ));
    let other = ("ConfigMap", "other-ca");
    y.push_str(&policy(
        "stranger",
        old,
        &target("stranger"),
        other,
        "web.up.svc",
    ));
    let missing = ("ConfigMap", "no-such-ca");
    y.push_str(&policy(
        "missing",
        old,
        &target("missing"),
        missing,
        "web.up.svc",
    ));
    m.write("btls.yaml", &y);
    let p = match provider {
        Provider::Haproxy => Portico::start_haproxy(m.path(), &[]).await,
        _ => Portico::start(m.path(), &[]).await,
    };

    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_policy(&p, "web", &accepted).await;
    for host in ["web.test", "bysecret.test"] {
        let r = p.get(host, "/").await;
        assert_eq!(
            (r.status, r.service()),
            (200, "secure".into()),
            "{host}: {r:?}"
        );
        assert_eq!(r.json()["sni"], "web.up.svc", "{host}: {r:?}");
    }
    // A plain HTTP request to the TLS backend: what the pool would get without the policy.
    let plain = p.get("plain.test", "/").await;
    assert_ne!(plain.status, 200, "{plain:?}");
    for host in ["wronghost.test", "stranger.test", "missing.test"] {
        let r = p.get(host, "/").await;
        assert_eq!(r.status, 502, "{host}: {r:?}");
    }
    let conflicted = [
        "Accepted=False/Conflicted",
        "ResolvedRefs=True/ResolvedRefs",
    ];
    wait_policy(&p, "web-whole", &conflicted).await;
    let unresolved = [
        "Accepted=True/Accepted",
        "ResolvedRefs=False/InvalidCACertificateRef",
    ];
    wait_policy(&p, "missing", &unresolved).await;
    wait_policy(&p, "stranger", &accepted).await;

    let table = get(&p, &["backendtlspolicies", "-o", "wide"]);
    let row = |name: &str| {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name));
        row.unwrap_or_default().to_owned()
    };
    assert!(row("web").contains("web:http"), "{table}");
    assert!(
        row("web-whole").contains("gw: False (Conflicted)"),
        "{table}"
    );
    assert!(
        row("missing").contains("InvalidCACertificateRef"),
        "{table}"
    );
    let list: Value = serde_json::from_str(&get(&p, &["btlspolicy", "-o", "json"])).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(6), "{list}");
}

/// A policy's `subjectAltNames`: the backend's certificate must carry one of them (the
/// policy's hostname is still sent as SNI, and alone no longer does): a Hostname or a URI (a
/// SPIFFE ID) on the built-in proxy. haproxy checks the certificate against the SNI it sends
/// (its `verifyhost` applies only without SNI), so there such a policy fails closed.
async fn subject_alt_names_are_required_instead_of_the_hostname(provider: Provider) {
    const SPIFFE: &str = "spiffe://cluster.local/ns/up/sa/web";
    let m = Manifests::new();
    let ca = portico_tls::generate::Authority::new("upstream SAN CA").unwrap();
    let named = ca
        .issue_with_uris(&["web.up.svc", "web.internal"], &[SPIFFE])
        .unwrap();
    let named = tls_backend_with(&named, "named", false).await;
    // The policy's hostname only: none of the names the policies require.
    let unnamed = ca.issue(&["web.up.svc"]).unwrap();
    let unnamed = tls_backend_with(&unnamed, "unnamed", false).await;
    let by_host = "[{type: Hostname, hostname: web.internal}]";
    let by_uri = format!("[{{type: URI, uri: '{SPIFFE}'}}]");
    let cases = [
        ("host", named, by_host.to_owned()),
        ("uri", named, by_uri.clone()),
        ("nohost", unnamed, by_host.to_owned()),
        ("nouri", unnamed, by_uri),
    ];
    let mut y = class("portico", OURS) + &gateway(NS, "gw", "portico", HTTP);
    y.push_str(&ca_config_map("upstream-ca", ca.cert_pem()));
    for (name, backend, sans) in &cases {
        y.push_str(&service(NS, name, &ready(&[*backend])));
        let spec = format!(
            "{{parentRefs: [{{name: gw}}], hostnames: [{name}.test], rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]}}"
        );
        y.push_str(&route(NS, name, &spec));
        let target = format!("{{group: \"\", kind: Service, name: {name}}}");
        let ca = ("ConfigMap", "upstream-ca");
        let old = "2026-01-01T00:00:00Z";
        y.push_str(&policy(name, old, &target, ca, "web.up.svc"));
        y.push_str(&format!("    subjectAltNames: {sans}\n"));
    }
    m.write("btls.yaml", &y);
    let p = match provider {
        Provider::Haproxy => Portico::start_haproxy(m.path(), &[]).await,
        _ => Portico::start(m.path(), &[]).await,
    };
    let accepted = ["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];
    wait_policy(&p, "host", &accepted).await;
    // Refused: 502, or with haproxy 503 once its health checks (over the same verified TLS)
    // have marked the server down.
    let refused = |status: u16| match provider {
        Provider::Haproxy => status == 502 || status == 503,
        _ => status == 502,
    };
    for host in ["host.test", "uri.test"] {
        let r = p.get(host, "/").await;
        match provider {
            Provider::Haproxy => assert!(refused(r.status), "{host}: {r:?}"),
            _ => {
                assert_eq!((r.status, r.service()), (200, "named".into()), "{r:?}");
                assert_eq!(r.json()["sni"], "web.up.svc", "{r:?}");
            }
        }
    }
    for host in ["nohost.test", "nouri.test"] {
        let r = p.get(host, "/").await;
        assert!(refused(r.status), "{host}: {r:?}");
    }
}
