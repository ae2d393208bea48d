//! Evaluation order, path normalisation and merging across Ingresses.

mod support;

use portico_model::{CompareType, Severity};
use serde_json::{Value, json};
use support::{findings, ingress, routes, rule, service, translate_values};

fn with_services(mut docs: Vec<Value>, services: &[&str]) -> Vec<Value> {
    for (i, name) in services.iter().enumerate() {
        docs.extend(service("default", name, &format!("10.0.0.{}", i + 1)));
    }
    docs
}

fn r(host: &str, path: &str, pool: &str) -> (String, String, String) {
    (
        host.to_owned(),
        path.to_owned(),
        format!("default_{pool}_80"),
    )
}

#[test]
fn longer_paths_come_first_whatever_the_yaml_order() {
    let spec = json!({"rules": [rule("h.com", &[("/", "Prefix", "a"), ("/a", "Prefix", "b"), ("/a/b/c", "Prefix", "c")])]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a", "b", "c"],
    ));
    let expected = vec![
        r("h.com", "/a/b/c", "c"),
        r("h.com", "/a", "b"),
        r("h.com", "/", "a"),
    ];
    assert_eq!(routes(&t), expected);
}

#[test]
fn exact_beats_prefix_at_equal_length() {
    let spec =
        json!({"rules": [rule("h.com", &[("/foo", "Prefix", "a"), ("/foo", "Exact", "b")])]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a", "b"],
    ));
    assert_eq!(
        routes(&t),
        vec![r("h.com", "/foo", "b"), r("h.com", "/foo", "a")]
    );
    let policies = &t.model.load_balancers[0].listeners[0].policies;
    assert_eq!(policies[0].rules[1].compare_type, CompareType::EqualTo);
    assert_eq!(policies[1].rules[1].compare_type, CompareType::PathPrefix);
}

#[test]
fn exact_hosts_precede_wildcards_which_precede_hostless_rules() {
    let spec = json!({"rules": [
        rule("", &[("/long/path/here", "Prefix", "any")]),
        rule("*.foo.com", &[("/", "Prefix", "wild")]),
        rule("z.foo.com", &[("/", "Prefix", "exact")]),
        rule("a.foo.com", &[("/", "Prefix", "exact")]),
    ]});
    let docs = with_services(
        vec![ingress("default", "i", None, spec)],
        &["any", "wild", "exact"],
    );
    let t = translate_values(docs);
    let expected = vec![
        r("a.foo.com", "/", "exact"),
        r("z.foo.com", "/", "exact"),
        r("foo.com", "/", "wild"),
        r("", "/long/path/here", "any"),
    ];
    assert_eq!(routes(&t), expected);
    let wildcard = &t.model.load_balancers[0].listeners[0].policies[2].rules[0];
    assert_eq!(wildcard.compare_type, CompareType::WildcardLabel);
}

#[test]
fn prefix_paths_drop_trailing_slashes_and_exact_paths_keep_them() {
    let spec = json!({"rules": [rule("h.com", &[("/a/", "Prefix", "a"), ("/b/", "Exact", "a"), ("/", "Prefix", "a")])]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a"],
    ));
    let paths: Vec<String> = routes(&t).into_iter().map(|(_, p, _)| p).collect();
    assert_eq!(paths, ["/b/", "/a", "/"]);
}

#[test]
fn implementation_specific_is_a_prefix_and_an_empty_path_is_the_root() {
    let spec = json!({"rules": [{"host": "h.com", "http": {"paths": [
        {"pathType": "ImplementationSpecific", "backend": {"service": {"name": "a", "port": {"number": 80}}}},
        {"path": "/x/", "pathType": "ImplementationSpecific", "backend": {"service": {"name": "a", "port": {"number": 80}}}}
    ]}}]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a"],
    ));
    let policies = &t.model.load_balancers[0].listeners[0].policies;
    let rules: Vec<_> = policies
        .iter()
        .map(|p| (p.rules[1].compare_type, p.rules[1].value.as_str()))
        .collect();
    assert_eq!(
        rules,
        [
            (CompareType::PathPrefix, "/x"),
            (CompareType::PathPrefix, "/")
        ]
    );
}

#[test]
fn ids_are_stable_and_positions_follow_the_order() {
    let spec = json!({"rules": [rule("h.com", &[("/b", "Prefix", "a"), ("/aa", "Prefix", "a")])]});
    let docs = with_services(vec![ingress("default", "i", None, spec)], &["a"]);
    let (first, second) = (translate_values(docs.clone()), translate_values(docs));
    assert_eq!(first.model, second.model);
    let listener = &first.model.load_balancers[0].listeners[0];
    let policies = &listener.policies;
    // A policy's position is its index, written out with it.
    let json = serde_json::to_value(listener).unwrap();
    let positions: Vec<_> = (json["policies"].as_array().unwrap().iter())
        .map(|p| p["position"].clone())
        .collect();
    assert_eq!(positions, [json!(0), json!(1)]);
    assert_ne!(policies[0].id, policies[1].id);
    assert_eq!(policies[0].rules[1].value, "/aa");
}

#[test]
fn paths_of_two_ingresses_on_one_host_merge() {
    let a = ingress(
        "default",
        "a",
        None,
        json!({"rules": [rule("h.com", &[("/a", "Prefix", "a")])]}),
    );
    let b = ingress(
        "default",
        "b",
        None,
        json!({"rules": [rule("h.com", &[("/bb", "Prefix", "b")])]}),
    );
    let t = translate_values(with_services(vec![a, b], &["a", "b"]));
    assert_eq!(
        routes(&t),
        vec![r("h.com", "/bb", "b"), r("h.com", "/a", "a")]
    );
    assert!(t.diagnostics.is_empty());
}

#[test]
fn identical_path_goes_to_the_oldest_ingress_and_the_loser_is_warned() {
    let young = ingress(
        "default",
        "young",
        Some("2024-06-01T00:00:00Z"),
        json!({"rules": [rule("h.com", &[("/x", "Prefix", "b")])]}),
    );
    let old = ingress(
        "default",
        "old",
        Some("2020-01-01T00:00:00Z"),
        json!({"rules": [rule("h.com", &[("/x/", "Prefix", "a")])]}),
    );
    let t = translate_values(with_services(vec![young, old], &["a", "b"]));
    assert_eq!(routes(&t), vec![r("h.com", "/x", "a")]);
    let loser = (
        "young".to_owned(),
        "spec.rules[0].http.paths[0].path".to_owned(),
        Severity::Warning,
    );
    assert_eq!(findings(&t.diagnostics), vec![loser]);
    assert!(t.diagnostics[0].message.contains("default/old"));
    assert!(t.ingresses.iter().all(|i| i.served));
}

#[test]
fn an_ingress_without_timestamp_counts_as_newest() {
    let undated = ingress(
        "default",
        "a-undated",
        None,
        json!({"rules": [rule("h.com", &[("/x", "Exact", "b")])]}),
    );
    let dated = ingress(
        "default",
        "z-dated",
        Some("2024-06-01T00:00:00Z"),
        json!({"rules": [rule("h.com", &[("/x", "Exact", "a")])]}),
    );
    let t = translate_values(with_services(vec![undated, dated], &["a", "b"]));
    assert_eq!(routes(&t), vec![r("h.com", "/x", "a")]);
    assert_eq!(t.diagnostics[0].object.name, "a-undated");
}

#[test]
fn equally_old_ingresses_are_ranked_by_namespace_then_name() {
    let spec = |svc| json!({"rules": [rule("h.com", &[("/x", "Prefix", svc)])]});
    let mut docs = vec![
        ingress("b-ns", "a", None, spec("b")),
        ingress("a-ns", "z", None, spec("a")),
    ];
    docs.extend(service("a-ns", "a", "10.0.0.1"));
    docs.extend(service("b-ns", "b", "10.0.0.2"));
    let t = translate_values(docs);
    let lb = &t.model.load_balancers[0];
    assert_eq!(lb.listeners[0].policies.len(), 1);
    assert_eq!(lb.listeners[0].policies[0].source.namespace, "a-ns");
    assert_eq!(t.diagnostics[0].object.namespace, "b-ns");
}

#[test]
fn a_duplicate_path_within_one_ingress_keeps_the_first() {
    let spec = json!({"rules": [rule("h.com", &[("/x", "Prefix", "a")]), rule("h.com", &[("/x", "ImplementationSpecific", "b")])]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a", "b"],
    ));
    assert_eq!(routes(&t), vec![r("h.com", "/x", "a")]);
    assert_eq!(t.diagnostics[0].field, "spec.rules[1].http.paths[0].path");
}

#[test]
fn the_oldest_default_backend_wins_and_others_are_warned() {
    let old = ingress(
        "default",
        "old",
        Some("2020-01-01T00:00:00Z"),
        json!({"defaultBackend": {"service": {"name": "a", "port": {"number": 80}}}}),
    );
    let new = ingress(
        "default",
        "new",
        Some("2021-01-01T00:00:00Z"),
        json!({"defaultBackend": {"service": {"name": "b", "port": {"number": 80}}}}),
    );
    let t = translate_values(with_services(vec![new, old], &["a", "b"]));
    let lb = &t.model.load_balancers[0];
    let listener = &lb.listeners[0];
    let pool = lb
        .pool(listener.default_pool.expect("default pool"))
        .expect("pool");
    assert_eq!(pool.name, "default_a_80");
    assert_eq!(
        listener.default_source.as_ref().map(|s| s.name.as_str()),
        Some("old")
    );
    assert_eq!(lb.pools.len(), 1, "the losing default backend gets no pool");
    let warning = (
        "new".to_owned(),
        "spec.defaultBackend".to_owned(),
        Severity::Warning,
    );
    assert_eq!(findings(&t.diagnostics), vec![warning]);
}

#[test]
fn no_default_backend_means_no_default_pool() {
    let spec = json!({"rules": [rule("h.com", &[("/", "Prefix", "a")])]});
    let t = translate_values(with_services(
        vec![ingress("default", "i", None, spec)],
        &["a"],
    ));
    let listener = &t.model.load_balancers[0].listeners[0];
    assert_eq!(
        (listener.default_pool, &listener.default_source),
        (None, &None)
    );
}

#[test]
fn identical_default_backends_of_two_ingresses_are_no_conflict() {
    let spec = || json!({"defaultBackend": {"service": {"name": "a", "port": {"number": 80}}}});
    let docs = vec![
        ingress("default", "old", Some("2026-01-01T00:00:00Z"), spec()),
        ingress("default", "new", Some("2026-01-02T00:00:00Z"), spec()),
    ];
    let t = translate_values(with_services(docs, &["a"]));
    assert_eq!(findings(&t.diagnostics), vec![]);
    let listener = &t.model.load_balancers[0].listeners[0];
    assert_eq!(
        listener.default_source.as_ref().map(|o| o.name.as_str()),
        Some("old")
    );
}

#[test]
fn different_default_backends_conflict_and_the_oldest_wins() {
    let docs = vec![
        ingress(
            "default",
            "new",
            Some("2026-01-02T00:00:00Z"),
            json!({"defaultBackend": {"service": {"name": "b", "port": {"number": 80}}}}),
        ),
        ingress(
            "default",
            "old",
            Some("2026-01-01T00:00:00Z"),
            json!({"defaultBackend": {"service": {"name": "a", "port": {"number": 80}}}}),
        ),
    ];
    let t = translate_values(with_services(docs, &["a", "b"]));
    assert_eq!(
        findings(&t.diagnostics),
        vec![(
            "new".to_owned(),
            "spec.defaultBackend".to_owned(),
            Severity::Warning
        )]
    );
}

/// Past a few thousand routes the two listeners' policies are built on two threads: each
/// listener still gets its own ids, in evaluation order.
#[test]
fn a_large_load_balancer_gets_each_listeners_own_policies_in_order() {
    let translate_rules = |hosts: &[String]| {
        let rules: Vec<Value> = hosts
            .iter()
            .map(|h| rule(h, &[("/", "Prefix", "a")]))
            .collect();
        let spec = json!({"rules": rules});
        translate_values(with_services(
            vec![ingress("default", "big", None, spec)],
            &["a"],
        ))
    };
    let hosts: Vec<String> = (0..2100).map(|i| format!("h{i:04}.test")).collect();
    let big = translate_rules(&hosts);
    let small = translate_rules(&hosts[1234..1235]);
    let listeners =
        |t: &portico_translate::Translation| t.model.load_balancers[0].listeners.clone();
    let (big, small) = (listeners(&big), listeners(&small));
    assert_eq!(big.len(), 2);
    for (listener, alone) in big.iter().zip(small.iter()) {
        assert_eq!(listener.protocol, alone.protocol);
        assert_eq!(listener.policies.len(), hosts.len());
        // The same route has the same policy, ids and all, whatever else is on the listener.
        assert_eq!(listener.policies[1234], alone.policies[0]);
    }
    assert_ne!(big[0].policies[0].id, big[1].policies[0].id);
}
