//! An active agent killed with SIGKILL and started again at once (root only; skipped
//! otherwise), in the namespace lab of `failover`: three agents, two load balancers of a
//! dedicated class, etcd and the controller. The killed agent leaves its addresses on its
//! interface; the one that starts must remove them before its successor's takeover can make
//! two holders, whatever it knows at start. From 1 s after each restart on, every 100 ms for
//! 5 s, exactly one agent holds each VIP and floating IP.

use crate::failover::{Ha, Lb, cut_etcd, heal, nft_missing, skip};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// The agents' lease, in seconds: short, so that waiting for it to run out costs little.
const LEASE_TTL: u64 = 2;
/// After the restart, sampling starts this late and lasts this long.
const GRACE: Duration = Duration::from_secs(1);
const WINDOW: Duration = Duration::from_secs(5);
const SAMPLE: Duration = Duration::from_millis(100);
/// How long etcd stays unreachable from the restarted agent in [`Variant::EtcdCut`].
const CUT: Duration = Duration::from_millis(1500);

#[derive(Debug, Clone, Copy)]
enum Variant {
    /// Started again before its key's lease ran out, from its cache.
    WithinLease,
    /// Started again once its key is gone (its load balancers placed elsewhere).
    AfterLease,
    /// Started again with its state directory emptied: no cache.
    NoCache,
    /// etcd unreachable from its namespace from before the kill until 1.5 s after the start.
    EtcdCut,
}

/// The addresses held by other than exactly one agent, at each sample of the window; `cut`:
/// the namespace whose etcd traffic is healed [`CUT`] after the restart.
async fn sample(
    ha: &Ha,
    addresses: &[Ipv4Addr],
    restarted: Instant,
    mut cut: Option<&str>,
) -> Vec<String> {
    let mut problems = vec![];
    let mut next = restarted + GRACE;
    while next < restarted + GRACE + WINDOW {
        tokio::time::sleep_until(next.into()).await;
        if let Some(ns) = cut.take_if(|_| restarted.elapsed() >= CUT) {
            heal(ns);
        }
        let at = restarted.elapsed().as_millis();
        problems.extend(
            not_one(ha, addresses)
                .iter()
                .map(|p| format!("{at} ms: {p}")),
        );
        next += SAMPLE;
    }
    if let Some(ns) = cut {
        heal(ns);
    }
    problems
}

/// Waits (5 s at most) until every load balancer has an active agent that serves it and
/// each address has one holder. When an address still has more, the agents that do not hold
/// its claim lose it by hand (as rebooted nodes would), so that a variant that failed does
/// not fail the next ones too.
async fn settle(ha: &Ha, lbs: &[Lb]) {
    for lb in lbs {
        ha.wait_active(&lb.id, lb.vip, &lb.service).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !not_one(ha, &addresses(lbs)).is_empty() {
        if Instant::now() > deadline {
            clear_strays(ha, lbs);
        }
        tokio::time::sleep(SAMPLE).await;
    }
}

/// Removes, from every agent but the holder of its claim, each load balancer's addresses.
fn clear_strays(ha: &Ha, lbs: &[Lb]) {
    for lb in lbs {
        let holder = ha.holder(&lb.id).map(|(node, _)| node);
        for agent in ha
            .agents
            .iter()
            .filter(|a| Some(&a.node) != holder.as_ref())
        {
            for ip in [lb.vip, lb.fip] {
                let cidr = format!("{ip}/32");
                let _ = std::process::Command::new("ip")
                    .args(["-n", &agent.ns, "address", "del", &cidr, "dev", "eth0"])
                    .output();
            }
        }
    }
}

/// The VIPs and floating IPs of `lbs`.
fn addresses(lbs: &[Lb]) -> Vec<Ipv4Addr> {
    lbs.iter().flat_map(|lb| [lb.vip, lb.fip]).collect()
}

/// Each address held by other than exactly one agent, with its holders.
fn not_one(ha: &Ha, addresses: &[Ipv4Addr]) -> Vec<String> {
    let held: Vec<Vec<bool>> = ha.agents.iter().map(|a| a.holds(addresses)).collect();
    let mut out = vec![];
    for (i, address) in addresses.iter().enumerate() {
        let holders: Vec<&str> = (ha.agents.iter().zip(&held))
            .filter(|(_, h)| h[i])
            .map(|(a, _)| a.node.as_str())
            .collect();
        if holders.len() != 1 {
            out.push(format!("{address} held by {holders:?}"));
        }
    }
    out
}

/// Kills the active agent of the first of `lbs`, starts it again as `variant` says, and
/// samples.
async fn restart(ha: &mut Ha, lbs: &[Lb], variant: Variant) -> Vec<String> {
    settle(ha, lbs).await;
    let addresses = &addresses(lbs);
    let lb = &lbs[0];
    let i = ha.wait_active(&lb.id, lb.vip, &lb.service).await;
    let (node, ns) = (ha.agents[i].node.clone(), ha.agents[i].ns.clone());
    let key = format!("/portico/agents/{node}");
    let cache = ha.agents[i]
        .state
        .path()
        .join(format!("agent/{node}.cache"));
    // An agent writes its cache once its views were quiet for a second.
    let what = format!("{node} has a cache");
    crate::netns::eventually(Duration::from_secs(10), &what, async || cache.exists()).await;
    if let Variant::EtcdCut = variant {
        cut_etcd(&ns, ha.etcd_port());
    }
    ha.agents[i].signal(9).await;
    match variant {
        Variant::AfterLease => {
            crate::netns::eventually(Duration::from_secs(10), "the lease ran out", async || {
                ha.etcd
                    .etcdctl(&["get", &key, "--keys-only"])
                    .trim()
                    .is_empty()
            })
            .await;
        }
        Variant::NoCache => {
            for entry in std::fs::read_dir(ha.agents[i].state.path()).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().is_some_and(|n| n != "agent.log") {
                    let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
                }
            }
            assert!(!cache.exists());
        }
        Variant::WithinLease | Variant::EtcdCut => {}
    }
    let within = !ha
        .etcd
        .etcdctl(&["get", &key, "--keys-only"])
        .trim()
        .is_empty();
    let restarted = Instant::now();
    ha.spawn_agent(i).await;
    // How soon the addresses it left are gone (for the log; the window starts later): it
    // comes back as standby, so it holds none.
    let mut gone = None;
    while gone.is_none() && restarted.elapsed() < GRACE {
        if !ha.agents[i].holds(addresses).contains(&true) {
            gone = Some(restarted.elapsed().as_millis());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cut = matches!(variant, Variant::EtcdCut).then_some(ns.as_str());
    let problems = sample(ha, addresses, restarted, cut).await;
    eprintln!(
        "{variant:?}: {node} restarted {} its lease, held nothing {} ms after the restart; {} samples with other than one holder",
        if within { "within" } else { "after" },
        gone.map_or_else(|| "not within 1000".to_owned(), |ms| ms.to_string()),
        problems.len()
    );
    match variant {
        Variant::WithinLease => assert!(within, "{node} came back within its lease"),
        Variant::AfterLease => assert!(!within, "{node} came back after its lease"),
        Variant::NoCache | Variant::EtcdCut => {}
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_active_agent_never_shares_an_address_with_its_successor() {
    if skip() || nft_missing() {
        return;
    }
    let mut ha = Ha::start_leased("proxy", 3, 2, LEASE_TTL).await;
    let lbs = ha.load_balancers(2).await;
    let mut failed = vec![];
    for variant in [
        Variant::WithinLease,
        Variant::AfterLease,
        Variant::NoCache,
        Variant::EtcdCut,
    ] {
        let problems = restart(&mut ha, &lbs, variant).await;
        match problems.as_slice() {
            [] => {}
            [one] => failed.push(format!("{variant:?}: {one}")),
            [first, .., last] => {
                let n = problems.len();
                failed.push(format!(
                    "{variant:?}: {n} times, first {first}, last {last}"
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
