//! Small JSON views for the dashboard (and any client): a summary of the whole snapshot with
//! traffic counters, and one load balancer's policies and pools page by page. They are built
//! from the same snapshot and registry as the rest of the API.

use crate::Snapshot;
use portico_model::{
    L7Policy, L7Rule, LoadBalancer, ObjectRef, Placement, PolicyAction, Pool, Protocol, Severity,
};
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::UNIX_EPOCH;

/// `GET /api/v1/summary`: counts, diagnostics by severity, every load balancer without its
/// policies and members, and the traffic counters per pool.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Summary<'a> {
    generation: u64,
    ready: bool,
    /// Milliseconds since the Unix epoch when this generation was applied.
    applied_at_ms: Option<u64>,
    counts: Counts,
    diagnostics: Severities,
    load_balancers: Vec<LoadBalancerSummary<'a>>,
    traffic: Traffic,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Counts {
    load_balancers: usize,
    ingresses: usize,
    listeners: usize,
    policies: usize,
    pools: usize,
    members: usize,
    members_ready: usize,
}

#[derive(Serialize, Default)]
struct Severities {
    error: usize,
    warning: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LoadBalancerSummary<'a> {
    id: String,
    name: &'a str,
    origin: &'a ObjectRef,
    provider: &'a str,
    vip: Option<IpAddr>,
    floating_ip: Option<IpAddr>,
    placement: Option<&'a Placement>,
    listeners: Vec<ListenerSummary<'a>>,
    /// Names of its pools (the `pool` label of the traffic counters).
    pools: Vec<&'a str>,
    members: usize,
    members_ready: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListenerSummary<'a> {
    name: &'a str,
    protocol: Protocol,
    port: u16,
    policies: usize,
    /// Where a request that no policy matches goes (`namespace/service:port`).
    default_pool: Option<String>,
    default_source: Option<&'a ObjectRef>,
}

/// Counters since the process started; a client computes rates from two samples.
#[derive(Serialize, Default, Debug, PartialEq)]
pub(crate) struct Traffic {
    requests: u64,
    errors: u64,
    pools: BTreeMap<String, PoolTraffic>,
}

/// One pool's counters: requests answered, of those 5xx, and the upstream latency sum and
/// count (seconds, requests that reached a member).
#[derive(Serialize, Default, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PoolTraffic {
    requests: u64,
    errors: u64,
    latency_sum: f64,
    latency_count: u64,
}

pub(crate) fn summary<'a>(snap: &'a Snapshot, registry: &Registry) -> Summary<'a> {
    let mut counts = Counts {
        load_balancers: snap.model.load_balancers.len(),
        ingresses: snap.ingresses.len(),
        ..Counts::default()
    };
    let mut diagnostics = Severities::default();
    let all = snap.ingresses.iter().flat_map(|i| &i.diagnostics);
    for d in all.chain(&snap.diagnostics) {
        match d.severity {
            Severity::Error => diagnostics.error += 1,
            Severity::Warning => diagnostics.warning += 1,
        }
    }
    let load_balancers = (snap.model.load_balancers.iter())
        .map(|lb| {
            let members = lb.pools.iter().map(|p| p.members.len()).sum();
            let members_ready = (lb.pools.iter())
                .map(|p| p.members.iter().filter(|m| m.ready).count())
                .sum();
            counts.listeners += lb.listeners.len();
            counts.policies += lb.listeners.iter().map(|l| l.policies.len()).sum::<usize>();
            counts.pools += lb.pools.len();
            counts.members += members;
            counts.members_ready += members_ready;
            LoadBalancerSummary {
                id: lb.id.to_string(),
                name: &lb.name,
                origin: &lb.origin,
                provider: &lb.provider,
                vip: lb.vip,
                floating_ip: lb.floating_ip,
                placement: snap.placements.get(&lb.id),
                listeners: (lb.listeners.iter())
                    .map(|l| ListenerSummary {
                        name: &l.name,
                        protocol: l.protocol,
                        port: l.port,
                        policies: l.policies.len(),
                        default_pool: l.default_pool.and_then(|id| lb.pool(id)).map(pool_label),
                        default_source: l.default_source.as_ref(),
                    })
                    .collect(),
                pools: lb.pools.iter().map(|p| p.name.as_str()).collect(),
                members,
                members_ready,
            }
        })
        .collect();
    Summary {
        generation: snap.generation,
        ready: snap.ready,
        applied_at_ms: snap
            .applied_at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        counts,
        diagnostics,
        load_balancers,
        traffic: traffic(registry),
    }
}

/// A pool as a person names it: `namespace/service:port`.
pub(crate) fn pool_label(p: &Pool) -> String {
    if p.service.namespace.is_empty() {
        format!("{}:{}", p.service.name, p.service_port)
    } else {
        format!(
            "{}/{}:{}",
            p.service.namespace, p.service.name, p.service_port
        )
    }
}

/// One policy of `GET /api/v1/loadbalancers/{id}/policies`: where it sits (listener and
/// position) and, for a pool action, the pool's name and label.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyRow<'a> {
    listener: &'a str,
    protocol: Protocol,
    port: u16,
    position: u32,
    action: &'a PolicyAction,
    rules: &'a [L7Rule],
    source: &'a ObjectRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_label: Option<String>,
}

/// Every policy of `lb` in evaluation order, listener by listener, kept when `filter` holds:
/// `q` (case-insensitive) in a rule value, the source's `namespace/name` or the pool's label;
/// `source` equal to the source's `namespace/name`.
pub(crate) fn policies<'a>(lb: &'a LoadBalancer, filter: &Filter) -> Vec<PolicyRow<'a>> {
    let mut rows = Vec::new();
    for l in lb.listeners.iter() {
        for (position, p) in l.policies.iter().enumerate() {
            // A split between pools shows its first.
            let pool = p.action.pools().next().and_then(|pool| lb.pool(pool));
            let label = pool.map(pool_label);
            if !filter.policy(p, label.as_deref()) {
                continue;
            }
            rows.push(PolicyRow {
                listener: &l.name,
                protocol: l.protocol,
                port: l.port,
                position: u32::try_from(position).unwrap_or(u32::MAX),
                action: &p.action,
                rules: &p.rules,
                source: &p.source,
                pool: pool.map(|p| p.name.as_str()),
                pool_label: label,
            });
        }
    }
    rows
}

/// One pool of `GET /api/v1/loadbalancers/{id}/pools`: the model's, with its label.
#[derive(Serialize)]
pub(crate) struct PoolRow<'a> {
    #[serde(flatten)]
    pool: &'a Pool,
    label: String,
}

/// The pools of `lb` whose label or name contains `q` (case-insensitive).
pub(crate) fn pools<'a>(lb: &'a LoadBalancer, filter: &Filter) -> Vec<PoolRow<'a>> {
    (lb.pools.iter())
        .map(|pool| PoolRow {
            pool,
            label: pool_label(pool),
        })
        .filter(|row| filter.text(&row.label) || filter.text(&row.pool.name))
        .collect()
}

/// `?q=` (a case-insensitive substring) and `?source=namespace/name` of a list.
#[derive(Default, Debug)]
pub(crate) struct Filter {
    q: Option<String>,
    source: Option<String>,
}

impl Filter {
    pub(crate) fn parse(query: Option<&str>) -> Filter {
        let mut f = Filter::default();
        for pair in query.unwrap_or_default().split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            match key {
                "q" if !value.is_empty() => f.q = Some(value.to_lowercase()),
                "source" if !value.is_empty() => f.source = Some(value),
                _ => {}
            }
        }
        f
    }

    /// Whether `text` contains `q` (always without a `q`).
    pub(crate) fn text(&self, text: &str) -> bool {
        self.q
            .as_ref()
            .is_none_or(|q| text.to_lowercase().contains(q.as_str()))
    }

    fn policy(&self, p: &L7Policy, pool: Option<&str>) -> bool {
        let source = format!("{}/{}", p.source.namespace, p.source.name);
        if self.source.as_ref().is_some_and(|s| *s != source) {
            return false;
        }
        self.q.is_none()
            || self.text(&source)
            || pool.is_some_and(|l| self.text(l))
            || p.rules.iter().any(|r| self.text(&r.value))
    }
}

/// `%XX` and `+` of a query value; invalid escapes stay as they are.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The proxy's counters read back from the registry's exposition:
/// `portico_http_requests_total{pool,code_class}` and the sum and count of
/// `portico_upstream_latency_seconds{pool}`. Requests that matched no pool (`pool=""`) count
/// in the totals only.
pub(crate) fn traffic(registry: &Registry) -> Traffic {
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, registry).is_err() {
        return Traffic::default();
    }
    parse_traffic(&text)
}

fn parse_traffic(text: &str) -> Traffic {
    let mut t = Traffic::default();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let Some(pool) = label(labels, "pool") else {
            continue;
        };
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        let count = v as u64;
        match name {
            "portico_http_requests_total" => {
                let error = label(labels, "code_class").as_deref() == Some("5xx");
                t.requests += count;
                t.errors += if error { count } else { 0 };
                if !pool.is_empty() {
                    let p = t.pools.entry(pool).or_default();
                    p.requests += count;
                    p.errors += if error { count } else { 0 };
                }
            }
            "portico_upstream_latency_seconds_sum" if !pool.is_empty() => {
                t.pools.entry(pool).or_default().latency_sum += v;
            }
            "portico_upstream_latency_seconds_count" if !pool.is_empty() => {
                t.pools.entry(pool).or_default().latency_count += count;
            }
            _ => {}
        }
    }
    t
}

/// The value of label `key` in `a="x",b="y"}` (OpenMetrics escapes `\\`, `\"`, `\n`).
fn label(labels: &str, key: &str) -> Option<String> {
    let mut rest = labels;
    loop {
        let (k, after) = rest.split_once("=\"")?;
        let k = k.trim_start_matches(',').trim();
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        if k == key {
            return Some(value);
        }
        rest = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_is_read_from_the_exposition() {
        let text = "\
# TYPE portico_http_requests counter
portico_http_requests_total{pool=\"demo_web_80\",code_class=\"2xx\"} 7
portico_http_requests_total{pool=\"demo_web_80\",code_class=\"5xx\"} 3
portico_http_requests_total{pool=\"\",code_class=\"4xx\"} 2
portico_upstream_latency_seconds_sum{pool=\"demo_web_80\"} 0.5
portico_upstream_latency_seconds_count{pool=\"demo_web_80\"} 10
portico_upstream_latency_seconds_bucket{le=\"0.5\",pool=\"demo_web_80\"} 10
portico_objects{kind=\"Ingress\"} 3
";
        let t = parse_traffic(text);
        assert_eq!((t.requests, t.errors), (12, 3));
        let web = &t.pools["demo_web_80"];
        assert_eq!((web.requests, web.errors, web.latency_count), (10, 3, 10));
        assert!((web.latency_sum - 0.5).abs() < 1e-9);
        assert_eq!(
            t.pools.len(),
            1,
            "the unrouted series is in the totals only"
        );
    }

    #[test]
    fn labels_are_unescaped_and_missing_ones_are_none() {
        assert_eq!(
            label("a=\"x\\\"y\",pool=\"p,q\"", "pool").as_deref(),
            Some("p,q")
        );
        assert_eq!(label("a=\"x\\\"y\"", "a").as_deref(), Some("x\"y"));
        assert_eq!(label("a=\"x\"", "pool"), None);
    }

    #[test]
    fn filters_decode_their_values() {
        let f = Filter::parse(Some("q=Demo%2Fweb+x&source=demo%2Fweb&limit=3"));
        assert_eq!(f.q.as_deref(), Some("demo/web x"));
        assert_eq!(f.source.as_deref(), Some("demo/web"));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
