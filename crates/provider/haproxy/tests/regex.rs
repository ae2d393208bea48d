//! Hosts whose paths are regular expressions (ingress-nginx's use-regex and rewrite-target,
//! the Gateway API's RegularExpression) render to ordered frontend lines `haproxy -c`
//! accepts; the rewrite is a `replace-path`; what haproxy could read otherwise is refused.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::*;
use std::sync::Arc;

fn rule(rule_type: RuleType, compare_type: CompareType, value: &str) -> L7Rule {
    L7Rule {
        id: L7RuleId::derive(value),
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    }
}

fn policy(name: &str, host: L7Rule, path: (CompareType, &str)) -> L7Policy {
    L7Policy {
        id: L7PolicyId::derive(name),
        action: PolicyAction::RedirectToPool {
            pool: PoolId::derive("pool"),
        },
        rules: vec![host, rule(RuleType::Path, path.0, path.1)],
        source: Arc::new(ObjectRef::new("Ingress", "default", name)),
        precedence: 0,
        options: None,
    }
}

fn host(h: &str) -> L7Rule {
    rule(RuleType::HostName, CompareType::EqualTo, h)
}

fn rewrite(mut p: L7Policy, target: &str, prefix: Option<&str>) -> L7Policy {
    let pattern = p.rules[1].value.clone();
    p.options = Some(Arc::new(PolicyOptions {
        rewrite: Some(Rewrite {
            pattern,
            target: target.into(),
            forwarded_prefix: prefix.map(str::to_owned),
        }),
        ..Default::default()
    }));
    p
}

fn lb(policies: Vec<L7Policy>) -> LoadBalancer {
    let mut policies: Vec<_> = policies.into_iter().map(std::sync::Arc::new).collect();
    portico_model::order::sort(&mut policies);
    let pool = PoolId::derive("pool");
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
fn regex_hosts_are_ordered_lines_and_rewrites_replace_the_path() {
    let regex = (CompareType::Regex, "/something(/|$)(.*)");
    let policies = vec![
        rewrite(
            policy("rw", host("rw.test"), regex),
            "/$2",
            Some("/something"),
        ),
        policy(
            "acme",
            host("rw.test"),
            (CompareType::Regex, "/.well-known"),
        ),
        policy("plain", host("plain.test"), (CompareType::PathPrefix, "/p")),
        policy(
            "wild",
            rule(RuleType::HostName, CompareType::WildcardLabel, "w.test"),
            (CompareType::Regex, "/w[0-9]+"),
        ),
        policy(
            "sfx",
            rule(RuleType::HostName, CompareType::WildcardSuffix, "s.test"),
            (CompareType::Regex, "(?-i:/S[a-z]*)$"),
        ),
    ];
    let lb = lb(policies);
    let dir = tempfile::tempdir().unwrap();
    let rendered = support::render_in(&lb, dir.path());
    assert_eq!(rendered.diagnostics, []);
    let config = &rendered.config;
    for needle in [
        // The longer expression first, the host compared, the path from its start.
        r#"{ var(txn.host) -m str "rw.test" } { path -m reg -i "\x5e\x28\x3f:/something\x28/\x7c\x24\x29\x28.*\x29\x29" }"#,
        r#"{ path -m reg -i "\x5e\x28\x3f:/.well-known\x29" }"#,
        r#"{ var(txn.route_wild) -m beg "*.w.test/" }"#,
        "{ var(txn.route_sfx) -m found }",
        r#"http-request set-header X-Forwarded-Prefix "/something" if { var(txn.policy) -m str "#,
        r#"http-request replace-path "\x28\x3fi\x29\x28\x3f:/something\x28/\x7c\x24\x29\x28.*\x29\x29" "/\x5c2" if"#,
    ] {
        assert!(config.contains(needle), "{needle}\n{config}");
    }
    let at = |n: &str| config.find(n).unwrap();
    assert!(
        at(r#"-i "\x5e\x28\x3f:/something"#) < at("well-known"),
        "{config}"
    );
    // Other hosts stay in the maps.
    let maps: Vec<&String> = rendered.maps.values().flat_map(|m| m.keys()).collect();
    assert!(
        maps.iter().any(|k| k.starts_with("plain.test/p")),
        "{maps:?}"
    );
    assert!(!maps.iter().any(|k| k.starts_with("rw.test")), "{maps:?}");
    support::check(&lb).unwrap();
}

#[test]
fn a_regex_or_a_target_haproxy_may_read_otherwise_is_refused_naming_it() {
    let policies = vec![
        policy("look", host("a.test"), (CompareType::Regex, "/(?=x)y")),
        rewrite(
            policy("query", host("b.test"), (CompareType::Regex, "/q(.*)")),
            "/new?x=1",
            None,
        ),
        policy("ok", host("a.test"), (CompareType::Regex, "/ok")),
    ];
    let lb = lb(policies);
    let dir = tempfile::tempdir().unwrap();
    let rendered = support::render_in(&lb, dir.path());
    let messages: Vec<String> = (rendered.diagnostics.iter())
        .map(|d| format!("{} {} {}", d.object, d.field, d.message))
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("Ingress default/look")
            && messages[0].contains("path on a use-regex host")
            && messages[0].contains("not served by haproxy"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("Ingress default/query") && messages[1].contains("rewrite-target"),
        "{messages:?}"
    );
    assert!(rendered.config.contains("/ok"));
    support::check(&lb).unwrap();
}

#[test]
fn a_split_on_a_regex_host_is_a_line_per_share_with_its_range_of_the_draw() {
    let pool = PoolId::derive("pool");
    let mut split = policy("split", host("s.test"), (CompareType::Regex, "/s[0-9]"));
    split.action = PolicyAction::RedirectToPools {
        pools: vec![
            WeightedPool {
                pool: Some(pool),
                weight: 3,
                options: None,
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
    let lb = lb(vec![split]);
    let dir = tempfile::tempdir().unwrap();
    let rendered = support::render_in(&lb, dir.path());
    assert_eq!(rendered.diagnostics, []);
    let config = &rendered.config;
    let shares: Vec<&str> = (config.lines())
        .filter(|l| l.contains("{ var(txn.draw),mod(4)"))
        .collect();
    assert_eq!(shares.len(), 2, "weight 0 gets no line\n{config}");
    assert!(shares[0].starts_with(&format!("    http-request set-var(txn.route) str({pool})")));
    assert!(shares[0].ends_with("-m int 0:2 }"), "{}", shares[0]);
    assert!(
        shares[1].contains("str(portico_reject_500)"),
        "{}",
        shares[1]
    );
    assert!(shares[1].ends_with("-m int 3:3 }"), "{}", shares[1]);
    assert!(
        config.contains("    http-request set-var(txn.draw) rand\n"),
        "{config}"
    );
    support::check(&lb).unwrap();
}
