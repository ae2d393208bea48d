//! The check before every apply, with real haproxy: a rejected configuration is not applied,
//! the last good one keeps serving and the problem is reported until a good one comes.

use super::*;
use crate::status::Statuses;
use portico_model::{LoadBalancerId, ObjectRef};
use tokio::io::AsyncWriteExt;

fn config(dir: &Path, port: u16, body: &str, extra: &str) -> Desired {
    let socket = crate::quote::path(&files::socket(dir, STATS_SOCKET)).unwrap();
    let text = format!(
        "global\n    stats socket {socket} mode 600 level admin expose-fd listeners\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend f\n    bind 127.0.0.1:{port}\n{extra}    http-request return status 200 content-type text/plain string \"{body}\"\n"
    );
    Desired {
        rendered: Rendered {
            config: text,
            ..Rendered::default()
        },
        certificates: BTreeMap::new(),
    }
}

async fn body(port: u16) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut raw = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut raw)
        .await
        .ok()?;
    raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_that_fails_the_check_leaves_the_last_good_one_serving() {
    let state = tempfile::tempdir().unwrap();
    // Longer than a unix socket's path allows: the sockets are reached through an alias.
    let dir = state.path().join("l".repeat(100)).join("lb");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let statuses = Statuses::new();
    let reporter = statuses.reporter(
        LoadBalancerId::derive("lb"),
        ObjectRef::new("IngressClass", "", "c"),
    );
    let binary = Arc::new(Binary {
        haproxy: "haproxy".into(),
    });
    let instance = Instance::start(
        dir.clone(),
        binary,
        reporter,
        Duration::from_secs(3),
        Arc::default(),
        Arc::default(),
        Arc::default(),
    );

    instance.set(Arc::new(config(&dir, port, "one", "")));
    until("the first configuration", async || {
        body(port).await.as_deref() == Some("one")
    })
    .await;
    until("ready", async || statuses.status().ready).await;

    instance.set(Arc::new(config(
        &dir,
        port,
        "two",
        "    no-such-directive here\n",
    )));
    until("the rejection", async || {
        !statuses.status().diagnostics.is_empty()
    })
    .await;
    let d = &statuses.status().diagnostics[0];
    assert!(d.message.contains("haproxy -c rejected"), "{d}");
    // haproxy's own reason, with the line it names.
    assert!(
        d.message.contains("unknown keyword 'no-such-directive'") && d.message.contains(":10]"),
        "{d}"
    );
    assert_eq!(d.object, ObjectRef::new("IngressClass", "", "c"));
    assert_eq!(
        body(port).await.as_deref(),
        Some("one"),
        "the last good configuration serves"
    );
    let on_disk = std::fs::read_to_string(dir.join(CONFIG_FILE)).unwrap();
    assert!(on_disk.contains("\"one\"") && !dir.join(CANDIDATE).exists());

    instance.set(Arc::new(config(&dir, port, "three", "")));
    until("the next good configuration", async || {
        body(port).await.as_deref() == Some("three")
    })
    .await;
    until("the problem to clear", async || {
        statuses.status().diagnostics.is_empty()
    })
    .await;

    instance.stop().await;
    assert!(!dir.exists(), "the directory is removed");
    assert!(body(port).await.is_none(), "haproxy is stopped");
}

fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn reporter(statuses: &Arc<Statuses>) -> Reporter {
    statuses.reporter(
        LoadBalancerId::derive("lb"),
        ObjectRef::new("IngressClass", "", "c"),
    )
}

/// A configuration that passes the check but cannot start (its port is taken): not ready, a
/// diagnostic with haproxy's reason and the retry, tried again with back-off until it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_is_reported_and_retried_until_it_serves() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("lb");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let statuses = Statuses::new();
    let binary = Arc::new(Binary {
        haproxy: "haproxy".into(),
    });
    let instance = Instance::start(
        dir.clone(),
        binary,
        reporter(&statuses),
        Duration::from_secs(3),
        Arc::default(),
        Arc::default(),
        Arc::default(),
    );
    instance.set(Arc::new(config(&dir, port, "one", "")));
    until("the failed start's diagnostic", async || {
        !statuses.status().diagnostics.is_empty()
    })
    .await;
    let status = statuses.status();
    assert!(!status.ready);
    let message = &status.diagnostics[0].message;
    assert!(
        message.contains("haproxy exited at start")
            && message.contains("cannot bind socket")
            && message.contains(&format!("127.0.0.1:{port}"))
            && message.contains("another process listens on that address and port")
            && message.contains("starting it again in"),
        "{message}"
    );
    // Tried again with a growing back-off.
    until("a later retry", async || {
        let s = statuses.status();
        s.diagnostics
            .first()
            .is_some_and(|d| d.message.contains("starting it again in 400ms"))
    })
    .await;
    drop(taken);
    until("serving once the port is free", async || {
        body(port).await.as_deref() == Some("one")
    })
    .await;
    until("ready without a problem", async || {
        let s = statuses.status();
        s.ready && s.diagnostics.is_empty()
    })
    .await;
    instance.stop().await;
}

/// A haproxy that takes longer than the old fixed 10 s to answer (here a wrapper that waits
/// 12 s before it starts haproxy, as a large configuration's parse does) is waited for while
/// it lives, and then serves: no give-up, no retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_start_is_waited_for_while_haproxy_lives() {
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("lb");
    let wrapper = state.path().join("slow-haproxy");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\ncase \" $* \" in *\" -W \"*) sleep 12;; esac\nexec haproxy \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o700)).unwrap();
    let port = port();
    let statuses = Statuses::new();
    let binary = Arc::new(Binary { haproxy: wrapper });
    let instance = Instance::start(
        dir.clone(),
        binary,
        reporter(&statuses),
        Duration::from_secs(3),
        Arc::default(),
        Arc::default(),
        Arc::default(),
    );
    let started = Instant::now();
    instance.set(Arc::new(config(&dir, port, "slow", "")));
    let deadline = Instant::now() + Duration::from_secs(30);
    while body(port).await.as_deref() != Some("slow") {
        assert!(
            statuses.status().diagnostics.is_empty(),
            "{:?}",
            statuses.status()
        );
        assert!(Instant::now() < deadline, "haproxy never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(started.elapsed() > Duration::from_secs(12));
    until("ready", async || statuses.status().ready).await;
    assert!(statuses.status().diagnostics.is_empty());
    instance.stop().await;
}

/// A broken first configuration (no last good one to keep) is not checked apart: the start
/// fails with haproxy's own reason, reported and retried, until a good one comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_first_configuration_fails_its_start_with_haproxys_reason() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("lb");
    let port = port();
    let statuses = Statuses::new();
    let binary = Arc::new(Binary {
        haproxy: "haproxy".into(),
    });
    let instance = Instance::start(
        dir.clone(),
        binary,
        reporter(&statuses),
        Duration::from_secs(3),
        Arc::default(),
        Arc::default(),
        Arc::default(),
    );
    instance.set(Arc::new(config(
        &dir,
        port,
        "one",
        "    no-such-directive here\n",
    )));
    until("the failed start's diagnostic", async || {
        !statuses.status().diagnostics.is_empty()
    })
    .await;
    let status = statuses.status();
    assert!(!status.ready);
    let message = &status.diagnostics[0].message;
    assert!(
        message.contains("unknown keyword 'no-such-directive'")
            && message.contains("starting it again in"),
        "{message}"
    );
    instance.set(Arc::new(config(&dir, port, "two", "")));
    until("serving the good one", async || {
        body(port).await.as_deref() == Some("two")
    })
    .await;
    until("ready", async || statuses.status().ready).await;
    instance.stop().await;
}

/// The master PID of the haproxy in `dir` (its PID file).
fn master_pid(dir: &Path) -> Option<i32> {
    let pid = std::fs::read_to_string(dir.join(PID_FILE)).ok()?;
    pid.trim().parse().ok()
}

/// A released instance leaves haproxy running; a new instance on the same directory adopts its
/// master (no start, no reload while the files stay the same), reloads it when they change (the
/// master stays), notices its exit (it is not this process's child when adopted by another
/// process; here a pidfd watches it all the same) and stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_haproxy_is_adopted_reloaded_only_on_a_change_and_stopped() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("lb");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let statuses = Statuses::new();
    let binary = Arc::new(Binary {
        haproxy: "haproxy".into(),
    });
    let start = |counters: Arc<crate::Counters>| {
        Instance::start(
            dir.clone(),
            binary.clone(),
            reporter(&statuses),
            Duration::from_secs(3),
            counters,
            Arc::default(),
            Arc::default(),
        )
    };
    let first = start(Arc::default());
    first.set(Arc::new(config(&dir, port, "one", "")));
    until("the first haproxy", async || {
        body(port).await.as_deref() == Some("one")
    })
    .await;
    let master = master_pid(&dir).unwrap();
    first.release().await;
    assert_eq!(body(port).await.as_deref(), Some("one"), "still serving");

    let counters = Arc::new(crate::Counters::default());
    let second = start(counters.clone());
    second.set(Arc::new(config(&dir, port, "one", "")));
    until("ready", async || statuses.status().ready).await;
    assert_eq!(master_pid(&dir), Some(master), "adopted, not started");
    assert_eq!(counters.reloads.load(Ordering::Relaxed), 0, "not reloaded");
    second.set(Arc::new(config(&dir, port, "two", "")));
    until("the change", async || {
        body(port).await.as_deref() == Some("two")
    })
    .await;
    assert_eq!(master_pid(&dir), Some(master), "reloaded, same master");
    assert_eq!(counters.reloads.load(Ordering::Relaxed), 1);
    second.stop().await;
    // Stopped: gone, or a zombie (this test process started it, and forgot it on release).
    let stat = std::fs::read_to_string(format!("/proc/{master}/stat")).unwrap_or_default();
    let running = stat
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'));
    assert!(!running, "the adopted master is stopped: {stat}");
}
