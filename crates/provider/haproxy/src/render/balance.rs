//! A pool's balancing and health in haproxy's terms, as the built-in proxy serves them
//! (docs/balancing.md lists the differences haproxy cannot avoid):
//!
//! - round robin: `balance roundrobin` (weighted);
//! - least request: `balance leastconn` (fewest connections in flight, round robin among
//!   equals; haproxy has no latency EWMA);
//! - hash: `hash-type consistent` with `balance hdr(name)`, `balance hash req.cook(name)`,
//!   `balance source` or `balance uri whole`; a request without the key gets round robin;
//! - cookie affinity: `cookie NAME insert indirect nocache httponly`, `Max-Age` and `Path` as
//!   `attr`, `option redispatch` (a cookie naming a server that is down is chosen again), and
//!   per server `cookie <value>`, the same value the proxy uses (a hash of the member id);
//! - passive health: `observe layer7 error-limit N on-error mark-down`, which needs `check`:
//!   a server marked down comes back after one passed check, made every ejection time;
//! - active health: `option httpchk`, `http-check send meth GET uri PATH hdr Host SERVICE`,
//!   `http-check expect status 200-399`, `check inter fall rise`, `timeout check`.
//!
//! Checks the descriptor limit leaves no room for ([`super::fit`]) are left out, and with
//! them what needs them (`observe` for passive health, `option httpchk` for active).

use super::Checks;
use crate::quote::word;
use portico_balance::hash::hash64;
use portico_model::{Algorithm, Diagnostic, HashKey, MemberId, Pool};
use std::fmt::Write as _;

/// The backend's balancing lines (the `balance` line first).
pub(super) fn backend_lines(
    pool: &Pool,
    checks: Checks,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    let mut s = String::new();
    let balance = match &pool.algorithm {
        Algorithm::RoundRobin => "roundrobin".to_owned(),
        Algorithm::LeastRequest => "leastconn".to_owned(),
        Algorithm::Hash(key) => match hash_balance(key) {
            Some(line) => line,
            None => {
                diagnostics.push(Diagnostic::warning(
                    pool.service.clone(),
                    "metadata.annotations",
                    format!(
                        "pool {}: haproxy hashes only header and cookie names of letters, \
                         digits, '-', '_' and '.'; it balances this pool by round robin",
                        pool.name
                    ),
                ));
                "roundrobin".to_owned()
            }
        },
    };
    let _ = writeln!(s, "    balance {balance}");
    if balance != "roundrobin" && balance != "leastconn" {
        s.push_str("    hash-type consistent\n");
    }
    let settings = &pool.settings;
    if let Some(affinity) = &settings.affinity {
        let quoted = |v: &str| word(v).ok();
        let name = quoted(&affinity.name);
        let mut attrs = String::new();
        if let Some(age) = affinity.max_age_s {
            let _ = write!(attrs, " attr \"Max-Age={age}\"");
        }
        if let Some(path) = affinity.path.as_deref().filter(|p| *p != "/") {
            match quoted(&format!("Path={path}")) {
                Some(attr) => {
                    let _ = write!(attrs, " attr {attr}");
                }
                None => attrs.clear(),
            }
        }
        // A request whose cookie names a down server goes elsewhere: every backend has
        // `option redispatch 1` from its retry settings (backend.rs).
        if let Some(name) = name {
            let _ = writeln!(
                s,
                "    cookie {name} insert indirect nocache httponly{attrs}"
            );
        }
    }
    if let Some(active) = settings.active.as_ref().filter(|_| checks.active) {
        let path = word(&active.path).ok();
        let host = word(&check_host(pool)).ok();
        if let (Some(path), Some(host)) = (path, host) {
            let _ = writeln!(
                s,
                "    option httpchk\n    http-check send meth GET uri {path} hdr Host {host}\n    http-check expect status 200-399\n    timeout check {}ms",
                active.timeout_ms
            );
        }
    }
    s
}

/// What the proxy sends as `Host` in its checks: the Service's cluster name.
fn check_host(pool: &Pool) -> String {
    format!("{}.{}.svc", pool.service.name, pool.service.namespace)
}

/// The `balance` argument for a hash key, if haproxy can name it.
fn hash_balance(key: &HashKey) -> Option<String> {
    let plain = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    match key {
        HashKey::Header(name) if plain(name) => Some(format!("hdr({name})")),
        HashKey::Cookie(name) if plain(name) => Some(format!("hash req.cook({name})")),
        HashKey::Header(_) | HashKey::Cookie(_) => None,
        HashKey::ClientAddress => Some("source".to_owned()),
        HashKey::RequestUri => Some("uri whole".to_owned()),
    }
}

/// The affinity cookie's value for a member, as the proxy sets it: its key in hex.
pub fn cookie_value(member: MemberId) -> String {
    format!("{:016x}", hash64(0, member.0.as_bytes()))
}

/// The health and affinity options of one `server` line (with a leading space); `check` only
/// where `checks` allows it.
pub(super) fn server_options(pool: &Pool, member: MemberId, checks: Checks) -> String {
    let settings = &pool.settings;
    let mut s = String::new();
    if settings.affinity.is_some() {
        let _ = write!(s, " cookie {}", cookie_value(member));
    }
    let passive = &settings.passive;
    let checked = match &settings.active {
        Some(_) => checks.active,
        None => checks.passive && passive.failures > 0,
    };
    if !checked {
        return s;
    }
    match &settings.active {
        Some(active) => {
            let _ = write!(
                s,
                " check inter {}ms fall {} rise {}",
                active.interval_ms.max(1),
                active.unhealthy.max(1),
                active.healthy.max(1)
            );
        }
        None if passive.failures > 0 => {
            // The check only brings a marked-down server back: a connection every ejection
            // time.
            let _ = write!(
                s,
                " check inter {0}ms downinter {0}ms fall 3 rise 1",
                passive.ejection_ms.max(1)
            );
        }
        None => {}
    }
    if passive.failures > 0 {
        let _ = write!(
            s,
            " observe layer7 error-limit {} on-error mark-down",
            passive.failures
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_keys_haproxy_can_name() {
        assert_eq!(
            hash_balance(&HashKey::Header("x-user".into())).unwrap(),
            "hdr(x-user)"
        );
        assert_eq!(
            hash_balance(&HashKey::Cookie("sess".into())).unwrap(),
            "hash req.cook(sess)"
        );
        assert_eq!(hash_balance(&HashKey::ClientAddress).unwrap(), "source");
        assert_eq!(hash_balance(&HashKey::RequestUri).unwrap(), "uri whole");
        assert_eq!(hash_balance(&HashKey::Header("x$y".into())), None);
        assert_eq!(hash_balance(&HashKey::Cookie("a)b".into())), None);
    }
}
