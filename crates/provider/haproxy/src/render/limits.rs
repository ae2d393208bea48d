//! ingress-nginx's rate limits per client address (`limit-rps`, `limit-rpm`,
//! `limit-connections`, `limit-burst-multiplier`, `limit-whitelist`) on haproxy: stick tables
//! keyed by the client address, one set per Ingress (the model's zone), shared by every path
//! and both frontends of the Ingress, counted per haproxy process as ingress-nginx counts per
//! replica.
//!
//! nginx admits `burst + 1` requests at once (the burst being the rate times the multiplier)
//! and then one every `1/rate`. haproxy 2.6 has no token bucket; its `http_req_rate(<period>)`
//! counts requests in a sliding window. Each rate gets a window of `(burst + 1) / rate`
//! holding `burst + 1` requests: the same requests at once and the same rate over the window,
//! but after a burst the next request waits until the window slides (up to one window), where
//! nginx admits one after `1/rate`. A refused request is not counted (it is refused before it
//! is tracked), as nginx's refused requests take nothing from the bucket.
//!
//! `limit-connections` is the table's `conn_cur`: requests in progress of the client, as the
//! built-in proxy counts. Clients in `limit-whitelist` are neither counted nor refused. A
//! refusal answers `--limit-status-code` (503 by default).

use portico_model::{L7Policy, LoadBalancer, RateLimit};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The window of a rate in milliseconds and the requests it holds: `per` requests every
/// `unit_ms`, with a burst of `per × multiplier`.
fn window(per: u32, unit_ms: u64, multiplier: u32) -> (u64, u64) {
    let holds = u64::from(per) * u64::from(multiplier.max(1)) + 1;
    let per = u64::from(per.max(1));
    // haproxy keeps periods in 32 bits of milliseconds.
    let ms = (holds * unit_ms).div_ceil(per).min(u64::from(u32::MAX / 2));
    (ms, holds)
}

/// The tables of one limit: `(name, store)` for the per-second table (with `conn_cur`) and
/// for the per-minute one, those it needs.
struct Tables {
    second: Option<(String, String)>,
    minute: Option<(String, String)>,
}

fn tables(limit: &RateLimit) -> Tables {
    let base = format!(
        "portico_limit_{}",
        portico_model::stable_uuid(&format!("{limit:?}")).simple()
    );
    let rps = limit.rps.map(|r| window(r, 1000, limit.burst_multiplier));
    let mut store = Vec::new();
    if let Some((ms, _)) = rps {
        store.push(format!("http_req_rate({ms})"));
    }
    if limit.connections.is_some() {
        store.push("conn_cur".to_owned());
    }
    let second = (!store.is_empty()).then(|| (format!("{base}_s"), store.join(",")));
    let minute = (limit.rpm).map(|r| {
        let (ms, _) = window(r, 60_000, limit.burst_multiplier);
        (format!("{base}_m"), format!("http_req_rate({ms})"))
    });
    Tables { second, minute }
}

/// The longest period `store` counts over, for the entries' expiry.
fn longest(store: &str) -> u64 {
    (store.split(',').filter_map(|s| {
        let ms = s.strip_prefix("http_req_rate(")?.strip_suffix(')')?;
        ms.parse::<u64>().ok()
    }))
    .max()
    .unwrap_or(0)
}

/// The `backend` of each stick table `lb`'s policies track into (one per zone and kind).
pub(super) fn stick_tables(lb: &LoadBalancer) -> String {
    let mut all = BTreeMap::new();
    let policies = lb.listeners.iter().flat_map(|l| &l.policies);
    for limit in policies.filter_map(|p| p.options.as_ref()?.rate_limit.as_ref()) {
        let t = tables(limit);
        all.extend(t.second.into_iter().chain(t.minute));
    }
    let mut s = String::new();
    for (name, store) in all {
        // An entry outlives its last request by two windows (the sliding window reads the
        // previous one), 30 s at least (requests in progress).
        let expire = (2 * longest(&store) + 1000).max(30_000);
        let _ = write!(
            s,
            "\nbackend {name}\n    stick-table type ipv6 size 100k expire {}ms store {store}\n",
            expire
        );
    }
    s
}

/// The lines of `policy`'s limits (its lines test `when`: its id in `txn.policy`): refusals
/// from the counts so far, then the request counted. Empty without limits.
pub(super) fn lines(policy: &L7Policy, when: &str, status: u16) -> String {
    let Some(limit) = policy.options.as_ref().and_then(|o| o.rate_limit.as_ref()) else {
        return String::new();
    };
    if super::auth::redirects(policy) {
        return String::new();
    }
    let status = if (200..=599).contains(&status) {
        status
    } else {
        503
    };
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let limited = if limit.allow.is_empty() {
        when.to_owned()
    } else {
        let ranges: Vec<String> = limit.allow.iter().map(|c| c.to_string()).collect();
        format!("{when} !{{ src {} }}", ranges.join(" "))
    };
    let t = tables(limit);
    let mut refusals = Vec::new();
    let mut tracks = Vec::new();
    if let Some((name, _)) = &t.second {
        if let Some(rps) = limit.rps {
            let (_, holds) = window(rps, 1000, limit.burst_multiplier);
            refusals.push(format!("{{ src,table_http_req_rate({name}) ge {holds} }}"));
        }
        if let Some(n) = limit.connections {
            refusals.push(format!("{{ src,table_conn_cur({name}) ge {n} }}"));
        }
        tracks.push(format!("track-sc1 src table {name}"));
    }
    if let (Some((name, _)), Some(rpm)) = (&t.minute, limit.rpm) {
        let (_, holds) = window(rpm, 60_000, limit.burst_multiplier);
        refusals.push(format!("{{ src,table_http_req_rate({name}) ge {holds} }}"));
        tracks.push(format!("track-sc2 src table {name}"));
    }
    let mut s = String::new();
    for refusal in refusals {
        let _ = writeln!(
            s,
            "    http-request return status {status} content-type \"text/plain; charset=utf-8\" string \"{status} {reason}\\n\" {limited} {refusal}"
        );
    }
    for track in tracks {
        let _ = writeln!(s, "    http-request {track} {limited}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_the_burst_and_the_first_request_at_the_rate() {
        // One a second, burst 2: three requests in three seconds.
        assert_eq!(window(1, 1000, 2), (3000, 3));
        // ingress-nginx's default multiplier: 10 rps → 51 in 5.1 s.
        assert_eq!(window(10, 1000, 5), (5100, 51));
        // 30 a minute, burst 30: 31 in 62 s.
        assert_eq!(window(30, 60_000, 1), (62_000, 31));
        // Huge values stay within haproxy's 32-bit periods.
        assert!(window(1, 60_000, u32::MAX).0 <= u64::from(u32::MAX));
    }
}
