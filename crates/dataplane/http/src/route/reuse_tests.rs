//! A table compiled over the previous one (which keeps a protocol's routes while its
//! listeners' policies are the same pointers over the same pool states, and otherwise the host
//! tables whose policies are unchanged) answers as one compiled from scratch, on random
//! changes.

use super::compile::Compiler;
use super::{RouteTable, Target};
use crate::upstream::Endpoints;
use portico_model::{
    Algorithm, CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId,
    LoadBalancer, LoadBalancerId, Member, MemberId, Model, ObjectRef, PolicyAction, Pool, PoolId,
    PoolProtocol, Protocol, RuleType,
};
use std::sync::Arc;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const HOSTS: [&str; 4] = ["a.test", "b.test", "x.w.test", "y.w.test"];
const PATHS: [&str; 5] = ["/", "/p", "/p/q", "/r", "/p/q/s"];
const POOLS: usize = 4;

fn pool(i: usize, members: usize) -> Arc<Pool> {
    Arc::new(Pool {
        id: PoolId::derive(&format!("pool{i}")),
        name: format!("default_s{i}_80"),
        service: ObjectRef::new("Service", "default", &format!("s{i}")),
        service_port: "80".into(),
        algorithm: Algorithm::RoundRobin,
        protocol: PoolProtocol::Http,
        settings: Arc::default(),
        members: (0..members)
            .map(|m| Member {
                id: MemberId::derive(&format!("pool{i}/{m}")),
                address: [10, 0, i as u8, m as u8].into(),
                port: 8080,
                weight: 1,
                ready: true,
            })
            .collect(),
    })
}

fn policy(rng: &mut Rng, serial: &mut u64) -> Arc<L7Policy> {
    *serial += 1;
    let id = L7PolicyId::derive(&format!("policy{serial}"));
    let rule = |n: &str, rule_type, compare_type, value: &str| L7Rule {
        id: L7RuleId::derive(&format!("{id}/{n}")),
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    };
    let mut rules = Vec::new();
    match rng.below(4) {
        0 => {}
        1 => rules.push(rule(
            "h",
            RuleType::HostName,
            CompareType::WildcardLabel,
            "w.test",
        )),
        _ => {
            let host = HOSTS[rng.below(HOSTS.len())];
            rules.push(rule("h", RuleType::HostName, CompareType::EqualTo, host));
        }
    }
    let compare = match rng.below(2) {
        0 => CompareType::EqualTo,
        _ => CompareType::PathPrefix,
    };
    rules.push(rule(
        "p",
        RuleType::Path,
        compare,
        PATHS[rng.below(PATHS.len())],
    ));
    let action = match rng.below(5) {
        0 => PolicyAction::Reject { status: 403 },
        _ => PolicyAction::RedirectToPool {
            pool: PoolId::derive(&format!("pool{}", rng.below(POOLS))),
        },
    };
    Arc::new(L7Policy {
        id,
        action,
        rules,
        source: Arc::new(ObjectRef::new("Ingress", "default", &format!("i{serial}"))),
        options: None,
        precedence: 0,
    })
}

fn listener(name: &str, protocol: Protocol, policies: Vec<Arc<L7Policy>>) -> Listener {
    Listener {
        id: ListenerId::derive(name),
        name: name.into(),
        protocol,
        port: if protocol == Protocol::Http { 80 } else { 443 },
        policies,
        default_pool: None,
        default_source: None,
        tls: None,
    }
}

fn model(listeners: &[Listener], pools: &[Arc<Pool>]) -> Model {
    Model {
        load_balancers: vec![LoadBalancer {
            id: LoadBalancerId::derive("lb"),
            name: "lb".into(),
            origin: ObjectRef::new("IngressClass", "", "portico"),
            provider: "proxy".into(),
            vip: None,
            floating_ip: None,
            listeners: Arc::new(listeners.to_vec()),
            pools: pools.to_vec(),
        }],
    }
}

/// One answer of `table`, a pool target checked to be the table's own state of the pool.
fn answer(table: &RouteTable, target: Option<&Target>) -> String {
    match target {
        None => "404".to_owned(),
        Some(Target::Pool(state)) => {
            let own = table.pool(state.id()).expect("the table's pool");
            assert!(Arc::ptr_eq(own, state), "a stale pool state");
            format!("{} ({} members)", state.name(), state.members().len())
        }
        Some(Target::Reject(status)) => format!("reject {status}"),
        Some(other) => format!("{other:?}"),
    }
}

/// Every answer of `table`, each pool target checked to be the table's own state of the pool.
fn answers(table: &RouteTable) -> Vec<String> {
    let mut out = Vec::new();
    for https in [false, true] {
        for host in HOSTS.iter().chain(&["other.test"]) {
            for path in PATHS.iter().chain(&["/p/x", "/z"]) {
                let answer = answer(table, table.route_request(https, host, path, &()));
                out.push(format!("{https} {host}{path}: {answer}"));
            }
        }
    }
    out
}

#[test]
fn a_table_compiled_over_the_previous_answers_as_one_compiled_from_scratch() {
    let endpoints = Endpoints::default();
    let (mut kept_http, mut kept_https, mut rebuilt) = (0, 0, 0);
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut serial = 0;
        let mut pools: Vec<Arc<Pool>> = (0..POOLS).map(|i| pool(i, 1)).collect();
        let mut listeners: Vec<Listener> = [
            ("http", Protocol::Http),
            ("https", Protocol::TerminatedHttps),
        ]
        .into_iter()
        .map(|(name, protocol)| {
            let policies = (0..12).map(|_| policy(&mut rng, &mut serial)).collect();
            listener(name, protocol, policies)
        })
        .collect();
        let mut previous =
            Compiler::new(None, None, &endpoints).compile(&model(&listeners, &pools));
        for _ in 0..30 {
            let l = rng.below(2);
            let policies = &mut listeners[l].policies;
            match rng.below(7) {
                0 => {}
                1 => {
                    let at = rng.below(policies.len());
                    policies[at] = policy(&mut rng, &mut serial);
                }
                2 if policies.len() > 1 => {
                    policies.remove(rng.below(policies.len()));
                }
                3 => {
                    let at = rng.below(policies.len() + 1);
                    policies.insert(at, policy(&mut rng, &mut serial));
                }
                4 => {
                    let i = rng.below(POOLS);
                    pools[i] = pool(i, 1 + rng.below(3));
                }
                5 => {
                    let pool = (rng.below(2) == 0)
                        .then(|| PoolId::derive(&format!("pool{}", rng.below(POOLS))));
                    listeners[l].default_pool = pool;
                }
                _ => {
                    // The same content under another pointer.
                    let at = rng.below(policies.len());
                    policies[at] = Arc::new(L7Policy::clone(&policies[at]));
                }
            }
            let model = model(&listeners, &pools);
            let table = Compiler::new(Some(&previous), None, &endpoints).compile(&model);
            let scratch = Compiler::new(None, None, &endpoints).compile(&model);
            assert_eq!(answers(&table), answers(&scratch), "seed {seed}");
            kept_http += usize::from(Arc::ptr_eq(&table.http, &previous.http));
            kept_https += usize::from(Arc::ptr_eq(&table.https, &previous.https));
            rebuilt += usize::from(!Arc::ptr_eq(&table.http, &previous.http));
            previous = table;
        }
    }
    // Both kinds of step happened: routes kept and routes compiled again.
    assert!(
        kept_http > 50 && kept_https > 50 && rebuilt > 50,
        "{kept_http} {kept_https} {rebuilt}"
    );
}

#[test]
fn a_change_to_one_protocol_keeps_the_other_protocol_routes() {
    let endpoints = Endpoints::default();
    let mut rng = Rng(7);
    let mut serial = 0;
    let pools: Vec<Arc<Pool>> = (0..POOLS).map(|i| pool(i, 1)).collect();
    let mut listeners = vec![
        listener(
            "http",
            Protocol::Http,
            (0..5).map(|_| policy(&mut rng, &mut serial)).collect(),
        ),
        listener(
            "https",
            Protocol::TerminatedHttps,
            (0..5).map(|_| policy(&mut rng, &mut serial)).collect(),
        ),
    ];
    let first = Compiler::new(None, None, &endpoints).compile(&model(&listeners, &pools));
    listeners[0].policies[2] = policy(&mut rng, &mut serial);
    let second = Compiler::new(Some(&first), None, &endpoints).compile(&model(&listeners, &pools));
    assert!(!Arc::ptr_eq(&first.http, &second.http));
    assert!(Arc::ptr_eq(&first.https, &second.https));
    // A pool's members changed: every route naming it is compiled again.
    let mut pools = pools;
    let named = (listeners[1].policies.iter()).find_map(|p| match p.action {
        PolicyAction::RedirectToPool { pool } => Some(pool),
        _ => None,
    });
    let i = (0..POOLS)
        .find(|i| Some(PoolId::derive(&format!("pool{i}"))) == named)
        .expect("an HTTPS policy names a pool");
    pools[i] = pool(i, 2);
    let third = Compiler::new(Some(&second), None, &endpoints).compile(&model(&listeners, &pools));
    assert!(!Arc::ptr_eq(&second.https, &third.https));
    assert_eq!(
        answers(&third),
        answers(&Compiler::new(None, None, &endpoints).compile(&model(&listeners, &pools)))
    );
}

/// Exact hosts (some under the one-label wildcard `*.w.test`, some under the suffix wildcards
/// `*.s.test` and `*.t.s.test`), as the per-host changes pick them.
const MANY_HOSTS: [&str; 8] = [
    "a.test",
    "b.test",
    "c.test",
    "x.w.test",
    "y.w.test",
    "u.s.test",
    "v.t.s.test",
    "deep.v.t.s.test",
];

/// A policy with a random host rule (exact, one-label wildcard, suffix wildcard, none), path,
/// optional header condition and action.
fn varied_policy(rng: &mut Rng, serial: &mut u64, host: Option<usize>) -> Arc<L7Policy> {
    *serial += 1;
    let id = L7PolicyId::derive(&format!("policy{serial}"));
    let rule = |n: &str, rule_type, compare_type, key: Option<&str>, value: &str| L7Rule {
        id: L7RuleId::derive(&format!("{id}/{n}")),
        rule_type,
        compare_type,
        key: key.map(str::to_owned),
        value: value.to_owned(),
    };
    let mut rules = Vec::new();
    let pick = host.unwrap_or_else(|| rng.below(MANY_HOSTS.len() + 4));
    match pick.checked_sub(MANY_HOSTS.len()) {
        None => rules.push(rule(
            "h",
            RuleType::HostName,
            CompareType::EqualTo,
            None,
            MANY_HOSTS[pick],
        )),
        Some(0) => {}
        Some(1) => rules.push(rule(
            "h",
            RuleType::HostName,
            CompareType::WildcardLabel,
            None,
            "w.test",
        )),
        Some(2) => rules.push(rule(
            "h",
            RuleType::HostName,
            CompareType::WildcardSuffix,
            None,
            "s.test",
        )),
        Some(_) => rules.push(rule(
            "h",
            RuleType::HostName,
            CompareType::WildcardSuffix,
            None,
            "t.s.test",
        )),
    }
    // Few regular expressions: each compile builds them again, slowly in debug builds.
    let compare = match rng.below(10) {
        0..=3 => CompareType::EqualTo,
        4 => CompareType::Regex,
        _ => CompareType::PathPrefix,
    };
    let path = PATHS[rng.below(PATHS.len())];
    rules.push(rule("p", RuleType::Path, compare, None, path));
    if rng.below(5) == 0 {
        rules.push(rule(
            "x",
            RuleType::Header,
            CompareType::EqualTo,
            Some("x-v"),
            "1",
        ));
    }
    let action = match rng.below(6) {
        0 => PolicyAction::Reject { status: 403 },
        1 => PolicyAction::Reject {
            status: 404 + rng.below(2) as u16,
        },
        _ => PolicyAction::RedirectToPool {
            pool: PoolId::derive(&format!("pool{}", rng.below(POOLS))),
        },
    };
    Arc::new(L7Policy {
        id,
        action,
        rules,
        source: Arc::new(ObjectRef::new("Ingress", "default", &format!("i{serial}"))),
        options: None,
        precedence: 0,
    })
}

/// Every answer of `table` on the varied hosts, with and without the header condition.
fn varied_answers(table: &RouteTable) -> Vec<String> {
    let mut with = http::HeaderMap::new();
    with.insert("x-v", http::HeaderValue::from_static("1"));
    let mut out = Vec::new();
    let hosts = MANY_HOSTS.iter().chain(&[
        "z.w.test",
        "q.s.test",
        "q.r.s.test",
        "q.t.s.test",
        "s.test",
        "other.test",
    ]);
    for https in [false, true] {
        for host in hosts.clone() {
            for path in PATHS.iter().chain(&["/p/x", "/z", "/P/Q"]) {
                for headers in [&() as &dyn super::RequestHeaders, &with] {
                    let answer = answer(table, table.route_request(https, host, path, headers));
                    out.push(format!("{https} {host}{path}: {answer}"));
                }
            }
        }
    }
    out
}

/// Two load balancers, each with an HTTP and an HTTPS listener.
fn two_load_balancers(listeners: &[Vec<Listener>], pools: &[Arc<Pool>]) -> Model {
    let lb = |i: usize| LoadBalancer {
        id: LoadBalancerId::derive(&format!("lb{i}")),
        name: format!("lb{i}"),
        origin: ObjectRef::new("IngressClass", "", "portico"),
        provider: "proxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners[i].clone()),
        pools: pools.to_vec(),
    };
    Model {
        load_balancers: vec![lb(0), lb(1)],
    }
}

#[test]
fn tables_compiled_over_previous_ones_with_per_host_changes_answer_as_from_scratch() {
    let endpoints = Endpoints::default();
    let (mut shared, mut tables, mut steps) = (0, 0, 0);
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let mut serial = 0;
        let mut pools: Vec<Arc<Pool>> = (0..POOLS).map(|i| pool(i, 1)).collect();
        let mut listeners: Vec<Vec<Listener>> = (0..2)
            .map(|lb| {
                let listener = |name: &str, protocol, rng: &mut Rng, serial: &mut u64| {
                    let n = 10 + rng.below(20);
                    let policies = (0..n).map(|_| varied_policy(rng, serial, None)).collect();
                    listener(&format!("{name}{lb}"), protocol, policies)
                };
                vec![
                    listener("http", Protocol::Http, &mut rng, &mut serial),
                    listener("https", Protocol::TerminatedHttps, &mut rng, &mut serial),
                ]
            })
            .collect();
        let mut previous =
            Compiler::new(None, None, &endpoints).compile(&two_load_balancers(&listeners, &pools));
        for _ in 0..40 {
            let (lb, l) = (rng.below(2), rng.below(2));
            let listener = &mut listeners[lb][l];
            let policies = &mut listener.policies;
            let len = policies.len();
            match rng.below(12) {
                // One host's policy replaced, removed, added.
                0 => policies[rng.below(len)] = varied_policy(&mut rng, &mut serial, None),
                1 if len > 1 => drop(policies.remove(rng.below(len))),
                2 => {
                    let host = rng.below(MANY_HOSTS.len());
                    let new = varied_policy(&mut rng, &mut serial, Some(host));
                    policies.insert(rng.below(len + 1), new);
                }
                // A host's policies all removed, or a host added with several.
                3 => {
                    let host = MANY_HOSTS[rng.below(MANY_HOSTS.len())];
                    let value = |p: &L7Policy| {
                        (p.rules.iter())
                            .any(|r| r.rule_type == RuleType::HostName && r.value == host)
                    };
                    policies.retain(|p| !value(p));
                    if policies.is_empty() {
                        policies.push(varied_policy(&mut rng, &mut serial, None));
                    }
                }
                4 => {
                    let host = rng.below(MANY_HOSTS.len() + 4);
                    let at = rng.below(len + 1);
                    for _ in 0..3 {
                        let new = varied_policy(&mut rng, &mut serial, Some(host));
                        policies.insert(at, new);
                    }
                }
                // The same policies reordered: one moved, two swapped.
                5 => {
                    let moved = policies.remove(rng.below(len));
                    policies.insert(rng.below(len), moved);
                }
                6 => policies.swap(rng.below(len), rng.below(len)),
                // A host-less, wildcard or suffix policy changed.
                7 => {
                    let host = MANY_HOSTS.len() + rng.below(4);
                    policies[rng.below(len)] = varied_policy(&mut rng, &mut serial, Some(host));
                }
                8 => {
                    let i = rng.below(POOLS);
                    pools[i] = pool(i, 1 + rng.below(3));
                }
                9 => {
                    listener.default_pool = (rng.below(2) == 0)
                        .then(|| PoolId::derive(&format!("pool{}", rng.below(POOLS))));
                }
                10 => {
                    // The same content under another pointer.
                    let at = rng.below(len);
                    policies[at] = Arc::new(L7Policy::clone(&policies[at]));
                }
                _ => {
                    // A policy moved from one load balancer's listener to the other's.
                    if len > 1 {
                        let moved = policies.remove(rng.below(len));
                        let other = &mut listeners[1 - lb][l].policies;
                        let at = rng.below(other.len() + 1);
                        other.insert(at, moved);
                    }
                }
            }
            let model = two_load_balancers(&listeners, &pools);
            let table = Compiler::new(Some(&previous), None, &endpoints).compile(&model);
            let scratch = Compiler::new(None, None, &endpoints).compile(&model);
            assert_eq!(
                varied_answers(&table),
                varied_answers(&scratch),
                "seed {seed}"
            );
            for (new, old) in [
                (&table.http, &previous.http),
                (&table.https, &previous.https),
            ] {
                if !Arc::ptr_eq(new, old) {
                    let (s, n) = new.tables_shared_with(old);
                    (shared, tables, steps) = (shared + s, tables + n, steps + 1);
                }
            }
            previous = table;
        }
    }
    // Routes compiled again mostly kept their tables: a step rebuilds only what it touched.
    eprintln!("{steps} steps compiled over the previous routes, {shared} of {tables} tables kept");
    assert!(steps > 400, "{steps}");
    assert!(shared * 2 > tables, "{shared} of {tables} tables kept");
}

#[test]
fn a_change_to_one_host_compiles_that_host_table_alone() {
    let endpoints = Endpoints::default();
    let mut rng = Rng(11);
    let mut serial = 0;
    let pools: Vec<Arc<Pool>> = (0..POOLS).map(|i| pool(i, 1)).collect();
    // Exact hosts only (no host-less or wildcard policy), so that every table is its own.
    let exact = |rng: &mut Rng, serial: &mut u64| {
        let host = rng.below(3);
        varied_policy(rng, serial, Some(host))
    };
    let policies: Vec<_> = (0..30).map(|_| exact(&mut rng, &mut serial)).collect();
    let mut listeners = vec![listener("http", Protocol::Http, policies)];
    let first = Compiler::new(None, None, &endpoints).compile(&model(&listeners, &pools));
    assert_eq!(first.http.tables_shared_with(&first.http), (4, 4));
    let host = |p: &L7Policy| p.rules[0].value.clone();
    let changed = host(&listeners[0].policies[7]);
    let replaced = varied_policy(
        &mut rng,
        &mut serial,
        MANY_HOSTS.iter().position(|h| *h == changed),
    );
    listeners[0].policies[7] = replaced;
    let second = Compiler::new(Some(&first), None, &endpoints).compile(&model(&listeners, &pools));
    // Three exact hosts and the host-less table: the changed host's alone is new.
    assert_eq!(second.http.tables_shared_with(&first.http), (3, 4));
    assert_eq!(
        varied_answers(&second),
        varied_answers(&Compiler::new(None, None, &endpoints).compile(&model(&listeners, &pools)))
    );
}

#[test]
fn an_apply_that_keeps_every_pool_state_keeps_the_endpoints_and_one_that_drops_members_prunes_them()
{
    let proxy = crate::Proxy::new(crate::ProxyMetrics::new(&mut Default::default()));
    let mut rng = Rng(5);
    let mut serial = 0;
    // One policy per pool, so that every pool is served.
    let to = |i: usize, rng: &mut Rng, serial: &mut u64| {
        let pool = PoolId::derive(&format!("pool{i}"));
        let action = PolicyAction::RedirectToPool { pool };
        Arc::new(L7Policy {
            action,
            ..L7Policy::clone(&policy(rng, serial))
        })
    };
    let policies: Vec<_> = (0..POOLS).map(|i| to(i, &mut rng, &mut serial)).collect();
    let mut listeners = vec![listener("http", Protocol::Http, policies)];
    let mut pools: Vec<Arc<Pool>> = (0..POOLS).map(|i| pool(i, 1)).collect();
    pools[0] = pool(0, 3);
    proxy.apply(&model(&listeners, &pools));
    assert_eq!(proxy.endpoint_count(), POOLS + 2);
    // A policy changed, every pool state kept.
    listeners[0].policies[1] = to(1, &mut rng, &mut serial);
    proxy.apply(&model(&listeners, &pools));
    assert_eq!(proxy.endpoint_count(), POOLS + 2);
    // Two members gone: their endpoints are forgotten.
    pools[0] = pool(0, 1);
    proxy.apply(&model(&listeners, &pools));
    assert_eq!(proxy.endpoint_count(), POOLS);
}
