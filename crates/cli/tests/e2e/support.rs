//! Test support: echo backends, manifest directories, and the real `portico` binary.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_portico");

/// Starts `pods` echo backends for `service`; returns their addresses (pod i is `<service>-<i>`).
pub async fn echo_pods(service: &str, pods: usize) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for i in 0..pods {
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        let addr = portico_echo::spawn(any, service, &format!("{service}-{i}"))
            .await
            .unwrap();
        out.push(addr);
    }
    out
}

/// One endpoint of a Service: address and readiness.
#[derive(Clone, Copy)]
pub struct Ep {
    pub addr: SocketAddr,
    pub ready: bool,
}

pub fn ready(addrs: &[SocketAddr]) -> Vec<Ep> {
    addrs.iter().map(|&addr| Ep { addr, ready: true }).collect()
}

/// A Service with port 80 named `http`, and one EndpointSlice per endpoint (each endpoint
/// listens on its own port), in namespace `ns`.
pub fn service(ns: &str, name: &str, eps: &[Ep]) -> String {
    service_on_port(ns, name, 80, eps)
}

/// Like [`service`] with another Service port number (the port is still named `http`).
pub fn service_on_port(ns: &str, name: &str, port: u16, eps: &[Ep]) -> String {
    let mut y = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector:\n    app: {name}\n  ports:\n  - name: http\n    port: {port}\n    targetPort: 8080\n"
    );
    for (i, ep) in eps.iter().enumerate() {
        let _ = write!(
            y,
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-{i}\n  namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {name}\naddressType: IPv4\nports:\n- name: http\n  port: {port}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions:\n    ready: {ready}\n",
            port = ep.addr.port(),
            ip = ep.addr.ip(),
            ready = ep.ready
        );
    }
    y
}

/// The IngressClass `portico` owned by this controller, marked default when `default` is true.
pub fn ingress_class(name: &str, controller: &str, default: bool) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {name}\n  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"{default}\"\nspec:\n  controller: {controller}\n"
    )
}

/// A directory of manifests that the test edits while Portico watches it.
pub struct Manifests {
    pub dir: tempfile::TempDir,
}

impl Manifests {
    pub fn new() -> Self {
        Manifests {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes atomically (temp file + rename), as editors and kubectl-style tools do.
    pub fn write(&self, name: &str, text: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.file(name)).unwrap();
    }

    pub fn remove(&self, name: &str) {
        std::fs::remove_file(self.file(name)).unwrap();
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A response as the tests look at it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The Service whose echo backend answered, or "" when no backend did.
    pub fn service(&self) -> String {
        self.json()["service"].as_str().unwrap_or("").to_owned()
    }
}

/// A running `portico run` process; killed when dropped.
pub struct Portico {
    child: Child,
    /// The process's TMPDIR, removed with the test (after the process is killed: `child`
    /// comes first).
    _tmp: tempfile::TempDir,
    /// The haproxy provider's state directory, when the test made one.
    _state: Option<tempfile::TempDir>,
    /// Where in `_state` the state directory is (`--state-dir`).
    state_below: Option<String>,
    /// The fake API server, when the objects come from it (`--kubernetes`).
    pub cluster: Option<crate::kube_support::Cluster>,
    /// In the distributed shape, the controller (whose admin API shows Ingress status), the
    /// other agent and etcd: this process is one agent.
    pub distributed: Option<Box<crate::distributed::Rest>>,
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub admin: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
    /// What the process printed on stdout after its banner (the access log by default).
    pub stdout: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Portico {
    pub async fn start(dir: &Path, extra: &[&str]) -> Self {
        Self::spawn(&Self::run_args(dir, extra)).await
    }

    /// Like [`Portico::start`], run by `prlimit` with a soft and a hard open-file limit.
    pub async fn start_limited(dir: &Path, soft: u64, hard: u64, extra: &[&str]) -> Self {
        let prlimit = ["prlimit".to_owned(), format!("--nofile={soft}:{hard}")];
        Self::spawn_with(
            &prlimit,
            &Self::run_args(dir, extra),
            "warn",
            Stdio::inherit(),
            &[],
        )
        .await
    }

    /// Like [`Portico::start`], logging at `level` into the file `log`.
    pub async fn start_logging(dir: &Path, level: &str, log: &Path) -> Self {
        let log = std::fs::File::create(log).unwrap();
        Self::spawn_with(&[], &Self::run_args(dir, &[]), level, Stdio::from(log), &[]).await
    }

    /// Like [`Portico::start`] with `--provider haproxy`: haproxy binds free loopback ports
    /// chosen now (it cannot be given port 0) and keeps its files in a new state directory.
    pub async fn start_haproxy(dir: &Path, extra: &[&str]) -> Self {
        Self::start_haproxy_below(dir, "", extra).await
    }

    /// Like [`Portico::start_haproxy`] with the state directory `below` inside the new one.
    pub async fn start_haproxy_below(dir: &Path, below: &str, extra: &[&str]) -> Self {
        Self::start_haproxy_under(&[], dir, below, extra).await
    }

    /// Like [`Portico::start_haproxy`], run by `prlimit` with a hard and soft open-file limit
    /// of `limit` (which haproxy inherits).
    pub async fn start_haproxy_limited(dir: &Path, limit: u64, extra: &[&str]) -> Self {
        let prlimit = ["prlimit".to_owned(), format!("--nofile={limit}:{limit}")];
        Self::start_haproxy_under(&prlimit, dir, "", extra).await
    }

    /// `portico run --provider haproxy`, run by the command `wrapper` (none when empty).
    async fn start_haproxy_under(
        wrapper: &[String],
        dir: &Path,
        below: &str,
        extra: &[&str],
    ) -> Self {
        let state = tempfile::tempdir().unwrap();
        let state_dir = state.path().join(below);
        let (http, https) = (free_port(), free_port());
        let mut args: Vec<String> = vec!["run".into(), "-f".into(), dir.display().to_string()];
        let listen = [
            format!("--http-listen=127.0.0.1:{http}"),
            format!("--https-listen=127.0.0.1:{https}"),
            "--admin-listen=127.0.0.1:0".to_owned(),
            "--provider=haproxy".to_owned(),
            format!("--state-dir={}", state_dir.display()),
        ];
        args.extend(listen);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut p = Self::spawn_with(wrapper, &args, "warn", Stdio::inherit(), &[]).await;
        p._state = Some(state);
        p.state_below = Some(below.to_owned());
        p
    }

    /// Like [`Portico::start`] with `--state-dir` a new directory: for load balancers a
    /// Service hands to provider haproxy while the default provider stays the built-in proxy.
    pub async fn start_with_state(dir: &Path, extra: &[&str]) -> Self {
        let state = tempfile::tempdir().unwrap();
        let mut args = Self::run_args(dir, extra);
        args.push(format!("--state-dir={}", state.path().display()));
        let mut p = Self::spawn(&args).await;
        p._state = Some(state);
        p.state_below = Some(String::new());
        p
    }

    /// The haproxy provider's state directory (only with [`Portico::start_haproxy`]).
    pub fn state_dir(&self) -> PathBuf {
        let state = self._state.as_ref().expect("started with haproxy").path();
        self.state_below
            .as_ref()
            .map_or_else(|| state.to_owned(), |b| state.join(b))
    }

    /// The directory of the first haproxy load balancer under the state directory (the one,
    /// in tests that serve one).
    pub fn haproxy_dir(&self) -> PathBuf {
        let root = self.state_dir().join("loadbalancer/haproxy");
        let first = std::fs::read_dir(&root).unwrap().next();
        first.unwrap().unwrap().path()
    }

    pub fn run_args(dir: &Path, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec!["run".into(), "-f".into(), dir.display().to_string()];
        args.extend(EPHEMERAL_LISTENERS.map(String::from));
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The binary with `args`, logging at `level` into the file `log`.
    pub async fn spawn_logging(args: &[String], level: &str, log: &Path) -> Self {
        let log = std::fs::File::create(log).unwrap();
        Self::spawn_with(&[], args, level, Stdio::from(log), &[]).await
    }

    pub async fn spawn(args: &[String]) -> Self {
        Self::spawn_with(&[], args, "warn", Stdio::inherit(), &[]).await
    }

    pub async fn spawn_with_env(args: &[String], env: &[(&str, &str)]) -> Self {
        Self::spawn_with(&[], args, "warn", Stdio::inherit(), env).await
    }

    /// The binary at `program` (a copy of the one under test) with `args`.
    pub async fn spawn_program(program: &Path, args: &[String]) -> Self {
        Self::spawn_from(program, &[], args, "warn", Stdio::inherit(), &[]).await
    }

    /// The binary with `args`, run by the command `wrapper` (none when empty).
    async fn spawn_with(
        wrapper: &[String],
        args: &[String],
        level: &str,
        stderr: Stdio,
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_from(Path::new(BIN), wrapper, args, level, stderr, env).await
    }

    async fn spawn_from(
        binary: &Path,
        wrapper: &[String],
        args: &[String],
        level: &str,
        stderr: Stdio,
        env: &[(&str, &str)],
    ) -> Self {
        // A temporary directory of the test's own (unless `env` names one): what the process
        // leaves there when it is killed (the demo's directory, socket aliases) goes with
        // the test. It holds the default state directory too, which a process locks: tests
        // running side by side must not share one.
        let tmp = tempfile::tempdir().unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(binary);
                c
            }
            None => Command::new(binary),
        };
        let mut child = command
            .args(args)
            .env("PORTICO_LOG", level)
            .env("TMPDIR", tmp.path())
            .env("XDG_RUNTIME_DIR", tmp.path())
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("portico printed its addresses in time")
            .unwrap()
            .expect("portico printed a line");
        let stdout = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let printed = stdout.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                printed.lock().unwrap().push(line);
            }
        });
        let (http, https, admin) = parse_banner(&first);
        let client = Client::builder(TokioExecutor::new()).build_http();
        let p = Portico {
            child,
            _tmp: tmp,
            _state: None,
            state_below: None,
            cluster: None,
            distributed: None,
            http,
            https,
            admin,
            client,
            stdout,
        };
        p.wait_ready().await;
        p
    }

    /// The environment of the running process, from /proc.
    pub fn environment(&self) -> Vec<String> {
        let pid = self.child.id().expect("portico is running");
        let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        raw.split(|b| *b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let reply = self
                .request(self.admin, "GET", "localhost", "/readyz", &[], "")
                .await;
            if reply.is_ok_and(|r| r.status == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("portico did not become ready");
    }

    pub async fn request(
        &self,
        to: SocketAddr,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<Reply, String> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("http://{to}{path}"))
            .header("host", host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_owned())))
            .map_err(|e| e.to_string())?;
        let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Reply {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    /// GET through the proxy with a Host header.
    pub async fn get(&self, host: &str, path: &str) -> Reply {
        self.request(self.http, "GET", host, path, &[], "")
            .await
            .unwrap()
    }

    pub async fn admin_json(&self, path: &str) -> Value {
        self.admin_json_at(self.admin, path).await
    }

    /// `GET path` on the admin API at `admin` (this process's, or another's), as JSON.
    pub async fn admin_json_at(&self, admin: SocketAddr, path: &str) -> Value {
        let r = self
            .request(admin, "GET", "localhost", path, &[], "")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "GET {path}");
        r.json()
    }

    /// The Prometheus text of the admin API at `admin` (this process's, or another's).
    pub async fn metrics_at(&self, admin: SocketAddr) -> String {
        let r = self
            .request(admin, "GET", "localhost", "/metrics", &[], "")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "GET /metrics");
        String::from_utf8_lossy(&r.body).into_owned()
    }

    /// The Prometheus text of this process's admin API.
    pub async fn metrics(&self) -> String {
        self.metrics_at(self.admin).await
    }

    /// The `/api/v1/ingresses` entry for `ns/name` (in the distributed shape, the controller's,
    /// once an agent's feedback gave it its status).
    pub async fn ingress(&self, ns: &str, name: &str) -> Value {
        if let Some(rest) = &self.distributed {
            return rest.ingress(self, ns, name).await;
        }
        let all = self.admin_json("/api/v1/ingresses").await;
        all.as_array()
            .and_then(|a| {
                a.iter()
                    .find(|i| i["namespace"] == ns && i["name"] == name)
                    .cloned()
            })
            .unwrap_or(Value::Null)
    }

    /// Polls until `(host, path)` is answered by `service` (or, for "", with `status`).
    pub async fn wait_route(&self, host: &str, path: &str, status: u16, service: &str) -> Duration {
        let start = Instant::now();
        loop {
            let r = self.get(host, path).await;
            if r.status == status && r.service() == service {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{host}{path}: wanted {status} from {service:?}, got {} from {:?}",
                r.status,
                r.service()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// A loopback port that is free now.
pub use portico_testkit::free_port;

fn parse_banner(line: &str) -> (SocketAddr, SocketAddr, SocketAddr) {
    // "portico: serving HTTP on A, HTTPS on B and the admin API on C"
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |name: &str| {
        let at = words.iter().position(|w| *w == name).expect(line);
        words[at + 2].trim_end_matches(',').parse().expect(line)
    };
    let admin = words.last().expect(line).parse().expect(line);
    (after("HTTP"), after("HTTPS"), admin)
}

/// An Ingress manifest from a compact list of rules: (host or "", path, pathType, service, port).
pub fn ingress(
    ns: &str,
    name: &str,
    created: &str,
    rules: &[(&str, &str, &str, &str, &str)],
) -> String {
    let mut y = format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {ns}\n  creationTimestamp: \"{created}\"\nspec:\n  ingressClassName: portico\n  rules:\n"
    );
    for (host, path, path_type, svc, port) in rules {
        if host.is_empty() {
            y.push_str("  - http:\n");
        } else {
            let _ = write!(y, "  - host: \"{host}\"\n    http:\n");
        }
        let port = match port.parse::<u16>() {
            Ok(n) => format!("number: {n}"),
            Err(_) => format!("name: {port}"),
        };
        let _ = write!(
            y,
            "      paths:\n      - path: \"{path}\"\n        pathType: {path_type}\n        backend:\n          service:\n            name: {svc}\n            port:\n              {port}\n"
        );
    }
    y
}

/// A backend that accepts connections and never answers (a thread holds them).
pub fn silent_backend() -> SocketAddr {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    addr
}

/// The three listeners of `run` and `demo` on ports the system picks.
pub const EPHEMERAL_LISTENERS: [&str; 6] = [
    "--http-listen",
    "127.0.0.1:0",
    "--https-listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
];

/// `portico demo` on ports the system picks.
pub fn demo_args() -> Vec<String> {
    std::iter::once("demo")
        .chain(EPHEMERAL_LISTENERS)
        .map(String::from)
        .collect()
}

/// [`annotated`] with ingress-nginx's annotations: each key is given without its
/// `nginx.ingress.kubernetes.io/` prefix.
pub fn nginx_annotated(manifest: &str, annotations: &[(&str, &str)]) -> String {
    let keys: Vec<(String, &str)> = (annotations.iter())
        .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), *v))
        .collect();
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    annotated(manifest, &keys)
}

/// `manifest` (one Ingress from [`ingress`]) with `annotations` added to its metadata.
pub fn annotated(manifest: &str, annotations: &[(&str, &str)]) -> String {
    let mut block = String::from("  annotations:\n");
    for (key, value) in annotations {
        // A JSON string is a valid YAML double-quoted scalar.
        let _ = writeln!(block, "    {key}: {}", serde_json::Value::from(*value));
    }
    let at = manifest
        .find("  namespace:")
        .expect("an Ingress from ingress()");
    let mut out = manifest.to_owned();
    out.insert_str(at, &block);
    out
}

/// One keep-alive HTTP/1.1 connection kept busy by a client that sends `GET /` for `host`,
/// request after request, until [`KeepAliveLoad::finish`]; it counts the answers, and stops
/// at the first that is not a whole 200.
pub struct KeepAliveLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    client: tokio::task::JoinHandle<(usize, usize)>,
}

impl KeepAliveLoad {
    pub async fn start(addr: SocketAddr, host: &str) -> KeepAliveLoad {
        use http_body_util::BodyExt as _;
        use std::sync::atomic::Ordering;
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, host) = (stop.clone(), host.to_owned());
        let client = tokio::spawn(async move {
            let (mut ok, mut failed) = (0, 0);
            while !flag.load(Ordering::Relaxed) {
                let req = http::Request::get("/")
                    .header("host", &host)
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                match sender.send_request(req).await {
                    Ok(resp) if resp.status() == 200 => match resp.into_body().collect().await {
                        Ok(_) => ok += 1,
                        Err(_) => failed += 1,
                    },
                    _ => return (ok, failed + 1),
                }
            }
            (ok, failed)
        });
        KeepAliveLoad { stop, client }
    }

    /// Stops the client: (whole 200 answers, failed requests).
    pub async fn finish(self) -> (usize, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.client.await.unwrap()
    }
}

/// Whether process `pid` has ended (gone, or a zombie its parent has not reaped yet).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => true,
    }
}
