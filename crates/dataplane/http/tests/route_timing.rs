//! Times a one-policy change applied over the previous route table at the scale of the
//! end-to-end benchmark: 10,000 HTTPRoute-shaped policies on a Gateway's HTTP listener beside
//! 40,000 Ingress-shaped ones (20,000 on each of a shared load balancer's HTTP and HTTPS
//! listeners), 5,000 pools of 10 members. `cargo test -p portico-dataplane-http --release
//! --test route_timing -- --ignored --nocapture`.
#![allow(clippy::unwrap_used)] // tests may unwrap

use portico_dataplane_http::{Proxy, ProxyMetrics, compile};
use portico_model::{
    Algorithm, CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId,
    LoadBalancer, LoadBalancerId, Member, MemberId, Model, ObjectRef, PolicyAction, Pool, PoolId,
    PoolProtocol, Protocol, RuleType,
};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::{Duration, Instant};

const POOLS: usize = 5_000;

fn pool(i: usize) -> Arc<Pool> {
    Arc::new(Pool {
        id: PoolId::derive(&format!("pool{i}")),
        name: format!("default_s{i}_80"),
        service: ObjectRef::new("Service", "default", &format!("s{i}")),
        service_port: "80".into(),
        algorithm: Algorithm::RoundRobin,
        protocol: PoolProtocol::Http,
        settings: Arc::default(),
        members: (0..10)
            .map(|m| Member {
                id: MemberId::derive(&format!("pool{i}/{m}")),
                address: [10, (i / 250) as u8, (i % 250) as u8, m as u8].into(),
                port: 8080,
                weight: 1,
                ready: true,
            })
            .collect(),
    })
}

fn policy(source: &str, host: &str, path: &str, pool: usize) -> Arc<L7Policy> {
    let id = L7PolicyId::derive(&format!("{source}{host}{path}"));
    let rule = |n: &str, rule_type, compare_type, value: &str| L7Rule {
        id: L7RuleId::derive(&format!("{id}/{n}")),
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    };
    Arc::new(L7Policy {
        id,
        action: PolicyAction::RedirectToPool {
            pool: PoolId::derive(&format!("pool{pool}")),
        },
        rules: vec![
            rule("h", RuleType::HostName, CompareType::EqualTo, host),
            rule("p", RuleType::Path, CompareType::PathPrefix, path),
        ],
        source: Arc::new(ObjectRef::new("Ingress", "default", source)),
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

fn load_balancer(name: &str, listeners: Vec<Listener>, pools: &[Arc<Pool>]) -> LoadBalancer {
    LoadBalancer {
        id: LoadBalancerId::derive(name),
        name: name.into(),
        origin: ObjectRef::new("IngressClass", "", name),
        provider: "proxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools: pools.to_vec(),
    }
}

/// 10,000 Ingresses on 2,000 hosts, two paths each, on both listeners; 10,000 HTTPRoutes on
/// 2,000 other hosts, one rule each. Host-sorted, as the translator orders them.
fn policies() -> (Vec<Arc<L7Policy>>, Vec<Arc<L7Policy>>) {
    let mut ingresses = Vec::new();
    for i in 0..10_000 {
        let host = format!("h{:04}.ingress.test", i / 5);
        ingresses.push(policy(
            &format!("i{i}"),
            &host,
            &format!("/a{i}"),
            i % POOLS,
        ));
        ingresses.push(policy(
            &format!("i{i}"),
            &host,
            &format!("/b{i}"),
            (i + 1) % POOLS,
        ));
    }
    let routes = (0..10_000)
        .map(|i| {
            let host = format!("g{:04}.gateway.test", i / 5);
            policy(&format!("r{i}"), &host, &format!("/r{i}"), i % POOLS)
        })
        .collect();
    (ingresses, routes)
}

fn model(ingresses: &[Arc<L7Policy>], routes: &[Arc<L7Policy>], pools: &[Arc<Pool>]) -> Model {
    let shared = load_balancer(
        "shared",
        vec![
            listener("http", Protocol::Http, ingresses.to_vec()),
            listener("https", Protocol::TerminatedHttps, ingresses.to_vec()),
        ],
        pools,
    );
    let gateway = load_balancer(
        "gateway",
        vec![listener("gw-http", Protocol::Http, routes.to_vec())],
        pools,
    );
    Model {
        load_balancers: vec![shared, gateway],
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
#[ignore = "a measurement: run it on its own, in release"]
fn one_policy_change_over_the_previous_table() {
    let pools: Vec<Arc<Pool>> = (0..POOLS).map(pool).collect();
    let (ingresses, routes) = policies();
    let a = model(&ingresses, &routes, &pools);
    // One HTTPRoute's rule moved to another path; one Ingress's path likewise.
    let mut moved_route = routes.clone();
    moved_route[4_321] = policy("r4321", "g0864.gateway.test", "/moved4321", 4_321);
    let route_changed = model(&ingresses, &moved_route, &pools);
    let mut moved_ingress = ingresses.clone();
    moved_ingress[8_642] = policy("i4321", "h0864.ingress.test", "/moved4321", 4_321);
    let ingress_changed = model(&moved_ingress, &routes, &pools);

    let start = Instant::now();
    let table = compile(&a);
    let full = start.elapsed();
    drop(table);

    let mut registry = Registry::default();
    let proxy = Proxy::new(ProxyMetrics::new(&mut registry));
    let start = Instant::now();
    proxy.apply(&a);
    let first = start.elapsed();
    let timed = |changed: &Model| {
        let mut times = Vec::new();
        for _ in 0..15 {
            for m in [changed, &a] {
                let start = Instant::now();
                proxy.apply(m);
                times.push(start.elapsed());
            }
        }
        median(times)
    };
    let route = timed(&route_changed);
    let ingress = timed(&ingress_changed);
    // The answers are those of a table compiled from scratch.
    proxy.apply(&route_changed);
    let served = proxy.table();
    let scratch = compile(&route_changed);
    for (host, path) in [
        ("g0864.gateway.test", "/moved4321"),
        ("g0864.gateway.test", "/r4321"),
        ("g0864.gateway.test", "/r4320"),
        ("h0864.ingress.test", "/a4321"),
    ] {
        let name = |t: &portico_dataplane_http::RouteTable| match t.route(host, path) {
            Some(portico_dataplane_http::Target::Pool(p)) => p.name().to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(name(&served), name(&scratch), "{host}{path}");
    }
    println!(
        "50,000 policies: compiled from scratch {full:?}, first apply {first:?}; \
         one-policy change applied over the previous table (median of 30): \
         HTTPRoute {route:?}, Ingress (both listeners) {ingress:?}"
    );
}
