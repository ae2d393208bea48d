//! What a connection is doing, for its deadlines: a request in flight (its response body
//! included) has none here; an idle connection has the first-bytes, header or keep-alive
//! deadline.

use hyper::body::{Body, Frame, SizeHint};
use portico_model::Limits;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio::time::Instant;

/// One client connection's activity, shared by its I/O, its requests and its watchdog.
pub(crate) struct Activity {
    state: Mutex<State>,
}

struct State {
    accepted: Instant,
    in_flight: usize,
    served: bool,
    idle_since: Instant,
    /// The first byte read while no request was in flight: a request head has begun.
    first_byte: Option<Instant>,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        let now = Instant::now();
        Arc::new(Activity {
            state: Mutex::new(State {
                accepted: now,
                in_flight: 0,
                served: false,
                idle_since: now,
                first_byte: None,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes came from the client. No wake-up: the watchdog looks again within a header
    /// timeout of any moment (see [`Activity::expired`]), before a deadline this sets.
    pub(crate) fn read(&self) {
        let mut state = self.state();
        if state.in_flight == 0 && state.first_byte.is_none() {
            state.first_byte = Some(Instant::now());
        }
    }

    /// A request head arrived; the connection has no deadline here until the returned guard
    /// (held by the response body) is dropped.
    pub(crate) fn request(self: &Arc<Self>) -> InFlight {
        let mut state = self.state();
        state.in_flight += 1;
        state.served = true;
        state.first_byte = None;
        InFlight(self.clone())
    }

    /// When the idle connection is to be closed; `None` while a request is in flight.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        let state = self.state();
        if state.in_flight > 0 {
            return None;
        }
        Some(match (state.served, state.first_byte) {
            (false, _) => state.accepted + limits.header_timeout,
            (true, Some(first)) => first + limits.header_timeout,
            (true, None) => state.idle_since + limits.keepalive_timeout,
        })
    }

    /// Resolves when the connection has been idle past its deadline.
    ///
    /// Nothing wakes it per request (a wake-up of the connection's task per request cost more
    /// than the check): it sleeps until the deadline it computes, but never longer than a
    /// header timeout, and computes it again. A first byte after idling sets a deadline a
    /// header timeout after it, so it is never later than the next look; the end of a
    /// request sets one a keep-alive timeout after it, never before the next look either.
    pub(crate) async fn expired(&self, limits: &Limits) {
        loop {
            let now = Instant::now();
            // At least a millisecond apart: a zero timeout (the command line refuses one)
            // must not make a watchdog of a request in flight spin.
            let period = (limits.header_timeout.min(limits.keepalive_timeout))
                .max(std::time::Duration::from_millis(1));
            let look_again = now + period;
            match self.deadline(limits) {
                Some(at) if at <= now => return,
                Some(at) => tokio::time::sleep_until(at.min(look_again)).await,
                None => tokio::time::sleep_until(look_again).await,
            }
        }
    }
}

/// A request in flight; its drop makes the connection idle again when it was the last.
pub(crate) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
            state.first_byte = None;
        }
    }
}

/// A response body that keeps its request in flight until it is sent (or dropped).
pub(crate) struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B> Tracked<B> {
    pub(crate) fn new(body: B, in_flight: InFlight) -> Self {
        Tracked {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // Real time, scaled down: tokio's paused clock needs its test-util feature, which would
    // rebuild tokio for the whole workspace.
    const HEADER: Duration = Duration::from_millis(100);
    const KEEPALIVE: Duration = Duration::from_millis(300);

    fn limits() -> Limits {
        Limits {
            header_timeout: HEADER,
            keepalive_timeout: KEEPALIVE,
            ..Limits::default()
        }
    }

    fn about(took: Duration, want: Duration) -> bool {
        took >= want && took < want + Duration::from_millis(80)
    }

    #[tokio::test]
    async fn a_new_connection_that_sends_nothing_expires_after_the_header_timeout() {
        let activity = Activity::new();
        let start = Instant::now();
        activity.expired(&limits()).await;
        assert!(about(start.elapsed(), HEADER), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn an_idle_keep_alive_connection_expires_after_the_keepalive_timeout() {
        let activity = Activity::new();
        drop(activity.request());
        let start = Instant::now();
        activity.expired(&limits()).await;
        assert!(about(start.elapsed(), KEEPALIVE), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn a_request_begun_after_idling_has_the_header_timeout_from_its_first_byte() {
        let activity = Activity::new();
        drop(activity.request());
        tokio::time::sleep(Duration::from_millis(100)).await;
        activity.read();
        let start = Instant::now();
        activity.expired(&limits()).await;
        assert!(about(start.elapsed(), HEADER), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn a_request_in_flight_has_no_deadline() {
        let activity = Activity::new();
        let in_flight = activity.request();
        let limits = limits();
        let expired = tokio::time::timeout(KEEPALIVE * 2, activity.expired(&limits));
        assert!(expired.await.is_err());
        drop(in_flight);
    }

    /// Runs the watchdog in a task of its own; it gives the time it expired.
    fn watchdog(activity: &Arc<Activity>) -> tokio::task::JoinHandle<Instant> {
        let activity = activity.clone();
        tokio::spawn(async move {
            activity.expired(&limits()).await;
            Instant::now()
        })
    }

    #[tokio::test]
    async fn a_waiting_watchdog_keeps_the_header_timeout_of_a_first_byte_without_a_wake_up() {
        let activity = Activity::new();
        drop(activity.request());
        let watchdog = watchdog(&activity);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let read = Instant::now();
        activity.read();
        let expired = watchdog.await.unwrap();
        assert!(about(expired - read, HEADER), "{:?}", expired - read);
    }

    #[tokio::test]
    async fn a_waiting_watchdog_keeps_the_keepalive_timeout_from_the_end_of_a_request() {
        let activity = Activity::new();
        let in_flight = activity.request();
        let watchdog = watchdog(&activity);
        tokio::time::sleep(Duration::from_millis(150)).await;
        let ended = Instant::now();
        drop(in_flight);
        let expired = watchdog.await.unwrap();
        assert!(about(expired - ended, KEEPALIVE), "{:?}", expired - ended);
    }
}
