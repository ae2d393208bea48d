//! `portico run --kubernetes` against a fake API server that speaks the real protocol (list
//! with resourceVersion, watch streams with bookmarks and 410 Gone, status patches, Events,
//! Leases): objects reach the data plane, status and Events reach the API server, watch
//! failures lose nothing, and of two replicas only the leader writes.

use crate::kube_support::Cluster;
use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NS: &str = "shop";

/// Echo Services `names` (one pod each) in the cluster.
async fn services(cluster: &Cluster, names: &[&str]) {
    for name in names {
        let pods = echo_pods(name, 1).await;
        cluster.apply(&service(NS, name, &ready(&pods)));
    }
}

fn route(name: &str, host: &str, path: &str, svc: &str) -> String {
    ingress(
        NS,
        name,
        "2026-01-01T00:00:00Z",
        &[(host, path, "Prefix", svc, "http")],
    )
}

fn ip(address: &str) -> Value {
    json!([{ "ip": address }])
}

#[tokio::test]
async fn created_updated_and_deleted_objects_reach_the_data_plane_and_status() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web", "api"]).await;
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    cluster.wait_status(NS, "shop", ip("127.0.0.1")).await;

    // Created: a second Ingress.
    cluster.apply(&route("api", "api.example", "/v1", "api"));
    p.wait_route("api.example", "/v1", 200, "api").await;
    cluster.wait_status(NS, "api", ip("127.0.0.1")).await;
    // Updated: the first Ingress now sends /v1 to api.
    cluster.apply(&route("shop", "shop.example", "/v1", "api"));
    p.wait_route("shop.example", "/v1", 200, "api").await;
    p.wait_route("shop.example", "/", 404, "").await;
    cluster.wait_status(NS, "shop", ip("127.0.0.1")).await;
    // An endpoint change: web's pod moves.
    let moved = echo_pods("web", 1).await;
    cluster.apply(&service(NS, "web", &ready(&moved)));
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    p.wait_route("shop.example", "/", 200, "web").await;
    // Deleted.
    assert!(
        cluster
            .api
            .delete("networking.k8s.io/v1", "Ingress", Some(NS), "api")
    );
    p.wait_route("api.example", "/v1", 404, "").await;

    // A class Portico does not own: the status it wrote is removed.
    let foreign = route("shop", "shop.example", "/", "web")
        .replace("ingressClassName: portico", "ingressClassName: other");
    cluster.apply(&foreign);
    p.wait_route("shop.example", "/", 404, "").await;
    cluster.wait_status(NS, "shop", json!([])).await;

    // Status is written only when it changes: one write per Ingress and transition.
    let patches = cluster.status_patches();
    let shop: Vec<_> = patches.iter().filter(|(n, _)| n == "shop").collect();
    assert_eq!(shop.len(), 2, "one write, one removal: {patches:?}");
    let api: Vec<_> = patches.iter().filter(|(n, _)| n == "api").collect();
    assert_eq!(api.len(), 1, "{patches:?}");
}

#[tokio::test]
async fn a_watch_stream_cut_midway_recovers_with_no_missed_update() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web", "api"]).await;
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    let watches = cluster.api.watch_count();
    for round in 0..3 {
        // Cut every stream, and change things before the watchers are back.
        cluster.api.cut_watches();
        let path = format!("/round-{round}");
        cluster.apply(&route(&format!("r{round}"), "shop.example", &path, "api"));
        p.wait_route("shop.example", &path, 200, "api").await;
        p.wait_route("shop.example", "/", 200, "web").await;
    }
    assert!(
        cluster.api.watch_count() >= watches + 3 * 5,
        "every watcher reconnected after each cut"
    );
}

#[tokio::test]
async fn a_410_gone_leads_to_a_relist_without_a_gap() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web", "api"]).await;
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    let lists_before = lists(&cluster);
    // The streams are cut and the first attempts to resume fail, so that a change made now
    // reaches no stream; then the history is forgotten: resuming from the last
    // resourceVersion gets 410 Gone, and only a relist can show the change.
    for _ in 0..5 {
        cluster.api.fail_next("GET", "watch=true", 500);
    }
    cluster.api.cut_watches();
    cluster.apply(&route("late", "late.example", "/", "api"));
    cluster.api.compact();
    // While the watchers relist, the existing route never fails.
    let start = Instant::now();
    loop {
        let r = p.get("shop.example", "/").await;
        assert_eq!(
            (r.status, r.service()),
            (200, "web".to_owned()),
            "no gap during the relist"
        );
        if p.get("late.example", "/").await.status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the change after 410 was not seen"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(lists(&cluster) > lists_before, "the watchers listed again");
}

/// List requests (not watches) served so far.
fn lists(cluster: &Cluster) -> usize {
    let requests = cluster.api.requests();
    let list = |r: &&portico_fake_apiserver::Request| {
        r.method == "GET" && !r.query.contains("watch=") && r.path.ends_with('s')
    };
    requests.iter().filter(list).count()
}

#[tokio::test]
async fn diagnostics_become_events_once_and_stay_in_the_admin_api() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    // A backend naming a Service port that does not exist.
    let bad = ingress(
        NS,
        "bad",
        "2026-01-01T00:00:00Z",
        &[("bad.example", "/", "Prefix", "web", "grpc")],
    );
    cluster.apply(&bad);
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    let events = wait_events(&cluster, "bad", 1).await;
    let event = &events[0];
    assert_eq!(event["regarding"]["kind"], "Ingress", "{event}");
    assert_eq!(event["regarding"]["namespace"], NS, "{event}");
    assert!(
        !event["regarding"]["uid"].as_str().unwrap_or("").is_empty(),
        "{event}"
    );
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(
        event["reportingController"], "portico.dev/ingress-controller",
        "{event}"
    );
    let note = event["note"].as_str().unwrap_or("");
    assert!(
        note.contains("spec.rules[0].http.paths[0].backend"),
        "{event}"
    );
    // Unrelated changes do not repeat it.
    for i in 0..3 {
        cluster.apply(&route(
            &format!("more-{i}"),
            &format!("m{i}.example"),
            "/",
            "web",
        ));
        p.wait_route(&format!("m{i}.example"), "/", 200, "web")
            .await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(events_of(&cluster, "bad").len(), 1, "deduplicated");
    // The diagnostic is in the admin API as well.
    let view = p.ingress(NS, "bad").await;
    assert!(
        !view["diagnostics"].as_array().unwrap().is_empty(),
        "{view}"
    );
}

fn events_of(cluster: &Cluster, name: &str) -> Vec<Value> {
    let all = cluster.api.list("events.k8s.io/v1", "Event");
    all.into_iter()
        .filter(|e| e["regarding"]["name"] == name)
        .collect()
}

async fn wait_events(cluster: &Cluster, name: &str, count: usize) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let events = events_of(cluster, name);
        if events.len() >= count {
            return events;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no Event for {name}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn namespace_scope_and_only_referenced_secrets() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    let elsewhere = route("other", "other.example", "/", "web")
        .replace("namespace: shop", "namespace: elsewhere");
    cluster.apply(&elsewhere);
    let p = Portico::start_kube(&cluster, &["--namespace", NS]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    p.wait_route("other.example", "/", 404, "").await;
    let requests = cluster.api.requests();
    let cluster_wide = requests.iter().filter(|r| {
        r.method == "GET"
            && ["/ingresses", "/services", "/endpointslices", "/secrets"]
                .iter()
                .any(|k| r.path.ends_with(k))
            && !r.path.contains("/namespaces/shop/")
    });
    assert_eq!(
        cluster_wide.count(),
        0,
        "everything but IngressClasses is watched in {NS} only"
    );
}

#[tokio::test]
async fn secrets_named_all_at_once_are_fetched_over_a_few_connections() {
    const SECRETS: usize = 48;
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    for i in 0..SECRETS {
        let secret = crate::tls_support::tls_secret(NS, &format!("cert-{i}"), "chain", "key");
        cluster.apply(&secret);
    }
    let p = Portico::start_kube(&cluster, &[]).await;
    // Listed while no Ingress named them: none is kept, so each Ingress below makes a fetch.
    let before = cluster.api.connection_count();
    let ingresses: String = (0..SECRETS)
        .map(|i| {
            let host = format!("t{i}.example");
            let tls = format!("  tls:\n  - hosts: [{host}]\n    secretName: cert-{i}\n");
            route(&format!("t{i}"), &host, "/", "web")
                .replace("  rules:\n", &format!("{tls}  rules:\n"))
        })
        .collect();
    cluster.apply(&ingresses);
    let deadline = Instant::now() + Duration::from_secs(20);
    let fetched = || {
        let requests = cluster.api.requests();
        let gets = requests.iter().filter(|r| {
            r.method == "GET" && r.path.contains("/secrets/cert-") && r.query.is_empty()
        });
        gets.count()
    };
    while fetched() < SECRETS {
        assert!(
            Instant::now() < deadline,
            "only {} Secrets fetched",
            fetched()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened = cluster.api.connection_count() - before;
    // The fetches go eight at a time; the status writer, writing the same Ingresses' status
    // meanwhile, has up to eight requests of its own in flight, each pool over its own
    // connections. 48 fetches at once would open about 48.
    assert!(
        opened <= 20,
        "{SECRETS} fetches opened {opened} connections to the API server"
    );
    drop(p);
}

#[tokio::test]
async fn two_replicas_one_writes_status_and_a_successor_takes_over_within_15s() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    cluster.apply(&route("shop", "shop.example", "/", "web"));
    // Each replica publishes its own address, so the status tells who wrote it.
    let a = Portico::start_kube(
        &cluster,
        &["--identity=replica-a", "--publish-address=192.0.2.1"],
    )
    .await;
    let b = Portico::start_kube(
        &cluster,
        &["--identity=replica-b", "--publish-address=192.0.2.2"],
    )
    .await;
    // Both serve traffic.
    a.wait_route("shop.example", "/", 200, "web").await;
    b.wait_route("shop.example", "/", 200, "web").await;
    let lease = wait_holder(&cluster, |h| !h.is_empty()).await;
    let (leader, follower, leader_ip, follower_ip) = match lease.as_str() {
        "replica-a" => (a, b, "192.0.2.1", "192.0.2.2"),
        "replica-b" => (b, a, "192.0.2.2", "192.0.2.1"),
        other => panic!("unexpected holder {other}"),
    };
    cluster.wait_status(NS, "shop", ip(leader_ip)).await;
    // More changes: still only the leader writes.
    cluster.apply(&route("more", "more.example", "/", "web"));
    cluster.wait_status(NS, "more", ip(leader_ip)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writers: Vec<Value> = cluster
        .status_patches()
        .into_iter()
        .map(|(_, a)| a)
        .collect();
    assert!(!writers.is_empty());
    assert!(
        writers.iter().all(|w| *w == ip(leader_ip)),
        "only the leader writes: {writers:?}"
    );

    // The leader dies (SIGKILL: no release); the follower takes over within 15 s.
    let died = Instant::now();
    drop(leader);
    let successor = if leader_ip == "192.0.2.1" {
        "replica-b"
    } else {
        "replica-a"
    };
    wait_holder(&cluster, |h| h == successor).await;
    cluster.wait_status(NS, "shop", ip(follower_ip)).await;
    let took = died.elapsed();
    eprintln!("takeover after the leader was killed: {took:?}");
    assert!(took < Duration::from_secs(15), "takeover took {took:?}");
    follower.wait_route("shop.example", "/", 200, "web").await;

    // A leader stopped with SIGTERM releases the Lease: a third replica takes over at once,
    // well before the 10 s the Lease would take to expire.
    let c = Portico::start_kube(
        &cluster,
        &["--identity=replica-c", "--publish-address=192.0.2.3"],
    )
    .await;
    c.wait_route("shop.example", "/", 200, "web").await;
    let stopped = Instant::now();
    let pid = follower.pid().unwrap().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success());
    wait_holder(&cluster, |h| h == "replica-c").await;
    cluster.wait_status(NS, "shop", ip("192.0.2.3")).await;
    let took = stopped.elapsed();
    eprintln!("takeover after the leader stopped: {took:?}");
    assert!(
        took < Duration::from_secs(6),
        "a released Lease took {took:?}"
    );
}

/// Polls the leader Lease until its holder satisfies `want`.
async fn wait_holder(cluster: &Cluster, want: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let lease = cluster.api.get(
            "coordination.k8s.io/v1",
            "Lease",
            Some("default"),
            "portico-leader",
        );
        let holder = lease
            .as_ref()
            .and_then(|l| l["spec"]["holderIdentity"].as_str())
            .unwrap_or("")
            .to_owned();
        if lease.is_some() && want(&holder) {
            return holder;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "lease holder is {holder:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn an_unreadable_kubeconfig_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing-kubeconfig");
    let out = std::process::Command::new(BIN)
        .env("XDG_RUNTIME_DIR", dir.path())
        .args(["run", "--kubernetes", "--kubeconfig"])
        .arg(&missing)
        .args([
            "--http-listen=127.0.0.1:0",
            "--https-listen=127.0.0.1:0",
            "--admin-listen=127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or("");
    assert!(
        line.starts_with("portico: error: reading kubeconfig "),
        "{stderr}"
    );
    assert!(
        line.contains("missing-kubeconfig") && line.contains("No such file"),
        "{stderr}"
    );
    assert_eq!(
        line.matches("No such file").count(),
        1,
        "said once: {stderr}"
    );
}
