//! `portico migrate` on the real binary: each annotation's outcome (served, served
//! differently, ignored, refused), the ConfigMap's keys, the summary and the exit codes.

use crate::support::{Manifests, annotated, ingress};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_portico");

/// An Ingress of class `nginx` (as ingress-nginx users have them) with `annotations`.
fn nginx_ingress(name: &str, annotations: &[(&str, &str)]) -> String {
    let plain = ingress(
        "shop",
        name,
        "2026-01-01T00:00:00Z",
        &[(&format!("{name}.test"), "/", "Prefix", "web", "80")],
    );
    annotated(&plain, annotations).replace("ingressClassName: portico", "ingressClassName: nginx")
}

fn migrate(m: &Manifests, extra: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(BIN)
        .args(["migrate", "--ingress-class", "nginx", "-f"])
        .arg(m.path())
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), stdout)
}

/// The outcome `migrate -o json` gives `key` on Ingress `name`.
fn outcome<'a>(report: &'a Value, name: &str, key: &str) -> &'a Value {
    let ingress = (report["ingresses"].as_array().unwrap().iter())
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no Ingress {name}: {report}"));
    let found = (ingress["annotations"].as_array().unwrap().iter())
        .find(|a| a["key"] == format!("nginx.ingress.kubernetes.io/{key}"));
    found.unwrap_or_else(|| panic!("no {key} on {name}: {report}"))
}

#[tokio::test]
async fn migrate_reports_each_annotation_and_exits_1_unless_all_is_served() {
    let m = Manifests::new();
    m.write(
        "served.yaml",
        &nginx_ingress(
            "served",
            &[
                ("nginx.ingress.kubernetes.io/proxy-body-size", "8m"),
                ("nginx.ingress.kubernetes.io/proxy-read-timeout", "30"),
            ],
        ),
    );
    m.write(
        "mixed.yaml",
        &nginx_ingress(
            "mixed",
            &[
                ("nginx.ingress.kubernetes.io/load-balance", "ewma"),
                ("nginx.ingress.kubernetes.io/mirror-target", "http://mirror"),
                ("nginx.ingress.kubernetes.io/no-such-annotation", "x"),
                (
                    "nginx.ingress.kubernetes.io/configuration-snippet",
                    "return 200;",
                ),
                ("nginx.ingress.kubernetes.io/proxy-connect-timeout", "soon"),
            ],
        ),
    );
    let cm = Manifests::new();
    cm.write(
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n  \
         namespace: ingress-nginx\ndata:\n  proxy-body-size: 8m\n  ssl-protocols: TLSv1.3\n  \
         http-snippet: \"x\"\n",
    );
    let (code, text) = migrate(&m, &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("Ingress shop/mixed (provider proxy)"),
        "{text}"
    );
    assert!(
        text.contains("  refused             nginx.ingress.kubernetes.io/configuration-snippet"),
        "{text}"
    );
    assert!(
        text.contains(
            "2 Ingresses (0 not served): 2 served, 1 served differently, 3 ignored, 1 refused"
        ),
        "{text}"
    );

    let configmap = cm.file("configmap.yaml");
    let configmap = configmap.to_str().unwrap();
    let (code, json) = migrate(&m, &["-o", "json", "--nginx-configmap", configmap]);
    assert_eq!(code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        outcome(&report, "served", "proxy-body-size")["outcome"],
        "served"
    );
    assert_eq!(
        outcome(&report, "mixed", "load-balance")["outcome"],
        "served-differently"
    );
    let mirror = outcome(&report, "mixed", "mirror-target");
    assert_eq!(mirror["outcome"], "ignored");
    assert!(
        mirror["detail"]
            .as_str()
            .unwrap()
            .contains("not served yet"),
        "{mirror}"
    );
    assert_eq!(
        outcome(&report, "mixed", "no-such-annotation")["outcome"],
        "ignored"
    );
    let snippet = outcome(&report, "mixed", "configuration-snippet");
    assert_eq!(snippet["outcome"], "refused");
    assert!(
        snippet["detail"]
            .as_str()
            .unwrap()
            .contains("rewrite-target"),
        "{snippet}"
    );
    // A served key with a bad value is not served as written.
    let bad = outcome(&report, "mixed", "proxy-connect-timeout");
    assert_eq!(bad["outcome"], "ignored");
    assert!(
        bad["detail"].as_str().unwrap().contains("invalid value"),
        "{bad}"
    );
    let keys: Vec<(&str, &str)> = (report["configmap"].as_array().unwrap().iter())
        .map(|k| (k["key"].as_str().unwrap(), k["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        keys,
        [
            ("http-snippet", "refused"),
            ("proxy-body-size", "served"),
            ("ssl-protocols", "ignored")
        ]
    );
    assert_eq!(report["summary"]["refused"], 2, "{json}");

    // Only served annotations: exit 0.
    m.remove("mixed.yaml");
    let (code, text) = migrate(&m, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("1 Ingresses (0 not served): 2 served, 0 served differently"),
        "{text}"
    );

    // Ingresses of a class this run does not serve are reported as not served: exit 1.
    let out = std::process::Command::new(BIN)
        .args(["migrate", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("not served: its class (nginx)"), "{text}");

    // A bad ConfigMap file is an error naming the flag: exit 2.
    let (code, _) = migrate(&m, &["--nginx-configmap", "/nonexistent/cm.yaml"]);
    assert_eq!(code, Some(2));
}

/// `--kubernetes` reads the same objects from the API server (a fake one speaking the real
/// protocol), lists them once and reports them alike.
#[tokio::test]
async fn migrate_reads_the_kubernetes_api_with_the_kube_flags() {
    let cluster = crate::kube_support::Cluster::new().await;
    cluster.apply(&nginx_ingress(
        "api",
        &[
            ("nginx.ingress.kubernetes.io/proxy-body-size", "8m"),
            ("nginx.ingress.kubernetes.io/canary", "true"),
        ],
    ));
    let cluster_config = cluster.kubeconfig();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(BIN)
            .args([
                "migrate",
                "--ingress-class",
                "nginx",
                "--kubernetes",
                "-o",
                "json",
            ])
            .arg(format!("--kubeconfig={}", cluster_config.display()))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        outcome(&report, "api", "proxy-body-size")["outcome"],
        "served"
    );
    assert_eq!(
        outcome(&report, "api", "canary")["outcome"],
        "served-differently"
    );
}

/// The keys of canaries, rate limits and external auth: served, or served differently with
/// the difference named, as the table says; basic auth still ignored; the exit code 1.
#[tokio::test]
async fn migrate_reports_canaries_rate_limits_and_external_auth() {
    let m = Manifests::new();
    let n = |k: &str| format!("nginx.ingress.kubernetes.io/{k}");
    let pairs = [
        ("canary", "true"),
        ("canary-by-header", "x-canary"),
        ("canary-by-header-value", "yes"),
        ("canary-by-cookie", "canary"),
        ("canary-weight", "10"),
        ("canary-weight-total", "1000"),
        ("limit-rps", "5"),
        ("limit-rpm", "100"),
        ("limit-connections", "3"),
        ("limit-burst-multiplier", "2"),
        ("limit-whitelist", "10.0.0.0/8"),
        ("auth-url", "http://auth.shop.svc/check"),
        ("auth-method", "POST"),
        ("auth-signin", "https://login.test/start"),
        ("auth-response-headers", "X-User"),
        ("auth-request-redirect", "/back"),
        ("auth-snippet", "proxy_set_header X-A b;"),
        ("auth-type", "basic"),
        ("auth-secret", "users"),
        ("auth-realm", "Staff"),
    ];
    let keys: Vec<(String, &str)> = pairs.iter().map(|(k, v)| (n(k), *v)).collect();
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    m.write("all.yaml", &nginx_ingress("all", &keys));
    let (code, json) = migrate(&m, &["-o", "json"]);
    assert_eq!(code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    let served = [
        "canary-by-header",
        "canary-by-header-value",
        "canary-by-cookie",
        "canary-weight-total",
        "limit-burst-multiplier",
        "limit-whitelist",
        "auth-method",
        "auth-response-headers",
        "auth-request-redirect",
        "auth-realm",
    ];
    for key in served {
        assert_eq!(outcome(&report, "all", key)["outcome"], "served", "{key}");
    }
    let differently = [
        ("canary", "main Ingress"),
        ("canary-weight", "drawn in turn"),
        ("limit-rps", "per agent"),
        ("limit-rpm", "per agent"),
        ("limit-connections", "requests in progress"),
        ("auth-url", "http:// URLs"),
        ("auth-signin", "$escaped_request_uri"),
    ];
    for (key, why) in differently {
        let got = outcome(&report, "all", key);
        assert_eq!(got["outcome"], "served-differently", "{key}");
        assert!(
            got["detail"].as_str().unwrap().contains(why),
            "{key}: {got}"
        );
    }
    assert_eq!(
        outcome(&report, "all", "auth-snippet")["outcome"],
        "refused"
    );
    // The Secret is missing: the report says so, as the running proxy would answer 503.
    let secret = outcome(&report, "all", "auth-secret");
    assert_eq!(secret["outcome"], "ignored", "{secret}");
    assert!(
        secret["detail"].as_str().unwrap().contains("not found"),
        "{secret}"
    );
    let basic = outcome(&report, "all", "auth-type");
    assert_eq!(basic["outcome"], "served-differently", "{basic}");
    assert!(
        basic["detail"].as_str().unwrap().contains("digest"),
        "{basic}"
    );
}

/// With `--provider haproxy`: basic auth and rate limits are served (differently, the
/// difference named), and an Ingress whose Secret holds `$apr1$` hashes, which haproxy
/// answers 503, is reported so on `auth-secret`, while a bcrypt Secret is served.
#[tokio::test]
async fn migrate_reports_basic_auth_and_rate_limits_as_haproxy_serves_them() {
    let m = Manifests::new();
    let n = |k: &str| format!("nginx.ingress.kubernetes.io/{k}");
    let secret = |name: &str, entry: &str| {
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: shop\nstringData:\n  auth: {}\n",
            serde_json::Value::from(entry)
        )
    };
    m.write(
        "users.yaml",
        &secret(
            "users",
            "u:$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa\n",
        ),
    );
    m.write(
        "apache.yaml",
        &secret("apache", "u:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n"),
    );
    let pairs = [
        ("limit-rps", "5"),
        ("limit-rpm", "100"),
        ("limit-connections", "3"),
        ("limit-burst-multiplier", "2"),
        ("limit-whitelist", "10.0.0.0/8"),
        ("auth-type", "basic"),
        ("auth-secret", "users"),
        ("auth-realm", "Staff"),
    ];
    let keys: Vec<(String, &str)> = pairs.iter().map(|(k, v)| (n(k), *v)).collect();
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    m.write("all.yaml", &nginx_ingress("all", &keys));
    let apache = [(n("auth-type"), "basic"), (n("auth-secret"), "apache")];
    let apache: Vec<(&str, &str)> = apache.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    m.write("apache-ing.yaml", &nginx_ingress("apache", &apache));
    let (code, json) = migrate(&m, &["-o", "json", "--provider", "haproxy"]);
    assert_eq!(code, Some(1), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    for key in ["limit-whitelist", "auth-secret", "auth-realm"] {
        assert_eq!(
            outcome(&report, "all", key)["outcome"],
            "served",
            "{key}: {report}"
        );
    }
    for (key, why) in [
        ("limit-rps", "sliding window"),
        ("limit-rpm", "per agent"),
        ("limit-connections", "stick table"),
        ("limit-burst-multiplier", "sliding window"),
        ("auth-type", "$apr1$"),
    ] {
        let got = outcome(&report, "all", key);
        assert_eq!(got["outcome"], "served-differently", "{key}");
        assert!(
            got["detail"].as_str().unwrap().contains(why),
            "{key}: {got}"
        );
    }
    let apr1 = outcome(&report, "apache", "auth-secret");
    assert_eq!(apr1["outcome"], "ignored", "{apr1}");
    let detail = apr1["detail"].as_str().unwrap();
    assert!(
        detail.contains("$apr1$") && detail.contains("provider haproxy") && detail.contains("503"),
        "{apr1}"
    );
    // The proxy checks $apr1$: served there.
    let (_, json) = migrate(&m, &["-o", "json"]);
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        outcome(&report, "apache", "auth-secret")["outcome"],
        "served"
    );
}
