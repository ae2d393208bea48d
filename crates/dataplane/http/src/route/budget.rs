//! The retry budget of a pool, sans-io: the caller passes the time.
//!
//! A retry is allowed while the retries of the last [`WINDOW`] stay within `percent` of the
//! pool's requests over that window, or while the current second has had fewer than
//! [`MIN_PER_SECOND`] retries (so a quiet pool can still retry). A pool whose members fail
//! gets at most that many extra requests, whatever its tries allow: retries do not multiply
//! the load on a pool that is failing.

use std::time::{Duration, Instant};

/// The sliding window the percentage is counted over.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Retries allowed in any one second whatever the traffic.
pub const MIN_PER_SECOND: u64 = 3;

/// One bucket per second of the window.
const BUCKETS: usize = WINDOW.as_secs() as usize;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The second (since the budget's start) this bucket counts; older ones are stale.
    second: u64,
    requests: u64,
    retries: u64,
}

/// Requests and retries per second over the last ten seconds.
#[derive(Debug)]
pub struct RetryBudget {
    percent: u64,
    start: Instant,
    buckets: [Bucket; BUCKETS],
}

impl RetryBudget {
    pub fn new(percent: u32, now: Instant) -> Self {
        RetryBudget {
            percent: u64::from(percent),
            start: now,
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    /// Counts a request (its first try).
    pub fn request(&mut self, now: Instant) {
        let bucket = self.bucket(now);
        bucket.requests = bucket.requests.saturating_add(1);
    }

    /// Whether a retry may be made now; if so, it is counted.
    pub fn try_retry(&mut self, now: Instant) -> bool {
        let second = self.second(now);
        let (requests, retries) = self.totals(second);
        let this_second = self.bucket(now).retries;
        let by_share = retries.saturating_mul(100) < requests.saturating_mul(self.percent);
        if this_second < MIN_PER_SECOND || by_share {
            let bucket = self.bucket(now);
            bucket.retries = bucket.retries.saturating_add(1);
            true
        } else {
            false
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_secs()
    }

    /// The bucket of `now`'s second, emptied first when it held an older second.
    fn bucket(&mut self, now: Instant) -> &mut Bucket {
        let second = self.second(now);
        let slot = &mut self.buckets[(second % BUCKETS as u64) as usize];
        if slot.second != second {
            *slot = Bucket {
                second,
                ..Bucket::default()
            };
        }
        slot
    }

    /// Requests and retries of the window that ends with `second`.
    fn totals(&self, second: u64) -> (u64, u64) {
        let live = self
            .buckets
            .iter()
            .filter(|b| b.second <= second && second - b.second < BUCKETS as u64);
        live.fold((0, 0), |(req, ret), b| {
            (
                req.saturating_add(b.requests),
                ret.saturating_add(b.retries),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn without_traffic_only_the_minimum_per_second_is_retried() {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(0, t0);
        let allowed = (0..10).filter(|_| budget.try_retry(at(t0, 100))).count();
        assert_eq!(allowed, 3);
        // The next second brings three more.
        let allowed = (0..10).filter(|_| budget.try_retry(at(t0, 1100))).count();
        assert_eq!(allowed, 3);
    }

    #[test]
    fn the_share_of_requests_over_the_window_is_allowed_beyond_the_minimum() {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(20, t0);
        for i in 0..100 {
            budget.request(at(t0, i * 10));
        }
        // 20 % of 100 requests: 20 retries, the first 3 of them within the minimum.
        let allowed = (0..50).filter(|_| budget.try_retry(at(t0, 1500))).count();
        assert_eq!(allowed, 20);
        // Still within the window: spent.
        assert!(!budget.try_retry(at(t0, 1600)));
        // A later second brings its own minimum but no more share.
        let allowed = (0..10).filter(|_| budget.try_retry(at(t0, 2500))).count();
        assert_eq!(allowed, 3);
    }

    #[test]
    fn requests_older_than_the_window_no_longer_count() {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(50, t0);
        for _ in 0..100 {
            budget.request(t0);
        }
        assert!((0..40).all(|_| budget.try_retry(at(t0, 500))));
        // Eleven seconds later the requests and retries are out of the window.
        let allowed = (0..10).filter(|_| budget.try_retry(at(t0, 11_000))).count();
        assert_eq!(allowed, 3);
    }

    #[test]
    fn a_hundred_percent_allows_one_retry_per_request() {
        let t0 = Instant::now();
        let mut budget = RetryBudget::new(100, t0);
        for _ in 0..10 {
            budget.request(t0);
        }
        let allowed = (0..30).filter(|_| budget.try_retry(t0)).count();
        assert_eq!(allowed, 10);
    }
}
