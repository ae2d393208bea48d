//! Active-standby in network namespaces (root only; skipped otherwise): real `portico agent`s,
//! each in its own namespace on a bridge, a real `portico controller` and etcd in the root
//! namespace on the bridge's address, echo backends there too, and probes in a client
//! namespace. The agents hold their load balancers' VIPs on `eth0` and move them on failure.

use crate::netns::{Lab, Probe, eventually, exec};
use crate::support::BIN;
use portico_testkit::etcd::EtcdCluster;
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The heartbeat port of every agent.
const HEARTBEAT: u16 = 9182;

/// A placed load balancer of the controller's list, with both addresses.
fn lb_of(v: &Value) -> Option<Lb> {
    let ip = |k: &str| v[k].as_str()?.parse::<Ipv4Addr>().ok();
    // Ingress `in-<i>` and Gateway `gw-<i>` both route to `svc-<i>`; a Service of type
    // LoadBalancer `svc-<i>` is its own.
    let origin = v["origin"]["name"].as_str()?;
    let i = (origin.strip_prefix("in-"))
        .or_else(|| origin.strip_prefix("gw-"))
        .or_else(|| origin.strip_prefix("svc-"))?;
    Some(Lb {
        id: v["id"].as_str()?.to_owned(),
        vip: ip("vip")?,
        fip: ip("floating_ip")?,
        service: format!("svc-{i}"),
        active: v["placement"]["active"].as_str()?.to_owned(),
        standby: v["placement"]["standby"].as_str()?.to_owned(),
    })
}

/// One agent in its namespace.
pub struct AgentNode {
    pub node: String,
    pub ns: String,
    pub ip: Ipv4Addr,
    child: Option<Child>,
    /// The process serving now, when an upgrade replaced the one started.
    pub upgraded: Option<u32>,
    pub state: tempfile::TempDir,
}

impl AgentNode {
    pub fn pid(&self) -> Option<i32> {
        let started = self.child.as_ref().and_then(|c| c.id());
        self.upgraded.or(started).map(|p| p as i32)
    }

    /// Sends `signal` and waits for the process to end.
    pub async fn signal(&mut self, signal: i32) {
        if let (Some(pid), Some(mut child)) = (self.pid(), self.child.take()) {
            let _ = std::process::Command::new("kill")
                .args([format!("-{signal}"), pid.to_string()])
                .status();
            let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
        }
    }

    /// The processes left in this node's namespace (the agent and what it started).
    pub fn processes(&self) -> Vec<u32> {
        let out = std::process::Command::new("ip")
            .args(["netns", "pids", &self.ns])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The names of the processes listening on TCP `addr` in this node's namespace.
    pub fn listeners(&self, addr: SocketAddr) -> Vec<String> {
        let out = exec(&self.ns, &["ss", "-Hltnp", "src", &addr.to_string()]);
        out.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    /// Whether the VIP `vip` is on this node's `eth0`.
    pub fn has(&self, vip: Ipv4Addr) -> bool {
        self.holds(&[vip]) == [true]
    }

    /// Whether each of `addresses` is on this node's `eth0` (one `ip address` for all).
    pub fn holds(&self, addresses: &[Ipv4Addr]) -> Vec<bool> {
        let listed = exec(&self.ns, &["ip", "-o", "address", "show", "dev", "eth0"]);
        (addresses.iter())
            .map(|a| listed.contains(&format!(" {a}/32 ")))
            .collect()
    }
}

impl AgentNode {
    /// Kills, by PID, the agent and anything left in its namespace (its haproxy).
    fn kill_all(&self) {
        let agent = self.pid().into_iter().map(|p| p as u32);
        for pid in agent.chain(self.processes()) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

impl Drop for AgentNode {
    fn drop(&mut self) {
        self.kill_all();
        // A failed test shows what the agents logged.
        if std::thread::panicking() {
            let log =
                std::fs::read_to_string(self.state.path().join("agent.log")).unwrap_or_default();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("portico_app::failover") || l.contains("ERROR"))
                .collect();
            eprintln!(
                "--- agent {} (failover lines):\n{}",
                self.node,
                lines.join("\n")
            );
        }
    }
}

/// A lab with etcd, a controller and agents.
pub struct Ha {
    pub lab: Lab,
    pub etcd: EtcdCluster,
    pub _controller: Option<Child>,
    pub controller_admin: SocketAddr,
    pub agents: Vec<AgentNode>,
    pub client: String,
    /// `proxy` or `haproxy`: the controller's default provider and the agents' `--provider`.
    pub provider: &'static str,
    /// The agents' `--lease-ttl` in seconds.
    pub lease_ttl: u64,
    /// The agents' `--shutdown-timeout` and `--l4-drain-timeout`, when not the defaults (30 s).
    pub shutdown_timeout: Option<&'static str>,
    _manifests: crate::support::Manifests,
}

impl Drop for Ha {
    /// Nothing the test started outlives it: every process in the agents' namespaces is
    /// killed, by PID, while the namespaces still exist (the lab deletes them when dropped).
    fn drop(&mut self) {
        for a in &self.agents {
            a.kill_all();
        }
    }
}

/// A dedicated IngressClass: one load balancer per Ingress, on ports 80 and 443.
const CLASS: &str = "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: ha\n  annotations:\n    portico.dev/topology: dedicated\nspec:\n  controller: portico.dev/ingress-controller\n";

/// What a lab's load balancers come from.
enum Objects {
    /// `n` Ingresses of the dedicated class; the first one's host (if any) to a WebSocket echo;
    /// with `true`, also the Service [`FLOWS`] of type LoadBalancer (provider `l4`).
    Ingresses(usize, Option<String>, bool),
    /// One Gateway and its HTTPRoute; with `true`, also a TCP listener on [`FLOWS_TCP`] whose
    /// TCPRoute goes to the ClusterIP Service [`FLOWS`].
    Gateway(bool),
    /// One Service of type LoadBalancer, served by provider `l4` (TCP port 80 to the echo).
    L4Service,
}

/// The Service of type LoadBalancer of [`Ha::start_with_flows`], and its ports.
pub const FLOWS: &str = "flows";
pub const FLOWS_TCP: u16 = 7000;
pub const FLOWS_UDP: u16 = 7001;

/// The Service [`FLOWS`] and its EndpointSlice: a TCP and a UDP backend on `ip`, started now;
/// of type LoadBalancer (class `portico.dev/l4`) with `l4`, else a ClusterIP one.
async fn flows_service(ip: std::net::IpAddr, l4: bool) -> String {
    let tcp = crate::l4::tcp_pod_on(ip, "t0").await;
    let udp = crate::l4::udp_pod_on(ip, "u0").await;
    let kind = if l4 {
        "  type: LoadBalancer\n  loadBalancerClass: portico.dev/l4\n"
    } else {
        ""
    };
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {FLOWS}, namespace: default}}\nspec:\n{kind}  selector: {{app: {FLOWS}}}\n  ports:\n  - {{name: tcp, port: {FLOWS_TCP}, protocol: TCP, targetPort: tcp}}\n  - {{name: udp, port: {FLOWS_UDP}, protocol: UDP, targetPort: udp}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {FLOWS}-0\n  namespace: default\n  labels: {{kubernetes.io/service-name: {FLOWS}}}\naddressType: IPv4\nports: [{{name: tcp, port: {}, protocol: TCP}}, {{name: udp, port: {}, protocol: UDP}}]\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions: {{ready: true}}\n",
        tcp.port(),
        udp.port()
    )
}

/// Portico's GatewayClass, Gateway `gw-<i>` (HTTP on port 80) and an HTTPRoute to `service`;
/// with `tcp`, a TCP listener on [`FLOWS_TCP`] too and a TCPRoute to [`FLOWS`].
fn gateway_objects(i: usize, service: &str, tcp: bool) -> String {
    use crate::gateway_api::{HTTP, OURS, class, gateway, route};
    let spec = format!(
        "{{parentRefs: [{{name: gw-{i}}}], rules: [{{backendRefs: [{{name: {service}, port: 80}}]}}]}}"
    );
    let class = if i == 0 {
        class("portico", OURS)
    } else {
        String::new()
    };
    if !tcp {
        return class
            + &gateway("default", &format!("gw-{i}"), "portico", HTTP)
            + &route("default", &format!("rt-{i}"), &spec);
    }
    let listeners = format!(
        "[{{name: http, port: 80, protocol: HTTP}}, {{name: tcp, port: {FLOWS_TCP}, protocol: TCP}}]"
    );
    let tcp_route = format!(
        "---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\nmetadata: {{name: flows-{i}, namespace: default}}\nspec: {{parentRefs: [{{name: gw-{i}, sectionName: tcp}}], rules: [{{backendRefs: [{{name: {FLOWS}, port: {FLOWS_TCP}}}]}}]}}\n"
    );
    class
        + &gateway("default", &format!("gw-{i}"), "portico", &listeners)
        + &route("default", &format!("rt-{i}"), &spec)
        + &tcp_route
}

/// One load balancer as the controller shows it.
#[derive(Debug, Clone)]
pub struct Lb {
    pub id: String,
    pub vip: Ipv4Addr,
    pub fip: Ipv4Addr,
    /// Its Ingress's backend.
    pub service: String,
    pub active: String,
    pub standby: String,
}

impl Ha {
    /// A lab with `agents` agents (hosts .11, .12, …), a client (.2), and `ingresses` Ingresses
    /// `in-<i>` of a dedicated class routing everything to service `svc-<i>`; the controller
    /// allocates VIPs from 198.18.N.96/28 and floating IPs from 198.18.N.112/28 and places the
    /// load balancers. The agents start first, so that the first placement sees them all.
    pub async fn start(agents: usize, ingresses: usize) -> Ha {
        Ha::start_with("proxy", agents, ingresses).await
    }

    /// [`Ha::start`] with the load balancers served by `provider` (`proxy` or `haproxy`).
    pub async fn start_with(provider: &'static str, agents: usize, ingresses: usize) -> Ha {
        Ha::start_leased(provider, agents, ingresses, 5).await
    }

    /// [`Ha::start_with`] with the agents' keys under leases of `lease_ttl` seconds.
    pub async fn start_leased(
        provider: &'static str,
        agents: usize,
        ingresses: usize,
        lease_ttl: u64,
    ) -> Ha {
        Ha::start_routed(provider, agents, ingresses, lease_ttl, None).await
    }

    /// [`Ha::start_leased`]; `websocket`: a host of `in-0` routed to a WebSocket echo
    /// backend (`crate::websocket`) on the bridge's address.
    pub async fn start_routed(
        provider: &'static str,
        agents: usize,
        ingresses: usize,
        lease_ttl: u64,
        websocket: Option<&str>,
    ) -> Ha {
        let objects = Objects::Ingresses(ingresses, websocket.map(str::to_owned), false);
        Ha::start_objects(provider, agents, lease_ttl, objects).await
    }

    /// [`Ha::start_routed`] with one Ingress, its WebSocket host `websocket`, and beside it the
    /// Service [`FLOWS`] of type LoadBalancer served by provider `l4`: TCP port
    /// [`FLOWS_TCP`] to a greeting echo backend (`crate::l4::tcp_pod`), UDP port
    /// [`FLOWS_UDP`] to a datagram echo (`crate::l4::udp_pod`), both on the bridge's address.
    pub async fn start_with_flows(provider: &'static str, agents: usize, websocket: &str) -> Ha {
        let objects = Objects::Ingresses(1, Some(websocket.to_owned()), true);
        Ha::start_objects(provider, agents, 5, objects).await
    }

    /// A lab whose one load balancer is a Gateway `gw-0` of Portico's GatewayClass with an
    /// HTTP listener on port 80 and an HTTPRoute to `svc-0`, served by `provider`: placed and
    /// failed over like an Ingress of a dedicated class.
    pub async fn start_gateway(provider: &'static str, agents: usize) -> Ha {
        Ha::start_objects(provider, agents, 5, Objects::Gateway(false)).await
    }

    /// [`Ha::start_gateway`] with a TCP listener on the Gateway too, its TCPRoute to the
    /// greeting echo of [`FLOWS`] (the Gateway's `l4` half, on the same VIP).
    pub async fn start_gateway_with_tcp(agents: usize) -> Ha {
        Ha::start_objects("proxy", agents, 5, Objects::Gateway(true)).await
    }

    /// A lab whose one load balancer is the Service `svc-0` of type LoadBalancer (class
    /// `portico.dev/l4`), TCP port 80 to its echo backend: placed and failed over like an
    /// Ingress of a dedicated class.
    pub async fn start_l4(agents: usize) -> Ha {
        Ha::start_objects("proxy", agents, 5, Objects::L4Service).await
    }

    async fn start_objects(
        provider: &'static str,
        agents: usize,
        lease_ttl: u64,
        objects: Objects,
    ) -> Ha {
        let mut lab = Lab::new();
        let client = lab.namespace("cl", 2);
        let etcd = EtcdCluster::start_on(lab.addr(1).into());
        let m = crate::support::Manifests::new();
        let (ingresses, websocket) = match &objects {
            Objects::Ingresses(n, websocket, _) => (*n, websocket.as_deref()),
            Objects::Gateway(_) | Objects::L4Service => (1, None),
        };
        let mut yaml = CLASS.to_owned();
        if let Objects::Ingresses(_, _, true) = objects {
            yaml.push_str(&flows_service(lab.addr(1).into(), true).await);
        }
        for i in 0..ingresses {
            let service = format!("svc-{i}");
            let bind = SocketAddr::new(lab.addr(1).into(), 0);
            let pod = portico_echo::spawn(bind, &service, &format!("{service}-0"))
                .await
                .unwrap();
            let eps = crate::support::ready(&[pod]);
            if !matches!(objects, Objects::L4Service) {
                yaml.push_str(&crate::support::service("default", &service, &eps));
            }
            let mut rules = vec![("", "/", "Prefix", service.as_str(), "80")];
            if let Some(host) = websocket.filter(|_| i == 0) {
                let backend = crate::websocket::echo_backend_on(lab.addr(1).into()).await;
                let eps = crate::support::ready(&[backend]);
                yaml.push_str(&crate::support::service("default", "extra", &eps));
                rules.insert(0, (host, "/", "Prefix", "extra", "80"));
            }
            if let Objects::Gateway(tcp) = objects {
                yaml.push_str(&gateway_objects(i, &service, tcp));
                if tcp {
                    yaml.push_str(&flows_service(lab.addr(1).into(), false).await);
                }
                continue;
            }
            if let Objects::L4Service = objects {
                let plain = crate::support::service("default", &service, &eps);
                let l4 = "spec:\n  type: LoadBalancer\n  loadBalancerClass: portico.dev/l4\n";
                yaml.push_str(&plain.replacen("spec:\n", l4, 1));
                continue;
            }
            let ingress = crate::support::ingress(
                "default",
                &format!("in-{i}"),
                "2024-01-01T00:00:00Z",
                &rules,
            );
            yaml.push_str(&ingress.replace("ingressClassName: portico", "ingressClassName: ha"));
        }
        m.write("all.yaml", &yaml);
        let mut nodes = vec![];
        for i in 0..agents {
            let node = format!("n{i}");
            let ns = lab.namespace(&node, 11 + i as u8);
            let ip = lab.addr(11 + i as u8);
            let state = tempfile::tempdir().unwrap();
            nodes.push(AgentNode {
                node,
                ns,
                ip,
                child: None,
                upgraded: None,
                state,
            });
        }
        let mut ha = Ha {
            lab,
            etcd,
            _controller: None,
            controller_admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            agents: nodes,
            client,
            provider,
            lease_ttl,
            // The upgrades' lab holds a WebSocket and an `l4` stream on the first process of
            // each upgraded agent for all ten rounds: on a loaded machine these take longer
            // than the default 30 s after which a drained process closes its tunnels
            // (`--shutdown-timeout`) and its `l4` flows (`--l4-drain-timeout`).
            shutdown_timeout: matches!(objects, Objects::Ingresses(_, _, true)).then_some("600s"),
            _manifests: m,
        };
        for i in 0..agents {
            ha.spawn_agent(i).await;
        }
        eventually(
            Duration::from_secs(20),
            "every agent registered",
            async || {
                let keys = ha
                    .etcd
                    .etcdctl(&["get", "--prefix", "--keys-only", "/portico/agents/"]);
                keys.lines().filter(|l| !l.is_empty()).count() == agents
            },
        )
        .await;
        let (child, admin) = ha.start_controller().await;
        ha._controller = Some(child);
        ha.controller_admin = admin;
        ha
    }

    async fn start_controller(&self) -> (Child, SocketAddr) {
        let n = self.lab.n;
        let mut child = Command::new(BIN)
            .arg("controller")
            .arg("-f")
            .arg(self._manifests.path())
            .args(crate::distributed::store_args(&self.etcd))
            .args(["--admin-listen=127.0.0.1:0", "--identity=c1"])
            .arg(format!("--provider={}", self.provider))
            .arg(format!("--vip-pool=198.18.{n}.96/28"))
            .arg(format!("--fip-pool=198.18.{n}.112/28"))
            .env("PORTICO_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let admin = crate::distributed::admin_address(&mut child).await;
        (child, admin)
    }

    /// The controller's `n` load balancers once each has a VIP, a floating IP and a pair.
    pub async fn load_balancers(&self, n: usize) -> Vec<Lb> {
        let mut found = vec![];
        eventually(
            Duration::from_secs(20),
            "the controller placed the load balancers",
            async || {
                found = self.controller_lbs().iter().filter_map(lb_of).collect();
                found.len() == n
            },
        )
        .await;
        found.sort_by_key(|lb| lb.service.clone());
        found
    }

    /// Waits (`within`) until the controller's API shows `node` as the active agent of `id`.
    pub async fn wait_shown_active(&self, id: &str, node: &str, within: Duration) {
        eventually(
            within,
            "the controller shows the claim's holder as active",
            async || {
                (self.controller_lbs().iter())
                    .any(|lb| lb["id"] == id && lb["placement"]["active"] == node)
            },
        )
        .await;
    }

    /// The controller's `/api/v1/loadbalancers` now (empty when it does not answer).
    pub fn controller_lbs(&self) -> Vec<Value> {
        let url = format!("http://{}/api/v1/loadbalancers", self.controller_admin);
        let out = std::process::Command::new("curl")
            .args(["-sf", &url])
            .output()
            .unwrap();
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap_or_default()
    }

    /// Starts (again) agent `i`.
    pub async fn spawn_agent(&mut self, i: usize) {
        let endpoints = self.etcd.endpoints().join(",");
        let (provider, lease_ttl) = (self.provider, self.lease_ttl);
        let shutdown_timeout = self.shutdown_timeout;
        let a = &mut self.agents[i];
        let log = std::fs::File::create(a.state.path().join("agent.log")).unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &a.ns, BIN, "agent"])
            .arg(format!("--node={}", a.node))
            .arg(format!("--store=etcd://{endpoints}"))
            .arg("--interface=eth0")
            .arg(format!("--provider={provider}"))
            .arg(format!("--lease-ttl={lease_ttl}"))
            .arg(format!("--advertise-address={}", a.ip))
            .arg(format!("--heartbeat-port={HEARTBEAT}"))
            .arg(format!("--http-listen={}:8080", a.ip))
            .arg(format!("--https-listen={}:8443", a.ip))
            .arg(format!("--admin-listen={}:9180", a.ip))
            .arg(format!("--state-dir={}", a.state.path().display()))
            .arg("--access-log=off")
            .args(shutdown_timeout.map(|t| format!("--shutdown-timeout={t}")))
            .args(shutdown_timeout.map(|t| format!("--l4-drain-timeout={t}")))
            .env("PORTICO_LOG", "info,portico_app::failover=debug")
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await;
        assert!(matches!(first, Ok(Ok(Some(_)))), "agent {} started", a.node);
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        a.child = Some(child);
        a.upgraded = None;
    }

    /// The claim's holder of load balancer `id`.
    pub fn holder(&self, id: &str) -> Option<(String, u64)> {
        let out = self
            .etcd
            .etcdctl(&["get", &format!("/portico/ha/{id}"), "--print-value-only"]);
        let v: Value = serde_json::from_str(out.trim()).ok()?;
        if v["released"] == true {
            return None;
        }
        Some((v["holder"].as_str()?.to_owned(), v["epoch"].as_u64()?))
    }

    /// The port etcd listens on.
    pub fn etcd_port(&self) -> u16 {
        let endpoint = &self.etcd.endpoints()[0];
        endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub fn index(&self, node: &str) -> usize {
        self.agents.iter().position(|a| a.node == node).unwrap()
    }

    /// Waits until `id` has a holder that holds `vip` and serves it to the client.
    pub async fn wait_active(&self, id: &str, vip: Ipv4Addr, service: &str) -> usize {
        let mut holder = 0;
        eventually(
            Duration::from_secs(20),
            "an agent is active and serves the VIP",
            async || {
                let Some((node, _)) = self.holder(id) else {
                    return false;
                };
                holder = self.index(&node);
                self.agents[holder].has(vip) && self.answers(vip, service).await
            },
        )
        .await;
        holder
    }

    /// Whether `vip` answers from `service` to the client now.
    pub async fn answers(&self, vip: Ipv4Addr, service: &str) -> bool {
        let lines = Probe::http(&self.client, vip, 80, "x.test", 0.01, 10)
            .lines()
            .await;
        lines.iter().any(|(_, l)| l == &format!("ok {service}"))
    }

    /// Waits until the controller has placed `lb` on both agents again (a returning agent is
    /// the standby), then gives the pair time to hear each other (many adverts), so that a
    /// kill measures a failover from a settled pair.
    pub async fn settle(&self, lb: &Lb) {
        let mut nodes: Vec<&str> = self.agents.iter().map(|a| a.node.as_str()).collect();
        nodes.sort_unstable();
        eventually(
            Duration::from_secs(20),
            "the load balancer is placed on both agents",
            async || {
                let placed = self
                    .load_balancers(1)
                    .await
                    .into_iter()
                    .find(|l| l.id == lb.id);
                let mut pair: Vec<String> = placed
                    .map(|l| vec![l.active, l.standby])
                    .unwrap_or_default();
                pair.sort_unstable();
                pair == nodes
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The gap: the longest time between two requests (by start) answered fast (100 ms) by
/// `service` while the probe ran, its start and end included; and every answer from another
/// service.
fn gap(lines: &[(u64, String)], service: &str) -> (u64, Vec<String>) {
    let want = format!("ok {service}");
    let mut lines = lines.to_vec();
    lines.sort();
    let end = lines.last().map_or(0, |(t, _)| *t);
    // From the probe's start until the first fast answer, between answers, and from the last
    // one to the probe's end.
    let mut last = 0;
    let mut worst = 0;
    let mut wrong = vec![];
    for (t, line) in &lines {
        if line == &want {
            worst = worst.max(t - last);
            last = *t;
        } else if (line.starts_with("ok ") || line.starts_with("slow "))
            && !line.ends_with(&format!(" {service}"))
        {
            wrong.push(line.clone());
        }
    }
    worst = worst.max(end - last);
    (worst, wrong)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn skip() -> bool {
    if !crate::netns::available() {
        eprintln!("skipped: network namespaces need root and iproute2");
        return true;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_load_balancers_on_two_pairs_answer_on_their_vips_from_the_right_backends() {
    if skip() {
        return;
    }
    let ha = Ha::start(4, 2).await;
    let lbs = ha.load_balancers(2).await;
    let pairs: Vec<[&str; 2]> = lbs
        .iter()
        .map(|lb| [lb.active.as_str(), lb.standby.as_str()])
        .collect();
    assert!(
        pairs[0].iter().all(|n| !pairs[1].contains(n)),
        "the controller spread the load balancers on two pairs: {pairs:?}"
    );
    for lb in &lbs {
        let active = ha.wait_active(&lb.id, lb.vip, &lb.service).await;
        assert_eq!(
            ha.agents[active].node, lb.active,
            "the placed active holds the addresses"
        );
        assert!(ha.agents[active].has(lb.fip), "with the floating IP");
        for (j, other) in ha.agents.iter().enumerate() {
            if j != active {
                assert!(
                    !other.has(lb.vip) && !other.has(lb.fip),
                    "only the active holds {lb:?}"
                );
            }
        }
    }
    // Each VIP and floating IP answers from its own backend only, many times.
    for lb in &lbs {
        for ip in [lb.vip, lb.fip] {
            let lines = Probe::http(&ha.client, ip, 80, "x.test", 0.5, 10)
                .lines()
                .await;
            let (_, wrong) = gap(&lines, &lb.service);
            assert!(
                wrong.is_empty(),
                "{ip}: answers of another backend: {wrong:?}"
            );
            let ok = lines
                .iter()
                .filter(|(_, l)| l == &format!("ok {}", lb.service))
                .count();
            assert!(ok > 20, "{ip}: {ok} answers of {}", lb.service);
        }
    }
    // The agents' admin API shows the pair, the active being the claim's holder.
    let a = &ha.agents[ha.index(&lbs[0].active)];
    let url = format!("http://{}:9180/api/v1/loadbalancers/{}", a.ip, lbs[0].id);
    let out = std::process::Command::new("curl")
        .args(["-sf", &url])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["placement"]["active"], lbs[0].active.as_str(), "{v}");
    assert_eq!(v["floating_ip"], lbs[0].fip.to_string());
}

/// Kills (`signal`) the active agent of one load balancer `kills` times while the client sends
/// a request every 10 ms; returns each gap in milliseconds.
async fn failovers(signal: i32, kills: usize) -> Vec<u64> {
    failovers_with("proxy", signal, kills).await
}

/// [`failovers`] with the load balancer served by `provider`. Before each kill the standby
/// already listens on the VIP (it does not hold it); after it the killed agent left no process
/// behind (with haproxy: no haproxy).
async fn failovers_with(provider: &'static str, signal: i32, kills: usize) -> Vec<u64> {
    let ha = Ha::start_with(provider, 2, 1).await;
    failovers_of(ha, signal, kills).await
}

/// [`failovers_with`] in the lab `ha` (two agents, one load balancer).
async fn failovers_of(mut ha: Ha, signal: i32, kills: usize) -> Vec<u64> {
    let provider = ha.provider;
    let lb = ha.load_balancers(1).await.remove(0);
    let (id, vip) = (lb.id.clone(), lb.vip);
    let mut gaps = vec![];
    for k in 0..kills {
        let active = ha.wait_active(&id, vip, &lb.service).await;
        ha.settle(&lb).await;
        let epoch = ha.holder(&id).unwrap().1;
        let standby_node = &ha.agents[1 - active];
        assert!(!standby_node.has(vip), "the standby does not hold the VIP");
        let listening = standby_node.listeners(SocketAddr::new(vip.into(), 80));
        let want = if provider == "haproxy" {
            "haproxy"
        } else {
            "portico"
        };
        assert!(
            listening.iter().any(|name| name == want),
            "the standby's {want} listens on {vip}:80 before the kill: {listening:?}"
        );
        let on_fip = standby_node.listeners(SocketAddr::new(lb.fip.into(), 80));
        assert!(
            on_fip.iter().any(|name| name == want),
            "the standby's {want} listens on the floating IP {}:80 too: {on_fip:?}",
            lb.fip
        );
        eventually(
            Duration::from_secs(5),
            "the floating IP answers from the active",
            async || ha.answers(lb.fip, &lb.service).await,
        )
        .await;
        let probe = Probe::http(&ha.client, vip, 80, "x.test", 2.5, 10);
        tokio::time::sleep(Duration::from_millis(700)).await;
        ha.agents[active].signal(signal).await;
        eventually(
            Duration::from_secs(3),
            "the killed agent left no process behind",
            async || ha.agents[active].processes().is_empty(),
        )
        .await;
        // The controller shows the claim's holder as active before the dead agent's lease
        // (5 s) expires and the pair is placed again.
        let standby = ha.agents[1 - active].node.clone();
        let (lines, ()) = tokio::join!(
            probe.lines(),
            ha.wait_shown_active(&id, &standby, Duration::from_secs(3))
        );
        let (g, wrong) = gap(&lines, &lb.service);
        assert!(wrong.is_empty(), "answers of another backend: {wrong:?}");
        let (holder, new_epoch) = ha.holder(&id).expect("a holder after the failover");
        assert_eq!(
            holder,
            ha.agents[1 - active].node,
            "kill {k}: the standby took over"
        );
        assert!(new_epoch > epoch);
        let missed = lines.iter().filter(|(_, l)| !l.starts_with("ok ")).count();
        eprintln!(
            "failover (signal {signal}) {k}: gap {g} ms, {missed} of {} requests missed",
            lines.len()
        );
        gaps.push(g);
        // The agent returns, as standby.
        ha.spawn_agent(active).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            ha.holder(&id).unwrap().0,
            ha.agents[1 - active].node,
            "no preemption"
        );
        assert!(
            !ha.agents[active].has(vip),
            "the returning agent holds nothing"
        );
    }
    gaps.sort_unstable();
    eprintln!(
        "failover (signal {signal}): {} kills, p50 {} ms, p90 {} ms, max {} ms",
        gaps.len(),
        percentile(&gaps, 0.5),
        percentile(&gaps, 0.9),
        gaps.last().unwrap()
    );
    gaps
}

fn kills() -> usize {
    std::env::var("PORTICO_FAILOVER_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(3)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_of_the_active_moves_the_vip_in_under_a_second() {
    if skip() {
        return;
    }
    let gaps = failovers(9, kills()).await;
    assert!(*gaps.last().unwrap() < 1000, "gaps {gaps:?}");
}

/// A Gateway is a load balancer like a dedicated Ingress's: placed on both agents, its VIP
/// and floating IP on the active only, moved to the standby in under a second when the active
/// is killed, the standby already listening on both; with the built-in proxy and with haproxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateways_vip_fails_over_like_an_ingress_load_balancers() {
    if skip() {
        return;
    }
    for provider in ["proxy", "haproxy"] {
        let ha = Ha::start_gateway(provider, 2).await;
        let lb = ha.load_balancers(1).await.remove(0);
        let origin = (ha.controller_lbs().into_iter())
            .find(|v| v["id"] == lb.id.as_str())
            .map(|v| v["origin"].clone());
        assert_eq!(
            origin.as_ref().map(|o| o["kind"].clone()),
            Some(Value::from("Gateway")),
            "the load balancer is the Gateway's: {origin:?}"
        );
        let gaps = failovers_of(ha, 9, 2).await;
        assert!(*gaps.last().unwrap() < 1000, "{provider}: gaps {gaps:?}");
    }
}

/// A Service of type LoadBalancer served by provider `l4` fails over as an Ingress's load
/// balancer does: the standby's l4 listener is bound on the VIP before it holds it (IP_FREEBIND),
/// so the moved VIP answers new TCP connections at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_l4_services_vip_fails_over_to_a_standby_already_listening() {
    if skip() {
        return;
    }
    let ha = Ha::start_l4(2).await;
    let gaps = failovers_of(ha, 9, 2).await;
    assert!(*gaps.last().unwrap() < 1000, "gaps {gaps:?}");
}

/// A Gateway with an HTTP and a TCP listener is two load balancers on one VIP: its own (placed,
/// failed over) and its `l4` half (not placed, listening on every agent). Killing the active
/// agent moves the VIP once, and new TCP connections through it reach the TCPRoute's backend
/// from the new active; once the killed agent is back, only the new active holds the VIP.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateways_tcp_listener_follows_its_vip_on_failover() {
    if skip() {
        return;
    }
    let mut ha = Ha::start_gateway_with_tcp(2).await;
    let lb = ha.load_balancers(1).await.remove(0);
    let tcp = SocketAddr::new(lb.vip.into(), FLOWS_TCP);
    for round in 0..2 {
        let active = ha.wait_active(&lb.id, lb.vip, &lb.service).await;
        ha.settle(&lb).await;
        let mut conn = crate::l4::wait_connect(tcp).await;
        assert_eq!(conn.pod, "t0");
        conn.echo("before").await.unwrap();
        ha.agents[active].signal(9).await;
        let standby = 1 - active;
        eventually(
            Duration::from_secs(5),
            "new TCP connections through the moved VIP",
            async || match crate::l4::connect_from(None, tcp).await {
                Ok(mut c) => c.echo("after").await.is_ok() && ha.agents[standby].has(lb.vip),
                Err(_) => false,
            },
        )
        .await;
        // The killed agent's addresses stay on its interface (no process removed them) until
        // it comes back and gives up what it holds no claim for.
        ha.spawn_agent(active).await;
        eventually(
            Duration::from_secs(5),
            "the returning agent holds nothing",
            async || {
                let holders: Vec<bool> = ha.agents.iter().map(|a| a.has(lb.vip)).collect();
                holders == [active == 1, active == 0]
            },
        )
        .await;
        let again = crate::l4::connect_from(None, tcp).await;
        assert!(again.is_ok(), "round {round}");
    }
}

/// The same with `--provider haproxy`: the agents run haproxy, which binds the VIP with
/// `transparent` on both, so the standby's haproxy already listens when the VIP moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_haproxy_sigkill_of_the_active_moves_the_vip_to_a_listening_standby() {
    if skip() {
        return;
    }
    let gaps = failovers_with("haproxy", 9, kills()).await;
    assert!(*gaps.last().unwrap() < 1000, "gaps {gaps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_of_the_active_hands_over_at_once() {
    if skip() {
        return;
    }
    let gaps = failovers(15, kills()).await;
    // The target is 100 ms; the bound is loose for a loaded CI machine.
    assert!(*gaps.last().unwrap() < 250, "gaps {gaps:?}");
}

/// keepalived (Debian's) on two namespaces of a lab, moving the VIP .100 between them, with
/// VRRPv2 1 s adverts or VRRPv3 100 ms adverts.
struct Keepalived {
    children: Vec<Option<Child>>,
    dir: tempfile::TempDir,
}

impl Keepalived {
    fn config(ha: &Ha, vip: Ipv4Addr, i: usize, advert: &str, v3: bool) -> String {
        let me = &ha.agents[i];
        let peer = &ha.agents[1 - i];
        let version = if v3 { "vrrp_version 3\n" } else { "" };
        format!(
            "global_defs {{\n  {version}  enable_script_security\n}}\nvrrp_instance pt {{\n  state BACKUP\n  nopreempt\n  interface eth0\n  virtual_router_id 51\n  priority 100\n  advert_int {advert}\n  unicast_src_ip {}\n  unicast_peer {{\n    {}\n  }}\n  virtual_ipaddress {{\n    {}/32 dev eth0\n  }}\n}}\n",
            me.ip, peer.ip, vip
        )
    }

    fn start(ha: &Ha, vip: Ipv4Addr, advert: &str, v3: bool) -> Keepalived {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Keepalived {
            children: vec![None, None],
            dir,
        };
        for i in 0..2 {
            std::fs::write(
                k.file(i, "conf"),
                Keepalived::config(ha, vip, i, advert, v3),
            )
            .unwrap();
            k.spawn(ha, i);
        }
        k
    }

    fn file(&self, i: usize, what: &str) -> std::path::PathBuf {
        self.dir.path().join(format!("{i}.{what}"))
    }

    fn spawn(&mut self, ha: &Ha, i: usize) {
        let log = std::fs::File::create(self.file(i, "log")).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ha.agents[i].ns,
                "keepalived",
                "--dont-fork",
                "--log-console",
                "--vrrp",
            ])
            .arg(format!("--use-file={}", self.file(i, "conf").display()))
            .arg(format!("--pid={}", self.file(i, "pid").display()))
            .arg(format!("--vrrp_pid={}", self.file(i, "vrrp.pid").display()))
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.children[i] = Some(child);
    }

    /// SIGKILL of keepalived on node `i`: its VRRP child first, in the same call as the
    /// parent (killed alone, the parent's death would reach the child as SIGTERM, and a child
    /// stopped that way hands over at once with priority 0 adverts).
    async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let vrrp = std::fs::read_to_string(self.file(i, "vrrp.pid")).unwrap_or_default();
            let mut pids: Vec<String> = vrrp
                .trim()
                .parse::<u32>()
                .ok()
                .map(|p| p.to_string())
                .into_iter()
                .collect();
            pids.extend(child.id().map(|p| p.to_string()));
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .args(&pids)
                .status();
            let _ = child.wait().await;
        }
    }
}

impl Drop for Keepalived {
    fn drop(&mut self) {
        for i in 0..2 {
            let vrrp = std::fs::read_to_string(self.file(i, "vrrp.pid")).unwrap_or_default();
            if let Ok(pid) = vrrp.trim().parse::<u32>()
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "keepalived")
            {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// keepalived's failover gaps: both agents serve the load balancer (no `--interface`: they
/// listen on the VIP without holding it), keepalived moves the VIP; a kill is SIGKILL of the
/// master's keepalived and agent, as a kill of Portico's active agent leaves its address.
async fn keepalived_failovers(
    ha: &mut Ha,
    lb: &Lb,
    advert: &str,
    v3: bool,
    kills: usize,
) -> Vec<u64> {
    let vip = lb.vip;
    let mut k = Keepalived::start(ha, vip, advert, v3);
    let mut gaps = vec![];
    for n in 0..kills {
        let mut master = 0;
        eventually(
            Duration::from_secs(30),
            "keepalived has a master serving the VIP",
            async || {
                let holders: Vec<usize> = (0..2).filter(|&i| ha.agents[i].has(vip)).collect();
                if holders.len() != 1 {
                    return false;
                }
                master = holders[0];
                ha.answers(vip, &lb.service).await
            },
        )
        .await;
        // The backup knows the master before the kill.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let probe = Probe::http(&ha.client, vip, 80, "x.test", 7.0, 10);
        tokio::time::sleep(Duration::from_millis(700)).await;
        k.kill(master).await;
        ha.agents[master].signal(9).await;
        let lines = probe.lines().await;
        let (g, _) = gap(&lines, &lb.service);
        eprintln!("keepalived advert {advert} s kill {n}: gap {g} ms");
        gaps.push(g);
        // The node returns: its address is cleared (as a rebooted node's), agent and
        // keepalived start again.
        let _ = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &ha.agents[master].ns,
                "ip",
                "address",
                "del",
                &format!("{vip}/32"),
                "dev",
                "eth0",
            ])
            .output();
        ha.spawn_plain_agent(master).await;
        k.spawn(ha, master);
    }
    gaps.sort_unstable();
    gaps
}

impl Ha {
    /// Starts agent `i` without active-standby (it serves every load balancer).
    async fn spawn_plain_agent(&mut self, i: usize) {
        let endpoints = self.etcd.endpoints().join(",");
        let a = &mut self.agents[i];
        let mut child = Command::new("ip")
            .args(["netns", "exec", &a.ns, BIN, "agent"])
            .arg(format!("--node={}", a.node))
            .arg(format!("--store=etcd://{endpoints}"))
            .arg(format!("--http-listen={}:8080", a.ip))
            .arg(format!("--https-listen={}:8443", a.ip))
            .arg(format!("--admin-listen={}:9180", a.ip))
            .arg(format!("--state-dir={}", a.state.path().display()))
            .arg("--access-log=off")
            .env("PORTICO_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await;
        assert!(matches!(first, Ok(Ok(Some(_)))), "agent {} started", a.node);
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        a.child = Some(child);
    }
}

fn row(name: &str, gaps: &[u64]) -> String {
    format!(
        "| {name} | {} | {} | {} | {} |",
        gaps.len(),
        percentile(gaps, 0.5),
        percentile(gaps, 0.9),
        gaps.last().copied().unwrap_or(0)
    )
}

/// bench/failover.sh: Portico's failover gaps after SIGKILL and SIGTERM next to keepalived's
/// (1 s VRRPv2 adverts, 100 ms VRRPv3 adverts) in the same lab layout, printed as a table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: bash bench/failover.sh"]
async fn benchmark() {
    if skip() {
        return;
    }
    let kills = kills();
    let sigkill = failovers(9, kills).await;
    let sigterm = failovers(15, kills).await;
    let mut ha = Ha::start(2, 1).await;
    let lb = ha.load_balancers(1).await.remove(0);
    for i in 0..2 {
        ha.agents[i].signal(9).await;
        for ip in [lb.vip, lb.fip] {
            let _ = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &ha.agents[i].ns,
                    "ip",
                    "address",
                    "del",
                    &format!("{ip}/32"),
                    "dev",
                    "eth0",
                ])
                .output();
        }
        ha.spawn_plain_agent(i).await;
    }
    let v2 = keepalived_failovers(&mut ha, &lb, "1", false, kills).await;
    let v3 = keepalived_failovers(&mut ha, &lb, "0.1", true, kills).await;
    println!("| failover | kills | p50 ms | p90 ms | max ms |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "{}",
        row(
            "Portico, SIGKILL of the active agent (50 ms adverts)",
            &sigkill
        )
    );
    println!("{}", row("Portico, SIGTERM of the active agent", &sigterm));
    println!(
        "{}",
        row(
            "keepalived, SIGKILL of the master (VRRPv2, 1 s adverts)",
            &v2
        )
    );
    println!(
        "{}",
        row(
            "keepalived, SIGKILL of the master (VRRPv3, 100 ms adverts)",
            &v3
        )
    );
}

/// Whether nftables is missing (said on stderr): the tests that drop traffic skip then.
pub fn nft_missing() -> bool {
    let missing = (std::process::Command::new("nft").arg("--version").output()).is_err();
    if missing {
        eprintln!("skipped: needs nft (nftables)");
    }
    missing
}

/// Drops, in `ns`, the heartbeats (UDP to and from the heartbeat port) and, with `etcd_port`,
/// the traffic to etcd too.
pub fn cut(ns: &str, etcd_port: Option<u16>) {
    let heartbeats = format!("udp dport {HEARTBEAT} drop; ");
    let etcd = etcd_port.map_or_else(String::new, |port| format!("tcp dport {port} drop; "));
    drop_traffic(ns, &heartbeats, &format!("{heartbeats}{etcd}"));
}

/// Drops, in `ns`, what is sent to etcd on `port`: etcd is unreachable from there.
pub fn cut_etcd(ns: &str, port: u16) {
    drop_traffic(ns, "", &format!("tcp dport {port} drop; "));
}

/// Replaces the table `ptcut` in `ns` with the rules `input` and `output`; [`heal`] removes it.
fn drop_traffic(ns: &str, input: &str, output: &str) {
    let _ = std::process::Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "delete", "table", "inet", "ptcut",
        ])
        .output();
    let rules = format!(
        "table inet ptcut {{\n chain in {{ type filter hook input priority 0; {input}}}\n chain out {{ type filter hook output priority 0; {output}}}\n}}\n"
    );
    let path = std::env::temp_dir().join(format!("ptcut-{ns}.nft"));
    std::fs::write(&path, rules).unwrap();
    exec(ns, &["nft", "-f", &path.display().to_string()]);
    let _ = std::fs::remove_file(path);
}

pub fn heal(ns: &str) {
    exec(ns, &["nft", "delete", "table", "inet", "ptcut"]);
}

/// The ARP probe's lines with more than one MAC answering.
fn doubles(lines: &[(u64, String)]) -> Vec<(u64, String)> {
    lines
        .iter()
        .filter(|(_, l)| l.contains(','))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_heartbeat_link_never_leaves_two_agents_answering_arp() {
    if skip() {
        return;
    }
    if nft_missing() {
        return;
    }
    let ha = Ha::start(2, 1).await;
    let lb = ha.load_balancers(1).await.remove(0);
    let (id, vip) = (lb.id.clone(), lb.vip);
    let active = ha.wait_active(&id, vip, &lb.service).await;
    let standby = 1 - active;
    let (_, epoch) = ha.holder(&id).unwrap();
    let mac = |i: usize| ha.lab.mac(&ha.agents[i].ns);
    let client = ha.lab.addr(2);

    // The heartbeats are dropped in the active's namespace; etcd stays reachable: the active
    // renews its claim, the standby sees it alive and stays standby.
    let probe = Probe::arp(&ha.client, vip, client, 3.0, 20);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cut(&ha.agents[active].ns, None);
    let lines = probe.lines().await;
    assert!(
        doubles(&lines).is_empty(),
        "two agents answered ARP: {:?}",
        doubles(&lines)
    );
    assert!(
        lines.iter().all(|(_, l)| l == &mac(active)),
        "only the active answered"
    );
    assert_eq!(
        ha.holder(&id),
        Some((ha.agents[active].node.clone(), epoch))
    );

    // The active loses etcd too: it fences itself before the standby may claim, and the
    // standby takes over with the next epoch.
    let etcd_port = ha.etcd_port();
    let probe = Probe::arp(&ha.client, vip, client, 3.0, 20);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cut(&ha.agents[active].ns, Some(etcd_port));
    let lines = probe.lines().await;
    assert!(
        doubles(&lines).is_empty(),
        "two agents answered ARP: {:?}",
        doubles(&lines)
    );
    let takeover = lines
        .iter()
        .position(|(_, l)| l == &mac(standby))
        .expect("the standby took over");
    assert!(
        lines[takeover..].iter().all(|(_, l)| l == &mac(standby)),
        "after the takeover only the new active answers"
    );
    assert_eq!(
        ha.holder(&id),
        Some((ha.agents[standby].node.clone(), epoch + 1))
    );
    assert!(
        !ha.agents[active].has(vip),
        "the side that lost the epoch stepped down"
    );
    let silent: u64 = lines
        .windows(2)
        .filter(|w| w[0].1 == "-")
        .map(|w| w[1].0 - w[0].0)
        .sum();
    eprintln!("link cut and etcd lost: {silent} ms without an ARP answer around the takeover");

    // Healed: the old active stays standby.
    heal(&ha.agents[active].ns);
    let probe = Probe::arp(&ha.client, vip, client, 1.5, 20);
    let lines = probe.lines().await;
    assert!(lines.iter().all(|(_, l)| l == &mac(standby)), "{lines:?}");
    assert!(!ha.agents[active].has(vip));
}
