use super::*;
use portico_model::HashKey;

fn ingress(annotations: &[(&str, &str)]) -> KeptIngress {
    let mut ing = KeptIngress::default();
    ing.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    ing
}

fn read(annotations: &[(&str, &str)]) -> (Arc<Upstream>, Vec<Diagnostic>) {
    let object = ObjectRef::new("Ingress", "shop", "web");
    let mut diagnostics = Vec::new();
    let u = upstream(&object, &ingress(annotations), &mut diagnostics);
    (u, diagnostics)
}

/// The fields of the warnings, for assertions.
fn fields(diagnostics: &[Diagnostic]) -> Vec<String> {
    diagnostics.iter().map(|d| d.field.clone()).collect()
}

#[test]
fn no_annotations_is_the_shared_default() {
    let (u, d) = read(&[]);
    assert!(Arc::ptr_eq(&u, &Upstream::default_arc()));
    assert!(d.is_empty());
    let (u, d) = read(&[("kubernetes.io/ingress.class", "x"), ("example.com/a", "b")]);
    assert!(u.digest.is_none() && d.is_empty());
}

#[test]
fn each_setting_under_both_prefixes() {
    for prefix in [PORTICO, NGINX] {
        let k = |key: &str| format!("{prefix}{key}");
        let pairs = [
            (k("proxy-connect-timeout"), "3"),
            (k("proxy-read-timeout"), "500ms"),
            (k("proxy-send-timeout"), "2m"),
            (k("proxy-body-size"), "8m"),
            (k("load-balance"), "ewma"),
            (k("affinity"), "cookie"),
            (k("session-cookie-name"), "route"),
            (k("session-cookie-max-age"), "3600"),
            (k("session-cookie-path"), "/app"),
            (k("proxy-next-upstream-tries"), "2"),
            (k("whitelist-source-range"), "10.0.0.0/8, 192.168.1.7"),
            (k("backend-protocol"), "HTTPS"),
            (k("proxy-ssl-verify"), "on"),
            (k("proxy-ssl-secret"), "shop/ca"),
            (k("proxy-ssl-name"), "web.shop.svc"),
            (k("proxy-ssl-server-name"), "on"),
        ];
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), *b)).collect();
        let (u, d) = read(&refs);
        assert!(d.is_empty(), "{prefix}: {d:?}");
        let s = &u.settings;
        assert_eq!(s.connect_timeout_ms, Some(3000));
        assert_eq!(s.read_timeout_ms, Some(500));
        assert_eq!(s.send_timeout_ms, Some(120_000));
        assert_eq!(s.max_body_bytes, Some(8 << 20));
        assert_eq!(u.algorithm, Algorithm::LeastRequest);
        let affinity = s.affinity.as_ref().unwrap();
        assert_eq!(
            (
                affinity.name.as_str(),
                affinity.max_age_s,
                affinity.path.as_deref()
            ),
            ("route", Some(3600), Some("/app"))
        );
        assert_eq!(s.tries, Some(2));
        let ranges: Vec<String> = s.allow_sources.iter().map(ToString::to_string).collect();
        assert_eq!(ranges, ["10.0.0.0/8", "192.168.1.7/32"]);
        assert_eq!(u.protocol, Some(PoolProtocol::Https));
        let tls = s.upstream_tls.as_ref().unwrap();
        assert!(tls.verify && tls.sni);
        assert_eq!(tls.ca, Some(ObjectRef::new("Secret", "shop", "ca")));
        assert_eq!(tls.server_name.as_deref(), Some("web.shop.svc"));
        assert!(u.digest.is_some());
    }
}

#[test]
fn portico_wins_over_nginx() {
    let (u, d) = read(&[
        ("portico.dev/proxy-read-timeout", "5s"),
        ("nginx.ingress.kubernetes.io/proxy-read-timeout", "99"),
    ]);
    assert!(d.is_empty());
    assert_eq!(u.settings.read_timeout_ms, Some(5000));
}

#[test]
fn bad_values_warn_naming_the_annotation_and_the_default_applies() {
    let cases: &[(&str, &str)] = &[
        ("nginx.ingress.kubernetes.io/proxy-connect-timeout", "soon"),
        ("portico.dev/proxy-read-timeout", "0"),
        ("portico.dev/proxy-send-timeout", "2d"),
        ("nginx.ingress.kubernetes.io/proxy-body-size", "8mb"),
        ("nginx.ingress.kubernetes.io/load-balance", "chash"),
        (
            "nginx.ingress.kubernetes.io/upstream-hash-by",
            "$request_uri$host",
        ),
        ("nginx.ingress.kubernetes.io/affinity", "ip"),
        (
            "nginx.ingress.kubernetes.io/proxy-next-upstream-tries",
            "-1",
        ),
        ("nginx.ingress.kubernetes.io/backend-protocol", "FCGI"),
        ("portico.dev/health-check-interval", "fast"),
        ("portico.dev/retry-budget", "150"),
        ("portico.dev/passive-health-failures", "many"),
    ];
    for (key, value) in cases {
        let (u, d) = read(&[(key, value)]);
        assert_eq!(
            fields(&d),
            [format!("metadata.annotations[{key}]")],
            "{key}"
        );
        assert!(d[0].message.contains("the default applies"), "{:?}", d[0]);
        assert!(u.digest.is_none(), "{key}: the default applies");
    }
}

#[test]
fn snippets_are_refused_and_unknown_keys_reported() {
    let (u, d) = read(&[
        (
            "nginx.ingress.kubernetes.io/configuration-snippet",
            "more_set_headers x;",
        ),
        (
            "nginx.ingress.kubernetes.io/server-snippet",
            "location / {}",
        ),
        ("portico.dev/proxy-read-timout", "5"),
        ("nginx.ingress.kubernetes.io/mirror-target", "http://m"),
    ]);
    assert!(u.digest.is_none());
    let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(d.len(), 4, "{messages:?}");
    assert!(messages[0].contains("snippets are refused by design"));
    assert!(messages[1].contains("not supported by Portico"));
    assert!(messages[2].contains("snippets are refused by design"));
    assert!(messages[3].contains("unknown annotation"));
}

#[test]
fn hash_keys() {
    let cases = [
        ("$remote_addr", HashKey::ClientAddress),
        ("$binary_remote_addr", HashKey::ClientAddress),
        ("client-address", HashKey::ClientAddress),
        ("$request_uri", HashKey::RequestUri),
        ("$http_x_user_id", HashKey::Header("x-user-id".into())),
        ("header:X-User", HashKey::Header("x-user".into())),
        ("$cookie_session", HashKey::Cookie("session".into())),
        ("cookie:session", HashKey::Cookie("session".into())),
    ];
    for (value, key) in cases {
        let (u, d) = read(&[("nginx.ingress.kubernetes.io/upstream-hash-by", value)]);
        assert!(d.is_empty(), "{value}");
        assert_eq!(u.algorithm, Algorithm::Hash(key), "{value}");
    }
    // The hash wins over load-balance, as in ingress-nginx.
    let (u, _) = read(&[
        ("nginx.ingress.kubernetes.io/load-balance", "ewma"),
        (
            "nginx.ingress.kubernetes.io/upstream-hash-by",
            "$remote_addr",
        ),
    ]);
    assert_eq!(u.algorithm, Algorithm::Hash(HashKey::ClientAddress));
}

#[test]
fn a_bad_allowlist_entry_never_opens_the_pool() {
    let (u, d) = read(&[(
        "nginx.ingress.kubernetes.io/allowlist-source-range",
        "10.0.0.0/8,10.0.0.0/33",
    )]);
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("the valid ranges apply"));
    assert_eq!(u.settings.allow_sources.len(), 1);
    let (u, d) = read(&[("portico.dev/whitelist-source-range", "everyone")]);
    assert!(d[0].message.contains("every client is refused"));
    let allowed = &u.settings.allow_sources;
    assert!(!allowed.is_empty());
    assert!(
        !allowed
            .iter()
            .any(|c| c.contains("10.1.2.3".parse().unwrap()))
    );
}

#[test]
fn a_denylist_is_read_beside_the_allowlist_and_a_bad_one_refuses_everyone() {
    let (u, d) = read(&[
        (
            "nginx.ingress.kubernetes.io/denylist-source-range",
            "10.1.0.0/16, 192.168.1.7,10.1.0.0/16",
        ),
        (
            "nginx.ingress.kubernetes.io/allowlist-source-range",
            "10.0.0.0/8",
        ),
    ]);
    assert!(d.is_empty(), "{d:?}");
    let denied: Vec<String> = u
        .settings
        .deny_sources
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(denied, ["10.1.0.0/16", "192.168.1.7/32"]);
    assert_eq!(u.settings.allow_sources.len(), 1);
    // Portico's key wins over nginx's.
    let (u, _) = read(&[
        (
            "nginx.ingress.kubernetes.io/denylist-source-range",
            "10.1.0.0/16",
        ),
        ("portico.dev/denylist-source-range", "10.2.0.0/16"),
    ]);
    assert_eq!(u.settings.deny_sources[0].to_string(), "10.2.0.0/16");
    let (u, d) = read(&[(
        "nginx.ingress.kubernetes.io/denylist-source-range",
        "10.1.0.0/16, 10.1.0.0/99",
    )]);
    assert!(d[0].message.contains("the valid ranges apply"), "{d:?}");
    assert_eq!(u.settings.deny_sources.len(), 1);
    let (u, d) = read(&[("portico.dev/denylist-source-range", "nobody")]);
    assert_eq!(
        d[0].field,
        "metadata.annotations[portico.dev/denylist-source-range]"
    );
    assert!(d[0].message.contains("every client is refused"), "{d:?}");
    for ip in ["10.1.2.3", "2001:db8::1"] {
        let ip = ip.parse().unwrap();
        assert!(
            u.settings.deny_sources.iter().any(|c| c.contains(ip)),
            "{ip}"
        );
    }
}

#[test]
fn upstream_tls_needs_a_tls_protocol_and_a_local_secret() {
    let (u, d) = read(&[("nginx.ingress.kubernetes.io/proxy-ssl-verify", "on")]);
    assert!(u.settings.upstream_tls.is_none());
    assert!(d[0].message.contains("has no effect"));
    let (_, d) = read(&[
        ("nginx.ingress.kubernetes.io/backend-protocol", "GRPCS"),
        (
            "nginx.ingress.kubernetes.io/proxy-ssl-secret",
            "kube-system/ca",
        ),
    ]);
    assert!(d[0].message.contains("own namespace"), "{d:?}");
    let (u, d) = read(&[("nginx.ingress.kubernetes.io/backend-protocol", "GRPCS")]);
    assert!(d.is_empty());
    assert_eq!(u.protocol, Some(PoolProtocol::H2));
    assert_eq!(u.settings.upstream_tls, Some(UpstreamTls::default()));
}

#[test]
fn health_checks() {
    let (u, d) = read(&[
        ("portico.dev/health-check-path", "/healthz"),
        ("portico.dev/health-check-interval", "2s"),
        ("portico.dev/health-check-unhealthy-threshold", "2"),
        ("portico.dev/passive-health-failures", "0"),
        ("portico.dev/passive-health-ejection", "30s"),
    ]);
    assert!(d.is_empty(), "{d:?}");
    let active = u.settings.active.as_ref().unwrap();
    assert_eq!(
        (active.path.as_str(), active.interval_ms, active.timeout_ms),
        ("/healthz", 2000, 1000)
    );
    assert_eq!((active.healthy, active.unhealthy), (2, 2));
    assert_eq!(
        u.settings.passive,
        PassiveHealth {
            failures: 0,
            ejection_ms: 30_000
        }
    );
    // The interval alone asks for no check.
    let (u, _) = read(&[("portico.dev/health-check-interval", "2s")]);
    assert!(u.settings.active.is_none());
}

#[test]
fn equal_settings_equal_digests() {
    let (a, _) = read(&[("portico.dev/proxy-read-timeout", "5")]);
    let (b, _) = read(&[("nginx.ingress.kubernetes.io/proxy-read-timeout", "5s")]);
    let (c, _) = read(&[("portico.dev/proxy-read-timeout", "6")]);
    assert_eq!(a.digest, b.digest);
    assert_ne!(a.digest, c.digest);
}

fn read_location(annotations: &[(&str, &str)]) -> (Arc<Location>, Vec<Diagnostic>) {
    let object = ObjectRef::new("Ingress", "shop", "web");
    let mut diagnostics = Vec::new();
    let l = location(&object, &ingress(annotations), &mut diagnostics);
    (l, diagnostics)
}

#[test]
fn rate_limits_are_per_ingress_with_ingress_nginx_defaults() {
    let (l, d) = read_location(&[
        ("nginx.ingress.kubernetes.io/limit-rps", "5"),
        ("nginx.ingress.kubernetes.io/limit-connections", "2"),
        (
            "nginx.ingress.kubernetes.io/limit-whitelist",
            "10.0.0.0/8, nonsense ,192.168.1.7",
        ),
    ]);
    let limit = l.rate_limit.clone().unwrap();
    assert_eq!(limit.zone, "shop/web");
    assert_eq!(
        (limit.rps, limit.rpm, limit.connections),
        (Some(5), None, Some(2))
    );
    assert_eq!(limit.burst_multiplier, 5);
    let allow: Vec<String> = limit.allow.iter().map(ToString::to_string).collect();
    assert_eq!(allow, ["10.0.0.0/8", "192.168.1.7/32"]);
    assert_eq!(
        fields(&d),
        ["metadata.annotations[nginx.ingress.kubernetes.io/limit-whitelist]"]
    );
    // Settings without a limit are no limit; a bad or zero limit is a warning.
    let (l, d) = read_location(&[
        ("nginx.ingress.kubernetes.io/limit-burst-multiplier", "3"),
        ("portico.dev/limit-rpm", "0"),
    ]);
    assert_eq!(l.rate_limit, None);
    assert_eq!(fields(&d), ["metadata.annotations[portico.dev/limit-rpm]"]);
}

#[test]
fn external_auth_with_ingress_nginx_defaults_and_an_unservable_url_fails_closed() {
    let (l, d) = read_location(&[
        (
            "nginx.ingress.kubernetes.io/auth-url",
            "http://auth.ns.svc:8080/check",
        ),
        (
            "nginx.ingress.kubernetes.io/auth-response-headers",
            "X-User, X-Email",
        ),
        (
            "nginx.ingress.kubernetes.io/auth-signin",
            "https://$host/start?rd=$request_uri",
        ),
    ]);
    assert!(d.is_empty(), "{d:?}");
    let auth = l.external_auth.clone().unwrap().unwrap();
    assert_eq!(auth.signin_redirect_param, "rd");
    assert_eq!(auth.response_headers, ["x-user", "x-email"]);
    assert_eq!(auth.method, None);
    for bad in [
        "https://auth.example/check",
        "http://$host/auth",
        "auth.ns.svc",
    ] {
        let (l, d) = read_location(&[("nginx.ingress.kubernetes.io/auth-url", bad)]);
        assert_eq!(l.external_auth, Some(Err(())), "{bad}");
        assert!(format!("{d:?}").contains("refused (503)"), "{bad}: {d:?}");
    }
    let (_, d) = read_location(&[
        ("nginx.ingress.kubernetes.io/auth-url", "http://a/"),
        (
            "nginx.ingress.kubernetes.io/auth-signin",
            "https://x/?u=$remote_addr",
        ),
        ("nginx.ingress.kubernetes.io/auth-method", "get"),
    ]);
    assert_eq!(d.len(), 2, "{d:?}");
}

#[test]
fn basic_auth_names_its_secret_and_a_setting_that_cannot_be_served_fails_closed() {
    let n = |k: &str| format!("nginx.ingress.kubernetes.io/{k}");
    let (t, s, r) = (n("auth-type"), n("auth-secret"), n("auth-realm"));
    let (l, d) = read_location(&[(&t, "basic"), (&s, "users"), (&r, "Staff \"only\"")]);
    assert!(d.is_empty(), "{d:?}");
    let auth = l.basic_auth.clone().unwrap().unwrap();
    assert_eq!(auth.secret, ObjectRef::new("Secret", "shop", "users"));
    assert_eq!(auth.realm, "Staff \"only\"");
    let st = n("auth-secret-type");
    for (bad, field) in [
        (vec![(t.as_str(), "digest"), (s.as_str(), "users")], &t),
        (vec![(t.as_str(), "basic")], &t),
        (vec![(t.as_str(), "basic"), (s.as_str(), "other/users")], &s),
        (
            vec![
                (t.as_str(), "basic"),
                (s.as_str(), "u"),
                (st.as_str(), "file"),
            ],
            &st,
        ),
    ] {
        let (l, d) = read_location(&bad);
        assert_eq!(l.basic_auth, Some(Err(())), "{bad:?}");
        assert_eq!(
            fields(&d),
            [format!("metadata.annotations[{field}]")],
            "{bad:?}"
        );
        assert!(format!("{d:?}").contains("refused (503)"), "{d:?}");
    }
}
