//! Prometheus metrics of the proxy.
//!
//! Per-pool handles are resolved once per pool, on its first request, so a request updates its
//! counters without building label strings or taking the family lock. Not when the route
//! table is compiled: at 5,000 pools, eight series each cost megabytes that pools without
//! traffic never use (ingress-nginx and Traefik likewise show a backend's series from its
//! first request on).

mod family;
mod histogram;

pub(crate) use family::Family;

use crate::route::{MemberLabels, MemberMetrics};
use histogram::LatencyHistogram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

const CODE_CLASSES: [&str; 4] = ["2xx", "3xx", "4xx", "5xx"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    pool: String,
    code_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

type LatencyFamily = Family<PoolLabel, LatencyHistogram>;

/// The proxy's metrics; cloning is cheap and clones share the same series.
#[derive(Clone, Debug)]
pub struct ProxyMetrics {
    /// Where the pools' series are made.
    pools: Families,
    generation: Gauge,
    connections: Gauge,
    /// Requests that matched no pool carry `pool=""`.
    unrouted: PoolMetrics,
    member_healthy: Family<MemberLabels, Gauge>,
    member_ejections: Family<MemberLabels, Counter>,
}

impl ProxyMetrics {
    /// Creates the metrics and registers them into `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let requests = Family::default();
        let latency = LatencyFamily::default();
        let generation = Gauge::default();
        let connections = Gauge::default();
        let help = "HTTP requests answered, by pool and status class";
        registry.register("portico_http_requests", help, requests.clone());
        let help = "Time from forwarding a request to the upstream's response headers";
        registry.register("portico_upstream_latency_seconds", help, latency.clone());
        let help = "Generation of the configuration the proxy serves";
        registry.register("portico_config_generation", help, generation.clone());
        let help = "Open client connections";
        registry.register("portico_http_connections_active", help, connections.clone());
        let retries = RetryFamilies::default();
        let help = "Requests tried again on another member after a failed try, by pool";
        registry.register("portico_upstream_retries", help, retries.retries.clone());
        let help = "Retries not made because the pool's retry budget was spent, by pool";
        registry.register(
            "portico_upstream_retry_budget_exhausted",
            help,
            retries.exhausted.clone(),
        );
        let member_healthy = Family::default();
        let member_ejections = Family::default();
        let help = "Whether a pool member is in rotation (1) or out: ejected or failing checks (0)";
        registry.register("portico_member_healthy", help, member_healthy.clone());
        let help = "Ejections of a pool member by passive health";
        registry.register("portico_member_ejections", help, member_ejections.clone());
        let pools = Families {
            requests,
            latency,
            retries,
        };
        ProxyMetrics {
            unrouted: PoolMetrics::new(Some(pools.clone()), ""),
            pools,
            generation,
            connections,
            member_healthy,
            member_ejections,
        }
    }

    /// The series of pool `name`, made on its first request.
    pub(crate) fn pool(&self, name: &str) -> PoolMetrics {
        PoolMetrics::new(Some(self.pools.clone()), name)
    }

    /// Where the member series of pool `name` go (removed by the pool's state when members
    /// or the pool go).
    pub(crate) fn members(&self, name: &str) -> MemberMetrics {
        MemberMetrics {
            pool: name.to_owned(),
            healthy: self.member_healthy.clone(),
            ejections: self.member_ejections.clone(),
        }
    }

    pub(crate) fn unrouted(&self) -> &PoolMetrics {
        &self.unrouted
    }

    pub(crate) fn set_generation(&self, generation: u64) {
        self.generation
            .set(i64::try_from(generation).unwrap_or(i64::MAX));
    }

    pub(crate) fn connections(&self) -> &Gauge {
        &self.connections
    }
}

/// Retries made and retries refused by the budget, per pool.
#[derive(Clone, Debug, Default)]
struct RetryFamilies {
    retries: Family<PoolLabel, Counter>,
    exhausted: Family<PoolLabel, Counter>,
}

/// The families a pool's series belong to.
#[derive(Clone, Debug)]
struct Families {
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    retries: RetryFamilies,
}

impl Families {
    fn series(&self, pool: &str) -> Series {
        let codes = CODE_CLASSES.map(|code_class| {
            let labels = RequestLabels {
                pool: pool.to_owned(),
                code_class,
            };
            self.requests.get_or_create(&labels)
        });
        let label = PoolLabel {
            pool: pool.to_owned(),
        };
        Series {
            codes,
            latency: self.latency.get_or_create(&label),
            retries: self.retries.retries.get_or_create(&label),
            exhausted: self.retries.exhausted.get_or_create(&label),
        }
    }

    fn remove(&self, pool: &str) {
        for code_class in CODE_CLASSES {
            let pool = pool.to_owned();
            self.requests.remove(&RequestLabels { pool, code_class });
        }
        let label = PoolLabel {
            pool: pool.to_owned(),
        };
        self.latency.remove(&label);
        self.retries.retries.remove(&label);
        self.retries.exhausted.remove(&label);
    }
}

/// The series of one pool, resolved on its first request and kept by the configurations that
/// keep the pool. Cloning shares them.
#[derive(Clone, Debug)]
pub(crate) struct PoolMetrics(Arc<LazySeries>);

#[derive(Debug)]
struct LazySeries {
    /// Where the series are made; none for series that belong to no registry.
    families: Option<Families>,
    pool: Box<str>,
    series: OnceLock<Series>,
    /// Set once the pool's series were removed ([`PoolMetrics::forget`]).
    forgotten: AtomicBool,
}

#[derive(Debug)]
struct Series {
    codes: [Counter; 4],
    latency: LatencyHistogram,
    retries: Counter,
    exhausted: Counter,
}

impl PoolMetrics {
    fn new(families: Option<Families>, pool: &str) -> Self {
        PoolMetrics(Arc::new(LazySeries {
            families,
            pool: pool.into(),
            series: OnceLock::new(),
            forgotten: AtomicBool::new(false),
        }))
    }

    /// Series that belong to no registry, for route tables compiled outside a proxy.
    pub(crate) fn detached() -> Self {
        PoolMetrics::new(None, "")
    }

    fn series(&self) -> &Series {
        let lazy = &*self.0;
        lazy.series.get_or_init(|| {
            let Some(families) = &lazy.families else {
                return Series {
                    codes: Default::default(),
                    latency: LatencyHistogram::default(),
                    retries: Counter::default(),
                    exhausted: Counter::default(),
                };
            };
            let series = families.series(&lazy.pool);
            // A request that finishes on a table whose pool was already forgotten must not
            // bring its series back. `forget` sets the flag before removing; made before that
            // removal, the series are removed by it; made after it, they are removed here.
            if lazy.forgotten.load(Ordering::SeqCst) {
                families.remove(&lazy.pool);
            }
            series
        })
    }

    /// Removes the pool's series from the registry (the pool is no longer served); the
    /// handles still count, unregistered.
    pub(crate) fn forget(&self) {
        let lazy = &*self.0;
        lazy.forgotten.store(true, Ordering::SeqCst);
        if let Some(families) = &lazy.families {
            families.remove(&lazy.pool);
        }
    }

    pub(crate) fn record(&self, status: StatusCode) {
        let class = usize::from(status.as_u16() / 100).saturating_sub(2).min(3);
        self.series().codes[class].inc();
    }

    pub(crate) fn observe_latency(&self, elapsed: Duration) {
        self.series().latency.observe(elapsed);
    }

    /// A request tried again on another member.
    pub(crate) fn retried(&self) {
        self.series().retries.inc();
    }

    /// A retry the budget refused.
    pub(crate) fn budget_exhausted(&self) {
        self.series().exhausted.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    fn exposition(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn requests_are_counted_by_pool_and_code_class() {
        let mut registry = Registry::default();
        let metrics = ProxyMetrics::new(&mut registry);
        let web = metrics.pool("default_web_80");
        web.record(StatusCode::OK);
        web.record(StatusCode::BAD_GATEWAY);
        web.record(StatusCode::BAD_GATEWAY);
        metrics.unrouted().record(StatusCode::NOT_FOUND);
        let text = exposition(&registry);
        let line = |pool: &str, class: &str| {
            format!("portico_http_requests_total{{pool=\"{pool}\",code_class=\"{class}\"}}")
        };
        assert!(
            text.contains(&format!("{} 1\n", line("default_web_80", "2xx"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 2\n", line("default_web_80", "5xx"))),
            "{text}"
        );
        assert!(text.contains(&format!("{} 1\n", line("", "4xx"))), "{text}");
    }

    #[test]
    fn a_forgotten_pool_has_no_series_left() {
        let mut registry = Registry::default();
        let metrics = ProxyMetrics::new(&mut registry);
        let web = metrics.pool("default_web_80");
        web.record(StatusCode::OK);
        metrics.pool("default_api_80").record(StatusCode::OK);
        web.forget();
        let text = exposition(&registry);
        assert!(!text.contains("default_web_80"), "{text}");
        assert!(text.contains("default_api_80"), "{text}");
    }

    #[test]
    fn a_pool_has_no_series_until_its_first_request() {
        let mut registry = Registry::default();
        let metrics = ProxyMetrics::new(&mut registry);
        let web = metrics.pool("default_web_80");
        assert!(!exposition(&registry).contains("default_web_80"));
        web.observe_latency(Duration::from_millis(3));
        let text = exposition(&registry);
        let count = "portico_upstream_latency_seconds_count{pool=\"default_web_80\"} 1\n";
        assert!(text.contains(count), "{text}");
        let retries = "portico_upstream_retries_total{pool=\"default_web_80\"} 0\n";
        assert!(text.contains(retries), "{text}");
    }

    #[test]
    fn a_request_that_ends_after_its_pool_was_forgotten_leaves_no_series() {
        let mut registry = Registry::default();
        let metrics = ProxyMetrics::new(&mut registry);
        let web = metrics.pool("default_web_80");
        web.forget();
        web.record(StatusCode::OK);
        web.retried();
        assert!(!exposition(&registry).contains("default_web_80"));
    }

    #[test]
    fn generation_gauge_shows_the_applied_generation() {
        let mut registry = Registry::default();
        let metrics = ProxyMetrics::new(&mut registry);
        metrics.set_generation(7);
        assert!(exposition(&registry).contains("portico_config_generation 7\n"));
    }
}
