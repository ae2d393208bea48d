//! A table compiled over the previous one (which keeps a protocol's routes while its
//! listeners' policies are the same pointers over the same pool states) answers as one
//! compiled from scratch, on random changes.

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

/// Every answer of `table`, each pool target checked to be the table's own state of the pool.
fn answers(table: &RouteTable) -> Vec<String> {
    let mut out = Vec::new();
    for https in [false, true] {
        for host in HOSTS.iter().chain(&["other.test"]) {
            for path in PATHS.iter().chain(&["/p/x", "/z"]) {
                let answer = match table.route_request(https, host, path, &()) {
                    None => "404".to_owned(),
                    Some(Target::Pool(state)) => {
                        let own = table.pool(state.id()).expect("the table's pool");
                        assert!(Arc::ptr_eq(own, state), "a stale pool state");
                        format!("{} ({} members)", state.name(), state.members().len())
                    }
                    Some(Target::Reject(status)) => format!("reject {status}"),
                    Some(other) => format!("{other:?}"),
                };
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
