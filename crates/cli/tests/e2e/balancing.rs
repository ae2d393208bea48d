//! Balancing and health, per provider (the built-in proxy and haproxy): real echo backends
//! that name their pod and can be made slow, failing or unhealthy while they run.

use crate::conformance::Provider;
use crate::support::*;
use portico_echo::Behaviour;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One test per (scenario, provider): `balancing::proxy::…`, `balancing::haproxy::…`.
macro_rules! per_provider {
    ($($scenario:ident),* $(,)?) => {
        mod proxy {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario(super::Provider::Proxy).await
            })*
        }
        mod haproxy {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                super::$scenario(super::Provider::Haproxy).await
            })*
        }
    };
}

per_provider!(
    round_robin_spreads_evenly,
    least_request_sends_fewer_requests_to_a_slow_member,
    hash_by_header_keeps_a_key_on_one_member_and_spreads_keys,
    cookie_affinity_keeps_a_client_and_rechooses_when_its_member_is_gone,
    passive_health_ejects_a_failing_member_and_brings_it_back,
    active_checks_take_out_a_failing_member_and_bring_it_back,
);

const NS: &str = "balance";
const HOST: &str = "balance.test";

async fn start(provider: Provider, dir: &Path) -> Portico {
    match provider {
        Provider::Haproxy => Portico::start_haproxy(dir, &[]).await,
        _ => Portico::start(dir, &[]).await,
    }
}

/// Echo pods `web-0`…, each with its behaviour.
struct Pods {
    addrs: Vec<SocketAddr>,
    behaviour: Vec<Arc<Behaviour>>,
}

async fn pods(n: usize) -> Pods {
    let mut pods = Pods {
        addrs: Vec::new(),
        behaviour: Vec::new(),
    };
    for i in 0..n {
        let b = Arc::new(Behaviour::default());
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let addr = portico_echo::spawn_with(any, "web", &format!("web-{i}"), b.clone())
            .await
            .unwrap();
        pods.addrs.push(addr);
        pods.behaviour.push(b);
    }
    pods
}

/// The Service `web` on `addrs` and an Ingress for every path of `balance.test` with these
/// annotations; waits until the route serves.
async fn serve(
    provider: Provider,
    pods: &Pods,
    annotations: &[(&str, &str)],
) -> (Manifests, Portico) {
    let m = Manifests::new();
    m.write("web.yaml", &service(NS, "web", &ready(&pods.addrs)));
    m.write("ingress.yaml", &annotated_ingress(annotations));
    let p = start(provider, m.path()).await;
    wait_served(&p).await;
    (m, p)
}

fn annotated_ingress(annotations: &[(&str, &str)]) -> String {
    let y = ingress(
        NS,
        "web",
        "2026-01-01T00:00:00Z",
        &[(HOST, "/", "Prefix", "web", "80")],
    );
    let mut a = String::from("  annotations:\n");
    for (k, v) in annotations {
        a.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    y.replacen("spec:\n", &format!("{a}spec:\n"), 1)
}

async fn wait_served(p: &Portico) {
    let start = Instant::now();
    while p.get(HOST, "/").await.service() != "web" {
        assert!(start.elapsed() < Duration::from_secs(10), "not served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pod that answered, or "" (with the status) when none did.
fn pod(r: &Reply) -> String {
    r.json()["pod"].as_str().unwrap_or("").to_owned()
}

/// `n` sequential requests: how many each pod answered.
async fn spread(p: &Portico, n: usize, headers: &[(&str, &str)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let r = p
            .request(p.http, "GET", HOST, "/", headers, "")
            .await
            .unwrap();
        *counts.entry(pod(&r)).or_default() += 1;
    }
    counts
}

async fn round_robin_spreads_evenly(provider: Provider) {
    let pods = pods(3).await;
    let (_m, p) = serve(provider, &pods, &[]).await;
    let counts = spread(&p, 60, &[]).await;
    assert_eq!(counts.len(), 3, "{counts:?}");
    for (pod, n) in &counts {
        assert!((18..=22).contains(n), "{pod}: {n} of 60: {counts:?}");
    }
}

/// Requests from `concurrency` clients for `duration`: how many each pod answered.
async fn load(p: &Portico, concurrency: usize, duration: Duration) -> BTreeMap<String, usize> {
    let p = Arc::new(p);
    let until = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let p = p.clone();
        tasks.push(async move {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            while Instant::now() < until {
                let r = p.get(HOST, "/").await;
                *counts.entry(pod(&r)).or_default() += 1;
            }
            counts
        });
    }
    let mut all = BTreeMap::new();
    for counts in futures::future::join_all(tasks).await {
        for (k, v) in counts {
            *all.entry(k).or_default() += v;
        }
    }
    all
}

async fn least_request_sends_fewer_requests_to_a_slow_member(provider: Provider) {
    let pods = pods(3).await;
    pods.behaviour[2].delay_ms.store(50, Ordering::Relaxed);
    let (_m, p) = serve(
        provider,
        &pods,
        &[("nginx.ingress.kubernetes.io/load-balance", "ewma")],
    )
    .await;
    let counts = load(&p, 6, Duration::from_secs(3)).await;
    let total: usize = counts.values().sum();
    let slow = counts.get("web-2").copied().unwrap_or(0);
    // Round robin would give it a third.
    assert!(
        slow * 10 < total,
        "the slow member got {slow} of {total}: {counts:?}"
    );
    assert!(
        counts.get("web-0").is_some_and(|n| *n > total / 4),
        "{counts:?}"
    );
    assert!(
        counts.get("web-1").is_some_and(|n| *n > total / 4),
        "{counts:?}"
    );
}

async fn hash_by_header_keeps_a_key_on_one_member_and_spreads_keys(provider: Provider) {
    let pods = pods(3).await;
    let annotations = [(
        "nginx.ingress.kubernetes.io/upstream-hash-by",
        "$http_x_user",
    )];
    let (_m, p) = serve(provider, &pods, &annotations).await;
    let mut members = HashSet::new();
    for user in 0..30 {
        let user = format!("user-{user}");
        let counts = spread(&p, 4, &[("x-user", &user)]).await;
        assert_eq!(counts.len(), 1, "{user} went to {counts:?}");
        members.insert(counts.into_keys().next().unwrap());
    }
    assert_eq!(members.len(), 3, "30 keys on {members:?}");
    // Without the header: round robin.
    assert_eq!(spread(&p, 6, &[]).await.len(), 3);
}

async fn cookie_affinity_keeps_a_client_and_rechooses_when_its_member_is_gone(provider: Provider) {
    let pods = pods(3).await;
    let annotations = [
        ("nginx.ingress.kubernetes.io/affinity", "cookie"),
        ("nginx.ingress.kubernetes.io/session-cookie-name", "route"),
        ("nginx.ingress.kubernetes.io/session-cookie-max-age", "600"),
    ];
    let (m, p) = serve(provider, &pods, &annotations).await;
    let first = p.get(HOST, "/").await;
    let set = first.headers.get("set-cookie").expect("a Set-Cookie");
    let set = set.to_str().unwrap().to_owned();
    let lower = set.to_ascii_lowercase();
    assert!(set.starts_with("route="), "{set}");
    for attr in ["path=/", "max-age=600", "httponly"] {
        assert!(lower.contains(attr), "{set} lacks {attr}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let member = pod(&first);
    let counts = spread(&p, 10, &[("cookie", &cookie)]).await;
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert!(counts.contains_key(&member), "{counts:?}");
    // Its member leaves the Service: another one answers and a new cookie is set.
    let index: usize = member.trim_start_matches("web-").parse().unwrap();
    let rest: Vec<SocketAddr> = (pods.addrs.iter().enumerate())
        .filter(|(i, _)| *i != index)
        .map(|(_, a)| *a)
        .collect();
    m.write("web.yaml", &service(NS, "web", &ready(&rest)));
    let start = Instant::now();
    loop {
        let r = p
            .request(p.http, "GET", HOST, "/", &[("cookie", &cookie)], "")
            .await
            .unwrap();
        if r.status == 200 && pod(&r) != member {
            let again = r.headers.get("set-cookie").expect("a new Set-Cookie");
            let again = again.to_str().unwrap();
            assert!(
                again.starts_with("route=") && !again.starts_with(&cookie),
                "{again}"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "still {}",
            pod(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn passive_health_ejects_a_failing_member_and_brings_it_back(provider: Provider) {
    let pods = pods(3).await;
    let annotations = [
        ("portico.dev/passive-health-failures", "3"),
        ("portico.dev/passive-health-ejection", "2s"),
    ];
    let (_m, p) = serve(provider, &pods, &annotations).await;
    pods.behaviour[1].status.store(500, Ordering::Relaxed);
    let counts = spread(&p, 30, &[]).await;
    let failed = counts.get("web-1").copied().unwrap_or(0);
    assert!(
        failed <= 4,
        "the failing member got {failed} of 30: {counts:?}"
    );
    if matches!(provider, Provider::Proxy) {
        let text = p.metrics().await;
        let addr = pods.addrs[1].to_string();
        let healthy = text
            .lines()
            .find(|l| l.starts_with("portico_member_healthy{") && l.contains(&addr));
        assert!(
            healthy.is_some_and(|l| l.ends_with(" 0")),
            "{healthy:?}\n{text}"
        );
        let ejections = text
            .lines()
            .find(|l| l.starts_with("portico_member_ejections_total{") && l.contains(&addr));
        assert!(
            ejections.is_some_and(|l| l.ends_with(" 1")),
            "{ejections:?}"
        );
        let member = admin_member(&p, pods.addrs[1]).await;
        assert_eq!(member["health"], "ejected", "{member}");
        assert!(
            member["ejectedForMs"].as_u64().is_some_and(|ms| ms <= 2000),
            "{member}"
        );
    } else {
        // haproxy's runtime API: marked down after errors.
        let member = admin_member(&p, pods.addrs[1]).await;
        assert_eq!(member["health"], "down", "{member}");
        assert_eq!(member["provider"], "haproxy", "{member}");
    }
    pods.behaviour[1].status.store(0, Ordering::Relaxed);
    let start = Instant::now();
    loop {
        let counts = spread(&p, 6, &[]).await;
        if counts.contains_key("web-1") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "web-1 did not come back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn active_checks_take_out_a_failing_member_and_bring_it_back(provider: Provider) {
    let pods = pods(3).await;
    let annotations = [
        ("portico.dev/health-check-path", "/healthz"),
        ("portico.dev/health-check-interval", "200ms"),
        ("portico.dev/health-check-timeout", "1s"),
        ("portico.dev/health-check-healthy-threshold", "2"),
        ("portico.dev/health-check-unhealthy-threshold", "2"),
    ];
    let (_m, p) = serve(provider, &pods, &annotations).await;
    // A few passed checks first (haproxy takes a server that never passed one out at its first
    // failed check).
    let start = Instant::now();
    while pods.behaviour[0].checks.load(Ordering::Relaxed) < 3 {
        assert!(start.elapsed() < Duration::from_secs(5), "no checks");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = pods.behaviour[0].checks.load(Ordering::Relaxed);
    pods.behaviour[0].unhealthy.store(true, Ordering::Relaxed);
    let start = Instant::now();
    loop {
        let counts = spread(&p, 9, &[]).await;
        if !counts.contains_key("web-0") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "web-0 still served: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // It stays out while its checks fail.
    let counts = spread(&p, 30, &[]).await;
    assert!(!counts.contains_key("web-0"), "{counts:?}");
    let out = match provider {
        Provider::Haproxy => "down",
        _ => "failing_checks",
    };
    let member = admin_member(&p, pods.addrs[0]).await;
    assert_eq!(member["health"], out, "{member}");
    let other = admin_member(&p, pods.addrs[1]).await;
    assert_eq!(other["health"], "healthy", "{other}");
    assert!(
        other["pool"]
            .as_str()
            .is_some_and(|n| n.starts_with("balance_web_80")),
        "{other}"
    );
    let failed = pods.behaviour[0].checks.load(Ordering::Relaxed) - before;
    assert!(failed >= 2, "out after {failed} failed checks");
    pods.behaviour[0].unhealthy.store(false, Ordering::Relaxed);
    let start = Instant::now();
    loop {
        let counts = spread(&p, 9, &[]).await;
        if counts.contains_key("web-0") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "web-0 did not come back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The member at `addr` in `GET /api/v1/pools`.
async fn admin_member(p: &Portico, addr: SocketAddr) -> serde_json::Value {
    let pools = p.admin_json("/api/v1/pools").await;
    let members = pools.as_array().into_iter().flatten().flat_map(|pool| {
        let members = pool["members"].as_array().cloned().unwrap_or_default();
        members.into_iter().map(move |mut m| {
            m["pool"] = pool["name"].clone();
            m["provider"] = pool["provider"].clone();
            m
        })
    });
    let mut found = members.filter(|m| m["address"] == addr.to_string());
    found
        .next()
        .unwrap_or_else(|| panic!("{addr} not in {pools}"))
}
