//! Polling until something is observed, bounded in time.

use std::time::{Duration, Instant};

/// How often a change is looked for.
pub const POLL: Duration = Duration::from_millis(1);
/// How long a change may take before it counts as not served.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Checks every [`POLL`] until `check` is true; the time from `start`, or `None` after
/// [`CHANGE_TIMEOUT`].
pub async fn observed_after(
    start: Instant,
    mut check: impl AsyncFnMut() -> bool,
) -> Option<Duration> {
    while start.elapsed() < CHANGE_TIMEOUT {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
    None
}
