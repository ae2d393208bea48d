//! Active-standby, the controller's half: dedicated load balancers get a VIP and a floating IP
//! from the controller's pools (or the pinned one), are placed on two agents on different nodes
//! with an epoch, and re-placed when an agent's lease runs out; the addresses are released with
//! their Ingress and survive a controller restart. A real etcd, the real binaries; the agents
//! bind nothing on 198.18.0.0/15 (their listeners stay on loopback; a VIP they cannot bind is a
//! diagnostic, not a failure).

use crate::distributed::store_args;
use crate::support::*;
use portico_testkit::etcd::EtcdCluster;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const POOLS: [&str; 2] = ["--vip-pool=198.18.0.0/24", "--fip-pool=198.19.0.0/24"];

/// The IngressClass `name`, dedicated, with extra annotation lines.
fn dedicated_class(name: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {name}\n  annotations:\n    portico.dev/topology: dedicated\n{extra}spec:\n  controller: portico.dev/ingress-controller\n"
    )
}

/// An Ingress of class `class` for `host` → `web`, with extra annotation lines.
fn routed(name: &str, class: &str, host: &str, annotations: &str) -> String {
    let mut y = ingress(
        "default",
        name,
        "2024-01-01T00:00:00Z",
        &[(host, "/", "Prefix", "web", "80")],
    );
    y = y.replace(
        "ingressClassName: portico",
        &format!("ingressClassName: {class}"),
    );
    if !annotations.is_empty() {
        y = y.replace(
            "  creationTimestamp:",
            &format!("  annotations:\n{annotations}  creationTimestamp:"),
        );
    }
    y
}

fn pin(ip: &str) -> String {
    format!("    portico.dev/external-ip: \"{ip}\"\n")
}

async fn start_controller(dir: &Path, etcd: &EtcdCluster) -> (Child, SocketAddr) {
    let mut args: Vec<String> = vec!["controller".into(), "-f".into(), dir.display().to_string()];
    args.extend(store_args(etcd));
    args.extend([
        "--admin-listen=127.0.0.1:0".to_owned(),
        "--identity=c1".to_owned(),
    ]);
    args.extend(POOLS.map(str::to_owned));
    let mut child = Command::new(BIN)
        .args(&args)
        .env("PORTICO_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let admin = crate::distributed::admin_address(&mut child).await;
    (child, admin)
}

async fn start_agent(etcd: &EtcdCluster, node: &str, zone: &str, state: &Path) -> Portico {
    let mut args: Vec<String> = vec!["agent".into(), format!("--node={node}")];
    args.extend(store_args(etcd));
    args.extend([
        "--http-listen=127.0.0.1:0".to_owned(),
        "--https-listen=127.0.0.1:0".to_owned(),
        "--admin-listen=127.0.0.1:0".to_owned(),
        format!("--state-dir={}", state.display()),
        format!("--zone={zone}"),
        "--label=role=edge".to_owned(),
        "--lease-ttl=2".to_owned(),
    ]);
    Portico::spawn(&args).await
}

async fn get_json(p: &Portico, admin: SocketAddr, path: &str) -> Value {
    let reply = p.request(admin, "GET", "localhost", path, &[], "").await;
    reply.map(|r| r.json()).unwrap_or(Value::Null)
}

/// The load balancers an admin API shows, by name.
async fn load_balancers(p: &Portico, admin: SocketAddr) -> BTreeMap<String, Value> {
    let all = get_json(p, admin, "/api/v1/loadbalancers").await;
    let all = all.as_array().cloned().unwrap_or_default();
    let name = |lb: &Value| lb["name"].as_str().unwrap_or_default().to_owned();
    all.into_iter().map(|lb| (name(&lb), lb)).collect()
}

/// Polls the load balancers on `admin` until `check` holds; panics after `within`.
async fn wait_lbs(
    p: &Portico,
    admin: SocketAddr,
    within: Duration,
    what: &str,
    check: impl Fn(&BTreeMap<String, Value>) -> bool,
) -> BTreeMap<String, Value> {
    let deadline = Instant::now() + within;
    loop {
        let lbs = load_balancers(p, admin).await;
        if check(&lbs) {
            return lbs;
        }
        assert!(Instant::now() < deadline, "{what}: {lbs:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `lb` is placed on two different agents, none of them `gone`.
fn placed(lb: &Value, gone: &str) -> bool {
    let (active, standby) = (&lb["placement"]["active"], &lb["placement"]["standby"]);
    active.is_string()
        && standby.is_string()
        && active != standby
        && active != gone
        && standby != gone
}

fn addresses(lbs: &BTreeMap<String, Value>) -> BTreeMap<String, (Value, Value)> {
    lbs.iter()
        .map(|(n, lb)| (n.clone(), (lb["vip"].clone(), lb["floating_ip"].clone())))
        .collect()
}

/// The diagnostics the controller shows on Ingress `name`, as "field: message".
async fn ingress_problems(p: &Portico, admin: SocketAddr, name: &str) -> Vec<String> {
    let all = get_json(p, admin, "/api/v1/ingresses").await;
    let all = all.as_array().cloned().unwrap_or_default();
    let found = all
        .iter()
        .find(|i| i["name"] == name)
        .cloned()
        .unwrap_or(Value::Null);
    let problems = found["diagnostics"].as_array().cloned().unwrap_or_default();
    let line = |d: &Value| format!("{}: {}", d["field"].as_str().unwrap_or(""), d["message"]);
    problems.iter().map(line).collect()
}

#[tokio::test]
async fn dedicated_load_balancers_get_pool_addresses_and_a_pair_of_agents_that_follows_the_agents()
{
    let m = crate::backends("default", &[("web", 1)]).await;
    m.write("class.yaml", &dedicated_class("portico", ""));
    let small = "    portico.dev/vip-pool: 198.18.1.0/30\n";
    m.write("small.yaml", &dedicated_class("small", small));
    m.write("a.yaml", &routed("a", "portico", "a.test", ""));
    m.write(
        "b.yaml",
        &routed("b", "portico", "b.test", &pin("198.19.0.50")),
    );
    let etcd = EtcdCluster::start(1);
    let (mut controller, admin) = start_controller(m.path(), &etcd).await;
    let states: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut agents = Vec::new();
    for (i, state) in states.iter().enumerate() {
        let node = format!("n{i}");
        agents.push(start_agent(&etcd, &node, &format!("z{i}"), state.path()).await);
    }
    let p = &agents[2];

    // Two load balancers, each with a VIP and a floating IP, on two different agents.
    let lbs = wait_lbs(
        p,
        admin,
        Duration::from_secs(20),
        "placed with addresses",
        |lbs| {
            let two = ["ingress/default/a", "ingress/default/b"];
            two.iter().all(|n| {
                lbs.get(*n).is_some_and(|lb| {
                    placed(lb, "") && lb["vip"].is_string() && lb["floating_ip"].is_string()
                })
            })
        },
    )
    .await;
    let (a, b) = (&lbs["ingress/default/a"], &lbs["ingress/default/b"]);
    let mut vips = [a["vip"].as_str().unwrap(), b["vip"].as_str().unwrap()];
    vips.sort_unstable();
    assert_eq!(vips, ["198.18.0.1", "198.18.0.2"]);
    assert_eq!(a["floating_ip"], "198.19.0.1");
    assert_eq!(b["floating_ip"], "198.19.0.50", "the pinned address");
    assert_eq!(a["origin"]["kind"], "Ingress");
    assert!(a["placement"]["epoch"].as_u64() >= Some(1));

    // Every agent shows the same placements and addresses.
    let on_agent = wait_lbs(p, p.admin, Duration::from_secs(10), "agent view", |got| {
        let strip = |v: &BTreeMap<String, Value>| {
            v.iter()
                .map(|(n, lb)| (n.clone(), (lb["vip"].clone(), lb["placement"].clone())))
                .collect::<Vec<_>>()
        };
        strip(got) == strip(&lbs)
    })
    .await;
    assert_eq!(on_agent["ingress/default/b"]["floating_ip"], "198.19.0.50");

    // The Ingress status lists the VIP and the floating IP.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = get_json(p, admin, "/api/v1/ingresses").await;
        let b_view = all
            .as_array()
            .and_then(|a| a.iter().find(|i| i["name"] == "b").cloned());
        let status = b_view.map(|v| v["status"]["loadBalancer"]["ingress"].clone());
        let ips: Vec<String> = status
            .and_then(|s| s.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["ip"].as_str().map(str::to_owned))
            .collect();
        if ips.contains(&"198.19.0.50".to_owned()) {
            assert_eq!(ips[0], b["vip"].as_str().unwrap());
            break;
        }
        assert!(Instant::now() < deadline, "status of b: {ips:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // SIGKILL of a's active agent: after its lease (2 s) both load balancers are placed on the
    // two agents left, with a higher epoch where the pair changed.
    let victim = a["placement"]["active"].as_str().unwrap().to_owned();
    let index: usize = victim.trim_start_matches('n').parse().unwrap();
    let pid = agents[index].pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let killed_at = Instant::now();
    let survivor = &agents[(index + 1) % 3];
    let after = wait_lbs(
        survivor,
        admin,
        Duration::from_secs(15),
        "re-placed",
        |lbs| {
            ["ingress/default/a", "ingress/default/b"]
                .iter()
                .all(|n| lbs.get(*n).is_some_and(|lb| placed(lb, &victim)))
        },
    )
    .await;
    eprintln!("re-placed {:?} after the SIGKILL", killed_at.elapsed());
    let new_a = &after["ingress/default/a"];
    assert_eq!(
        new_a["placement"]["active"], a["placement"]["standby"],
        "the standby took over"
    );
    assert!(new_a["placement"]["epoch"].as_u64() > a["placement"]["epoch"].as_u64());
    for name in ["ingress/default/a", "ingress/default/b"] {
        let (before, now) = (&lbs[name], &after[name]);
        if before["placement"]["active"] != victim && before["placement"]["standby"] != victim {
            assert_eq!(before["placement"], now["placement"], "untouched: {name}");
        }
    }
    assert_eq!(addresses(&after), addresses(&lbs), "addresses stay");
    let metrics = survivor.metrics_at(admin).await;
    let changes = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portico_placement_changes_total "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(
        changes >= Some(3),
        "two placed, at least one re-placed: {metrics}"
    );

    // An exhausted pool and a colliding pin: diagnostics on those Ingresses, nothing else
    // blocked (a small /30 pool has two usable addresses).
    for name in ["c", "d", "e"] {
        m.write(
            &format!("{name}.yaml"),
            &routed(name, "small", &format!("{name}.test"), ""),
        );
    }
    m.write(
        "f.yaml",
        &routed("f", "portico", "f.test", &pin("198.19.0.50")),
    );
    let lbs = wait_lbs(
        survivor,
        admin,
        Duration::from_secs(15),
        "six load balancers",
        |lbs| lbs.len() == 6 && lbs.values().all(|lb| placed(lb, &victim)),
    )
    .await;
    let small_vips: Vec<&Value> = ["c", "d", "e"]
        .iter()
        .map(|n| &lbs[&format!("ingress/default/{n}")]["vip"])
        .collect();
    assert_eq!(
        small_vips.iter().filter(|v| v.is_string()).count(),
        2,
        "{small_vips:?}"
    );
    let exhausted = ["c", "d", "e"]
        .iter()
        .position(|n| !lbs[&format!("ingress/default/{n}")]["vip"].is_string())
        .unwrap();
    let problems = ingress_problems(survivor, admin, ["c", "d", "e"][exhausted]).await;
    assert!(
        problems
            .iter()
            .any(|d| d.contains("portico.dev/vip-pool") && d.contains("exhausted")),
        "{problems:?}"
    );
    let f = &lbs["ingress/default/f"];
    assert_eq!(f["vip"], "198.18.0.3", "f still gets a VIP");
    assert!(f["floating_ip"].is_null(), "{f}");
    let problems = ingress_problems(survivor, admin, "f").await;
    assert!(
        problems
            .iter()
            .any(|d| d.contains("portico.dev/external-ip") && d.contains("198.19.0.50")),
        "{problems:?}"
    );
    assert_eq!(lbs["ingress/default/b"]["floating_ip"], "198.19.0.50");

    // a goes: its addresses are released and the next load balancer gets them.
    let a_addresses = (a["vip"].clone(), a["floating_ip"].clone());
    m.remove("a.yaml");
    m.write("g.yaml", &routed("g", "portico", "g.test", ""));
    let lbs = wait_lbs(
        survivor,
        admin,
        Duration::from_secs(15),
        "g replaces a",
        |lbs| !lbs.contains_key("ingress/default/a") && lbs.contains_key("ingress/default/g"),
    )
    .await;
    let g = &lbs["ingress/default/g"];
    assert_eq!((g["vip"].clone(), g["floating_ip"].clone()), a_addresses);

    // A restarted controller hands out the same addresses and keeps the placements. (g goes
    // first: the gap it leaves below f's VIP would be filled by a fresh allocation.)
    m.remove("g.yaml");
    let before = wait_lbs(survivor, admin, Duration::from_secs(15), "g gone", |lbs| {
        lbs.len() == 5 && !lbs.contains_key("ingress/default/g")
    })
    .await;
    assert_eq!(before["ingress/default/f"]["vip"], "198.18.0.3");
    controller.start_kill().unwrap();
    controller.wait().await.unwrap();
    let (_controller, admin) = start_controller(m.path(), &etcd).await;
    let again = wait_lbs(
        survivor,
        admin,
        Duration::from_secs(20),
        "after restart",
        |lbs| lbs.len() == 5 && lbs.values().all(|lb| placed(lb, &victim)),
    )
    .await;
    assert_eq!(addresses(&again), addresses(&before));
    let placements = |l: &BTreeMap<String, Value>| {
        l.iter()
            .map(|(n, lb)| (n.clone(), lb["placement"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(placements(&again), placements(&before));
}

#[tokio::test]
async fn portico_run_allocates_from_its_pools_and_places_on_its_one_agent() {
    let m = crate::backends("default", &[("web", 1)]).await;
    m.write("class.yaml", &dedicated_class("portico", ""));
    m.write("a.yaml", &routed("a", "portico", "a.test", ""));
    m.write(
        "b.yaml",
        &routed("b", "portico", "b.test", &pin("198.19.7.7")),
    );
    let p = Portico::start(m.path(), &POOLS).await;
    let lbs = wait_lbs(&p, p.admin, Duration::from_secs(10), "placed", |lbs| {
        lbs.len() == 2 && lbs.values().all(|lb| lb["placement"]["active"] == "local")
    })
    .await;
    let a = &lbs["ingress/default/a"];
    assert_eq!(a["floating_ip"], "198.19.0.1");
    assert!(a["placement"]["standby"].is_null(), "one agent: no standby");
    assert_eq!(lbs["ingress/default/b"]["floating_ip"], "198.19.7.7");
    let status = p.ingress("default", "b").await;
    let ips: Vec<&str> = status["status"]["loadBalancer"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["ip"].as_str())
        .collect();
    let vip = lbs["ingress/default/b"]["vip"].as_str().unwrap();
    assert_eq!(ips[..2], [vip, "198.19.7.7"], "{status}");
}
