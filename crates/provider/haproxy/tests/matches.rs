//! Conditions (header, query parameter, method, cookie matches, regular expressions) and
//! weighted splits render to a configuration `haproxy -c` accepts.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::*;
use std::sync::Arc;

fn rule(rule_type: RuleType, compare_type: CompareType, key: Option<&str>, value: &str) -> L7Rule {
    L7Rule {
        id: L7RuleId::derive(&format!("{key:?}/{value}")),
        rule_type,
        compare_type,
        key: key.map(str::to_owned),
        value: value.to_owned(),
    }
}

fn policy(name: &str, mut rules: Vec<L7Rule>, action: PolicyAction) -> L7Policy {
    rules.push(rule(
        RuleType::HostName,
        CompareType::EqualTo,
        None,
        "m.test",
    ));
    rules.push(rule(RuleType::Path, CompareType::PathPrefix, None, "/"));
    L7Policy {
        id: L7PolicyId::derive(name),
        action,
        rules,
        source: Arc::new(ObjectRef::new("HTTPRoute", "default", name)),
        precedence: 0,
        options: None,
    }
}

/// A URLRewrite of the path and a RequestRedirect with the same path change, on their own
/// paths.
fn rewrite(name: &str, path: PathRewrite) -> [L7Policy; 2] {
    let on = |p: &str| {
        vec![rule(
            RuleType::Path,
            CompareType::PathPrefix,
            None,
            &format!("/{name}{p}"),
        )]
    };
    let mut forward = policy(
        name,
        on("/f"),
        PolicyAction::RedirectToPool {
            pool: PoolId::derive("pool"),
        },
    );
    forward.options = Some(Arc::new(PolicyOptions {
        path: Some(path.clone()),
        ..Default::default()
    }));
    let redirect = Redirect {
        status: 302,
        scheme: "http".into(),
        hostname: None,
        port: 80,
        path: Some(path),
        same_scheme: false,
    };
    [
        forward,
        policy(
            &format!("{name}-r"),
            on("/r"),
            PolicyAction::RequestRedirect(redirect),
        ),
    ]
}

fn lb() -> LoadBalancer {
    let pool = PoolId::derive("pool");
    let to_pool = PolicyAction::RedirectToPool { pool };
    let header = |value| {
        rule(
            RuleType::Header,
            CompareType::EqualTo,
            Some("X-Version"),
            value,
        )
    };
    let headers_modified = Arc::new(PolicyOptions {
        request_headers: Some(HeaderChanges {
            set: vec![("x-share".into(), "b".into())],
            ..Default::default()
        }),
        ..Default::default()
    });
    let split = PolicyAction::RedirectToPools {
        pools: vec![
            WeightedPool {
                pool: Some(pool),
                weight: 2,
                options: None,
            },
            WeightedPool {
                pool: Some(pool),
                weight: 1,
                options: Some(headers_modified),
            },
            WeightedPool {
                pool: None,
                weight: 1,
                options: None,
            },
            WeightedPool {
                pool: Some(pool),
                weight: 0,
                options: None,
            },
        ],
    };
    let mut policies = vec![
        policy(
            "both",
            vec![
                header("v1, v2"),
                rule(RuleType::Query, CompareType::EqualTo, Some("a"), "-i"),
            ],
            to_pool.clone(),
        ),
        policy(
            "regex",
            vec![rule(
                RuleType::Header,
                CompareType::Regex,
                Some("x-re"),
                r"v[0-9]+\.(?-i:a)$",
            )],
            to_pool.clone(),
        ),
        policy(
            "method",
            vec![rule(RuleType::Method, CompareType::EqualTo, None, "PATCH")],
            to_pool.clone(),
        ),
        policy(
            "cookie",
            vec![rule(
                RuleType::Cookie,
                CompareType::EqualTo,
                Some("canary"),
                "always",
            )],
            to_pool.clone(),
        ),
        policy("split", vec![], split),
    ];
    policies.extend(rewrite(
        "full",
        PathRewrite::Full {
            path: "/one two".into(),
        },
    ));
    let prefix = |prefix: &str, replacement: &str| PathRewrite::Prefix {
        prefix: prefix.into(),
        replacement: replacement.into(),
    };
    policies.extend(rewrite("prefix", prefix("/a.b(c)", "/new/")));
    policies.extend(rewrite("strip", prefix("/s", "/")));
    for suffix in ["wildcard.io", "a.wildcard.io"] {
        let mut wildcard = policy(suffix, vec![], to_pool.clone());
        wildcard.rules = vec![
            rule(
                RuleType::HostName,
                CompareType::WildcardSuffix,
                None,
                suffix,
            ),
            rule(RuleType::Header, CompareType::EqualTo, Some("x"), "1"),
        ];
        policies.push(wildcard);
    }
    let mut policies: Vec<_> = policies.into_iter().map(std::sync::Arc::new).collect();
    portico_model::order::sort(&mut policies);
    LoadBalancer {
        id: LoadBalancerId::derive("lb"),
        name: "lb".into(),
        origin: ObjectRef::new("GatewayClass", "", "portico"),
        provider: "haproxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(vec![Listener {
            id: ListenerId::derive("http"),
            name: "HTTP:80".into(),
            protocol: Protocol::Http,
            port: 80,
            policies,
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

#[test]
fn conditions_and_splits_pass_haproxy_check() {
    let lb = lb();
    let dir = tempfile::tempdir().unwrap();
    let rendered = support::render_in(&lb, dir.path());
    assert_eq!(rendered.diagnostics, []);
    for needle in [
        "req.fhdr(X-Version) -m str --",
        "var(txn.query_61) -m str -- \"-i\"",
        "set-var(txn.query_61) urlp(a)",
        "method -m str -- \"PATCH\"",
        "req.cook(canary) -m str --",
        "req.fhdr(x-re) -m reg -i --",
        "var(txn.draw),mod(4) -m int 3:3",
        "set-header x-share \"b\" if { var(txn.policy) -m str ",
        "set-var(txn.route_sfx) str(*.a.wildcard.io),concat(,txn.route_path) if !{ var(txn.route) -m found } { var(txn.host) -m end .a.wildcard.io }",
        "http-request set-path \"/one\\x20two\" if { var(txn.policy) -m str ",
        "    http-request replace-path \"\\x5e/s\\x28/.*\\x29\\x24\" \"\\x5c1\"\n    http-request redirect location",
    ] {
        assert!(
            rendered.config.contains(needle),
            "{needle}\n{}",
            rendered.config
        );
    }
    // The longer suffix is looked up first.
    let at = |n: &str| rendered.config.find(n).unwrap();
    assert!(at("str(*.a.wildcard.io)") < at("str(*.wildcard.io)"));
    support::check(&lb).unwrap();
}
