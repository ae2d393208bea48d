//! One timer per connection for every deadline of the own path.
//!
//! Each wait of the own path has a deadline: the next request head's (header or keep-alive
//! timeout), the member's answer's and each body read's (the pool's read timeout). A timer per
//! wait (`tokio::time::timeout`) entered tokio's timer wheel and left it again, under its lock,
//! two or three times per request; and a timer that became the runtime's nearest woke the
//! runtime's driver with a system call (an `eventfd` write): 0.7 per request with a new
//! connection per request (strace). Deadlines mostly move later, so [`Watch`] keeps one timer
//! and moves it only when a deadline comes nearer than the timer; when the timer fires before
//! the deadline noted last, it is set again for that deadline. A connection's timer thus
//! moves about once per timeout period, not per wait.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Poll, ready};
use tokio::time::{Instant, Sleep};

/// A connection's current deadline, on one timer.
pub(super) struct Watch {
    timer: Pin<Box<Sleep>>,
    deadline: Instant,
}

impl Watch {
    pub(super) fn new(deadline: Instant) -> Watch {
        Watch {
            timer: Box::pin(tokio::time::sleep_until(deadline)),
            deadline,
        }
    }

    /// The deadline is `deadline` from now on, later or earlier than before.
    fn set(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if deadline < self.timer.deadline() {
            self.timer.as_mut().reset(deadline);
        }
    }

    /// What `future` resolves to, or `None` when `deadline` passes first. `future` is polled
    /// first: one that is ready is never timed out, and leaves the timer where it was. (A TLS
    /// connection's close_notify, nearly always sent at once, moved the timer a second ahead
    /// of every other deadline: the runtime's nearest, hence an `eventfd` write per
    /// connection.)
    pub(super) async fn within<F: Future>(
        &mut self,
        deadline: Instant,
        future: F,
    ) -> Option<F::Output> {
        let mut future = pin!(future);
        let mut waiting = false;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            if !waiting {
                waiting = true;
                self.set(deadline);
            }
            loop {
                ready!(self.timer.as_mut().poll(cx));
                // The timer fired. It was set for the deadline or earlier; if earlier, the
                // deadline moved later since, and the timer follows it now.
                if self.timer.deadline() >= self.deadline {
                    return Poll::Ready(None);
                }
                let deadline = self.deadline;
                self.timer.as_mut().reset(deadline);
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_its_own_deadline_whatever_the_timer_was_set_for_before() {
        let start = Instant::now();
        let mut watch = Watch::new(start + 10 * SECOND);
        // A later deadline: the timer stays at 10 s, fires there, and follows to 30 s.
        let waited = watch
            .within(start + 30 * SECOND, std::future::pending::<()>())
            .await;
        assert_eq!(waited, None);
        assert_eq!(Instant::now() - start, 30 * SECOND);
        // An earlier one than the timer's: the timer comes nearer.
        let now = Instant::now();
        let mut watch = Watch::new(now + 60 * SECOND);
        let waited = watch
            .within(now + 5 * SECOND, std::future::pending::<()>())
            .await;
        assert_eq!(waited, None);
        assert_eq!(Instant::now() - now, 5 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn what_is_ready_before_the_deadline_is_returned_and_the_timer_is_not_moved_for_it() {
        let start = Instant::now();
        let mut watch = Watch::new(start + 10 * SECOND);
        for n in 1..=5u32 {
            let done = tokio::time::sleep(SECOND);
            let got = watch.within(Instant::now() + 10 * SECOND, done).await;
            assert_eq!(got, Some(()));
            assert_eq!(Instant::now() - start, n * SECOND);
        }
        // Five waits later the timer is still where it was first set.
        assert_eq!(watch.timer.deadline(), start + 10 * SECOND);
        // Ready at once: returned even when the deadline has passed, and the timer is not
        // brought nearer for it.
        let late = watch.within(start, std::future::ready(7)).await;
        assert_eq!(late, Some(7));
        let soon = watch
            .within(Instant::now() + SECOND, std::future::ready(8))
            .await;
        assert_eq!(soon, Some(8));
        assert_eq!(watch.timer.deadline(), start + 10 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_has_passed_ends_a_wait_at_once() {
        let start = Instant::now();
        let mut watch = Watch::new(start + 10 * SECOND);
        tokio::time::sleep(20 * SECOND).await;
        let waited = watch
            .within(start + 15 * SECOND, std::future::pending::<()>())
            .await;
        assert_eq!(waited, None);
        assert_eq!(Instant::now() - start, 20 * SECOND);
    }
}
