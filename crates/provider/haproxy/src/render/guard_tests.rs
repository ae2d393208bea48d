//! Basic auth ([`super::auth`]) and rate limits ([`super::limits`]) in whole renders; the
//! lines they write pass `haproxy -c`.

use super::*;
use portico_model::*;
use std::path::PathBuf;
use std::sync::Arc;

const BCRYPT: &str = "$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa";

fn guarded_lb(options: PolicyOptions) -> LoadBalancer {
    let pool = PoolId::derive("pool");
    let policy = L7Policy {
        id: L7PolicyId::derive("p"),
        action: PolicyAction::RedirectToPool { pool },
        rules: vec![L7Rule {
            id: L7RuleId::derive("r"),
            rule_type: RuleType::Path,
            compare_type: CompareType::PathPrefix,
            key: None,
            value: "/a".into(),
        }],
        source: Arc::new(ObjectRef::new("Ingress", "default", "web")),
        precedence: 0,
        options: Some(Arc::new(options)),
    };
    LoadBalancer {
        id: LoadBalancerId::derive("lb"),
        name: "lb".into(),
        origin: ObjectRef::new("IngressClass", "", "portico"),
        provider: "haproxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(vec![Listener {
            id: ListenerId::derive("http"),
            name: "HTTP:80".into(),
            protocol: Protocol::Http,
            port: 80,
            policies: vec![Arc::new(policy)],
            default_pool: None,
            default_source: None,
            tls: None,
        }]),
        pools: vec![Arc::new(Pool {
            id: pool,
            name: "default_web_80".into(),
            service: ObjectRef::new("Service", "default", "web"),
            service_port: "80".into(),
            algorithm: Algorithm::RoundRobin,
            settings: Default::default(),
            protocol: PoolProtocol::Http,
            members: vec![],
        })],
    }
}

fn render_with(lb: &LoadBalancer, credentials: &Credentials, limits: &Limits) -> Rendered {
    let dir = PathBuf::from("/state/lb");
    let none = BTreeMap::new();
    let input = Input {
        dir: &dir,
        binds: Binds {
            http: Some(([127, 0, 0, 1], 8080).into()),
            https: None,
            transparent: false,
            floating: None,
        },
        certificates: &none,
        ca_files: &none,
        credentials,
        limits,
        tcp: Default::default(),
        access_log: None,
        descriptors: None,
    };
    render(lb, &input)
}

fn basic(secret: &str, realm: &str) -> PolicyOptions {
    PolicyOptions {
        basic_auth: Some(BasicAuth {
            secret: ObjectRef::new("Secret", "default", secret),
            realm: realm.into(),
        }),
        ..PolicyOptions::default()
    }
}

/// `haproxy -c` on `config` with its map files written beside it.
fn haproxy_check(r: &Rendered) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, entries) in &r.maps {
        std::fs::write(dir.path().join(name), crate::routes::file_text(entries)).unwrap();
    }
    std::fs::write(dir.path().join(BAD_GATEWAY_FILE), BAD_GATEWAY_RESPONSE).unwrap();
    let config = r
        .config
        .replace("/state/lb", &dir.path().display().to_string());
    let path = dir.path().join("haproxy.conf");
    std::fs::write(&path, config).unwrap();
    let out = std::process::Command::new("haproxy")
        .current_dir(dir.path())
        .args(["-c", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let alerts = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() && !alerts.contains("ALERT") {
        Ok(())
    } else {
        Err(alerts)
    }
}

#[test]
fn basic_auth_renders_a_userlist_per_secret_and_a_challenge_that_haproxy_accepts() {
    let users = Htpasswd::from_file(&format!("al\"ice:{BCRYPT}\nbob:bGVh02xkuGli2\n")).unwrap();
    let secret = ObjectRef::new("Secret", "default", "users");
    let credentials = Credentials::from([(secret, Arc::new(users))]);
    let lb = guarded_lb(basic("users", r#"Area "51""#));
    let r = render_with(&lb, &credentials, &Limits::default());
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    assert!(
        r.config.contains("\nuserlist portico_auth_"),
        "{}",
        r.config
    );
    // Names and hashes are quoted words: `$` and `"` escaped.
    assert!(
        r.config
            .contains(r#"    user "al\x22ice" password "\x242y\x2405\x24nC6n"#),
        "{}",
        r.config
    );
    assert!(
        r.config.contains(r#"hdr WWW-Authenticate "Basic\x20realm\x3d\x22Area\x20\x5c\x2251\x5c\x22\x22" if { var(txn.policy) -m str "#),
        "{}",
        r.config
    );
    assert!(r.config.contains("!{ http_auth(portico_auth_"));
    haproxy_check(&r).unwrap();
}

#[test]
fn an_apr1_or_missing_secret_fails_closed_with_503_and_a_warning_naming_the_kind() {
    let apr1 = Htpasswd::from_file("a:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n").unwrap();
    let secret = ObjectRef::new("Secret", "default", "apache");
    let credentials = Credentials::from([(secret, Arc::new(apr1))]);
    let r = render_with(
        &guarded_lb(basic("apache", "")),
        &credentials,
        &Limits::default(),
    );
    assert!(!r.config.contains("userlist"), "{}", r.config);
    assert!(r.config.contains("http-request return status 503"));
    assert!(!r.config.contains("$apr1$") && !r.config.contains("x24apr1"));
    let [d] = &r.diagnostics[..] else {
        panic!("{:?}", r.diagnostics)
    };
    assert!(d.message.contains("$apr1$") && d.message.contains("provider haproxy"));
    assert_eq!(d.object, ObjectRef::new("Ingress", "default", "web"));
    haproxy_check(&r).unwrap();
    // Not handed at all: 503, and the translation's warning is the one.
    let r = render_with(
        &guarded_lb(basic("missing", "")),
        &Credentials::new(),
        &Limits::default(),
    );
    assert!(r.config.contains("http-request return status 503"));
    assert!(r.diagnostics.is_empty());
}

#[test]
fn rate_limits_render_stick_tables_per_ingress_and_refusals_before_counting() {
    let limit = RateLimit {
        zone: "default/web".into(),
        rps: Some(2),
        rpm: Some(60),
        connections: Some(3),
        burst_multiplier: 5,
        allow: vec!["10.0.0.0/8".parse().unwrap()],
    };
    let options = PolicyOptions {
        rate_limit: Some(limit),
        ..basic("users", "r")
    };
    let limits = Limits {
        limit_status: 429,
        ..Limits::default()
    };
    let users = Htpasswd::from_file("bob:bGVh02xkuGli2\n").unwrap();
    let secret = ObjectRef::new("Secret", "default", "users");
    let credentials = Credentials::from([(secret, Arc::new(users))]);
    let r = render_with(&guarded_lb(options), &credentials, &limits);
    let c = &r.config;
    // 2 a second with a burst of 10: 11 in 5.5 s; 60 a minute with a burst of 300: 301 in 301 s.
    assert!(c.contains("store http_req_rate(5500),conn_cur"), "{c}");
    assert!(c.contains("store http_req_rate(301000)"), "{c}");
    assert!(c.contains("table_http_req_rate(portico_limit_"), "{c}");
    assert!(c.contains("_s) ge 11 }"), "{c}");
    assert!(c.contains("_s) ge 3 }"), "{c}");
    assert!(c.contains("_m) ge 301 }"), "{c}");
    assert!(c.contains("http-request return status 429"), "{c}");
    assert!(c.contains("!{ src 10.0.0.0/8 }"), "{c}");
    // Refused before counted, limits before auth.
    let at = |needle: &str| c.find(needle).unwrap_or_else(|| panic!("{needle}: {c}"));
    assert!(at("status 429") < at("track-sc1"));
    assert!(at("track-sc2") < at("http_auth("));
    haproxy_check(&r).unwrap();
}

#[test]
fn a_cors_preflight_is_answered_before_limits_and_auth_and_a_redirect_skips_both() {
    let cors = Cors {
        origins: vec!["https://app.test".into()],
        methods: "GET".into(),
        headers: "X-A".into(),
        expose_headers: String::new(),
        credentials: true,
        max_age_s: 60,
        gateway_api: false,
    };
    let limit = RateLimit {
        zone: "default/web".into(),
        rps: Some(1),
        rpm: None,
        connections: None,
        burst_multiplier: 5,
        allow: vec![],
    };
    let options = PolicyOptions {
        cors: Some(cors),
        rate_limit: Some(limit),
        ..basic("users", "r")
    };
    let users = Htpasswd::from_file("bob:bGVh02xkuGli2\n").unwrap();
    let secret = ObjectRef::new("Secret", "default", "users");
    let credentials = Credentials::from([(secret, Arc::new(users))]);
    let r = render_with(
        &guarded_lb(options.clone()),
        &credentials,
        &Limits::default(),
    );
    let c = &r.config;
    let at = |needle: &str| c.find(needle).unwrap_or_else(|| panic!("{needle}: {c}"));
    assert!(at(" METH_OPTIONS\n") < at("table_http_req_rate("));
    assert!(at("track-sc1") < at("http_auth("));
    haproxy_check(&r).unwrap();
    // The HTTP → HTTPS redirect of a TLS host comes first, as nginx's rewrite phase.
    let mut lb = guarded_lb(options);
    let mut listeners = (*lb.listeners).clone();
    Arc::make_mut(&mut listeners[0].policies[0]).action =
        PolicyAction::RedirectToHttps { status: 308 };
    lb.listeners = Arc::new(listeners);
    let r = render_with(&lb, &credentials, &Limits::default());
    assert!(!r.config.contains("http_auth(") && !r.config.contains("track-sc1"));
}
