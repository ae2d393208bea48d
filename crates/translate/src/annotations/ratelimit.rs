//! `limit-rps`, `limit-rpm`, `limit-connections` with `limit-burst-multiplier` and
//! `limit-whitelist`: ingress-nginx's per-client limits, counted per Ingress. A bad value is a
//! warning and that limit is not applied; a bad allowlist entry is left out (fewer clients
//! are exempt, never more).

use super::{Reader, parse};
use portico_model::{Cidr, RateLimit};

const BURST_MULTIPLIER: u32 = 5;

pub(super) fn rate_limit(r: &mut Reader<'_>) -> Option<RateLimit> {
    let positive = |v: &str| match parse::u32_value(v) {
        Ok(0) => Err("must be more than 0".to_owned()),
        other => other,
    };
    let rps = r.value("limit-rps", positive);
    let rpm = r.value("limit-rpm", positive);
    let connections = r.value("limit-connections", positive);
    let burst_multiplier = r.value("limit-burst-multiplier", positive);
    let allow = allowlist(r);
    if rps.is_none() && rpm.is_none() && connections.is_none() {
        return None;
    }
    Some(RateLimit {
        zone: format!("{}/{}", r.object.namespace, r.object.name),
        rps,
        rpm,
        connections,
        burst_multiplier: burst_multiplier.unwrap_or(BURST_MULTIPLIER),
        allow,
    })
}

fn allowlist(r: &mut Reader<'_>) -> Vec<Cidr> {
    let Some((name, raw)) = r.get("limit-whitelist") else {
        return Vec::new();
    };
    let raw = raw.to_owned();
    let (mut out, mut bad) = (Vec::new(), Vec::new());
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.parse::<Cidr>() {
            Ok(c) => out.push(c),
            Err(_) => bad.push(entry),
        }
    }
    if !bad.is_empty() {
        let message = format!(
            "invalid address ranges {bad:?} (e.g. 10.0.0.0/8, 192.168.1.7) are left out: those \
             clients are limited"
        );
        r.warn(&name, message);
    }
    out.sort();
    out.dedup();
    out
}
