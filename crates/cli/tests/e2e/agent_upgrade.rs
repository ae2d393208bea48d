//! Upgrades of an active `portico agent` (root only; skipped otherwise), in the namespace lab
//! of `failover`: two agents, one load balancer of a dedicated class with a VIP, etcd and the
//! controller. Under load through the VIP (new connections, keep-alive, an open WebSocket),
//! ten `portico upgrade`s of the active agent: no request fails, no connection is refused,
//! the WebSocket stays open, the VIP is on exactly one node at every 100 ms sample, and no
//! election happens (the claim's holder and epoch stay, the standby never holds the VIP).
//! With the haproxy provider, the active agent's haproxy masters and workers are the same
//! processes before and after.

use crate::failover::{Ha, skip};
use crate::hot_upgrade::{NewConnections, haproxy_processes, keep_alive_to, upgrade};
use crate::websocket::{handshake, round_trip};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

const UPGRADES: usize = 10;
const SAMPLE: Duration = Duration::from_millis(100);

/// Which agents hold `vip` now.
fn holders(ha: &Ha, vip: Ipv4Addr) -> Vec<String> {
    (ha.agents.iter())
        .filter(|a| a.has(vip))
        .map(|a| a.node.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_upgrades_of_the_active_agent_keep_the_vip_without_an_election() {
    ten_upgrades("proxy").await;
}

/// Ignored until it has a longer record: on a loaded machine the new process, started as the
/// claim's holder, stepped down within the fence and claimed again with the next epoch (the
/// store mirror's first "not connected" kept it from renewing; no longer fed to the elections,
/// see docs/active-standby.md), at the second upgrade in every run before that fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the successor's election steps down under load: see the comment"]
async fn ten_upgrades_of_an_active_haproxy_agent_keep_the_vip_and_haproxy() {
    ten_upgrades("haproxy").await;
}

/// Ten upgrades of the active agent of a load balancer served by `provider`, under load.
async fn ten_upgrades(provider: &'static str) {
    if skip() {
        return;
    }
    let mut ha = Ha::start_routed(provider, 2, 1, 5, Some("ws.test")).await;
    let lb = ha.load_balancers(1).await.remove(0);
    let active = ha.wait_active(&lb.id, lb.vip, &lb.service).await;
    ha.settle(&lb).await;
    let active = ha
        .wait_active(&lb.id, lb.vip, &lb.service)
        .await
        .max(active);
    let (holder, epoch) = ha.holder(&lb.id).expect("a holder");
    let node = ha.agents[active].node.clone();
    assert_eq!(holder, node);
    let state = ha.agents[active].state.path().to_owned();
    let haproxy = || (provider == "haproxy").then(|| haproxy_processes(&state));
    let haproxy_before = haproxy();
    if let Some(before) = &haproxy_before {
        assert!(
            !before.is_empty() && before.iter().all(|(_, w)| !w.is_empty()),
            "{before:?}"
        );
    }

    let addr = SocketAddr::new(lb.vip.into(), 80);
    let mut ws = tokio::net::TcpStream::connect(addr).await.unwrap();
    handshake(&mut ws, "ws.test", "/chat").await.unwrap();
    assert_eq!(
        round_trip(&mut ws, "hello").await.as_deref(),
        Some("echo: hello")
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kept = keep_alive_to(addr, "x.test", stop.clone());
    let fresh = NewConnections::start_for(addr, "x.test", &lb.service);

    let mut problems = vec![];
    let mut took = vec![];
    let mut pid = ha.agents[active].pid().unwrap() as u32;
    let first = pid;
    for i in 1..=UPGRADES {
        let began = Instant::now();
        let up = upgrade(pid, &state);
        tokio::pin!(up);
        // Every 100 ms while the upgrade runs and for 500 ms after: exactly one holder.
        let mut done_at = None;
        while done_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_millis(500)) {
            tokio::select! {
                outcome = &mut up, if done_at.is_none() => {
                    took.push(began.elapsed().as_millis());
                    pid = outcome.unwrap_or_else(|e| panic!("upgrade {i}: {e}"));
                    done_at = Some(Instant::now());
                }
                () = tokio::time::sleep(SAMPLE) => {
                    let held = holders(&ha, lb.vip);
                    if held != [node.clone()] {
                        let at = began.elapsed().as_millis();
                        problems.push(format!("upgrade {i}, {at} ms: the VIP held by {held:?}"));
                    }
                }
            }
        }
        ha.agents[active].upgraded = Some(pid);
        let text = format!("after upgrade {i}");
        let echoed = round_trip(&mut ws, &text).await;
        if echoed.is_none() {
            let log = std::fs::read_to_string(state.join("agent.log")).unwrap_or_default();
            let lines: Vec<&str> = (log.lines())
                .filter(|l| !l.contains("failover") && !l.contains(" DEBUG "))
                .collect();
            eprintln!("--- {node}:\n{}", lines.join("\n"));
            eprintln!(
                "first {first}, alive in the namespace: {:?}",
                ha.agents[active].processes()
            );
        }
        assert_eq!(
            echoed,
            Some(format!("echo: {text}")),
            "the WebSocket after upgrade {i}"
        );
        assert_eq!(haproxy(), haproxy_before, "haproxy after upgrade {i}");
        assert_eq!(
            ha.holder(&lb.id),
            Some((node.clone(), epoch)),
            "the claim after upgrade {i}: no election"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = fresh.finish().await;
    let kept = kept.await.unwrap();
    took.sort_unstable();
    eprintln!(
        "{UPGRADES} agent upgrades ({provider}): {} new-connection and {} keep-alive requests answered; portico upgrade took {took:?} ms",
        seen.ok, kept.0
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    assert!(kept.1.is_empty(), "keep-alive failures: {:?}", kept.1);
    assert!(seen.ok > 0 && kept.0 > 0);
    // The standby never became active.
    let standby = &ha.agents[1 - active];
    let log = std::fs::read_to_string(standby.state.path().join("agent.log")).unwrap();
    assert!(
        !log.contains("active: adding the addresses"),
        "the standby {} took over",
        standby.node
    );
}
