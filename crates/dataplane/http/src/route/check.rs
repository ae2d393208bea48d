//! Active HTTP health checks: one task per pool whose settings ask for them, sending
//! `GET path` with the Service's cluster name as `Host` to every member each interval, over a
//! new HTTP/1.1 connection (`Connection: close`). A status from 200 to 399 within the timeout
//! passes. Members whose checks fail `unhealthy` times in a row leave the rotation until
//! `healthy` checks in a row pass.
//!
//! The task holds only a weak reference to the pool's [`Balance`]: it ends when no
//! configuration serves the pool any more, and a configuration that keeps the pool keeps the
//! task and its members' state.

use super::balance::Balance;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// Starts the check task of `balance` if its settings ask for checks and none runs; needs a
/// Tokio runtime (without one, nothing is started).
pub(crate) fn ensure_checks(balance: &Arc<Balance>) {
    let Some(active) = balance.settings.active.clone() else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if balance.checking.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(balance);
    runtime.spawn(run(weak, active));
}

async fn run(balance: Weak<Balance>, active: portico_model::ActiveHealth) {
    let mut ticks = tokio::time::interval(active.interval().max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(b) = balance.upgrade() else { return };
        let members = b.member_states();
        let host = b.check_host.clone();
        drop(b);
        let mut checks = JoinSet::new();
        for (i, m) in members.iter().enumerate() {
            let (addr, host, path) = (m.endpoint.addr(), host.clone(), active.path.clone());
            let timeout = active.timeout();
            checks.spawn(async move {
                let passed = tokio::time::timeout(timeout, check(addr, &host, &path)).await;
                (i, matches!(passed, Ok(Ok(true))))
            });
        }
        let mut outcomes = Vec::with_capacity(members.len());
        while let Some(done) = checks.join_next().await {
            if let Ok(outcome) = done {
                outcomes.push(outcome);
            }
        }
        let Some(b) = balance.upgrade() else { return };
        let now = b.now();
        for (i, passed) in outcomes {
            let m = &members[i];
            let mut state = m.active.lock().unwrap_or_else(PoisonError::into_inner);
            if state.record(passed, active.healthy, active.unhealthy) {
                let healthy = state.is_healthy();
                drop(state);
                let upstream = m.endpoint.addr();
                if healthy {
                    tracing::info!(%upstream, "member passes its health checks again");
                } else {
                    tracing::warn!(%upstream, path = %active.path, "member fails its health checks");
                }
                m.refresh_gauge(now);
            }
        }
    }
}

/// One check: whether `GET path` answers 200-399.
async fn check(addr: SocketAddr, host: &str, path: &str) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: portico-health-check\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 64];
    while !head.contains(&b'\n') && head.len() < 1024 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(passes(&head))
}

/// Whether a response's status line has a status from 200 to 399.
fn passes(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().unwrap_or_default();
    version.starts_with(b"HTTP/1.")
        && status.len() == 3
        && matches!(status.first(), Some(b'2' | b'3'))
        && status.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::passes;

    #[test]
    fn status_lines() {
        assert!(passes(b"HTTP/1.1 200 OK\r\n"));
        assert!(passes(b"HTTP/1.0 302 Found\r\n"));
        assert!(!passes(b"HTTP/1.1 404 Not Found\r\n"));
        assert!(!passes(b"HTTP/1.1 500 Oops\r\n"));
        assert!(!passes(b""));
        assert!(!passes(b"garbage 200"));
    }
}
