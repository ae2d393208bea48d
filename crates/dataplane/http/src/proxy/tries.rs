//! A pool's settings as the forwarding of one request applies them: timeouts, body size,
//! allowed sources, and which failed tries may go to another member.

use crate::route::PoolState;
use crate::upstream::UpstreamError;
use portico_model::{Limits, PoolSettings};
use std::net::IpAddr;
use std::time::Duration;

/// Connecting to a member: the pool's `proxy-connect-timeout`, else 5 s.
pub(super) fn connect_timeout(pool: &PoolState) -> Duration {
    let own = pool.settings().connect_timeout();
    own.unwrap_or(PoolSettings::DEFAULT_CONNECT_TIMEOUT)
}

/// Waiting for the response head and between two reads of the response: the pool's
/// `proxy-read-timeout`, else `--upstream-timeout`.
pub(super) fn read_timeout(pool: &PoolState, limits: &Limits) -> Duration {
    pool.settings()
        .read_timeout()
        .unwrap_or(limits.upstream_timeout)
}

/// Between two writes of the request to the member: the pool's `proxy-send-timeout`, else
/// none (`Duration::ZERO`; the client's pace is bounded by `--client-body-timeout`).
pub(super) fn send_timeout(pool: &PoolState) -> Duration {
    pool.settings().send_timeout().unwrap_or(Duration::ZERO)
}

/// The largest request body: the pool's `proxy-body-size`, else `--max-body-bytes`; 0: none.
pub(super) fn max_body(pool: &PoolState, limits: &Limits) -> u64 {
    pool.settings()
        .max_body_bytes
        .unwrap_or(limits.max_body_bytes)
}

/// Whether the pool admits a client at `ip`: not in `denylist-source-range`, and in
/// `allowlist-source-range` when that is set (a client in both is refused, as nginx's `deny`
/// lines come before its `allow` lines).
pub(super) fn source_allowed(pool: &PoolState, ip: IpAddr) -> bool {
    let settings = pool.settings();
    let (allow, deny) = (&settings.allow_sources, &settings.deny_sources);
    !deny.iter().any(|range| range.contains(ip))
        && (allow.is_empty() || allow.iter().any(|range| range.contains(ip)))
}

/// Methods that are safe to send twice (RFC 9110 section 9.2.2), CONNECT and PATCH aside.
pub(super) fn is_idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

/// Whether a failed try may be made again on another member. Nothing of the request reached
/// the member (a refused or timed-out connect, a pooled connection found closed): always.
/// Else only a request that is safe to repeat and that can be sent again as it was (an
/// idempotent request without a body: bodies are streamed, not buffered), after a reset or
/// a close before any response byte.
pub(super) fn may_retry(unsent: bool, replayable: bool, error: &UpstreamError) -> bool {
    unsent || (replayable && error.before_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_methods_are_idempotent() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(m), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT"] {
            assert!(!is_idempotent(m), "{m}");
        }
    }

    #[test]
    fn a_request_nothing_of_which_was_sent_is_always_retried() {
        let refused = UpstreamError::Connect(std::io::ErrorKind::ConnectionRefused.into());
        assert!(may_retry(true, false, &refused));
        let timed_out = UpstreamError::ConnectTimeout(Duration::from_secs(1));
        assert!(may_retry(true, false, &timed_out));
        assert!(!may_retry(false, false, &refused));
        assert!(may_retry(false, true, &refused));
    }
}
