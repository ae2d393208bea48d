//! One `frontend` per listener: the bind, the normalized host, ACLs named by policy UUID and
//! `use_backend` lines in policy order.

use super::backend::Specials;
use super::reduce::{HostMatch, PathMatch, reduce};
use super::{CRT_LIST_FILE, DEFAULT_CERTIFICATE_FILE, Input, Rendered};
use crate::quote::{self, Unquotable};
use portico_model::{Diagnostic, L7Policy, Listener, LoadBalancer, PolicyAction, Protocol};
use std::fmt::Write as _;

/// The request host as the proxy routes on it: lower-cased, without port, without a trailing
/// dot (`[::1]:80` keeps its brackets).
const HOST_VARIABLE: &str = "    http-request set-var(txn.host) req.hdr(host),lower,regsub(':[0-9]*$',''),regsub('\\.$','')\n";

pub(super) fn frontend(
    lb: &LoadBalancer,
    listener: &Listener,
    input: &Input<'_>,
    specials: &mut Specials,
    out: &mut Rendered,
) -> String {
    let Some(bind) = bind_line(lb, listener, input, out) else {
        return String::new();
    };
    let scheme = match listener.protocol {
        Protocol::TerminatedHttps => "https",
        _ => "http",
    };
    let mut s = format!(
        "\nfrontend {}\n{bind}{}    option forwardfor\n{HOST_VARIABLE}",
        listener.id,
        super::global::frontend_limits(
            input.limits,
            &super::access::frontend(input.access_log.is_some())
        ),
    );
    let _ = writeln!(s, "    http-request set-header X-Forwarded-Proto {scheme}");
    s.push_str("    http-request set-header X-Forwarded-Host %[req.hdr(host)]\n");
    for policy in &listener.policies {
        match policy_lines(policy, specials) {
            Ok(lines) => s.push_str(&lines),
            Err(Unquotable) => out.diagnostics.push(unquotable(policy)),
        }
    }
    let default = match listener.default_pool {
        Some(pool) => {
            specials.pool(pool);
            pool.to_string()
        }
        None => specials.no_route(),
    };
    let _ = writeln!(s, "    default_backend {default}");
    s
}

fn unquotable(policy: &L7Policy) -> Diagnostic {
    Diagnostic::error(
        policy.source.clone(),
        "spec.rules",
        format!(
            "a host or path of policy {} {}; it is not served by haproxy",
            policy.id, Unquotable
        ),
    )
}

/// The `bind` line, or `None` (with a diagnostic when that is a problem) when the listener
/// has no address or a protocol haproxy does not serve here.
fn bind_line(
    lb: &LoadBalancer,
    listener: &Listener,
    input: &Input<'_>,
    out: &mut Rendered,
) -> Option<String> {
    match listener.protocol {
        Protocol::Http => Some(format!("    bind {}\n", input.binds.http?)),
        Protocol::TerminatedHttps => {
            let addr = input.binds.https?;
            let list = quote::path(&input.dir.join(CRT_LIST_FILE)).ok()?;
            Some(format!(
                "    bind {addr} ssl crt {DEFAULT_CERTIFICATE_FILE} crt-list {list} alpn h2,http/1.1 ssl-min-ver TLSv1.2\n"
            ))
        }
        Protocol::Tcp | Protocol::Udp => {
            let class = lb.origin.clone();
            let message = format!(
                "listener {} is {:?}: the haproxy provider serves HTTP and TERMINATED_HTTPS only",
                listener.id, listener.protocol
            );
            out.diagnostics
                .push(Diagnostic::warning(class, "", message));
            None
        }
    }
}

/// The ACLs and the `use_backend` line of one policy; nothing when its rules never match.
fn policy_lines(policy: &L7Policy, specials: &mut Specials) -> Result<String, Unquotable> {
    let Some((host, path)) = reduce(&policy.rules) else {
        return Ok(String::new());
    };
    let id = policy.id;
    let mut acls = String::new();
    let mut conditions = Vec::new();
    match host {
        HostMatch::Any => {}
        HostMatch::Exact(h) => {
            let _ = writeln!(
                acls,
                "    acl {id}_host var(txn.host) -m str -- {}",
                quote::word(&h)?
            );
            conditions.push(format!("{id}_host"));
        }
        HostMatch::Wildcard(suffix) => {
            let end = quote::word(&format!(".{suffix}"))?;
            let dots = suffix.bytes().filter(|b| *b == b'.').count() + 1;
            let _ = writeln!(acls, "    acl {id}_host var(txn.host) -m end -- {end}");
            let _ = writeln!(
                acls,
                "    acl {id}_label var(txn.host) -m reg -- '^[^.]+(\\.[^.]*){{{dots}}}$'"
            );
            conditions.push(format!("{id}_host {id}_label"));
        }
    }
    match path {
        PathMatch::Prefix(p) if p == "/" => {}
        PathMatch::Prefix(p) => {
            let _ = writeln!(
                acls,
                "    acl {id}_path path -m str -- {}",
                quote::word(&p)?
            );
            let _ = writeln!(
                acls,
                "    acl {id}_path path -m beg -- {}",
                quote::word(&format!("{p}/"))?
            );
            conditions.push(format!("{id}_path"));
        }
        PathMatch::Exact(p) => {
            let _ = writeln!(
                acls,
                "    acl {id}_path path -m str -- {}",
                quote::word(&p)?
            );
            conditions.push(format!("{id}_path"));
        }
    }
    let backend = match &policy.action {
        PolicyAction::RedirectToPool { pool } => {
            specials.pool(*pool);
            pool.to_string()
        }
        PolicyAction::Reject { status } => specials.reject(*status),
        PolicyAction::RedirectToHttps { status } => specials.redirect(*status),
    };
    let condition = if conditions.is_empty() {
        String::new()
    } else {
        format!(" if {}", conditions.join(" "))
    };
    let _ = writeln!(acls, "    use_backend {backend}{condition}");
    Ok(acls)
}
