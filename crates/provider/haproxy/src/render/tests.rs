use super::*;
use portico_model::*;
use std::path::PathBuf;

fn rule(rule_type: RuleType, compare_type: CompareType, value: &str) -> L7Rule {
    L7Rule {
        id: L7RuleId::derive(value),
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    }
}

fn policy(name: &str, rules: Vec<L7Rule>, action: PolicyAction) -> L7Policy {
    L7Policy {
        id: L7PolicyId::derive(name),
        action,
        rules,
        source: std::sync::Arc::new(ObjectRef::new("Ingress", "default", "web")),
        precedence: 0,
        options: None,
    }
}

fn lb(policies: Vec<L7Policy>, members: Vec<Member>) -> LoadBalancer {
    let pool = PoolId::derive("pool");
    LoadBalancer {
        id: LoadBalancerId::derive("lb"),
        name: "lb".into(),
        origin: portico_model::ObjectRef::new("IngressClass", "", "portico"),
        provider: "haproxy".into(),
        vip: None,
        floating_ip: None,
        listeners: std::sync::Arc::new(vec![Listener {
            id: ListenerId::derive("http"),
            name: "HTTP:80".into(),
            protocol: Protocol::Http,
            port: 80,
            policies: policies.into_iter().map(std::sync::Arc::new).collect(),
            default_pool: None,
            default_source: None,
            tls: None,
        }]),
        pools: vec![std::sync::Arc::new(Pool {
            id: pool,
            name: "default_web_80".into(),
            service: ObjectRef::new("Service", "default", "web"),
            service_port: "80".into(),
            algorithm: Algorithm::RoundRobin,
            settings: Default::default(),
            protocol: PoolProtocol::Http,
            members,
        })],
    }
}

fn to_pool() -> PolicyAction {
    PolicyAction::RedirectToPool {
        pool: PoolId::derive("pool"),
    }
}

fn member(last: u8, ready: bool) -> Member {
    Member {
        id: MemberId::derive(&last.to_string()),
        address: [10, 0, 0, last].into(),
        port: 8080,
        weight: 1,
        ready,
    }
}

/// The CA bundle file of Secret default/upstream-ca.
fn ca_files() -> BTreeMap<ObjectRef, String> {
    let ca = ObjectRef::new("Secret", "default", "upstream-ca");
    BTreeMap::from([(ca, "ca-0123.pem".to_owned())])
}

fn rendered(lb: &LoadBalancer) -> Rendered {
    let dir = PathBuf::from("/state/lb");
    let certificates = BTreeMap::new();
    let input = Input {
        dir: &dir,
        binds: Binds {
            http: Some(([127, 0, 0, 1], 8080).into()),
            https: Some(([127, 0, 0, 1], 8443).into()),
            transparent: false,
            floating: None,
        },
        certificates: &certificates,
        ca_files: &ca_files(),
        credentials: &portico_model::Credentials::new(),
        limits: &portico_model::Limits::default(),
        tcp: Default::default(),
        access_log: None,
        descriptors: None,
    };
    render(lb, &input)
}

fn lines_with<'a>(r: &'a Rendered, needle: &str) -> Vec<&'a str> {
    r.config
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::trim)
        .collect()
}

/// Every entry of the listener's maps: (tier-kind, key, backend).
fn entries(r: &Rendered) -> Vec<(String, String, String)> {
    let l = ListenerId::derive("http");
    let mut out = Vec::new();
    for tier in ["host", "wild", "any"] {
        for kind in ["exact", "prefix"] {
            let name = routes::map_name(l, tier, kind);
            for (k, v) in &r.maps[&name] {
                out.push((format!("{tier}-{kind}"), k.clone(), v.clone()));
            }
        }
    }
    out
}

fn e(map: &str, key: &str, backend: &str) -> (String, String, String) {
    (map.to_owned(), key.to_owned(), backend.to_owned())
}

#[test]
fn prefix_is_the_path_itself_or_the_path_and_a_slash() {
    let p = policy(
        "p",
        vec![rule(RuleType::Path, CompareType::PathPrefix, "/foo/")],
        to_pool(),
    );
    let r = rendered(&lb(vec![p], vec![]));
    let pool = PoolId::derive("pool").to_string();
    assert_eq!(
        entries(&r),
        [
            e("any-exact", "/foo", &pool),
            e("any-prefix", "/foo/", &pool)
        ]
    );
}

#[test]
fn routing_is_by_maps_with_a_fixed_number_of_lines_per_listener() {
    let policies: Vec<L7Policy> = (0..50)
        .map(|n| {
            let rules = vec![
                rule(
                    RuleType::HostName,
                    CompareType::EqualTo,
                    &format!("h{n}.test"),
                ),
                rule(RuleType::Path, CompareType::PathPrefix, "/app"),
            ];
            policy(&n.to_string(), rules, to_pool())
        })
        .collect();
    let many = rendered(&lb(policies, vec![]));
    let none = rendered(&lb(vec![], vec![]));
    let frontend = |r: &Rendered| r.config.split("\nbackend ").next().unwrap().lines().count();
    assert_eq!(frontend(&many), frontend(&none));
    assert!(lines_with(&many, "acl ").is_empty());
    assert_eq!(entries(&many).len(), 100);
    let l = ListenerId::derive("http");
    assert!(many.config.contains(&format!(
        "var(txn.route_host),map_beg({})",
        routes::map_name(l, "host", "prefix")
    )));
    assert_eq!(
        lines_with(&many, "use_backend"),
        ["use_backend %[var(txn.route),field(1,~)] if { var(txn.route) -m found }"]
    );
}

#[test]
fn root_prefix_without_host_matches_everything() {
    let p = policy(
        "p",
        vec![rule(RuleType::Path, CompareType::PathPrefix, "/")],
        to_pool(),
    );
    let r = rendered(&lb(vec![p], vec![]));
    let pool = PoolId::derive("pool").to_string();
    assert_eq!(
        entries(&r),
        [e("any-exact", "/", &pool), e("any-prefix", "/", &pool)]
    );
}

#[test]
fn wildcard_host_is_the_suffix_and_exactly_one_more_label() {
    let p = policy(
        "p",
        vec![rule(
            RuleType::HostName,
            CompareType::WildcardLabel,
            "foo.com",
        )],
        to_pool(),
    );
    let r = rendered(&lb(vec![p], vec![]));
    let pool = PoolId::derive("pool").to_string();
    assert_eq!(
        entries(&r),
        [
            e("wild-exact", "*.foo.com/", &pool),
            e("wild-prefix", "*.foo.com/", &pool)
        ]
    );
    // The request's wildcard key: its first label replaced by `*`, only when it has one.
    assert_eq!(
        lines_with(&r, "set-var(txn.route_wild)"),
        [
            "http-request set-var(txn.route_wild) var(txn.host),regsub('^[^.]+\\.','*.'),concat(,txn.route_path) if { var(txn.host) -m reg ^[^./]+\\.[^/]*$ }"
        ]
    );
}

#[test]
fn policies_that_can_never_match_are_left_out() {
    let rules = vec![
        rule(RuleType::HostName, CompareType::EqualTo, "a.com"),
        rule(RuleType::HostName, CompareType::EqualTo, "b.com"),
    ];
    let r = rendered(&lb(vec![policy("p", rules, to_pool())], vec![]));
    assert!(entries(&r).is_empty());
    assert!(r.diagnostics.is_empty());
}

#[test]
fn no_match_and_no_default_backend_is_404_and_an_empty_pool_is_503() {
    let r = rendered(&lb(vec![], vec![member(1, false)]));
    assert_eq!(
        lines_with(&r, "default_backend"),
        ["default_backend portico_no_route"]
    );
    assert!(r.config.contains("http-request return status 404 content-type \"text/plain; charset=utf-8\" string \"404 Not Found\\n\""));
    assert!(
        r.config
            .contains("string \"503 Service Unavailable\\n\" if { nbsrv eq 0 } !{ stopping }")
    );
    let options = "check inter 10000ms downinter 10000ms fall 3 rise 1 observe layer7 \
                   error-limit 5 on-error mark-down disabled";
    let mut expected = vec![format!(
        "server {} 10.0.0.1:8080 weight 1 {options}",
        MemberId::derive("1")
    )];
    // The spare slots members added later take without a reload: the same options.
    for n in 1..=SPARE_SLOTS {
        expected.push(format!(
            "server portico-spare-{n} 0.0.0.0:0 weight 1 {options}"
        ));
    }
    assert_eq!(lines_with(&r, "    server "), expected);
}

#[test]
fn a_nul_byte_leaves_the_policy_out_with_an_error_on_its_ingress() {
    let p = policy(
        "p",
        vec![rule(RuleType::Path, CompareType::EqualTo, "/a\0b")],
        to_pool(),
    );
    let r = rendered(&lb(vec![p], vec![]));
    assert!(entries(&r).is_empty());
    assert_eq!(r.diagnostics.len(), 1);
    assert_eq!(
        r.diagnostics[0].object,
        ObjectRef::new("Ingress", "default", "web")
    );
}

#[test]
fn a_policy_with_external_auth_is_left_out_rather_than_served_open() {
    let mut p = policy(
        "p",
        vec![rule(RuleType::Path, CompareType::PathPrefix, "/a")],
        to_pool(),
    );
    p.options = Some(std::sync::Arc::new(PolicyOptions {
        external_auth: Some(ExternalAuth {
            url: "http://auth/".into(),
            method: None,
            signin: None,
            signin_redirect_param: "rd".into(),
            response_headers: vec![],
            request_redirect: None,
        }),
        ..PolicyOptions::default()
    }));
    let r = rendered(&lb(vec![p], vec![]));
    assert!(entries(&r).is_empty());
    assert!(
        r.diagnostics[0]
            .message
            .contains("external auth (auth-url)")
    );
}

#[test]
fn redirects_name_the_https_port_and_keep_path_and_query() {
    let action = PolicyAction::RedirectToHttps { status: 308 };
    let p = policy(
        "p",
        vec![rule(RuleType::HostName, CompareType::EqualTo, "a.com")],
        action,
    );
    let r = rendered(&lb(vec![p], vec![]));
    assert!(r.config.contains(
        "http-request redirect location \"https://%[var(txn.host)]:8443%[pathq]\" code 308"
    ));
}

#[test]
fn shape_ignores_only_the_members() {
    let a = rendered(&lb(vec![], vec![member(1, true)]));
    let mut changed = vec![member(1, false)];
    changed[0].weight = 7;
    let b = rendered(&lb(vec![], changed));
    assert_ne!(a.config, b.config);
    assert_eq!(a.shape(), b.shape());
    // Members come and go through spare slots: the same shape, as long as the retry count
    // (the pool's tries, at most one per member) stays.
    let three = rendered(&lb(vec![], (1..=3).map(|n| member(n, true)).collect()));
    let four = rendered(&lb(vec![], (1..=4).map(|n| member(n, true)).collect()));
    assert_eq!(three.shape(), four.shape());
    let c = rendered(&lb(vec![], vec![member(1, true), member(2, true)]));
    assert_ne!(a.shape(), c.shape());
    // Not with cookie affinity (a cookie value per member, no spares).
    let sticky = |members| {
        let mut l = lb(vec![], members);
        std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut l.pools[0]).settings)
            .affinity = Some(CookieAffinity {
            name: "c".into(),
            max_age_s: None,
            path: None,
        });
        rendered(&l)
    };
    let one = sticky(vec![member(1, true)]);
    assert!(!one.config.contains("portico-spare-"));
    assert_ne!(
        one.shape(),
        sticky(vec![member(1, true), member(2, true)]).shape()
    );
    // Other settings change the shape.
    let mut slow = lb(vec![], vec![member(1, true)]);
    let pool = std::sync::Arc::make_mut(&mut slow.pools[0]);
    std::sync::Arc::make_mut(&mut pool.settings)
        .passive
        .failures = 9;
    assert_ne!(a.shape(), rendered(&slow).shape());
}

#[test]
fn pool_settings_become_backend_rules_timeouts_and_retries() {
    let mut lb = lb(
        vec![policy("all", vec![], to_pool())],
        vec![member(1, true), member(2, true), member(3, false)],
    );
    let settings = &mut std::sync::Arc::make_mut(&mut lb.pools[0]).settings;
    let settings = std::sync::Arc::make_mut(settings);
    settings.allow_sources = vec!["10.0.0.0/8".parse().unwrap(), "::1".parse().unwrap()];
    settings.deny_sources = vec!["10.1.0.0/16".parse().unwrap()];
    settings.max_body_bytes = Some(1024);
    settings.connect_timeout_ms = Some(250);
    settings.read_timeout_ms = Some(2000);
    settings.tries = Some(0);
    let r = rendered(&lb);
    let backend = r.config.split("\nbackend ").nth(1).unwrap();
    let rules: Vec<&str> = backend.lines().map(str::trim).collect();
    let at = |needle: &str| {
        rules
            .iter()
            .position(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{backend}"))
    };
    // The denied ranges first: a client in both lists is refused.
    assert_eq!(
        rules[at("http-request deny deny_status 403")],
        "http-request deny deny_status 403 if { src 10.1.0.0/16 }"
    );
    assert_eq!(
        rules[at("http-request deny deny_status 403 unless")],
        "http-request deny deny_status 403 unless { src 10.0.0.0/8 ::1/128 }"
    );
    assert_eq!(
        rules[at("http-request deny deny_status 413 if { req.hdr")],
        "http-request deny deny_status 413 if { req.hdr_val(content-length) gt 1024 }"
    );
    assert!(rules[at("http-request wait-for-body")].contains("at-least 1025"));
    assert_eq!(rules[at("timeout connect")], "timeout connect 250ms");
    assert_eq!(rules[at("timeout server")], "timeout server 2s");
    // Tries 0: every member (three), so two retries.
    assert_eq!(rules[at("retries")], "retries 2");
    assert!(at("retry-on") > 0 && at("option redispatch 1") > 0);
    // The pool's refusals come before its 503.
    assert!(at("http-request deny deny_status 403") < at("http-request return status 503"));
    // The frontend no longer refuses bodies: each pool does, with its own limit.
    let frontend = r.config.split("\nbackend ").next().unwrap();
    assert!(!frontend.contains("deny_status 413"), "{frontend}");
}

#[test]
fn backend_tls_subject_alt_names_other_than_the_server_name_fail_closed() {
    use portico_model::SubjectAltName;
    let render = |names: Vec<SubjectAltName>| {
        let mut lb = lb(
            vec![policy("all", vec![], to_pool())],
            vec![member(1, true)],
        );
        let pool = std::sync::Arc::make_mut(&mut lb.pools[0]);
        pool.protocol = PoolProtocol::Https;
        std::sync::Arc::make_mut(&mut pool.settings).upstream_tls = Some(UpstreamTls {
            verify: true,
            ca: Some(ObjectRef::new("Secret", "default", "upstream-ca")),
            server_name: Some("api.internal".into()),
            sni: true,
            subject_alt_names: names,
        });
        let r = rendered(&lb);
        let line = lines_with(&r, " 10.0.0.1:8080 ")[0].to_owned();
        (line, r.diagnostics)
    };
    // The server name itself: what haproxy checks anyway (against the SNI it sends).
    let (line, diagnostics) = render(vec![SubjectAltName::Hostname("api.internal".into())]);
    assert!(
        line.contains("ca-file \"/state/lb/ca-0123.pem\" verifyhost \"api.internal\" sni str(\"api.internal\")"),
        "{line}"
    );
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    for names in [
        vec![SubjectAltName::Hostname("web.internal".into())],
        vec![SubjectAltName::Uri("spiffe://a/b".into())],
        vec![
            SubjectAltName::Hostname("a.internal".into()),
            SubjectAltName::Hostname("b.internal".into()),
        ],
    ] {
        let (line, diagnostics) = render(names);
        let closed =
            format!("ca-file \"/state/lb/{DEFAULT_CERTIFICATE_FILE}\" verifyhost \"api.internal\"");
        assert!(line.contains(&closed), "{line}");
        assert!(
            diagnostics
                .iter()
                .any(|d| d.field.contains("subjectAltNames")),
            "{diagnostics:?}"
        );
    }
}

#[test]
fn verifying_pools_name_their_ca_file_server_name_and_sni_and_fail_closed_without_one() {
    let server = |tls: UpstreamTls| {
        let mut lb = lb(
            vec![policy("all", vec![], to_pool())],
            vec![member(1, true)],
        );
        std::sync::Arc::make_mut(&mut lb.pools[0]).protocol = PoolProtocol::Https;
        let pool = std::sync::Arc::make_mut(&mut lb.pools[0]);
        std::sync::Arc::make_mut(&mut pool.settings).upstream_tls = Some(tls);
        let r = rendered(&lb);
        let line = lines_with(&r, " 10.0.0.1:8080 ")[0].to_owned();
        let after = line.split_once(" weight ").unwrap().1;
        let tls = after.split_once(' ').map_or("", |(_, rest)| rest);
        // Passive health's options follow the TLS ones.
        tls.split(" check ").next().unwrap_or_default().to_owned()
    };
    let ca = Some(ObjectRef::new("Secret", "default", "upstream-ca"));
    assert_eq!(
        server(UpstreamTls {
            verify: true,
            ca: ca.clone(),
            server_name: None,
            sni: false,
            subject_alt_names: vec![],
        }),
        "ssl verify required ca-file \"/state/lb/ca-0123.pem\" verifyhost \"web.default.svc\""
    );
    assert_eq!(
        server(UpstreamTls {
            verify: true,
            ca: ca.clone(),
            server_name: Some("api.internal".into()),
            sni: true,
            subject_alt_names: vec![],
        }),
        "ssl verify required ca-file \"/state/lb/ca-0123.pem\" verifyhost \"api.internal\" sni str(\"api.internal\")"
    );
    // A Secret without a usable bundle: the default certificate stands in, which signed no
    // member's certificate.
    let missing = Some(ObjectRef::new("Secret", "default", "missing"));
    assert_eq!(
        server(UpstreamTls {
            verify: true,
            ca: missing,
            server_name: None,
            sni: false,
            subject_alt_names: vec![],
        }),
        format!(
            "ssl verify required ca-file \"/state/lb/{DEFAULT_CERTIFICATE_FILE}\" verifyhost \"web.default.svc\""
        )
    );
    assert_eq!(
        server(UpstreamTls {
            verify: false,
            ca,
            server_name: None,
            sni: false,
            subject_alt_names: vec![],
        }),
        "ssl verify none"
    );
}

/// A load balancer with one member, its HTTP listener and a TERMINATED_HTTPS one on 443.
fn lb_with_https() -> LoadBalancer {
    let mut lb = lb(vec![], vec![member(1, true)]);
    let mut listeners = (*lb.listeners).clone();
    let mut https = listeners[0].clone();
    https.id = ListenerId::derive("https");
    https.protocol = Protocol::TerminatedHttps;
    https.port = 443;
    listeners.push(https);
    lb.listeners = std::sync::Arc::new(listeners);
    lb
}

#[test]
fn transparent_binds_say_so_on_the_http_and_https_bind_lines_only_then() {
    let dir = PathBuf::from("/state/lb");
    let certificates = BTreeMap::new();
    let lb = lb_with_https();
    for transparent in [true, false] {
        let input = Input {
            dir: &dir,
            binds: Binds {
                http: Some(([198, 18, 0, 5], 80).into()),
                https: Some(([198, 18, 0, 5], 443).into()),
                transparent,
                floating: None,
            },
            certificates: &certificates,
            ca_files: &ca_files(),
            credentials: &portico_model::Credentials::new(),
            limits: &portico_model::Limits::default(),
            tcp: Default::default(),
            access_log: None,
            descriptors: None,
        };
        let r = render(&lb, &input);
        let binds = lines_with(&r, "bind 198.18.0.5:");
        assert_eq!(binds.len(), 2, "{binds:?}");
        assert!(
            binds[0] == "bind 198.18.0.5:80 transparent" || !transparent,
            "{binds:?}"
        );
        assert!(
            binds[1].starts_with("bind 198.18.0.5:443 transparent ssl ") || !transparent,
            "{binds:?}"
        );
        if !transparent {
            assert!(
                binds.iter().all(|b| !b.contains("transparent")),
                "{binds:?}"
            );
        }
    }
}

/// A floating IP is bound beside the VIP on every listener's port, with the same options.
#[test]
fn the_floating_ip_is_bound_beside_the_vip_on_the_same_ports() {
    let dir = PathBuf::from("/state/lb");
    let certificates = BTreeMap::new();
    let lb = lb_with_https();
    let binds = Binds {
        http: Some(([198, 18, 0, 5], 80).into()),
        https: Some(([198, 18, 0, 5], 443).into()),
        transparent: true,
        floating: Some([198, 19, 0, 7].into()),
    };
    let input = Input {
        dir: &dir,
        binds,
        certificates: &certificates,
        ca_files: &ca_files(),
        credentials: &portico_model::Credentials::new(),
        limits: &portico_model::Limits::default(),
        tcp: Default::default(),
        access_log: None,
        descriptors: None,
    };
    let r = render(&lb, &input);
    let floating = lines_with(&r, "bind 198.19.0.7:");
    assert_eq!(floating.len(), 2, "{floating:?}");
    assert_eq!(floating[0], "bind 198.19.0.7:80 transparent");
    assert!(
        floating[1].starts_with("bind 198.19.0.7:443 transparent ssl "),
        "{floating:?}"
    );
    assert_eq!(lines_with(&r, "bind 198.18.0.5:").len(), 2);
    let all = binds.all();
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all.contains(&([198, 19, 0, 7], 443).into()));
}

/// haproxy's own alerts (2.6) for a bind that failed get the fix; others get nothing.
#[test]
fn a_failed_bind_names_its_fix() {
    let alert = |why: &str| {
        format!(
            "[ALERT]    (8368) : Binding [a.cfg:9] for frontend f: cannot bind socket ({why}) for [198.18.250.7:18080]"
        )
    };
    assert!(bind_fix(&alert("Address already in use")).contains("another process listens"));
    assert!(bind_fix(&alert("Permission denied")).contains("CAP_NET_BIND_SERVICE"));
    assert!(
        bind_fix(&alert("Cannot assign requested address")).contains("net.ipv4.ip_nonlocal_bind=1")
    );
    assert!(!bind_fix(&alert("Something else")).is_empty());
    assert_eq!(
        bind_fix("[ALERT] parsing [a.cfg:3]: unknown keyword 'freebind'"),
        ""
    );
}

/// Under a short descriptor limit: the passive-only pool's servers lose `check` (and
/// `observe`, which needs it), the actively checked pool keeps both, maxconn is what is left,
/// and a warning on the IngressClass says so.
#[test]
fn a_short_descriptor_limit_leaves_passive_checks_out_and_lowers_maxconn() {
    let members = (1..=200).map(|n| member(n, true)).collect();
    let mut lb = lb(vec![], members);
    let mut active = (*lb.pools[0]).clone();
    active.id = PoolId::derive("checked");
    std::sync::Arc::make_mut(&mut active.settings).active = Some(ActiveHealth {
        path: "/healthz".into(),
        interval_ms: 1000,
        timeout_ms: 500,
        healthy: 1,
        unhealthy: 1,
    });
    active.members.truncate(10);
    lb.pools.push(std::sync::Arc::new(active));
    let with = |descriptors| {
        let dir = PathBuf::from("/state/lb");
        let certificates = BTreeMap::new();
        let input = Input {
            dir: &dir,
            binds: Binds::default(),
            certificates: &certificates,
            ca_files: &ca_files(),
            credentials: &portico_model::Credentials::new(),
            limits: &portico_model::Limits::default(),
            tcp: Default::default(),
            access_log: None,
            descriptors,
        };
        render(&lb, &input)
    };
    let roomy = with(Some(20_000));
    assert!(roomy.diagnostics.is_empty(), "{:?}", roomy.diagnostics);
    assert_eq!(lines_with(&roomy, " check inter ").len(), 200 + 1 + 10 + 1);
    assert_eq!(
        lines_with(&roomy, "maxconn 4096").len(),
        2,
        "global and defaults"
    );

    let short = with(Some(1000));
    let checked = lines_with(&short, " check inter ");
    assert_eq!(checked.len(), 10 + 1, "the active pool's members and spare");
    assert!(
        checked.iter().all(|l| !l.contains("downinter")),
        "{checked:?}"
    );
    // Passive ejection stays where the servers are checked anyway.
    assert_eq!(lines_with(&short, "observe layer7").len(), 11);
    assert_eq!(lines_with(&short, "option httpchk").len(), 1);
    let fit = fit(
        Some(1000),
        &Needs {
            listeners: 0,
            active_checks: 11,
            passive_checks: 201,
            max_connections: 4096,
        },
    );
    let maxconn = format!("maxconn {}", fit.maxconn);
    assert!(fit.maxconn < 4096);
    assert_eq!(lines_with(&short, &maxconn).len(), 2, "global and defaults");
    let [d] = short.diagnostics.as_slice() else {
        panic!("{:?}", short.diagnostics)
    };
    assert_eq!(d.object, ObjectRef::new("IngressClass", "", "portico"));
    assert_eq!(d.severity, Severity::Warning);
    assert!(
        d.message
            .contains("passive health checks left out on 201 servers")
            && d.message.contains(&format!(
                "haproxy's maxconn reduced from 4096 to {}",
                fit.maxconn
            ))
            && d.message.contains("descriptor limit 1000"),
        "{}",
        d.message
    );
}

/// A load balancer whose HTTPS listener passes `hosts` through to a second pool, `secure`.
fn lb_with_passthrough(hosts: &[&str]) -> LoadBalancer {
    let mut lb = lb_with_https();
    let secure = PoolId::derive("secure");
    let mut pool = (*lb.pools[0]).clone();
    pool.id = secure;
    pool.name = "default_secure_443".into();
    pool.members = vec![member(7, true)];
    lb.pools.push(std::sync::Arc::new(pool));
    let mut listeners = (*lb.listeners).clone();
    listeners[1].tls = Some(ListenerTls {
        passthrough: (hosts.iter())
            .map(|h| SniPassthrough {
                host: (*h).to_owned(),
                pool: secure,
                source: ObjectRef::new("Ingress", "default", "pass"),
                terminate: false,
            })
            .collect(),
        ..ListenerTls::default()
    });
    lb.listeners = std::sync::Arc::new(listeners);
    lb
}

static NO_CREDENTIALS: Credentials = Credentials::new();

fn passthrough_input<'a>(
    dir: &'a std::path::Path,
    certificates: &'a BTreeMap<ObjectRef, String>,
    ca: &'a BTreeMap<ObjectRef, String>,
    limits: &'a Limits,
) -> Input<'a> {
    Input {
        dir,
        binds: Binds {
            http: Some(([127, 0, 0, 1], 8080).into()),
            https: Some(([127, 0, 0, 1], 8443).into()),
            transparent: false,
            floating: None,
        },
        certificates,
        ca_files: ca,
        credentials: &NO_CREDENTIALS,
        limits,
        tcp: Default::default(),
        access_log: None,
        descriptors: None,
    }
}

#[test]
fn passthrough_hosts_get_a_tcp_frontend_on_the_https_address_and_the_rest_a_hop() {
    let dir = PathBuf::from("/state/lb");
    let (certificates, ca, limits) = (BTreeMap::new(), ca_files(), Limits::default());
    let input = passthrough_input(&dir, &certificates, &ca, &limits);
    let r = render(
        &lb_with_passthrough(&["*.a.test", "b.test", "*.x.a.test"]),
        &input,
    );
    let config = &r.config;
    if std::env::var_os("PRINT_CONFIG").is_some() {
        println!("=====\n{config}=====");
    }
    let secure = sni::tcp_backend(PoolId::derive("secure"));
    let https = ListenerId::derive("https");
    // The address is the SNI frontend's; the HTTPS frontend binds the hop.
    assert_eq!(
        lines_with(&r, "bind 127.0.0.1:8443"),
        ["bind 127.0.0.1:8443"]
    );
    let hop = lines_with(&r, "bind \"unix@/state/lb/https.sock\"");
    assert!(
        hop[0].starts_with("bind \"unix@/state/lb/https.sock\" accept-proxy ssl "),
        "{hop:?}"
    );
    assert!(config.contains("server https \"unix@/state/lb/https.sock\" send-proxy-v2"));
    assert!(config.contains("tcp-request content accept if { req.ssl_hello_type 1 }"));
    // Exact names first, then the longest suffix: the proxy's matching.
    let uses = lines_with(&r, "sess.portico_sni) -m");
    assert_eq!(
        uses,
        [
            format!("use_backend {secure} if {{ var(sess.portico_sni) -m str b.test }}"),
            format!("use_backend {secure} if {{ var(sess.portico_sni) -m end .x.a.test }}"),
            format!("use_backend {secure} if {{ var(sess.portico_sni) -m end .a.test }}"),
        ]
    );
    assert!(config.contains(&format!("default_backend {https}-terminate")));
    // The passthrough pool has a `mode tcp` backend, with its member.
    assert_eq!(config.matches(&format!("backend {secure}\n")).count(), 1);
    let tcp = &config[config.find(&format!("backend {secure}\n")).unwrap()..];
    let tcp = tcp.split("\n\n").next().unwrap();
    assert!(
        tcp.contains("server ") && tcp.contains("10.0.0.7:8080"),
        "{tcp}"
    );
    assert!(
        tcp.starts_with(&format!("backend {secure}\n    mode tcp\n")),
        "{tcp}"
    );
    assert!(!tcp.contains("http-request"), "{tcp}");
    assert!(r.servers.iter().any(|s| s.backend == secure));
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn without_passthrough_hosts_the_https_frontend_binds_the_address_itself() {
    let dir = PathBuf::from("/state/lb");
    let (certificates, ca, limits) = (BTreeMap::new(), ca_files(), Limits::default());
    let input = passthrough_input(&dir, &certificates, &ca, &limits);
    let r = render(&lb_with_passthrough(&[]), &input);
    assert!(!r.config.contains("mode tcp") && !r.config.contains("https.sock"));
    assert!(lines_with(&r, "bind 127.0.0.1:8443")[0].contains(" ssl "));
}

#[test]
fn a_passthrough_host_haproxy_cannot_select_is_refused_with_a_diagnostic() {
    let dir = PathBuf::from("/state/lb");
    let (certificates, ca, limits) = (BTreeMap::new(), ca_files(), Limits::default());
    let input = passthrough_input(&dir, &certificates, &ca, &limits);
    let r = render(&lb_with_passthrough(&["ok.test", "bad }.test"]), &input);
    assert_eq!(lines_with(&r, "sess.portico_sni) -m").len(), 1);
    assert!(!r.config.contains("bad"));
    let d = &r.diagnostics[0];
    assert_eq!(d.object.name, "pass");
    assert!(
        d.message.contains("\"bad }.test\"") && d.message.contains("not served by haproxy"),
        "{d:?}"
    );
}

fn host_root(host: &str) -> Vec<L7Rule> {
    vec![
        rule(RuleType::HostName, CompareType::EqualTo, host),
        rule(RuleType::Path, CompareType::PathPrefix, "/"),
    ]
}

#[test]
fn a_policy_with_options_is_named_in_its_map_value_and_gets_its_own_lines() {
    let mut vh = policy("vh", host_root("vh.test"), to_pool());
    vh.options = Some(std::sync::Arc::new(PolicyOptions {
        upstream_host: Some("internal.svc".into()),
        ..Default::default()
    }));
    let plain = policy("plain", host_root("plain.test"), to_pool());
    let r = rendered(&lb(vec![vh, plain], vec![]));
    let pool = PoolId::derive("pool").to_string();
    let id = L7PolicyId::derive("vh");
    let values: Vec<String> = entries(&r).into_iter().map(|(_, _, v)| v).collect();
    assert!(values.contains(&format!("{pool}~{id}")), "{values:?}");
    assert!(values.contains(&pool), "{values:?}");
    assert_eq!(
        lines_with(&r, "set-header Host"),
        [format!(
            "http-request set-header Host \"internal.svc\" if {{ var(txn.policy) -m str {id} }}"
        )]
    );
    // The policy's lines come after the lookup that sets txn.policy, before use_backend.
    let at = |needle: &str| r.config.find(needle).unwrap();
    assert!(at("set-var(txn.policy)") < at("set-header Host"));
    assert!(at("set-header Host") < at("use_backend"));
}

#[test]
fn redirects_to_urls_are_backends_and_a_relative_one_keeps_scheme_and_host() {
    let to = |status, url: &str| PolicyAction::RedirectToUrl {
        status,
        url: url.into(),
    };
    let policies = vec![
        policy(
            "pr",
            host_root("pr.test"),
            to(301, "https://example.com/new?a=b"),
        ),
        policy("ar", host_root("ar.test"), to(302, "/app1")),
        policy("pct", host_root("pct.test"), to(301, "https://x.test/%41")),
    ];
    let r = rendered(&lb(policies, vec![]));
    assert_eq!(
        lines_with(&r, "http-request redirect"),
        [
            "http-request redirect location \"%[ssl_fc,iif(https,http)]://%[req.hdr(host)]/app1\" code 302",
            "http-request redirect location \"https://example.com/new\\x3fa\\x3db\" code 301",
        ]
    );
    let text = format!("{:?}", r.diagnostics);
    assert!(text.contains("holds a %"), "{text}");
    assert_eq!(entries(&r).len(), 4, "pct.test is not routed");
}

#[test]
fn header_modifiers_are_policy_lines_and_unwritable_values_are_refused() {
    let changes = |set: &str| HeaderChanges {
        set: vec![("x-set".into(), set.into())],
        add: vec![("x-add".into(), "a b".into())],
        remove: vec!["x-gone".into()],
    };
    let mut ok = policy("ok", host_root("ok.test"), to_pool());
    ok.options = Some(std::sync::Arc::new(PolicyOptions {
        request_headers: Some(changes("v")),
        response_headers: Some(changes("w")),
        ..Default::default()
    }));
    let mut bad = policy("bad", host_root("bad.test"), to_pool());
    bad.options = Some(std::sync::Arc::new(PolicyOptions {
        request_headers: Some(changes("%[src]")),
        ..Default::default()
    }));
    let r = rendered(&lb(vec![ok, bad], vec![]));
    let id = L7PolicyId::derive("ok");
    let when = format!("if {{ var(txn.policy) -m str {id} }}");
    let mut want = vec![];
    for side in ["request", "response"] {
        let v = if side == "request" { "v" } else { "w" };
        want.push(format!("http-{side} set-header x-set \"{v}\" {when}"));
        want.push(format!("http-{side} add-header x-add \"a\\x20b\" {when}"));
        want.push(format!("http-{side} del-header x-gone {when}"));
    }
    assert_eq!(lines_with(&r, "-header x-"), want);
    let text = format!("{:?}", r.diagnostics);
    assert!(
        text.contains("RequestHeaderModifier") && text.contains("holds a %"),
        "{text}"
    );
    assert_eq!(entries(&r).len(), 2, "bad.test is not routed");
}

#[test]
fn a_terminated_host_goes_through_the_stream_hop_and_a_refused_name_to_no_server() {
    let dir = PathBuf::from("/state/lb");
    let (certificates, ca, limits) = (BTreeMap::new(), ca_files(), Limits::default());
    let input = passthrough_input(&dir, &certificates, &ca, &limits);
    let mut lb = lb_with_passthrough(&["raw.t.test", "term.t.test"]);
    let mut listeners = (*lb.listeners).clone();
    let tls = listeners[1].tls.as_mut().unwrap();
    tls.passthrough[1].terminate = true;
    tls.refused = vec!["*.t.test".to_owned(), "bad }.test".to_owned()];
    lb.listeners = std::sync::Arc::new(listeners);
    let r = render(&lb, &input);
    let config = &r.config;
    if std::env::var_os("PRINT_CONFIG").is_some() {
        println!("=====\n{config}=====");
    }
    let secure = sni::tcp_backend(PoolId::derive("secure"));
    let https = ListenerId::derive("https");
    // On the address: the raw host to its pool, the terminated one to the stream hop, the
    // rest of the Terminate listener's names to a backend without server.
    let uses = lines_with(&r, "var(sess.portico_sni) -m");
    assert_eq!(
        uses,
        [
            format!("use_backend {secure} if {{ var(sess.portico_sni) -m str raw.t.test }}"),
            format!("use_backend {https}-stream if {{ var(sess.portico_sni) -m str term.t.test }}"),
            format!("use_backend {https}-refuse if {{ var(sess.portico_sni) -m end .t.test }}"),
            // The stream frontend: the decrypted stream of the terminated name to its pool.
            format!("use_backend {secure} if {{ var(sess.portico_sni) -m str term.t.test }}"),
        ]
    );
    let stream = lines_with(&r, "bind \"unix@/state/lb/tls-stream.sock\"");
    assert_eq!(stream.len(), 1, "{stream:?}");
    assert!(
        stream[0].contains(" accept-proxy ssl crt default.pem crt-list ")
            && !stream[0].contains("alpn"),
        "{stream:?}"
    );
    assert!(config.contains("server stream \"unix@/state/lb/tls-stream.sock\" send-proxy-v2"));
    assert!(config.contains("ssl_fc_sni,lower"));
    assert!(config.contains(&format!("backend {https}-refuse\n    mode tcp\n")));
    // A name haproxy cannot compare is left out.
    assert!(!config.contains("bad"));
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn a_match_haproxy_cannot_write_is_refused_naming_the_route_and_the_match() {
    let mut rules = host_root("h.test");
    rules.push(L7Rule {
        key: Some("x,y".into()),
        ..rule(RuleType::Header, CompareType::EqualTo, "v")
    });
    let mut bad = policy("bad", rules, to_pool());
    bad.source = std::sync::Arc::new(ObjectRef::new("HTTPRoute", "default", "comma"));
    let r = rendered(&lb(vec![bad], vec![]));
    let d = &r.diagnostics[..];
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].object.name.as_str(), d[0].field.as_str()),
        ("comma", "spec.rules")
    );
    assert!(
        d[0].message.contains("header match") && d[0].message.contains("\"x,y\""),
        "{d:?}"
    );
    assert_eq!(entries(&r).len(), 0);
}

#[test]
fn more_conditions_go_first_and_a_group_none_of_which_holds_leaves_the_request_to_the_next_tier() {
    let header = |name: &str| L7Rule {
        key: Some(name.into()),
        ..rule(RuleType::Header, CompareType::EqualTo, "1")
    };
    let mut two = host_root("h.test");
    two.extend([header("a"), header("b")]);
    let mut one = host_root("h.test");
    one.push(header("a"));
    let policies = vec![
        policy("one", one, to_pool()),
        policy("two", two, PolicyAction::Reject { status: 403 }),
        policy(
            "any",
            vec![rule(RuleType::Path, CompareType::PathPrefix, "/")],
            PolicyAction::Reject { status: 404 },
        ),
    ];
    let mut policies: Vec<_> = policies.into_iter().map(std::sync::Arc::new).collect();
    portico_model::order::sort(&mut policies);
    let policies = policies.iter().map(|p| L7Policy::clone(p)).collect();
    let r = rendered(&lb(policies, vec![]));
    let group = lines_with(&r, "-m str =g0");
    assert_eq!(group.len(), 2, "{group:?}");
    assert!(
        group[0].starts_with("http-request set-var(txn.route) str(portico_reject_403)"),
        "{group:?}"
    );
    assert!(
        group[0].ends_with("{ req.fhdr(a) -m str -- \"1\" } { req.fhdr(b) -m str -- \"1\" }"),
        "{group:?}"
    );
    // Neither holds: the group is undone before the wildcard and host-less tiers' lookups.
    let at = |needle: &str| r.config.find(needle).unwrap();
    assert!(at("unset-var(txn.route)") > at(group[1]));
    assert!(at("unset-var(txn.route)") < at("wild-exact.map"));
    assert!(entries(&r).contains(&e("any-prefix", "/", "portico_reject_404")));
}
