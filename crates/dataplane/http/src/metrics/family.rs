//! A metric family whose table gives its room back when most of its series are removed.
//!
//! prometheus-client's `Family` keeps its map's capacity for good: after 50,000 pool members
//! came and went, the member families held about 0.9 MB of empty table (docs/benchmarks.md,
//! "Memory after every object is deleted"). This one encodes the same way (one series per
//! label set, no descriptor while empty) and shrinks its map when a removal leaves it under a
//! quarter full.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, PoisonError, RwLock};

/// A map below this capacity is left as it is: shrinking it would save nothing worth a
/// rehash.
const KEEP: usize = 64;

/// Series of metric `M` by label set `S`. Cloning is cheap and clones share the series.
#[derive(Debug)]
pub(crate) struct Family<S, M> {
    series: Arc<RwLock<HashMap<S, M>>>,
}

impl<S, M> Clone for Family<S, M> {
    fn clone(&self) -> Self {
        Family {
            series: Arc::clone(&self.series),
        }
    }
}

impl<S, M> Default for Family<S, M> {
    fn default() -> Self {
        Family {
            series: Arc::default(),
        }
    }
}

impl<S: Clone + Hash + Eq, M: Clone + Default> Family<S, M> {
    /// The series of `labels`, made (at its default) when there is none; the handle shares
    /// the series.
    pub(crate) fn get_or_create(&self, labels: &S) -> M {
        let read = self.series.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(metric) = read.get(labels) {
            return metric.clone();
        }
        drop(read);
        let mut write = self.series.write().unwrap_or_else(PoisonError::into_inner);
        let metric = write.entry(labels.clone()).or_default();
        metric.clone()
    }

    /// Removes the series of `labels`; true when there was one. A map left under a quarter
    /// full gives the rest of its room back.
    pub(crate) fn remove(&self, labels: &S) -> bool {
        let mut write = self.series.write().unwrap_or_else(PoisonError::into_inner);
        let removed = write.remove(labels).is_some();
        if removed && write.capacity() > KEEP && write.len() < write.capacity() / 4 {
            // Room for twice what is left: a family that shrinks and grows by a few series
            // does not rehash on every change.
            let room = 2 * write.len();
            write.shrink_to(room);
        }
        removed
    }

    /// How many series the map has room for without growing.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.series
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .capacity()
    }
}

impl<S, M> EncodeMetric for Family<S, M>
where
    S: EncodeLabelSet + std::fmt::Debug + Send + Sync,
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let read = self.series.read().unwrap_or_else(PoisonError::into_inner);
        for (labels, metric) in read.iter() {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        (self.series.read().unwrap_or_else(PoisonError::into_inner)).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Labels {
        member: String,
    }

    fn labels(i: usize) -> Labels {
        Labels {
            member: format!("127.1.{}.{}:80", i / 256, i % 256),
        }
    }

    fn exposition(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn removing_most_series_gives_the_tables_room_back() {
        let family = Family::<Labels, Gauge>::default();
        for i in 0..50_000 {
            family.get_or_create(&labels(i)).set(1);
        }
        let full = family.capacity();
        assert!(full >= 50_000, "{full}");
        for i in 10..50_000 {
            assert!(family.remove(&labels(i)));
        }
        assert!(!family.remove(&labels(20)), "removed already");
        let left = family.capacity();
        assert!(left < 256, "room for {left} series kept for 10");
        assert_eq!(family.get_or_create(&labels(3)).get(), 1, "the rest kept");
    }

    #[test]
    fn series_are_shared_encoded_by_label_set_and_gone_once_removed() {
        let mut registry = Registry::default();
        let family = Family::<Labels, Counter>::default();
        registry.register("portico_test_events", "Test events", family.clone());
        assert!(
            !exposition(&registry).contains("portico_test_events"),
            "empty"
        );
        family.get_or_create(&labels(1)).inc();
        family.get_or_create(&labels(1)).inc();
        family.get_or_create(&labels(2));
        let text = exposition(&registry);
        assert!(
            text.contains("# TYPE portico_test_events counter"),
            "{text}"
        );
        let one = "portico_test_events_total{member=\"127.1.0.1:80\"} 2\n";
        assert!(text.contains(one), "{text}");
        assert!(text.contains("member=\"127.1.0.2:80\"} 0\n"), "{text}");
        family.remove(&labels(1));
        family.remove(&labels(2));
        assert!(
            !exposition(&registry).contains("portico_test_events"),
            "empty again"
        );
    }
}
