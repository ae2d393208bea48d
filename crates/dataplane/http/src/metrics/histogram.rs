//! A latency histogram updated with atomics only.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation; on the request path
//! that is a lock shared by every connection of a pool, so this one uses one atomic per bucket.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds in seconds: 0.5 ms doubling up to ~16 s, then +Inf.
const BOUNDS: [f64; 16] = {
    let mut bounds = [0.0005; 16];
    let mut i = 1;
    while i < bounds.len() {
        bounds[i] = bounds[i - 1] * 2.0;
        i += 1;
    }
    bounds
};

const BUCKETS: usize = BOUNDS.len() + 1;

#[derive(Debug, Default)]
struct Inner {
    buckets: [AtomicU64; BUCKETS],
    sum_nanos: AtomicU64,
}

/// Cloning is cheap; clones share the same counts.
#[derive(Clone, Debug, Default)]
pub(crate) struct LatencyHistogram(Arc<Inner>);

impl LatencyHistogram {
    pub(crate) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = BOUNDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BOUNDS.len());
        self.0.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.0.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Per-bucket (not cumulative) counts with their upper bounds, as the encoder expects.
    fn snapshot(&self) -> [(f64, u64); BUCKETS] {
        std::array::from_fn(|i| {
            let bound = BOUNDS.get(i).copied().unwrap_or(f64::INFINITY);
            (bound, self.0.buckets[i].load(Ordering::Relaxed))
        })
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets = self.snapshot();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = Duration::from_nanos(self.0.sum_nanos.load(Ordering::Relaxed)).as_secs_f64();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let counts: Vec<u64> = h.snapshot().iter().map(|(_, n)| *n).collect();
        assert_eq!(counts[0], 1, "0.3 ms ≤ 0.5 ms");
        assert_eq!(counts[3], 1, "3 ms ≤ 4 ms");
        assert_eq!(counts[BUCKETS - 1], 1, "60 s only fits +Inf");
        assert_eq!(counts.iter().sum::<u64>(), 3);
    }
}
