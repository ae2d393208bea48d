//! Upgrades of an active `portico agent` (root only; skipped otherwise), in the namespace lab
//! of `failover`: two agents, one load balancer of a dedicated class with a VIP and a Service of
//! type LoadBalancer served by provider `l4` on a VIP of its own, etcd and the controller. Under
//! load through the VIPs (new HTTP connections, keep-alive, new HTTPS connections, an open
//! WebSocket, an `l4` TCP stream and a UDP flow), ten `portico upgrade`s of each load balancer's
//! active agent: no request fails, no connection is refused, the WebSocket and the TCP stream
//! stay open, the UDP flow answers, each VIP is on exactly one node at every 100 ms sample, and
//! no election happens (the claims' holders and epochs stay, the standby never holds a VIP).
//! With the haproxy provider, the active agent's haproxy masters and workers are the same
//! processes before and after.

use crate::failover::{FLOWS, FLOWS_TCP, FLOWS_UDP, Ha, skip};
use crate::hot_upgrade::{
    NewConnections, haproxy_processes, https_new_connections, keep_alive_to, upgrade,
};
use crate::netns::eventually;
use crate::websocket::{handshake, round_trip};
use serde_json::Value;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_upgrades_of_an_active_haproxy_agent_keep_the_vip_and_haproxy() {
    ten_upgrades("haproxy").await;
}

/// The `l4` Service's load balancer once placed: its id and VIP.
async fn flows_lb(ha: &Ha) -> (String, Ipv4Addr) {
    let mut found = None;
    eventually(
        Duration::from_secs(20),
        "the controller placed the l4 Service",
        async || {
            let all = ha.controller_lbs();
            let lb: Option<&Value> = all.iter().find(|lb| lb["origin"]["name"] == FLOWS);
            found = lb.and_then(|lb| {
                let vip = lb["vip"].as_str()?.parse().ok()?;
                lb["placement"]["active"].as_str()?;
                Some((lb["id"].as_str()?.to_owned(), vip))
            });
            found.is_some()
        },
    )
    .await;
    found.unwrap()
}

/// Ten upgrades of the active agent of each load balancer (the Ingress's, served by
/// `provider`, and the `l4` Service's), under load.
async fn ten_upgrades(provider: &'static str) {
    if skip() {
        return;
    }
    let mut ha = Ha::start_with_flows(provider, 2, "ws.test").await;
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
    // The l4 Service's active: the same agent or the other one (placement spreads them).
    let (flows, flows_vip) = flows_lb(&ha).await;
    let mut flows_holder = None;
    eventually(
        Duration::from_secs(20),
        "an agent holds the l4 Service's VIP",
        async || {
            flows_holder = ha
                .holder(&flows)
                .filter(|(n, _)| holders(&ha, flows_vip) == [n.clone()]);
            flows_holder.is_some()
        },
    )
    .await;
    let (flows_node, flows_epoch) = flows_holder.unwrap();
    let flows_active = ha.index(&flows_node);
    let states: Vec<std::path::PathBuf> = (ha.agents.iter())
        .map(|a| a.state.path().to_owned())
        .collect();
    let state = |i: usize| states[i].clone();
    let haproxy = || (provider == "haproxy").then(|| haproxy_processes(&state(active)));
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
    let mut stream = crate::l4::wait_connect(SocketAddr::new(flows_vip.into(), FLOWS_TCP)).await;
    stream.echo("hello").await.unwrap();
    let flow = tokio::net::UdpSocket::bind("0.0.0.0:0").await.unwrap();
    let udp = SocketAddr::new(flows_vip.into(), FLOWS_UDP);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kept = keep_alive_to(addr, "x.test", stop.clone());
    let https = SocketAddr::new(lb.vip.into(), 443);
    let tls = https_new_connections(https, "x.test", stop.clone());
    let fresh = NewConnections::start_for(addr, "x.test", &lb.service);

    let mut problems = vec![];
    let mut took = vec![];
    // The agents to upgrade each round: the Ingress's active, then the l4 Service's if another.
    let mut upgraded = vec![active];
    if flows_active != active {
        upgraded.push(flows_active);
    }
    let mut pids: Vec<u32> = (upgraded.iter())
        .map(|&i| ha.agents[i].pid().unwrap() as u32)
        .collect();
    let first = pids[0];
    let wanted = [(lb.vip, node.clone()), (flows_vip, flows_node.clone())];
    for i in 1..=UPGRADES {
        for (k, &agent) in upgraded.iter().enumerate() {
            let began = Instant::now();
            let dir = state(agent);
            let up = upgrade(pids[k], &dir);
            tokio::pin!(up);
            // Every 100 ms while the upgrade runs and for 500 ms after: exactly one holder of
            // each VIP.
            let mut done_at = None;
            while done_at.is_none_or(|at: Instant| at.elapsed() < Duration::from_millis(500)) {
                tokio::select! {
                    outcome = &mut up, if done_at.is_none() => {
                        took.push(began.elapsed().as_millis());
                        pids[k] = outcome.unwrap_or_else(|e| panic!("upgrade {i}: {e}"));
                        done_at = Some(Instant::now());
                    }
                    () = tokio::time::sleep(SAMPLE) => {
                        for (vip, holder) in &wanted {
                            let held = holders(&ha, *vip);
                            if held != [holder.clone()] {
                                let at = began.elapsed().as_millis();
                                problems.push(format!("upgrade {i} of {}, {at} ms: {vip} held by {held:?}", ha.agents[agent].node));
                            }
                        }
                    }
                }
            }
            ha.agents[agent].upgraded = Some(pids[k]);
        }
        let text = format!("after upgrade {i}");
        let echoed = round_trip(&mut ws, &text).await;
        if echoed.is_none() {
            let log = std::fs::read_to_string(state(active).join("agent.log")).unwrap_or_default();
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
        if let Err(e) = stream.echo(&text).await {
            panic!("the l4 TCP stream after upgrade {i}: {e}");
        }
        flow.send_to(text.as_bytes(), udp).await.unwrap();
        let mut buf = [0u8; 256];
        let got = tokio::time::timeout(Duration::from_secs(3), flow.recv_from(&mut buf)).await;
        let (n, _) = got
            .unwrap_or_else(|_| panic!("the UDP flow answers after upgrade {i}"))
            .unwrap();
        assert_eq!(&buf[..n], format!("u0:{text}").as_bytes());
        assert_eq!(haproxy(), haproxy_before, "haproxy after upgrade {i}");
        if ha.holder(&lb.id) != Some((node.clone(), epoch))
            || ha.holder(&flows) != Some((flows_node.clone(), flows_epoch))
        {
            for &agent in &upgraded {
                let log = std::fs::read_to_string(state(agent).join("agent.log"));
                let log = log.unwrap_or_default();
                let lines: Vec<&str> = (log.lines())
                    .filter(|l| l.contains("failover") && !l.contains("advert"))
                    .collect();
                eprintln!(
                    "--- {} (failover):\n{}",
                    ha.agents[agent].node,
                    lines.join("\n")
                );
            }
        }
        assert_eq!(
            ha.holder(&lb.id),
            Some((node.clone(), epoch)),
            "the claim after upgrade {i}: no election"
        );
        assert_eq!(
            ha.holder(&flows),
            Some((flows_node.clone(), flows_epoch)),
            "the l4 Service's claim after upgrade {i}: no election"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = fresh.finish().await;
    let (kept, tls) = (kept.await.unwrap(), tls.await.unwrap());
    took.sort_unstable();
    eprintln!(
        "{UPGRADES} rounds of agent upgrades ({provider}, {} agents): {} new-connection, {} keep-alive and {} HTTPS requests answered; portico upgrade took {took:?} ms",
        upgraded.len(),
        seen.ok,
        kept.0,
        tls.0
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(seen.failed.is_empty() && seen.refused == 0, "{seen:?}");
    assert!(kept.1.is_empty(), "keep-alive failures: {:?}", kept.1);
    assert!(tls.1.is_empty(), "HTTPS failures: {:?}", tls.1);
    assert!(seen.ok > 0 && kept.0 > 0 && tls.0 > 0);
    // No standby ever became active.
    for (i, agent) in ha.agents.iter().enumerate() {
        let log = std::fs::read_to_string(agent.state.path().join("agent.log")).unwrap();
        let took_over = log.contains("active: adding the addresses");
        let was_active = upgraded.contains(&i);
        assert!(
            was_active || !took_over,
            "the standby {} took over",
            agent.node
        );
    }
}
