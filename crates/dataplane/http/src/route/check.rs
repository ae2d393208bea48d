//! Active HTTP health checks: one task per pool whose settings ask for them, sending
//! `GET path` with the Service's cluster name as `Host` to every member each interval, over a
//! new connection that speaks what the pool's traffic speaks (HTTP/1.1 with `Connection:
//! close`, or HTTP/2 for HTTP/2 pools; over TLS with the pool's verification for TLS pools:
//! `Endpoint::probe`). A status from 200 to 399 within the timeout passes. Members whose checks fail `unhealthy` times in a row leave the rotation until
//! `healthy` checks in a row pass.
//!
//! The task holds only a weak reference to the pool's [`Balance`]: it ends when no
//! configuration serves the pool any more, and a configuration that keeps the pool keeps the
//! task and its members' state.

use super::balance::Balance;
use http::StatusCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;
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
            let (endpoint, host, path) = (m.endpoint.clone(), host.clone(), active.path.clone());
            let timeout = active.timeout();
            checks.spawn(async move {
                let probe = endpoint.probe(&host, &path, timeout);
                let status = tokio::time::timeout(timeout, probe).await;
                (i, matches!(status, Ok(Ok(s)) if passes(s)))
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

/// Whether a check's answer passes: a status from 200 to 399.
fn passes(status: StatusCode) -> bool {
    (200..400).contains(&status.as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_from_200_to_399_pass() {
        for (status, pass) in [
            (200, true),
            (302, true),
            (399, true),
            (404, false),
            (503, false),
            (101, false),
        ] {
            assert_eq!(
                passes(StatusCode::from_u16(status).unwrap()),
                pass,
                "{status}"
            );
        }
    }
}
