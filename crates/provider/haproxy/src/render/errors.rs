//! ingress-nginx's `default-backend` annotation: when the pool a policy chose has no usable
//! server (`nbsrv` 0: no ready member, or every one down by its checks), the request goes to
//! the default backend's pool instead, with the headers ingress-nginx sends it (`X-Code:
//! 503`, `X-Format` from `Accept`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`,
//! `X-Service-Name`, `X-Service-Port`; a client's `X-Request-ID` passes as it came). The lines
//! come before the policy's other lines, so `X-Original-URI` is the URI as the client sent
//! it and a rewrite still applies, as in the proxy. `custom-http-errors` is not served here:
//! haproxy 2.6 cannot answer a status with a page fetched from another backend.

use super::backend::Specials;
use super::policy::Refused;
use crate::quote;
use portico_model::{L7Policy, PolicyAction, PoolId};
use std::fmt::Write as _;

/// The lines that send `policy`'s requests to its default backend when their pool has no
/// usable server; empty without one.
pub(super) fn unavailable(policy: &L7Policy, specials: &mut Specials) -> Result<String, Refused> {
    let Some(errors) = policy.options.as_ref().and_then(|o| o.errors.as_ref()) else {
        return Ok(String::new());
    };
    if !errors.unavailable {
        return Ok(String::new());
    }
    let fields = [
        ("X-Namespace", &errors.namespace),
        ("X-Ingress-Name", &errors.ingress),
        ("X-Service-Name", &errors.service),
        ("X-Service-Port", &errors.service_port),
    ];
    let mut words = Vec::with_capacity(fields.len());
    for (name, value) in fields {
        words.push((name, word(value)?));
    }
    specials.pool(errors.pool);
    let mut s = String::new();
    for pool in pools(&policy.action) {
        // A share's own lines test `<policy>.<n>`: `beg` takes both.
        let when = format!(
            "if {{ var(txn.policy) -m beg {} }} {{ var(txn.route) -m beg {pool} }} {{ nbsrv({pool}) eq 0 }}",
            policy.id
        );
        let _ = writeln!(s, "    http-request set-header X-Code 503 {when}");
        let accept = "{ req.fhdr(accept) -m found }";
        let _ = writeln!(
            s,
            "    http-request set-header X-Format %[req.fhdr(accept)] {when} {accept}"
        );
        let _ = writeln!(
            s,
            "    http-request set-header X-Format text/html {when} !{accept}"
        );
        let _ = writeln!(
            s,
            "    http-request set-header X-Original-URI %[pathq] {when}"
        );
        for (name, value) in &words {
            let _ = writeln!(s, "    http-request set-header {name} {value} {when}");
        }
        // Last: the lines above test the route.
        let _ = writeln!(
            s,
            "    http-request set-var(txn.route) str({}~{}) {when}",
            errors.pool, policy.id
        );
    }
    Ok(s)
}

/// The distinct pools `action` may send a request to.
fn pools(action: &PolicyAction) -> Vec<PoolId> {
    let mut out: Vec<PoolId> = action.pools().collect();
    out.sort();
    out.dedup();
    out
}

/// A header value of the Ingress (names of Kubernetes objects and ports) as a quoted word;
/// haproxy would read a `%` as a format directive.
fn word(value: &str) -> Result<String, Refused> {
    let refused = |why: String| Refused {
        field: "default-backend",
        why,
    };
    if value.contains('%') {
        return Err(refused(format!(
            "header value {value:?} holds a %, which haproxy reads as a format directive"
        )));
    }
    quote::word(value).map_err(|e| refused(e.to_string()))
}
