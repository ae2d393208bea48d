//! Route matching against the Ingress v1 semantics. Policies are listed in the order the
//! translator emits them: exact hosts, then wildcards, then host-less rules; longest path first,
//! Exact before Prefix at equal length.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use portico_dataplane_http::{RouteTable, Target, compile};
use portico_model::{Model, PolicyAction};
use support::model::{ModelBuilder, addr, exact, host, prefix};

fn routed(table: &RouteTable, host: &str, path: &str) -> String {
    match table.route(host, path) {
        Some(Target::Pool(pool) | Target::Options(pool, _)) => pool.name().to_owned(),
        Some(Target::Reject(status)) => format!("reject {status}"),
        Some(Target::RedirectToHttps(status)) => format!("redirect {status}"),
        Some(Target::RedirectToUrl(status, url)) => format!("redirect {status} {url}"),
        Some(Target::Redirect(redirect)) => format!("redirect {}", redirect.status),
        None => "404".to_owned(),
    }
}

/// Asserts every (host, path) → expected pool name (or "404").
fn check(model: &Model, cases: &[(&str, &str, &str)]) {
    let table = compile(model);
    for (host, path, want) in cases {
        assert_eq!(routed(&table, host, path), *want, "{host}{path}");
    }
}

#[test]
fn exact_path_is_whole_and_case_sensitive() {
    let mut m = ModelBuilder::new("exact");
    let a = m.pool("a", &[addr(1)]);
    m.policy(vec![exact("/foo")], a);
    check(
        &m.build(),
        &[
            ("x", "/foo", "a"),
            ("x", "/foo/", "404"),
            ("x", "/FOO", "404"),
            ("x", "/foo/bar", "404"),
        ],
    );
}

#[test]
fn prefix_match_is_element_wise() {
    let mut m = ModelBuilder::new("prefix");
    let a = m.pool("a", &[addr(1)]);
    m.policy(vec![prefix("/foo")], a);
    let cases = [
        ("x", "/foo", "a"),
        ("x", "/foo/", "a"),
        ("x", "/foo/bar", "a"),
        ("x", "/foobar", "404"),
        ("x", "/FOO", "404"),
    ];
    check(&m.build(), &cases);
}

#[test]
fn prefix_match_ignores_trailing_slash_in_rule_and_request() {
    let mut m = ModelBuilder::new("slash");
    let a = m.pool("a", &[addr(1)]);
    m.policy(vec![prefix("/foo/")], a);
    check(
        &m.build(),
        &[
            ("x", "/foo", "a"),
            ("x", "/foo/", "a"),
            ("x", "/foo//", "a"),
            ("x", "/fo", "404"),
        ],
    );
}

#[test]
fn longest_prefix_wins() {
    let mut m = ModelBuilder::new("longest");
    let (long, short) = (m.pool("long", &[addr(1)]), m.pool("short", &[addr(2)]));
    m.policy(vec![prefix("/aaa/bbb")], long)
        .policy(vec![prefix("/aaa")], short);
    let cases = [
        ("x", "/aaa/bbb/c", "long"),
        ("x", "/aaa/bbbc", "short"),
        ("x", "/aaa", "short"),
        ("x", "/bbb", "404"),
    ];
    check(&m.build(), &cases);
}

#[test]
fn exact_beats_prefix_at_equal_length() {
    let mut m = ModelBuilder::new("tie");
    let (e, p) = (m.pool("exact", &[addr(1)]), m.pool("prefix", &[addr(2)]));
    m.policy(vec![exact("/foo")], e)
        .policy(vec![prefix("/foo")], p);
    check(
        &m.build(),
        &[
            ("x", "/foo", "exact"),
            ("x", "/foo/", "prefix"),
            ("x", "/foo/x", "prefix"),
        ],
    );
}

#[test]
fn root_prefix_catches_every_other_path() {
    let mut m = ModelBuilder::new("root");
    let (api, root) = (m.pool("api", &[addr(1)]), m.pool("root", &[addr(2)]));
    m.policy(vec![prefix("/api")], api)
        .policy(vec![prefix("/")], root);
    check(
        &m.build(),
        &[
            ("x", "/api/v1", "api"),
            ("x", "/", "root"),
            ("x", "/apix", "root"),
            ("x", "", "root"),
        ],
    );
}

#[test]
fn host_match_is_exact_case_insensitive_and_ignores_port() {
    let mut m = ModelBuilder::new("hosts");
    let a = m.pool("a", &[addr(1)]);
    m.policy(vec![host("foo.bar.com"), prefix("/")], a);
    let cases = [
        ("foo.bar.com", "/", "a"),
        ("FOO.Bar.COM", "/", "a"),
        ("foo.bar.com:8080", "/", "a"),
        ("foo.bar.com.", "/", "a"),
        ("bar.com", "/", "404"),
        ("xfoo.bar.com", "/", "404"),
    ];
    check(&m.build(), &cases);
}

#[test]
fn ipv6_host_with_port_falls_to_host_less_rules() {
    let mut m = ModelBuilder::new("v6");
    let (named, any) = (m.pool("named", &[addr(1)]), m.pool("any", &[addr(2)]));
    m.policy(vec![host("foo.com"), prefix("/")], named)
        .policy(vec![prefix("/")], any);
    check(
        &m.build(),
        &[
            ("[::1]:8080", "/", "any"),
            ("[::1]", "/", "any"),
            ("foo.com", "/", "named"),
        ],
    );
}

#[test]
fn wildcard_host_matches_exactly_one_label() {
    let mut m = ModelBuilder::new("wild");
    let w = m.pool("wild", &[addr(1)]);
    m.policy(vec![host("*.foo.com"), prefix("/")], w);
    let cases = [
        ("bar.foo.com", "/", "wild"),
        ("BAR.foo.com:80", "/x", "wild"),
        ("baz.bar.foo.com", "/", "404"),
        ("foo.com", "/", "404"),
        (".foo.com", "/", "404"),
    ];
    check(&m.build(), &cases);
}

#[test]
fn exact_host_beats_wildcard() {
    let mut m = ModelBuilder::new("exact-wild");
    let (e, w) = (m.pool("exact", &[addr(1)]), m.pool("wild", &[addr(2)]));
    m.policy(vec![host("bar.foo.com"), prefix("/")], e)
        .policy(vec![host("*.foo.com"), prefix("/")], w);
    check(
        &m.build(),
        &[("bar.foo.com", "/", "exact"), ("baz.foo.com", "/", "wild")],
    );
}

#[test]
fn exact_host_without_matching_path_falls_through_to_wildcard_and_host_less_rules() {
    let mut m = ModelBuilder::new("fall");
    let (e, w, any) = (
        m.pool("exact", &[addr(1)]),
        m.pool("wild", &[addr(2)]),
        m.pool("any", &[addr(3)]),
    );
    m.policy(vec![host("a.foo.com"), prefix("/a")], e)
        .policy(vec![host("*.foo.com"), prefix("/w")], w)
        .policy(vec![prefix("/")], any);
    let cases = [
        ("a.foo.com", "/a", "exact"),
        ("a.foo.com", "/w", "wild"),
        ("a.foo.com", "/z", "any"),
        ("b.foo.com", "/a", "any"),
        ("other.com", "/w", "any"),
    ];
    check(&m.build(), &cases);
}

#[test]
fn host_less_rules_apply_to_every_host() {
    let mut m = ModelBuilder::new("hostless");
    let a = m.pool("a", &[addr(1)]);
    m.policy(vec![prefix("/shared")], a);
    check(
        &m.build(),
        &[
            ("one.com", "/shared", "a"),
            ("two.com:81", "/shared/x", "a"),
            ("two.com", "/", "404"),
        ],
    );
}

#[test]
fn default_pool_catches_what_no_policy_matches() {
    let mut m = ModelBuilder::new("default");
    let (a, d) = (m.pool("a", &[addr(1)]), m.pool("default", &[addr(2)]));
    m.policy(vec![host("a.com"), prefix("/a")], a)
        .default_pool(d);
    check(
        &m.build(),
        &[
            ("a.com", "/a", "a"),
            ("a.com", "/b", "default"),
            ("b.com", "/", "default"),
        ],
    );
}

#[test]
fn nothing_matches_an_empty_model() {
    check(&Model::default(), &[("a.com", "/", "404")]);
}

#[test]
fn reject_policy_routes_to_its_status() {
    let mut m = ModelBuilder::new("reject");
    m.action(vec![prefix("/admin")], PolicyAction::Reject { status: 403 });
    check(
        &m.build(),
        &[("x", "/admin/x", "reject 403"), ("x", "/", "404")],
    );
}

#[test]
fn earlier_policy_wins_even_when_less_specific() {
    let mut m = ModelBuilder::new("order");
    let (first, second) = (m.pool("first", &[addr(1)]), m.pool("second", &[addr(2)]));
    m.policy(vec![prefix("/")], first)
        .policy(vec![host("a.com"), exact("/x")], second);
    check(&m.build(), &[("a.com", "/x", "first")]);
}

#[test]
fn first_load_balancer_by_id_wins_on_equal_keys() {
    let (mut one, mut two) = (ModelBuilder::new("lb-one"), ModelBuilder::new("lb-two"));
    let p1 = one.pool("one", &[addr(1)]);
    one.policy(vec![host("a.com"), prefix("/")], p1);
    let p2 = two.pool("two", &[addr(2)]);
    two.policy(vec![host("a.com"), prefix("/")], p2);
    let mut lbs = vec![one.load_balancer(), two.load_balancer()];
    lbs.sort_by_key(|lb| lb.id);
    let want = lbs[0].pools[0].name.clone();
    lbs.reverse();
    check(
        &Model {
            load_balancers: lbs,
        },
        &[("a.com", "/", want.as_str())],
    );
}

#[test]
fn pool_lists_only_ready_members_and_rotates_over_them() {
    let mut m = ModelBuilder::new("rr");
    let p = m.pool_with("p", &[(addr(1), true), (addr(2), false), (addr(3), true)]);
    m.policy(vec![], p);
    let table = compile(&m.build());
    let pool = table.pool(p).unwrap();
    assert_eq!(pool.members(), [addr(1), addr(3)]);
    let picks: Vec<_> = (0..4).map(|_| pool.next_member().unwrap()).collect();
    assert_eq!(picks, [addr(1), addr(3), addr(1), addr(3)]);
}

#[test]
fn pool_without_ready_members_yields_no_member() {
    let mut m = ModelBuilder::new("down");
    let p = m.pool_with("p", &[(addr(1), false)]);
    m.policy(vec![], p);
    assert_eq!(compile(&m.build()).pool(p).unwrap().next_member(), None);
}

#[test]
fn https_listeners_route_apart_from_http_over_the_same_pools() {
    let mut m = ModelBuilder::new("lb");
    let web = m.pool("web", &[addr(1)]);
    m.http_only(
        vec![host("a.test"), prefix("/")],
        PolicyAction::RedirectToHttps { status: 308 },
    );
    m.policy(vec![host("a.test"), prefix("/")], web);
    m.tls(&[], None);
    let table = compile(&m.build());
    assert_eq!(routed(&table, "a.test", "/x"), "redirect 308");
    let https = match table.route_https("a.test", "/x") {
        Some(Target::Pool(pool)) => pool.clone(),
        other => panic!("{other:?}"),
    };
    assert!(std::sync::Arc::ptr_eq(&https, table.pool(web).unwrap()));
}

/// A request without key, cookie or history.
fn plain_choose(
    pool: &portico_dataplane_http::PoolState,
    exclude: &[std::net::SocketAddr],
) -> portico_dataplane_http::Pick {
    let headers = http::HeaderMap::new();
    let uri = http::Uri::from_static("/");
    let request = portico_dataplane_http::RequestInfo {
        headers: &headers,
        uri: &uri,
        client: [127, 0, 0, 1].into(),
    };
    pool.choose(&request, exclude).unwrap()
}

#[test]
fn member_health_and_rotation_survive_a_configuration_swap_that_keeps_the_pool() {
    use portico_dataplane_http::{Health, Outcome, Proxy, ProxyMetrics};
    let mut registry = prometheus_client::registry::Registry::default();
    let proxy = Proxy::new(ProxyMetrics::new(&mut registry));
    let mut m = ModelBuilder::new("swap");
    let p = m.pool("p", &[addr(1), addr(2), addr(3)]);
    m.policy(vec![], p);
    proxy.apply(&m.build());
    let table = proxy.table();
    let pool = table.pool(p).unwrap();
    // Eject addr(2) (five failures in a row, the default).
    for _ in 0..5 {
        let pick = plain_choose(pool, &[addr(1), addr(3)]);
        assert_eq!(pick.addr(), addr(2));
        pool.record(pick, Outcome::ConnectFailed);
    }
    let first = plain_choose(pool, &[]).addr();
    // A new configuration: another policy, one member more; the pool keeps its id.
    let mut m = ModelBuilder::new("swap");
    let p2 = m.pool("p", &[addr(1), addr(2), addr(3), addr(4)]);
    assert_eq!(p, p2);
    m.policy(vec![host("a.com")], p);
    m.policy(vec![], p);
    proxy.apply(&m.build());
    let table = proxy.table();
    let pool = table.pool(p).unwrap();
    let health = pool.health();
    assert!(
        matches!(health[1], (a, Health::Ejected { .. }) if a == addr(2)),
        "{health:?}"
    );
    assert_eq!(health[3], (addr(4), Health::Healthy));
    // The rotation goes on where it was (it does not start over at the first member).
    let next = plain_choose(pool, &[]).addr();
    assert_ne!(next, first, "the rotation restarted");
    let picks: Vec<_> = (0..6).map(|_| plain_choose(pool, &[]).addr()).collect();
    assert!(!picks.contains(&addr(2)), "{picks:?}");
}

#[test]
fn an_unchanged_pool_keeps_its_state_and_a_changed_one_is_built_again() {
    use portico_dataplane_http::{Proxy, ProxyMetrics};
    use std::sync::Arc;
    let mut registry = prometheus_client::registry::Registry::default();
    let proxy = Proxy::new(ProxyMetrics::new(&mut registry));
    let model = |q_members: &[std::net::SocketAddr]| {
        let mut m = ModelBuilder::new("reuse");
        let p = m.pool("p", &[addr(1), addr(2)]);
        let q = m.pool("q", q_members);
        m.policy(vec![host("p.test")], p);
        m.policy(vec![host("q.test")], q);
        (m.build(), p, q)
    };
    let (first, p, q) = model(&[addr(3)]);
    proxy.apply(&first);
    let before = proxy.table();
    let (second, _, _) = model(&[addr(3), addr(4)]);
    proxy.apply(&second);
    let after = proxy.table();
    let kept = Arc::ptr_eq(before.pool(p).unwrap(), after.pool(p).unwrap());
    assert!(kept, "the unchanged pool p was built again");
    let rebuilt = !Arc::ptr_eq(before.pool(q).unwrap(), after.pool(q).unwrap());
    assert!(rebuilt, "the changed pool q kept its old state");
    assert_eq!(after.pool(q).unwrap().members(), [addr(3), addr(4)]);

    // Members moved apart from a compile (the endpoint fast path), then a full configuration
    // whose pool p is the one compiled before: p must get those members back.
    let (mut moved, _, _) = model(&[addr(3), addr(4)]);
    let lb = &mut moved.load_balancers[0];
    let pool = lb.pools.iter_mut().find(|pool| pool.id == p).unwrap();
    std::sync::Arc::make_mut(pool).members.truncate(1);
    proxy.update_members([&**pool]);
    assert_eq!(proxy.table().pool(p).unwrap().members(), [addr(1)]);
    proxy.apply(&second);
    assert_eq!(proxy.table().pool(p).unwrap().members(), [addr(1), addr(2)]);
    assert_eq!(proxy.table().pool(q).unwrap().members(), [addr(3), addr(4)]);
}

#[test]
fn a_pool_changed_in_place_in_the_model_is_built_again() {
    use portico_dataplane_http::{Proxy, ProxyMetrics};
    use std::sync::Arc;
    let mut registry = prometheus_client::registry::Registry::default();
    let proxy = Proxy::new(ProxyMetrics::new(&mut registry));
    let mut m = ModelBuilder::new("in-place");
    let p = m.pool("p", &[addr(1), addr(2)]);
    let q = m.pool("q", &[addr(3)]);
    m.policy(vec![host("p.test")], p);
    m.policy(vec![host("q.test")], q);
    let mut model = m.build();
    proxy.apply(&model);
    let before = proxy.table();
    // The same model again: its pools are the very `Arc`s compiled before.
    proxy.apply(&model);
    let after = proxy.table();
    assert!(Arc::ptr_eq(before.pool(p).unwrap(), after.pool(p).unwrap()));
    assert!(Arc::ptr_eq(before.pool(q).unwrap(), after.pool(q).unwrap()));
    // The model is the pool's only holder: `make_mut` changes it without a copy of its own.
    drop((before, after));
    let lb = &mut model.load_balancers[0];
    let pool = lb.pools.iter_mut().find(|pool| pool.id == q).unwrap();
    Arc::make_mut(pool).members.truncate(0);
    proxy.apply(&model);
    assert_eq!(proxy.table().pool(q).unwrap().members(), []);
    assert_eq!(proxy.table().pool(p).unwrap().members(), [addr(1), addr(2)]);
}

/// Past a few thousand policies the HTTP and HTTPS routes compile on two threads: both must
/// route as they would alone, over the same pool states.
#[test]
fn a_large_table_compiled_on_two_threads_routes_both_listeners() {
    let mut m = ModelBuilder::new("large");
    let pools: Vec<_> = (0..50)
        .map(|i| m.pool(&format!("p{i}"), &[addr(1 + (i % 4) as u8)]))
        .collect();
    for h in 0..2500 {
        let host_name = format!("h{h}.test");
        m.http_only(
            vec![host(&host_name), prefix("/secure")],
            PolicyAction::RedirectToHttps { status: 308 },
        );
        m.policy(vec![host(&host_name), prefix("/")], pools[h % pools.len()]);
    }
    m.default_pool(pools[7]);
    m.tls(&[], None);
    let model = m.build();
    let policies: usize = (model.load_balancers[0].listeners.iter())
        .map(|l| l.policies.len())
        .sum();
    assert!(
        policies >= 4096,
        "{policies} policies do not take the two threads"
    );
    let table = compile(&model);
    let name = |t: Option<&Target>| match t {
        Some(Target::Pool(pool)) => pool.name().to_owned(),
        Some(Target::RedirectToHttps(s)) => format!("redirect {s}"),
        other => format!("{other:?}"),
    };
    for h in [0usize, 1, 777, 2499] {
        let host_name = format!("h{h}.test");
        let pool = format!("p{}", h % pools.len());
        assert_eq!(name(table.route(&host_name, "/x")), pool);
        assert_eq!(name(table.route(&host_name, "/secure/a")), "redirect 308");
        assert_eq!(name(table.route_https(&host_name, "/secure/a")), pool);
    }
    assert_eq!(name(table.route("nowhere.test", "/")), "p7");
    assert_eq!(name(table.route_https("nowhere.test", "/")), "p7");
    // One state per pool, shared by both protocols.
    let (Some(Target::Pool(a)), Some(Target::Pool(b))) = (
        table.route("h3.test", "/"),
        table.route_https("h3.test", "/"),
    ) else {
        panic!("h3.test is not routed to a pool");
    };
    assert!(std::sync::Arc::ptr_eq(a, b));
}

#[test]
fn weighted_pools_share_requests_by_weight_and_an_unresolved_share_answers_500() {
    let mut m = ModelBuilder::new("split");
    let (a, b) = (m.pool("a", &[addr(1)]), m.pool("b", &[addr(2)]));
    let share = |pool, weight| portico_model::WeightedPool {
        pool,
        weight,
        options: None,
    };
    let pools = vec![share(Some(a), 2), share(Some(b), 1), share(None, 1)];
    m.action(vec![prefix("/")], PolicyAction::RedirectToPools { pools });
    let table = compile(&m.build());
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..400 {
        *counts.entry(routed(&table, "x", "/")).or_insert(0) += 1;
    }
    let expected = [
        ("a".to_owned(), 200),
        ("b".to_owned(), 100),
        ("reject 500".to_owned(), 100),
    ];
    assert_eq!(counts, expected.into_iter().collect());
}

#[test]
fn suffix_wildcard_matches_one_or_more_labels_and_the_longer_suffix_wins() {
    let mut m = ModelBuilder::new("suffix");
    let (a, b) = (m.pool("a", &[addr(1)]), m.pool("b", &[addr(2)]));
    m.policy(vec![host("**.b.com")], b);
    m.policy(vec![host("**.com")], a);
    check(
        &m.build(),
        &[
            ("x.b.com", "/", "b"),
            ("x.y.b.com", "/", "b"),
            ("b.com", "/", "a"),
            ("x.com", "/", "a"),
            ("com", "/", "404"),
        ],
    );
}

#[test]
fn passthrough_hosts_match_exactly_or_under_a_wildcard_at_any_depth_and_the_first_entry_wins() {
    let mut b = ModelBuilder::new("lb");
    let (a, w, other) = (
        b.pool("a", &[addr(1)]),
        b.pool("w", &[addr(2)]),
        b.pool("other", &[addr(3)]),
    );
    b.tls(&[], None)
        .passthrough(&[("a.test", a), ("*.w.test", w), ("a.test", other)]);
    let table = compile(&b.build());
    let name = |h: &str| table.passthrough(h).map(|p| p.name().to_owned());
    assert!(table.has_passthrough());
    assert_eq!(name("a.test").as_deref(), Some("a"));
    assert_eq!(name("A.Test.").as_deref(), Some("a"));
    assert_eq!(name("x.w.test").as_deref(), Some("w"));
    assert_eq!(name("y.x.w.test").as_deref(), Some("w"));
    assert_eq!(name("w.test"), None);
    assert_eq!(name("b.test"), None);
    // The pool is served with its members, though no policy names it.
    assert_eq!(table.passthrough("a.test").unwrap().members(), [addr(1)]);
}

#[test]
fn terminated_hosts_go_to_their_pools_and_a_refused_wildcard_takes_only_what_no_entry_takes() {
    use portico_dataplane_http::SniTarget;
    let mut b = ModelBuilder::new("lb");
    let (raw, a, w) = (
        b.pool("raw", &[addr(1)]),
        b.pool("a", &[addr(2)]),
        b.pool("w", &[addr(3)]),
    );
    b.tls(&[], None)
        .passthrough(&[("raw.t.test", raw)])
        .terminated(&[("a.t.test", a), ("*.w.t.test", w)], &["*.t.test"]);
    let table = compile(&b.build());
    let target = |h: &str| match table.sni_target(h) {
        Some(SniTarget::Pass(p)) => format!("pass {}", p.name()),
        Some(SniTarget::Terminate(p)) => format!("terminate {}", p.name()),
        Some(SniTarget::Refuse) => "refuse".to_owned(),
        None => "https".to_owned(),
    };
    assert_eq!(target("raw.t.test"), "pass raw");
    assert_eq!(target("A.t.test."), "terminate a");
    assert_eq!(target("x.y.w.t.test"), "terminate w");
    assert_eq!(target("b.t.test"), "refuse");
    assert_eq!(target("x.b.t.test"), "refuse");
    assert_eq!(target("t.test"), "https");
    // Only raw entries pass through.
    assert!(table.passthrough("a.t.test").is_none());
    assert_eq!(table.passthrough("raw.t.test").unwrap().name(), "raw");
}

#[test]
fn a_table_without_passthrough_hosts_says_so() {
    let mut b = ModelBuilder::new("lb");
    let web = b.pool("web", &[addr(1)]);
    b.tls(&[], None).policy(vec![host("a.test")], web);
    assert!(!compile(&b.build()).has_passthrough());
}
