//! The provider against real haproxy: serving, hitless reloads under load, member changes
//! through the runtime API without reload, restart after a kill, stop and clean-up.

#![allow(clippy::unwrap_used)]

mod support;

use portico_provider::{CaBundles, Certificates, Provider};
use portico_testkit::free_port;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::live::*;

async fn wait_ready(p: &impl Provider) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !p.status().ready {
        assert!(Instant::now() < deadline, "not ready: {:?}", p.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_reloads_without_failing_requests_and_cleans_up() {
    let state = tempfile::tempdir().unwrap();
    let (a, b) = (echo("a").await, echo("b").await);
    let port = free_port();
    let front: SocketAddr = ([127, 0, 0, 1], port).into();
    let p = provider(state.path());
    let none = Certificates::new();
    assert!(
        p.apply(&model(port, &[(a, true)]), &none, &CaBundles::new())
            .is_empty()
    );
    wait_ready(&p).await;
    wait_for(front, "/", 200, "a").await;
    let conf = std::fs::read_to_string(dir(state.path()).join("haproxy.conf")).unwrap();
    assert!(conf.contains(&format!(
        "server {}",
        portico_model::MemberId::derive(&a.to_string())
    )));

    // Continuous requests while the member set changes ten times, each a reload.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load = {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match get(front, "/").await {
                    Ok((200, _)) => ok.fetch_add(1, Ordering::Relaxed),
                    other => {
                        eprintln!("failed: {other:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        })
    };
    for i in 0..10 {
        let members = if i % 2 == 0 {
            vec![(a, true), (b, true)]
        } else {
            vec![(b, true)]
        };
        p.apply(&model(port, &members), &none, &CaBundles::new());
        let expect = if i % 2 == 0 { "a" } else { "b" };
        wait_for(front, "/", 200, expect).await;
    }
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "{} succeeded",
        ok.load(Ordering::Relaxed)
    );
    assert!(ok.load(Ordering::Relaxed) > 10);

    p.apply(&portico_model::Model::default(), &none, &CaBundles::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while dir(state.path()).exists() || get(front, "/").await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "haproxy still serves or its directory is left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_changes_go_through_the_runtime_api_without_a_reload() {
    let state = tempfile::tempdir().unwrap();
    let a = echo("a").await;
    let port = free_port();
    let front: SocketAddr = ([127, 0, 0, 1], port).into();
    let p = provider(state.path());
    let none = Certificates::new();
    p.apply(&model(port, &[(a, true)]), &none, &CaBundles::new());
    wait_ready(&p).await;
    wait_for(front, "/", 200, "a").await;
    let pid = master_pid(state.path());
    let worker = worker_pids(pid);
    let changed = model(port, &[(a, false)]);
    p.update_members(&changed, &all_pools(&changed));
    wait_for(front, "/", 503, "503 Service Unavailable\n").await;
    let changed = model(port, &[(a, true)]);
    p.update_members(&changed, &all_pools(&changed));
    wait_for(front, "/", 200, "a").await;
    assert_eq!(
        worker_pids(pid),
        worker,
        "the same worker serves: no reload"
    );
    let conf = std::fs::read_to_string(dir(state.path()).join("haproxy.conf")).unwrap();
    let member = format!(
        "server {} ",
        portico_model::MemberId::derive(&a.to_string())
    );
    let line = conf.lines().find(|l| l.contains(&member)).unwrap();
    assert!(
        !line.contains(" disabled"),
        "the file follows runtime changes:\n{conf}"
    );
    p.shutdown(false).await;
    assert!(!dir(state.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_haproxy_is_started_again_and_serves() {
    let state = tempfile::tempdir().unwrap();
    let a = echo("a").await;
    let port = free_port();
    let front: SocketAddr = ([127, 0, 0, 1], port).into();
    let p = provider(state.path());
    p.apply(
        &model(port, &[(a, true)]),
        &Certificates::new(),
        &CaBundles::new(),
    );
    wait_ready(&p).await;
    wait_for(front, "/", 200, "a").await;
    let pid = master_pid(state.path());
    let target = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(target, rustix::process::Signal::KILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let restarted = std::fs::read_to_string(dir(state.path()).join("haproxy.pid"))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .is_some_and(|new| new != pid);
        if restarted
            && get(front, "/")
                .await
                .is_ok_and(|(s, b)| s == 200 && b == "a")
        {
            break;
        }
        assert!(Instant::now() < deadline, "haproxy was not started again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    p.shutdown(false).await;
}

/// Routes that change (a path added, one removed) reach the running haproxy through its
/// runtime API (`add map`, `del map`): the same worker serves, no reload is counted, and the
/// map files on disk follow, so a later reload agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_changes_go_through_the_runtime_api_without_a_reload() {
    use std::sync::atomic::Ordering::Relaxed;
    let state = tempfile::tempdir().unwrap();
    let a = echo("a").await;
    let port = free_port();
    let front: SocketAddr = ([127, 0, 0, 1], port).into();
    let (p, counters) = provider_counted(state.path());
    let none = Certificates::new();
    let apply = |paths: &[(&str, bool)]| {
        p.apply(&routed(port, &[(a, true)], paths), &none, &CaBundles::new());
    };
    apply(&[("/a", false)]);
    wait_ready(&p).await;
    wait_for(front, "/a/x", 200, "a").await;
    wait_for(front, "/b", 404, "404 Not Found\n").await;
    let pid = master_pid(state.path());
    let worker = worker_pids(pid);

    apply(&[("/a", false), ("/b", true)]);
    wait_for(front, "/b", 200, "a").await;
    wait_for(front, "/b/c", 404, "404 Not Found\n").await;
    apply(&[("/b", true)]);
    wait_for(front, "/a/x", 404, "404 Not Found\n").await;
    wait_for(front, "/b", 200, "a").await;

    assert_eq!(worker_pids(pid), worker, "the same worker serves");
    assert_eq!(counters.reloads.load(Relaxed), 0, "no reload");
    assert!(counters.runtime_updates.load(Relaxed) >= 2);
    let maps: String = std::fs::read_dir(dir(state.path()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "map"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(
        maps,
        format!("test/b {}\n", portico_model::PoolId::derive("pool"))
    );
    p.shutdown(false).await;
}

/// Endpoints that change (one replaced by a new address, one added) take spare server slots
/// through the runtime API: the new ones serve, the gone one gets nothing, the same worker
/// serves and no reload is counted; the file on disk names the new members.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_changes_take_spare_slots_without_a_reload() {
    use std::sync::atomic::Ordering::Relaxed;
    let state = tempfile::tempdir().unwrap();
    let (a, b, c) = (echo("a").await, echo("b").await, echo("c").await);
    let (d, e) = (echo("d").await, echo("e").await);
    let port = free_port();
    let front: SocketAddr = ([127, 0, 0, 1], port).into();
    let (p, counters) = provider_counted(state.path());
    let none = Certificates::new();
    p.apply(
        &model(port, &[(a, true), (b, true), (c, true)]),
        &none,
        &CaBundles::new(),
    );
    wait_ready(&p).await;
    wait_for(front, "/", 200, "c").await;
    let pid = master_pid(state.path());
    let worker = worker_pids(pid);

    let members = [(a, true), (b, true), (d, true), (e, true)];
    let changed = model(port, &members);
    p.update_members(&changed, &all_pools(&changed));
    wait_for(front, "/", 200, "d").await;
    wait_for(front, "/", 200, "e").await;
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let (status, body) = get(front, "/").await.unwrap();
        assert_eq!(status, 200);
        *seen.entry(body).or_insert(0) += 1;
    }
    assert!(
        !seen.contains_key("c"),
        "the gone endpoint served: {seen:?}"
    );
    assert_eq!(seen.len(), 4, "{seen:?}");

    assert_eq!(worker_pids(pid), worker, "the same worker serves");
    assert_eq!(counters.reloads.load(Relaxed), 0, "no reload");
    assert!(counters.runtime_updates.load(Relaxed) >= 1);
    // The files follow off the hot path (within 5 s), still without a reload.
    let follows = |conf: &str| {
        members.iter().all(|(addr, _)| {
            let id = portico_model::MemberId::derive(&addr.to_string());
            conf.contains(&format!("server {id} {addr} "))
        }) && !conf.contains(&c.to_string())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let conf = std::fs::read_to_string(dir(state.path()).join("haproxy.conf")).unwrap();
        if follows(&conf) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the files never followed:\n{conf}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        counters.reloads.load(Relaxed),
        0,
        "no reload for the files either"
    );
    p.shutdown(false).await;
}

/// Every pool of `model`: the pools whose members changed, as the caller of
/// `update_members` names them.
fn all_pools(model: &portico_model::Model) -> HashSet<portico_model::PoolId> {
    (model.load_balancers.iter())
        .flat_map(|lb| lb.pools.iter().map(|p| p.id))
        .collect()
}
