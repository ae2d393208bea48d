//! The haproxy provider through the real binary: `portico render`, the files under the state
//! directory, a killed haproxy started again, and clean-up at exit.

use crate::backends;
use crate::support::*;
use crate::tls_support::issued_secret;
use portico_tls::generate::Authority;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

fn web_ingress() -> String {
    ingress(
        "hx",
        "web",
        "2026-01-01T00:00:00Z",
        &[("web.test", "/", "Prefix", "web", "80")],
    )
}

#[test]
fn render_prints_the_config_of_each_haproxy_load_balancer_and_says_when_there_is_none() {
    let m = Manifests::new();
    // With TLS, so that the configuration names certificate files.
    let authority = portico_tls::generate::Authority::new("render test").unwrap();
    let issued = authority.issue(&["web.test"]).unwrap();
    let tls = "  tls:\n  - hosts: [web.test]\n    secretName: web-tls\n";
    let ingress = web_ingress().replace("spec:\n", &format!("spec:\n{tls}"));
    let secret = crate::tls_support::issued_secret("hx", "web-tls", &issued);
    m.write("ing.yaml", &format!("{ingress}\n---\n{secret}"));
    let state = tempfile::tempdir().unwrap();
    let run = |provider: &str| {
        let out = std::process::Command::new(BIN)
            .args(["render", "-f"])
            .arg(m.path())
            .args(["--provider", provider, "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run("haproxy");
    assert!(text.contains("/loadbalancer/haproxy/"), "{text}");
    // Routing is by maps written beside the configuration, not by ACLs.
    assert!(
        !text.contains("acl ") && text.contains(",map_beg(routes-"),
        "{text}"
    );
    let maps: String = walk(state.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "map"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(maps.contains("web.test/ "), "{maps}");
    assert!(text.contains("bind 127.0.0.1:8080"), "{text}");
    assert!(text.contains("crt-list"), "{text}");
    // What render prints passes `haproxy -c` as printed: the files it names exist.
    let printed = state.path().join("printed.cfg");
    std::fs::write(&printed, &text).unwrap();
    let check = std::process::Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(&printed)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "haproxy -c on the printed configuration: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(run("proxy").contains("no load balancer has provider haproxy"));
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

async fn wait_for<F: Fn() -> bool>(what: &str, f: F) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn state_dir_files_a_killed_haproxy_and_clean_up_at_exit() {
    let m = crate::backends("hx", &[("web", 1)]).await;
    let ca = Authority::new("hx").unwrap();
    let cert = ca.issue(&["web.test"]).unwrap();
    m.write("secret.json", &issued_secret("hx", "web-tls", &cert));
    let y = web_ingress().replace(
        "spec:\n",
        "spec:\n  tls:\n  - hosts: [web.test]\n    secretName: web-tls\n",
    );
    m.write("ing.yaml", &y);
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("web.test", "/", 308, "").await;
    let dir = p.haproxy_dir();
    for name in [
        "haproxy.conf",
        "crt-list.txt",
        "default.pem",
        "haproxy.sock",
        "haproxy.pid",
    ] {
        assert!(
            dir.join(name).exists(),
            "{name} missing in {}",
            dir.display()
        );
    }
    let pems: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pem"))
        .collect();
    assert_eq!(
        pems.len(),
        2,
        "the Secret's certificate and the default one"
    );
    for pem in &pems {
        let mode = std::fs::metadata(pem).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", pem.display());
    }

    // A killed haproxy is started again and serves.
    let pid_file = dir.join("haproxy.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let new_pid = || std::fs::read_to_string(&pid_file).is_ok_and(|p| p != pid);
    wait_for("a new haproxy", new_pid).await;
    p.wait_route("web.test", "/", 308, "").await;

    // SIGTERM: Portico stops haproxy and removes the directory.
    let term = std::process::Command::new("kill")
        .arg(p.pid().unwrap().to_string())
        .status()
        .unwrap();
    assert!(term.success());
    wait_for("the directory to go", || !dir.exists()).await;
}

/// `validate` plans the haproxy load balancers as `run` would, and reports what stops one from
/// being served: here, a class of provider haproxy with no address to listen on.
#[tokio::test]
async fn validate_reports_haproxy_plan_errors() {
    let m = backends("edge", &[("web", 1)]).await;
    let class = ingress_class("edge", "portico.dev/ingress-controller", false).replace(
        "  annotations:\n",
        "  annotations:\n    portico.dev/provider: haproxy\n",
    );
    let y = ingress(
        "edge",
        "site",
        "2026-01-01T00:00:00Z",
        &[("edge.test", "/", "Prefix", "web", "80")],
    )
    .replace("ingressClassName: portico", "ingressClassName: edge");
    m.write("edge.yaml", &format!("{class}{y}"));
    let validate = |extra: &[&str]| {
        std::process::Command::new(BIN)
            .args(["validate", "-f"])
            .arg(m.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = validate(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("IngressClass edge: metadata.annotations[portico.dev/vip]")
            && text.contains("has no address to listen on"),
        "{text}"
    );
    // With --provider haproxy, the first such load balancer takes the run's listeners.
    let out = validate(&["--provider", "haproxy"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
}

/// A state directory longer than a unix socket's path allows: haproxy's stats and master
/// sockets and the access log's socket are reached through short aliases; haproxy serves, its
/// access log lines arrive, and the sockets themselves are in the state directory.
#[tokio::test]
async fn a_state_directory_too_long_for_unix_sockets_serves() {
    let m = backends("hx", &[("web", 1)]).await;
    m.write("ing.yaml", &web_ingress());
    let below = format!("{}/state", "long-state-directory-".repeat(5));
    let p = Portico::start_haproxy_below(m.path(), &below, &[]).await;
    assert!(p.state_dir().as_os_str().len() > 100);
    p.wait_route("web.test", "/", 200, "web").await;
    let dir = p.haproxy_dir();
    for name in ["haproxy.sock", "master.sock"] {
        assert!(dir.join(name).exists(), "{name} in {}", dir.display());
    }
    let logged = || {
        let lines = p.stdout.lock().unwrap();
        lines.iter().any(|l| l.contains("\"host\":\"web.test\""))
    };
    wait_for("haproxy's access log line", logged).await;
}

/// `portico_haproxy_reloads_total` and `portico_haproxy_runtime_updates_total` through the
/// real binary: an endpoint replaced by a new one and a path added to the Ingress are served
/// by the running haproxy through its runtime API, and no reload is counted.
#[tokio::test]
async fn endpoint_and_route_changes_are_served_without_a_reload() {
    let m = Manifests::new();
    let pods = echo_pods("web", 3).await;
    m.write("backends.yaml", &service("hx", "web", &ready(&pods)));
    m.write("ing.yaml", &web_ingress());
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("web.test", "/", 200, "web").await;
    let counter = |text: &str, name: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in:\n{text}"))
    };
    let before = p.metrics().await;
    assert_eq!(counter(&before, "portico_haproxy_reloads_total"), 0);

    // One endpoint replaced by a new pod.
    let new = portico_echo::spawn(([127, 0, 0, 1], 0).into(), "web", "web-new")
        .await
        .unwrap();
    let moved = [pods[0], pods[1], new];
    m.write("backends.yaml", &service("hx", "web", &ready(&moved)));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = p.get("web.test", "/").await;
        if r.json()["pod"] == "web-new" {
            break;
        }
        assert!(Instant::now() < deadline, "the new endpoint never answered");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // A path added to the Ingress.
    let y = ingress(
        "hx",
        "web",
        "2026-01-01T00:00:00Z",
        &[
            ("web.test", "/", "Prefix", "web", "80"),
            ("other.test", "/only", "Exact", "web", "80"),
        ],
    );
    m.write("ing.yaml", &y);
    p.wait_route("other.test", "/only", 200, "web").await;

    let after = p.metrics().await;
    assert_eq!(
        counter(&after, "portico_haproxy_reloads_total"),
        0,
        "no reload"
    );
    assert!(counter(&after, "portico_haproxy_runtime_updates_total") >= 2);
}

/// An endpoint-only change (one pod replaced) on the real haproxy: served through the runtime
/// API without a reload, haproxy.conf follows a little later (off the hot path), and a later
/// reload (a new Service and path: a new backend) serves the same members, the replaced pod
/// never again.
#[tokio::test]
async fn an_endpoint_only_change_is_served_without_a_reload_and_the_files_follow() {
    let m = Manifests::new();
    let pods = echo_pods("web", 2).await;
    m.write("backends.yaml", &service("hx", "web", &ready(&pods)));
    m.write("ing.yaml", &web_ingress());
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("web.test", "/", 200, "web").await;
    let reloads = async || {
        let text = p.metrics().await;
        let line = text
            .lines()
            .find(|l| l.starts_with("portico_haproxy_reloads_total"));
        let value = line.and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
        value.unwrap_or_else(|| panic!("no reload counter in:\n{text}"))
    };
    assert_eq!(reloads().await, 0);
    let dir = p.haproxy_dir();
    let config = || std::fs::read_to_string(dir.join("haproxy.conf")).unwrap();
    assert!(config().contains(&pods[1].to_string()));

    // web-1 is replaced by web-new.
    let new = portico_echo::spawn(([127, 0, 0, 1], 0).into(), "web", "web-new")
        .await
        .unwrap();
    m.write(
        "backends.yaml",
        &service("hx", "web", &ready(&[pods[0], new])),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while p.get("web.test", "/").await.json()["pod"] != "web-new" {
        assert!(Instant::now() < deadline, "the new endpoint never answered");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(reloads().await, 0, "an endpoint-only change reloaded");
    wait_for("haproxy.conf with the new endpoint", || {
        let text = config();
        text.contains(&new.to_string()) && !text.contains(&pods[1].to_string())
    })
    .await;
    assert_eq!(reloads().await, 0, "rewriting the files reloaded");

    // A new backend: a reload, from the files.
    let api = echo_pods("api", 1).await;
    m.write("api.yaml", &service("hx", "api", &ready(&api)));
    let y = ingress(
        "hx",
        "web",
        "2026-01-01T00:00:00Z",
        &[
            ("web.test", "/", "Prefix", "web", "80"),
            ("web.test", "/api", "Prefix", "api", "80"),
        ],
    );
    m.write("ing.yaml", &y);
    p.wait_route("web.test", "/api", 200, "api").await;
    assert_eq!(reloads().await, 1);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let r = p.get("web.test", "/").await;
        assert_eq!(r.status, 200);
        seen.insert(r.json()["pod"].as_str().unwrap_or_default().to_owned());
    }
    let expected = ["web-0", "web-new"].map(String::from);
    assert_eq!(seen, expected.into(), "after the reload");
}

/// Runs `command` for 10 s at most: its output once it exited; killed (and the test failed)
/// when it still runs.
/// Runs `command` to its end (at most 60 s: a second Portico that does not refuse to start
/// would run on), without blocking the test's runtime while it runs.
async fn exited(mut command: tokio::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let child = (command.stdout(Stdio::piped()).stderr(Stdio::piped()))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the second Portico exited")
        .unwrap()
}

/// A second `portico run` given the state directory of a running one refuses to start, names
/// the first's PID, and leaves its haproxy directory alone (it would have removed it as stale
/// while that haproxy was still starting); the default state directory is locked the same way.
#[tokio::test]
async fn a_second_portico_on_the_same_state_directory_refuses_to_start_and_names_the_first() {
    let m = crate::backends("hx", &[("web", 1)]).await;
    m.write("ing.yaml", &web_ingress());
    let first = Portico::start_haproxy(m.path(), &[]).await;
    first.wait_route("web.test", "/", 200, "web").await;
    let state = first.state_dir();
    let root = state.join("loadbalancer/haproxy");
    let before = walk(&root);
    assert!(
        before.iter().any(|f| f.ends_with("haproxy.conf")),
        "{before:?}"
    );
    let pid = first.pid().unwrap();
    let second = |extra: &[String], env: Option<&std::path::Path>| {
        let mut command = tokio::process::Command::new(BIN);
        command
            .args(["run", "-f"])
            .arg(m.path())
            .args(EPHEMERAL_LISTENERS)
            .args(extra);
        if let Some(runtime) = env {
            command.env("XDG_RUNTIME_DIR", runtime);
        }
        exited(command)
    };
    let out = second(&[format!("--state-dir={}", state.display())], None).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the state directory {} is in use by another Portico (PID {pid})",
            state.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        walk(&root),
        before,
        "the first's haproxy directory is intact"
    );
    first.wait_route("web.test", "/", 200, "web").await;

    // Two runs with the default state directory ($XDG_RUNTIME_DIR/portico here).
    let runtime = tempfile::tempdir().unwrap();
    let env = [("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())];
    let default = Portico::spawn_with_env(&Portico::run_args(m.path(), &[]), &env).await;
    let out = second(&[], Some(runtime.path())).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let pid = default.pid().unwrap();
    assert!(
        stderr.contains(&format!("in use by another Portico (PID {pid})")),
        "{stderr}"
    );
}

/// Services of one live pod and nine more on distinct loopback addresses nobody listens on
/// (not ready: starting pods), `services` of them, each behind one path of one Ingress.
pub async fn distinct_pods(m: &Manifests, services: usize) -> Vec<(String, String)> {
    let mut y = String::new();
    let mut routes = Vec::new();
    for s in 0..services {
        let name = format!("svc-{s}");
        let live = echo_pods(&name, 1).await;
        let mut eps = ready(&live);
        eps.extend((1..10u32).map(|n| {
            let ip = std::net::Ipv4Addr::from(0x7f01_0000 + u32::try_from(s).unwrap() * 16 + n);
            let addr = std::net::SocketAddr::new(ip.into(), 8080);
            Ep { addr, ready: false }
        }));
        y.push_str(&service("hx", &name, &eps));
        routes.push((format!("/{name}"), name));
    }
    m.write("backends.yaml", &y);
    let paths: Vec<(&str, &str, &str, &str, &str)> = (routes.iter())
        .map(|(path, name)| ("pods.test", path.as_str(), "Prefix", name.as_str(), "80"))
        .collect();
    m.write(
        "ing.yaml",
        &ingress("hx", "pods", "2026-01-01T00:00:00Z", &paths),
    );
    routes
}

/// Issue 35: with more checked servers than a descriptor limit allows, haproxy still starts
/// and serves under that limit: passive checks are left out and maxconn lowered, and a warning
/// on the IngressClass says so, in the admin API and in `portico validate` alike.
#[tokio::test]
async fn haproxy_starts_and_serves_within_a_short_descriptor_limit_and_says_what_it_reduced() {
    const LIMIT: u64 = 1024;
    let m = Manifests::new();
    let routes = distinct_pods(&m, 30).await;
    let started = Instant::now();
    let p = Portico::start_haproxy_limited(m.path(), LIMIT, &[]).await;
    for (path, name) in [&routes[0], &routes[29]] {
        p.wait_route("pods.test", path, 200, name).await;
    }
    let took = started.elapsed();
    // 300 members and a spare slot per pool, checked for passive ejection alone; two binds.
    let maxconn = portico_provider_haproxy::fit(
        Some(LIMIT),
        &portico_provider_haproxy::Needs {
            listeners: 2,
            active_checks: 0,
            passive_checks: 330,
            max_connections: 4096,
        },
    )
    .maxconn;
    assert!(maxconn < 4096);
    let wanted = [
        "passive health checks left out on 330 servers".to_owned(),
        format!("haproxy's maxconn reduced from 4096 to {maxconn}"),
        format!("descriptor limit {LIMIT}"),
    ];
    let diagnostics = p.admin_json("/api/v1/diagnostics").await.to_string();
    for part in &wanted {
        assert!(diagnostics.contains(part), "{part} in {diagnostics}");
    }
    let dir = p.haproxy_dir();
    let conf = std::fs::read_to_string(dir.join("haproxy.conf")).unwrap();
    assert!(conf.contains(&format!("    maxconn {maxconn}\n")), "{conf}");
    assert!(!conf.contains(" check "), "no server is checked");
    eprintln!("served under a hard limit of {LIMIT} descriptors after {took:?}");

    let validate = std::process::Command::new("prlimit")
        .arg(format!("--nofile={LIMIT}:{LIMIT}"))
        .args([BIN, "validate", "--provider", "haproxy", "-f"])
        .arg(m.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&validate.stdout);
    assert!(validate.status.success(), "{text}");
    for part in &wanted {
        assert!(text.contains(part.as_str()), "{part} in {text}");
    }
}
