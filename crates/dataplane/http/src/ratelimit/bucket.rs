//! nginx's `limit_req` with `burst` and `nodelay` as a pure function of time: the excess of
//! one client, in thousandths of a request, drains at the rate and grows by one request per
//! admitted request; a request that would take it over the burst is refused and changes
//! nothing. A client's first request finds no excess, so `burst + 1` requests pass at once.
//! The reference is `ngx_http_limit_req_lookup` (nginx's `src/http/modules`).

use std::time::Instant;

/// A rate and its burst, in nginx's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rate {
    /// Requests per second × 1000 (`limit-rpm` N is N × 1000 / 60, rounded down as nginx).
    pub(crate) milli_per_s: u64,
    /// Requests allowed beyond the rate, × 1000.
    pub(crate) burst_milli: u64,
}

impl Rate {
    /// `per_s` requests a second with a burst of `per_s × multiplier` (ingress-nginx's
    /// `limit-rps` and `limit-burst-multiplier`).
    pub(crate) fn per_second(per_s: u32, multiplier: u32) -> Self {
        Rate {
            milli_per_s: u64::from(per_s) * 1000,
            burst_milli: u64::from(per_s) * u64::from(multiplier) * 1000,
        }
    }

    /// `per_min` requests a minute with a burst of `per_min × multiplier` (`limit-rpm`).
    pub(crate) fn per_minute(per_min: u32, multiplier: u32) -> Self {
        Rate {
            milli_per_s: u64::from(per_min) * 1000 / 60,
            burst_milli: u64::from(per_min) * u64::from(multiplier) * 1000,
        }
    }
}

/// One client's state under one rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    excess_milli: u64,
    last: Instant,
}

impl Bucket {
    /// The state a client's first request leaves: no excess.
    pub(crate) fn first(now: Instant) -> Self {
        Bucket {
            excess_milli: 0,
            last: now,
        }
    }

    /// The state after a request at `now` is admitted, or `None` when it is refused (the
    /// state is then unchanged).
    pub(crate) fn admit(self, rate: Rate, now: Instant) -> Option<Bucket> {
        let excess = self.drained(rate, now) + 1000;
        (excess <= rate.burst_milli).then_some(Bucket {
            excess_milli: excess,
            last: now,
        })
    }

    /// Whether the excess has drained away by `now`: the client is as if never seen.
    pub(crate) fn is_empty(self, rate: Rate, now: Instant) -> bool {
        self.drained(rate, now) == 0
    }

    fn drained(self, rate: Rate, now: Instant) -> u64 {
        let ms = now.saturating_duration_since(self.last).as_millis();
        let ms = u64::try_from(ms).unwrap_or(u64::MAX);
        let drained = rate.milli_per_s.saturating_mul(ms) / 1000;
        self.excess_milli.saturating_sub(drained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::{Duration, advance};

    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }

    /// How many of `n` requests at the same instant pass, from `bucket`.
    fn burst(bucket: &mut Bucket, rate: Rate, n: usize) -> usize {
        let at = now();
        (0..n)
            .filter(|_| match bucket.admit(rate, at) {
                Some(next) => {
                    *bucket = next;
                    true
                }
                None => false,
            })
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_request_and_the_burst_pass_then_the_rate_refills() {
        // limit-rps 2, multiplier 5: a burst of 10 beyond the first request.
        let rate = Rate::per_second(2, 5);
        let mut bucket = Bucket::first(now());
        assert_eq!(1 + burst(&mut bucket, rate, 20), 11);
        // Half a second drains one request; a whole second two.
        advance(Duration::from_millis(499)).await;
        assert_eq!(burst(&mut bucket, rate, 5), 0);
        advance(Duration::from_millis(1)).await;
        assert_eq!(burst(&mut bucket, rate, 5), 1);
        advance(Duration::from_secs(1)).await;
        assert_eq!(burst(&mut bucket, rate, 5), 2);
        // After the whole burst has drained the client is as new.
        advance(Duration::from_secs(5)).await;
        assert!(bucket.is_empty(rate, now()));
        assert_eq!(burst(&mut bucket, rate, 20), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_multiplier_of_one_and_per_minute_rates() {
        let rate = Rate::per_second(1, 1);
        let mut bucket = Bucket::first(now());
        assert_eq!(burst(&mut bucket, rate, 5), 1);
        // limit-rpm 60 is one a second, in nginx's thousandths, with a burst of 60 × 1.
        let rate = Rate::per_minute(60, 1);
        assert_eq!(rate.milli_per_s, 1000);
        let mut bucket = Bucket::first(now());
        assert_eq!(burst(&mut bucket, rate, 100), 60);
        advance(Duration::from_millis(999)).await;
        assert_eq!(burst(&mut bucket, rate, 5), 0);
        advance(Duration::from_millis(1)).await;
        assert_eq!(burst(&mut bucket, rate, 5), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_request_changes_nothing() {
        let rate = Rate::per_second(1, 1);
        let full = Bucket::first(now()).admit(rate, now()).unwrap();
        assert_eq!(full.admit(rate, now()), None);
        advance(Duration::from_secs(1)).await;
        assert!(full.admit(rate, now()).is_some());
    }
}
