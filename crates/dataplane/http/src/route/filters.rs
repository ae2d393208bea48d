//! The Gateway API's filters of a route compiled for serving: header changes with their
//! names and values checked once, the path rewrite, the mirrors' pools, the timeouts.
//! Applied by `proxy/filters.rs`.

use super::pool::PoolState;
use http::{HeaderName, HeaderValue};
use portico_model::{HeaderChanges, PathRewrite, PolicyOptions, PoolId, Timeouts};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A route's filters; `None` in [`super::RouteOptions`] when it has none.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    pub(crate) request_headers: Option<Changes>,
    pub(crate) response_headers: Option<Changes>,
    pub(crate) path: Option<PathRewrite>,
    pub(crate) mirrors: Vec<Mirror>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) backend_timeout: Option<Duration>,
}

/// A mirror's pool and its share of requests.
#[derive(Debug)]
pub(crate) struct Mirror {
    pub(crate) pool: Arc<PoolState>,
    pub(crate) share: Share,
}

/// A share of requests, drawn exactly and spread evenly: request n is drawn when the share's
/// running total passes a whole request (20% of 100 requests is 20, every fifth).
#[derive(Debug)]
pub(crate) struct Share {
    per_million: u64,
    /// Requests seen so far.
    seen: AtomicU64,
}

impl Share {
    fn new(per_million: u32) -> Self {
        Share {
            per_million: u64::from(per_million.min(1_000_000)),
            seen: AtomicU64::new(0),
        }
    }

    /// Whether this request is in the share.
    pub(crate) fn draw(&self) -> bool {
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        let total = |n: u64| n.saturating_mul(self.per_million) / 1_000_000;
        total(n + 1) > total(n)
    }
}

/// [`HeaderChanges`] with names and values parsed; one that does not parse is left out (the
/// translator refuses them).
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub(crate) set: Vec<(HeaderName, HeaderValue)>,
    pub(crate) add: Vec<(HeaderName, HeaderValue)>,
    pub(crate) remove: Vec<HeaderName>,
}

impl Changes {
    fn compile(changes: &HeaderChanges) -> Self {
        let pair = |(n, v): &(String, String)| {
            Some((
                HeaderName::try_from(n).ok()?,
                HeaderValue::try_from(v).ok()?,
            ))
        };
        Changes {
            set: changes.set.iter().filter_map(pair).collect(),
            add: changes.add.iter().filter_map(pair).collect(),
            remove: (changes.remove.iter())
                .filter_map(|n| HeaderName::try_from(n).ok())
                .collect(),
        }
    }

    /// Applies the changes to `headers`: set, then add, then remove.
    pub(crate) fn apply(&self, headers: &mut http::HeaderMap) {
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            headers.append(name.clone(), value.clone());
        }
        for name in &self.remove {
            headers.remove(name);
        }
    }
}

impl Filters {
    /// The filters of `options`, if it has any; `pool` gives the state of a mirror's pool.
    pub(crate) fn compile(
        options: &PolicyOptions,
        pool: &dyn Fn(PoolId) -> Option<Arc<PoolState>>,
    ) -> Option<Self> {
        let Timeouts {
            request_ms,
            backend_ms,
        } = options.timeouts;
        let any = options.request_headers.is_some()
            || options.response_headers.is_some()
            || options.path.is_some()
            || !options.mirrors.is_empty()
            || request_ms.is_some()
            || backend_ms.is_some();
        any.then(|| Filters {
            request_headers: options.request_headers.as_ref().map(Changes::compile),
            response_headers: options.response_headers.as_ref().map(Changes::compile),
            path: options.path.clone(),
            mirrors: (options.mirrors.iter())
                .filter_map(|m| {
                    let share = Share::new(m.per_million);
                    Some(Mirror {
                        pool: pool(m.pool)?,
                        share,
                    })
                })
                .collect(),
            request_timeout: request_ms.map(Duration::from_millis),
            backend_timeout: backend_ms.map(Duration::from_millis),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_copy_exact_shares_spread_evenly() {
        let drawn = |per_million| {
            let share = Share::new(per_million);
            (0..100).filter(|_| share.draw()).count()
        };
        assert_eq!(drawn(1_000_000), 100);
        assert_eq!(drawn(200_000), 20);
        assert_eq!(drawn(333_333), 33);
        assert_eq!(drawn(0), 0);
        let half = Share::new(500_000);
        let pattern: Vec<bool> = (0..4).map(|_| half.draw()).collect();
        assert_eq!(pattern, [false, true, false, true]);
    }

    #[test]
    fn header_changes_set_then_add_then_remove() {
        let changes = Changes::compile(&HeaderChanges {
            set: vec![("x-set".into(), "one".into())],
            add: vec![
                ("x-add".into(), "two".into()),
                ("x-set".into(), "three".into()),
            ],
            remove: vec!["x-remove".into()],
        });
        let mut headers = http::HeaderMap::new();
        headers.append("x-set", "old".parse().unwrap());
        headers.append("x-set", "older".parse().unwrap());
        headers.append("x-add", "kept".parse().unwrap());
        headers.append("x-remove", "a".parse().unwrap());
        headers.append("x-remove", "b".parse().unwrap());
        changes.apply(&mut headers);
        let all = |name| -> Vec<&str> {
            (headers.get_all(name).iter())
                .map(|v| v.to_str().unwrap())
                .collect()
        };
        assert_eq!(all("x-set"), ["one", "three"]);
        assert_eq!(all("x-add"), ["kept", "two"]);
        assert!(all("x-remove").is_empty());
    }
}
