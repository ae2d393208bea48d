//! Least request: of two members drawn at random, the one with the lower cost, where the cost
//! is the member's latency EWMA times (its requests in flight + 1). Two random choices avoid
//! the herd that "always the least loaded" causes when many proxies see the same numbers, and
//! the EWMA makes a member that answers slowly take fewer requests even at equal load.
//!
//! A member without a measurement yet costs as much as the pool's cheapest measured member,
//! so a new member is tried without being flooded.

use std::time::Duration;

/// How fast old latencies are forgotten: a measurement's weight halves every `DECAY` / ln 2.
pub const DECAY: Duration = Duration::from_secs(10);

/// A latency moving average that decays with time (not with the number of requests), as in
/// Finagle's and ingress-nginx's EWMA balancers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ewma {
    /// Nanoseconds; none until the first measurement.
    value: Option<f64>,
    /// When the last measurement was folded in.
    at: Duration,
}

impl Ewma {
    /// Folds in a latency measured at `now`.
    pub fn observe(&mut self, latency: Duration, now: Duration) {
        let sample = latency.as_nanos() as f64;
        self.value = Some(match self.value {
            None => sample,
            Some(old) => {
                let elapsed = now.saturating_sub(self.at).as_secs_f64();
                let w = (-elapsed / DECAY.as_secs_f64()).exp();
                old * w + sample * (1.0 - w)
            }
        });
        self.at = self.at.max(now);
    }

    /// The average, in nanoseconds, if measured.
    pub fn value(&self) -> Option<f64> {
        self.value
    }
}

/// The cost of a member: latency EWMA × (in flight + 1); `unmeasured` stands for the EWMA of
/// a member not measured yet.
pub fn cost(ewma: Option<f64>, in_flight: u32, unmeasured: f64) -> f64 {
    ewma.unwrap_or(unmeasured).max(1.0) * (f64::from(in_flight) + 1.0)
}

/// Power of two choices among the eligible members `0..n`: draws two distinct eligible
/// members from `random` and returns the one of lower `cost` (the first drawn on ties).
/// `None` when no member is eligible.
pub fn pick(
    n: usize,
    eligible: impl Fn(usize) -> bool,
    cost: impl Fn(usize) -> f64,
    random: u64,
) -> Option<usize> {
    let candidates: Vec<usize> = (0..n).filter(|&i| eligible(i)).collect();
    match candidates.len() {
        0 => None,
        1 => Some(candidates[0]),
        m => {
            let a = (random % m as u64) as usize;
            // A different second draw: an offset in 1..m from the first.
            let b = (a + 1 + ((random >> 32) % (m as u64 - 1)) as usize) % m;
            let (a, b) = (candidates[a], candidates[b]);
            Some(if cost(b) < cost(a) { b } else { a })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ewma_moves_towards_new_samples_with_time() {
        let mut e = Ewma::default();
        assert_eq!(e.value(), None);
        e.observe(MS * 10, Duration::ZERO);
        assert_eq!(e.value(), Some(10e6));
        // Right away, a new sample barely counts; after a long time it is all that counts.
        e.observe(MS * 100, Duration::from_millis(1));
        assert!(e.value().unwrap() < 11e6);
        e.observe(MS * 100, Duration::from_secs(100));
        assert!((e.value().unwrap() - 100e6).abs() < 1e4);
    }

    #[test]
    fn picks_the_cheaper_of_two() {
        // With two members, both are always drawn: the cheaper wins.
        for r in 0..20 {
            let r = mix(r);
            assert_eq!(pick(2, |_| true, |i| [5.0, 1.0][i], r), Some(1));
        }
        assert_eq!(pick(3, |_| false, |_| 1.0, 7), None);
        assert_eq!(pick(3, |i| i == 2, |_| 1.0, 7), Some(2));
    }

    #[test]
    fn a_slow_member_gets_fewer_requests() {
        // Three members, one ten times slower: over many draws it is picked only when drawn
        // with... never, since any pair with it has a cheaper member.
        let costs = [
            cost(Some(1e6), 0, 1.0),
            cost(Some(1e6), 0, 1.0),
            cost(Some(1e7), 0, 1.0),
        ];
        let mut counts = [0; 3];
        for r in 0..3000 {
            counts[pick(3, |_| true, |i| costs[i], mix(r)).unwrap()] += 1;
        }
        assert_eq!(counts[2], 0, "{counts:?}");
        assert!(counts[0] > 1200 && counts[1] > 1200, "{counts:?}");
    }

    #[test]
    fn in_flight_raises_the_cost() {
        assert!(cost(Some(1e6), 3, 1.0) > cost(Some(1e6), 0, 1.0));
        assert_eq!(cost(None, 0, 5e6), 5e6);
    }

    #[test]
    fn draws_cover_every_member() {
        let mut seen = [false; 5];
        for r in 0..200 {
            seen[pick(5, |_| true, |_| 1.0, mix(r)).unwrap()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
