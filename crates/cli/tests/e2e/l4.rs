//! Services of type LoadBalancer (class `portico.dev/l4`) served by the real binary on VIPs
//! from a loopback `--vip-pool`, against TCP and UDP echo backends that say which pod they
//! are: the L4 kit, each TCP case run against provider `l4` and against provider `haproxy`
//! (the Service annotation `portico.dev/provider: haproxy`). UDP cases run for `l4` only:
//! haproxy 2.6 has no UDP proxying (its load balancer says so; a test checks the warning).

use crate::support::{Manifests, Portico, free_port};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};

/// A TCP backend: greets each connection with `<name>\n`, then echoes.
pub(crate) async fn tcp_pod(name: &str) -> SocketAddr {
    tcp_pod_on(IpAddr::from([127, 0, 0, 1]), name).await
}

/// [`tcp_pod`] listening on `ip`.
pub(crate) async fn tcp_pod_on(ip: IpAddr, name: &str) -> SocketAddr {
    let listener = TcpListener::bind(SocketAddr::new(ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let name = name.to_owned();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let greeting = format!("{name}\n");
            tokio::spawn(async move {
                if s.write_all(greeting.as_bytes()).await.is_err() {
                    return;
                }
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// A UDP backend: answers each datagram with `<name>:<datagram>`.
pub(crate) async fn udp_pod(name: &str) -> SocketAddr {
    udp_pod_on(IpAddr::from([127, 0, 0, 1]), name).await
}

/// [`udp_pod`] on `ip`.
pub(crate) async fn udp_pod_on(ip: IpAddr, name: &str) -> SocketAddr {
    let socket = UdpSocket::bind(SocketAddr::new(ip, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    let name = name.to_owned();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let mut reply = format!("{name}:").into_bytes();
            reply.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&reply, peer).await;
        }
    });
    addr
}

/// One endpoint: its ports by Service port name, and readiness.
pub(crate) struct Endpoint {
    pub(crate) ports: Vec<(&'static str, &'static str, u16)>,
    pub(crate) ready: bool,
}

pub(crate) fn tcp_endpoint(names: &[&'static str], addr: SocketAddr, ready: bool) -> Endpoint {
    Endpoint {
        ports: names.iter().map(|n| (*n, "TCP", addr.port())).collect(),
        ready,
    }
}

/// A Service of class `portico.dev/l4` with `spec_extra` (YAML lines under `spec:`), `ports`
/// (YAML list items), and one EndpointSlice per endpoint (all on 127.0.0.1).
pub(crate) fn l4_service(
    name: &str,
    spec_extra: &str,
    ports: &str,
    endpoints: &[Endpoint],
) -> String {
    let mut y = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: apps}}\nspec:\n  type: LoadBalancer\n  loadBalancerClass: portico.dev/l4\n  selector: {{app: {name}}}\n{spec_extra}  ports:\n{ports}"
    );
    for (i, ep) in endpoints.iter().enumerate() {
        let ports: Vec<String> = (ep.ports.iter())
            .map(|(n, proto, port)| format!("{{name: {n}, port: {port}, protocol: {proto}}}"))
            .collect();
        let _ = write!(
            y,
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-{i}\n  namespace: apps\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{}]\nendpoints:\n- addresses: [\"127.0.0.1\"]\n  conditions: {{ready: {}}}\n",
            ports.join(", "),
            ep.ready
        );
    }
    y
}

/// The VIP of the load balancer of Service `apps/<name>`, once it has one.
pub(crate) async fn vip_of(p: &Portico, name: &str) -> IpAddr {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = p.admin_json("/api/v1/loadbalancers").await;
        let lb = (all.as_array().into_iter().flatten())
            .find(|lb| lb["name"] == format!("service/apps/{name}"));
        if let Some(vip) = lb.and_then(|lb| lb["vip"].as_str()) {
            return vip.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no VIP for {name}: {all}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`vip_of`], after checking that `provider` serves the Service's load balancer.
pub(crate) async fn vip_by(p: &Portico, name: &str, provider: Provider) -> IpAddr {
    let vip = vip_of(p, name).await;
    let all = p.admin_json("/api/v1/loadbalancers").await;
    let lb = (all.as_array().into_iter().flatten())
        .find(|lb| lb["name"] == format!("service/apps/{name}"));
    let want = match provider {
        Provider::L4 => "l4",
        Provider::Haproxy => "haproxy",
    };
    assert_eq!(
        lb.map(|lb| lb["provider"].clone()),
        Some(want.into()),
        "{all}"
    );
    vip
}

/// A TCP connection through the load balancer: its pod's name, and the stream.
pub(crate) struct Conn {
    pub(crate) pod: String,
    pub(crate) stream: BufReader<TcpStream>,
}

pub(crate) async fn connect_from(
    source: Option<IpAddr>,
    addr: SocketAddr,
) -> std::io::Result<Conn> {
    let socket = TcpSocket::new_v4()?;
    if let Some(ip) = source {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    let stream = tokio::time::timeout(Duration::from_secs(3), socket.connect(addr))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)??;
    let mut stream = BufReader::new(stream);
    let mut pod = String::new();
    let read = tokio::time::timeout(Duration::from_secs(3), stream.read_line(&mut pod)).await;
    match read {
        Ok(Ok(n)) if n > 0 => Ok(Conn {
            pod: pod.trim().to_owned(),
            stream,
        }),
        Ok(Ok(_)) => Err(std::io::ErrorKind::UnexpectedEof.into()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// Connects until the listener answers (it is bound after the first translation).
pub(crate) async fn wait_connect(addr: SocketAddr) -> Conn {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match connect_from(None, addr).await {
            Ok(c) => return c,
            Err(e) => assert!(Instant::now() < deadline, "{addr} never answered: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Conn {
    /// Sends a line and expects it back.
    pub(crate) async fn echo(&mut self, line: &str) -> std::io::Result<()> {
        self.stream
            .get_mut()
            .write_all(format!("{line}\n").as_bytes())
            .await?;
        let mut back = String::new();
        tokio::time::timeout(Duration::from_secs(3), self.stream.read_line(&mut back))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if back.trim() != line {
            return Err(std::io::Error::other(format!("echoed {back:?}")));
        }
        Ok(())
    }
}

/// Sends `payload` over UDP from a new socket; the reply.
pub(crate) async fn udp_ask(addr: SocketAddr, payload: &str) -> Option<String> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut buf = [0u8; 2048];
    for _ in 0..5 {
        socket.send_to(payload.as_bytes(), addr).await.unwrap();
        let got =
            tokio::time::timeout(Duration::from_millis(300), socket.recv_from(&mut buf)).await;
        if let Ok(Ok((n, from))) = got {
            assert_eq!(from, addr, "the reply leaves from the listener's address");
            return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    None
}

/// Which provider serves the Services of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    L4,
    Haproxy,
}

/// `yaml` with every Service handed to `provider` (the annotation `portico.dev/provider`
/// added to the Services' one-line metadata; `l4` is the default and needs none).
pub(crate) fn served_by(yaml: &str, provider: Provider) -> String {
    if provider == Provider::L4 {
        return yaml.to_owned();
    }
    let mut out = String::new();
    let mut service = false;
    for line in yaml.split_inclusive('\n') {
        let line = match line.strip_prefix("metadata: {") {
            Some(rest) if service => match rest.split_once("annotations: {") {
                Some((before, after)) => format!(
                    "metadata: {{{before}annotations: {{portico.dev/provider: haproxy, {after}"
                ),
                None => {
                    format!("metadata: {{annotations: {{portico.dev/provider: haproxy}}, {rest}")
                }
            },
            _ => line.to_owned(),
        };
        service = line.trim_end() == "kind: Service";
        out.push_str(&line);
    }
    out
}

/// Portico with `args`; for haproxy, with a state directory of its own.
pub(crate) async fn start_for(provider: Provider, m: &Manifests, args: &[&str]) -> Portico {
    match provider {
        Provider::L4 => Portico::start(m.path(), args).await,
        Provider::Haproxy => Portico::start_with_state(m.path(), args).await,
    }
}

async fn start(provider: Provider, m: &Manifests, pool: &str) -> Portico {
    let arg = format!("--vip-pool={pool}");
    start_for(provider, m, &[&arg]).await
}

/// Waits for a diagnostic whose text holds every one of `parts`.
pub(crate) async fn wait_diagnostic(p: &Portico, parts: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let all = p.admin_json("/api/v1/diagnostics").await;
        let found = (all.as_array().into_iter().flatten()).any(|d| {
            let text = d.to_string();
            parts.iter().all(|p| text.contains(p))
        });
        if found {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no diagnostic with {parts:?}: {all}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn tcp_and_udp_echo_on_several_ports_with_named_target_ports_and_unready_skipped_l4() {
    echo_on_several_ports(Provider::L4).await;
}

/// The UDP port is not served by haproxy: a warning names it, the TCP ports are served.
#[tokio::test]
async fn tcp_echo_on_several_ports_with_named_target_ports_and_unready_skipped_haproxy() {
    echo_on_several_ports(Provider::Haproxy).await;
}

async fn echo_on_several_ports(provider: Provider) {
    let (t0, t1, t2) = (
        tcp_pod("t0").await,
        tcp_pod("t1").await,
        tcp_pod("t2").await,
    );
    let (u0, u1) = (udp_pod("u0").await, udp_pod("u1").await);
    let (pa, pb, pu) = (free_port(), free_port(), free_port());
    let ports = format!(
        "  - {{name: tcp-a, port: {pa}, protocol: TCP, targetPort: web}}\n  - {{name: tcp-b, port: {pb}, protocol: TCP, targetPort: 9000}}\n  - {{name: dns, port: {pu}, protocol: UDP, targetPort: dns}}\n"
    );
    let udp = |addr: SocketAddr| Endpoint {
        ports: vec![("dns", "UDP", addr.port())],
        ready: true,
    };
    let endpoints = [
        tcp_endpoint(&["tcp-a", "tcp-b"], t0, true),
        tcp_endpoint(&["tcp-a", "tcp-b"], t1, true),
        // Not ready: never chosen.
        tcp_endpoint(&["tcp-a", "tcp-b"], t2, false),
        udp(u0),
        udp(u1),
    ];
    let m = Manifests::new();
    let yaml = l4_service("mixed", "", &ports, &endpoints);
    m.write("svc.yaml", &served_by(&yaml, provider));
    let net = match provider {
        Provider::L4 => "127.0.51.0/24",
        Provider::Haproxy => "127.0.61.0/24",
    };
    let p = start(provider, &m, net).await;
    let vip = vip_by(&p, "mixed", provider).await;
    assert!(vip.to_string().starts_with(&net[..9]), "{vip}");

    for port in [pa, pb] {
        let addr = SocketAddr::new(vip, port);
        wait_connect(addr).await;
        let mut seen = BTreeSet::new();
        for i in 0..40 {
            let mut c = connect_from(None, addr).await.unwrap();
            c.echo(&format!("hello {i}")).await.unwrap();
            seen.insert(c.pod);
        }
        let want: BTreeSet<String> = ["t0", "t1"].map(String::from).into();
        assert_eq!(seen, want, "port {port}: ready pods only, both used");
    }

    let addr = SocketAddr::new(vip, pu);
    if provider == Provider::Haproxy {
        let field = "spec.ports[2].protocol";
        wait_diagnostic(&p, &["mixed", field, "not served by provider haproxy"]).await;
        assert_eq!(udp_ask(addr, "q").await, None, "no UDP on haproxy");
        return;
    }
    let mut seen = BTreeSet::new();
    for i in 0..40 {
        let reply = udp_ask(addr, &format!("q{i}")).await.expect("a UDP reply");
        let (pod, echoed) = reply.split_once(':').unwrap();
        assert_eq!(echoed, format!("q{i}"));
        seen.insert(pod.to_owned());
    }
    assert_eq!(seen, ["u0", "u1"].map(String::from).into());
}

#[tokio::test]
async fn scale_up_and_down_under_traffic_breaks_no_established_connection_l4() {
    scale_under_traffic(Provider::L4, "127.0.52.0/24").await;
}

#[tokio::test]
async fn scale_up_and_down_under_traffic_breaks_no_established_connection_haproxy() {
    scale_under_traffic(Provider::Haproxy, "127.0.62.0/24").await;
}

async fn scale_under_traffic(provider: Provider, net: &str) {
    let mut pods = Vec::new();
    for i in 0..5 {
        pods.push(tcp_pod(&format!("p{i}")).await);
    }
    let port = free_port();
    let ports = format!("  - {{name: app, port: {port}, targetPort: 8080}}\n");
    let with = |n: usize| {
        let eps: Vec<Endpoint> = (pods[..n].iter())
            .map(|a| tcp_endpoint(&["app"], *a, true))
            .collect();
        served_by(&l4_service("scaled", "", &ports, &eps), provider)
    };
    let m = Manifests::new();
    m.write("svc.yaml", &with(3));
    let p = start(provider, &m, net).await;
    let addr = SocketAddr::new(vip_by(&p, "scaled", provider).await, port);
    wait_connect(addr).await;

    let mut conns = Vec::new();
    for _ in 0..30 {
        conns.push(connect_from(None, addr).await.unwrap());
    }
    let pods_of = |conns: &[Conn]| conns.iter().map(|c| c.pod.clone()).collect::<Vec<_>>();
    let before = pods_of(&conns);
    assert!(
        before
            .iter()
            .all(|p| ["p0", "p1", "p2"].contains(&p.as_str()))
    );

    // Traffic on every connection while the pool grows to 5 and shrinks to 2.
    check(&mut conns, 1).await;
    m.write("svc.yaml", &with(5));
    let grown = wait_pods(addr, &["p3", "p4"]).await;
    check(&mut conns, 2).await;
    assert!(grown.iter().all(|p| p.starts_with('p')));
    // Connections opened on the grown pool (for haproxy: on the worker that takes the
    // shrink through its runtime API), to pods that then leave.
    let mut grown_conns = Vec::new();
    while !["p3", "p4"]
        .iter()
        .all(|p| grown_conns.iter().any(|c: &Conn| c.pod == *p))
    {
        assert!(grown_conns.len() < 200, "p3 and p4 never answered");
        grown_conns.push(connect_from(None, addr).await.unwrap());
    }
    m.write("svc.yaml", &with(2));
    // New connections only reach p0 and p1 once the change is applied.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut seen = BTreeSet::new();
        for _ in 0..20 {
            seen.insert(connect_from(None, addr).await.unwrap().pod);
        }
        if seen.iter().all(|p| p == "p0" || p == "p1") {
            break;
        }
        assert!(Instant::now() < deadline, "still reaching {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Established connections, also those to p2, p3 and p4 (drained, not cut), go on.
    check(&mut conns, 3).await;
    check(&mut grown_conns, 4).await;
    assert_eq!(pods_of(&conns), before, "connections keep their pod");
}

/// Echoes on every connection; none may have broken.
async fn check(conns: &mut [Conn], round: u32) {
    for (i, c) in conns.iter_mut().enumerate() {
        if let Err(e) = c.echo(&format!("r{round} c{i}")).await {
            panic!("connection {i} to {} broke in round {round}: {e}", c.pod);
        }
    }
}

/// Opens connections until every one of `pods` has answered one.
async fn wait_pods(addr: SocketAddr, pods: &[&str]) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = BTreeSet::new();
    while !pods.iter().all(|p| seen.contains(*p)) {
        assert!(
            Instant::now() < deadline,
            "never reached {pods:?}: {seen:?}"
        );
        seen.insert(connect_from(None, addr).await.unwrap().pod);
    }
    seen
}

#[tokio::test]
async fn client_ip_affinity_and_source_ranges_l4() {
    affinity_and_ranges(Provider::L4, "127.0.53.0/24").await;
}

#[tokio::test]
async fn client_ip_affinity_and_source_ranges_haproxy() {
    affinity_and_ranges(Provider::Haproxy, "127.0.63.0/24").await;
}

async fn affinity_and_ranges(provider: Provider, net: &str) {
    let mut pods = Vec::new();
    for i in 0..4 {
        pods.push(tcp_pod(&format!("a{i}")).await);
    }
    let (pa, pr) = (free_port(), free_port());
    let eps = |name: &'static str| -> Vec<Endpoint> {
        (pods.iter())
            .map(|a| tcp_endpoint(&[name], *a, true))
            .collect()
    };
    let affinity = l4_service(
        "sticky",
        "  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}\n",
        &format!("  - {{name: app, port: {pa}}}\n"),
        &eps("app"),
    );
    let ranged = l4_service(
        "ranged",
        "  loadBalancerSourceRanges: [\"127.0.0.2/32\", \"127.0.0.4/31\"]\n",
        &format!("  - {{name: app, port: {pr}}}\n"),
        &eps("app"),
    );
    let m = Manifests::new();
    m.write("svc.yaml", &served_by(&(affinity + &ranged), provider));
    let p = start(provider, &m, net).await;

    let sticky = SocketAddr::new(vip_by(&p, "sticky", provider).await, pa);
    wait_connect(sticky).await;
    let mut by_client: BTreeMap<IpAddr, BTreeSet<String>> = BTreeMap::new();
    for host in 1..=12u8 {
        let source: IpAddr = [127, 0, 0, host].into();
        for _ in 0..8 {
            let c = connect_from(Some(source), sticky).await.unwrap();
            by_client.entry(source).or_default().insert(c.pod);
        }
    }
    assert!(
        by_client.values().all(|pods| pods.len() == 1),
        "each client address keeps one pod: {by_client:?}"
    );
    let used: BTreeSet<_> = by_client.values().flatten().collect();
    assert!(used.len() >= 2, "clients spread over pods: {by_client:?}");

    let ranged = SocketAddr::new(vip_by(&p, "ranged", provider).await, pr);
    let allowed = |host: u8| connect_from(Some([127, 0, 0, host].into()), ranged);
    let deadline = Instant::now() + Duration::from_secs(10);
    while allowed(2).await.is_err() {
        assert!(Instant::now() < deadline, "allowed client never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for host in [4, 5] {
        allowed(host).await.unwrap().echo("in range").await.unwrap();
    }
    for host in [1, 3, 6] {
        assert!(
            allowed(host).await.is_err(),
            "127.0.0.{host} is outside the source ranges and must be refused"
        );
    }
}

#[tokio::test]
async fn without_a_vip_pool_the_service_is_not_served_and_says_why_l4() {
    without_a_vip_pool(Provider::L4).await;
}

#[tokio::test]
async fn without_a_vip_pool_the_service_is_not_served_and_says_why_haproxy() {
    without_a_vip_pool(Provider::Haproxy).await;
}

async fn without_a_vip_pool(provider: Provider) {
    let pod = tcp_pod("x0").await;
    let port = free_port();
    let m = Manifests::new();
    let svc = l4_service(
        "novip",
        "",
        &format!("  - {{name: app, port: {port}}}\n"),
        &[tcp_endpoint(&["app"], pod, true)],
    );
    m.write("svc.yaml", &served_by(&svc, provider));
    let p = start_for(provider, &m, &[]).await;
    let says = match provider {
        Provider::L4 => "provider l4 needs a VIP",
        Provider::Haproxy => "provider haproxy needs a VIP",
    };
    wait_diagnostic(&p, &["novip", says]).await;
}

/// A Service naming a provider that does not serve Services is told so, naming the
/// annotation, and is served by `l4`.
#[tokio::test]
async fn a_bad_provider_annotation_is_named_and_l4_serves() {
    let pod = tcp_pod("b0").await;
    let port = free_port();
    let m = Manifests::new();
    let svc = l4_service(
        "badprov",
        "",
        &format!("  - {{name: app, port: {port}}}\n"),
        &[tcp_endpoint(&["app"], pod, true)],
    )
    .replacen(
        "metadata: {name: badprov,",
        "metadata: {annotations: {portico.dev/provider: \"ha proxy\"}, name: badprov,",
        1,
    );
    m.write("svc.yaml", &svc);
    let p = start(Provider::L4, &m, "127.0.64.0/24").await;
    let field = "metadata.annotations[portico.dev/provider]";
    wait_diagnostic(&p, &["badprov", field, "is not a provider of Services"]).await;
    let mut c = wait_connect(SocketAddr::new(
        vip_by(&p, "badprov", Provider::L4).await,
        port,
    ))
    .await;
    assert_eq!(c.pod, "b0");
    c.echo("served by l4").await.unwrap();
}

/// Through the Kubernetes API, a Service Portico serves gets its VIP in
/// `status.loadBalancer.ingress` (and the admin API lists it); a Service of another class is
/// left alone.
#[tokio::test]
async fn a_served_service_gets_its_vip_as_its_status_through_the_api() {
    let pod = tcp_pod("s0").await;
    let port = free_port();
    let ports = format!("  - {{name: tcp-a, port: {port}, protocol: TCP, targetPort: 9000}}\n");
    let ours = l4_service("status", "", &ports, &[tcp_endpoint(&["tcp-a"], pod, true)]);
    let theirs = l4_service("foreign", "", &ports, &[]).replace(
        "loadBalancerClass: portico.dev/l4",
        "loadBalancerClass: example.com/other",
    );
    let cluster = crate::kube_support::Cluster::new().await;
    cluster.apply(&ours);
    cluster.apply(&theirs);
    let p = Portico::start_kube(&cluster, &["--vip-pool=127.0.58.0/24"]).await;
    let vip = vip_of(&p, "status").await;
    let mut conn = wait_connect(SocketAddr::new(vip, port)).await;
    assert_eq!(conn.pod, "s0");
    conn.echo("hello").await.unwrap();
    let want = serde_json::json!([{ "ip": vip.to_string() }]);
    cluster
        .wait_object_status("v1", "Service", "apps", "status", want.clone())
        .await;
    let listed = p.admin_json("/api/v1/services").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["name"], "status");
    assert_eq!(listed[0]["status"]["loadBalancer"]["ingress"], want);
    let patched: Vec<String> = (cluster.api.status_patches().into_iter())
        .filter(|r| r.status < 300)
        .map(|r| r.path)
        .collect();
    assert!(
        !patched.iter().any(|p| p.contains("/services/foreign")),
        "another class's Service was written: {patched:?}"
    );
}
