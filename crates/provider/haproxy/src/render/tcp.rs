//! A Service's load balancer (`portico.dev/provider: haproxy` on a Service of type
//! LoadBalancer): one `frontend` in `mode tcp` per TCP listener, bound on the VIP (and the
//! floating IP) at the Service port, and one `backend` per pool:
//!
//! - balancing by a consistent hash (`hash-type consistent`, the closest to provider `l4`'s
//!   Maglev table: a member change moves few flows): of the client's address and port, or,
//!   with `sessionAffinity: ClientIP`, of its address (`balance source`) with a stick table
//!   that remembers each client's member for the affinity timeout;
//! - `loadBalancerSourceRanges`: `tcp-request connection reject unless { src ... }` (the
//!   ranges are the model's parsed addresses, never the user's text);
//! - connect timeout and idle timeout (`--l4-connect-timeout`, `--l4-tcp-idle-timeout`),
//!   `retries` with `option redispatch 1`: a failed connect tries another member, up to
//!   `--l4-tries` members;
//! - `portico.dev/proxy-protocol: v2`: `send-proxy-v2` on every server;
//! - members change through the same server slots (runtime API, spare slots) as HTTP pools,
//!   so established connections stay.
//!
//! UDP listeners are not served: haproxy 2.6 has no UDP proxying (a warning names them).

use super::{Input, Rendered, Server, TcpLimits};
use portico_model::{
    Algorithm, Diagnostic, HashKey, Listener, LoadBalancer, Pool, Protocol, ProxyProtocol,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;

/// Whether `lb` is a Service's load balancer (or has TCP or UDP listeners).
pub(crate) fn is_l4(lb: &LoadBalancer) -> bool {
    lb.origin.kind == "Service"
        || (lb.listeners.iter()).any(|l| matches!(l.protocol, Protocol::Tcp | Protocol::Udp))
}

/// The session variable holding the client's port, for the flow hash.
pub(super) const PORT_VARIABLE: &str = "sess.portico_src_port";

/// Renders a Service's load balancer.
pub(super) fn render(lb: &LoadBalancer, input: &Input<'_>, tcp: &TcpLimits) -> Rendered {
    let mut out = Rendered::default();
    // No checks: only the listeners and the connections count.
    let ips = 1 + usize::from(input.binds.floating.is_some());
    let listeners = lb.listeners.iter().filter(|l| l.protocol == Protocol::Tcp);
    let needs = super::Needs {
        listeners: listeners.count() * ips,
        max_connections: input.limits.max_connections,
        ..super::Needs::default()
    };
    let fit = super::fit(input.descriptors, &needs);
    out.diagnostics.extend(fit.diagnostic(&lb.origin));
    let header = super::global::header(lb, input, Some(tcp), fit.maxconn, &mut out.diagnostics);
    let mut text = header;
    let mut used = BTreeSet::new();
    for listener in lb.listeners.iter() {
        match listener.protocol {
            Protocol::Tcp => {
                if let Some(s) = frontend(lb, listener, input, &mut out.diagnostics) {
                    text.push_str(&s);
                    used.extend(listener.default_pool);
                }
            }
            protocol => {
                let message = format!(
                    "port {} ({protocol:?}) is not served by provider haproxy: haproxy serves \
                     a Service's TCP ports only (haproxy 2.6 has no UDP proxying; provider l4 \
                     serves UDP)",
                    listener.port
                );
                let field = format!("listener {}", listener.name);
                (out.diagnostics).push(Diagnostic::warning(lb.origin.clone(), field, message));
            }
        }
    }
    for pool in lb.pools.iter().filter(|p| used.contains(&p.id)) {
        out.spares.insert(pool.id, super::backend::spares(pool));
        text.push_str(&backend(pool, tcp, &mut out.servers));
    }
    out.config = text;
    out.diagnostics.sort();
    out.diagnostics.dedup();
    out
}

/// The listener's frontend; `None` (with a diagnostic) without a VIP or a pool.
fn frontend(
    lb: &LoadBalancer,
    listener: &Listener,
    input: &Input<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    let field = || format!("listener {}", listener.name);
    let Some(vip) = lb.vip else {
        let message = "not served: provider haproxy needs a VIP for a Service's ports (start \
                       Portico with --vip-pool, or set spec.loadBalancerIP)";
        diagnostics.push(Diagnostic::warning(lb.origin.clone(), field(), message));
        return None;
    };
    let pool = listener.default_pool.and_then(|id| lb.pool(id))?;
    let transparent = if input.binds.transparent {
        " transparent"
    } else {
        ""
    };
    let mut s = format!("\nfrontend {}\n", listener.id);
    let floating = input.binds.floating.into_iter();
    for ip in std::iter::once(vip).chain(floating) {
        let addr = SocketAddr::new(ip, listener.port);
        let _ = writeln!(s, "    bind {addr}{transparent}");
    }
    let allow = &pool.settings.allow_sources;
    if !allow.is_empty() {
        // Cidr's Display: an address and a prefix length, both parsed.
        let ranges: Vec<String> = allow.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "    tcp-request connection reject unless {{ src {} }}",
            ranges.join(" ")
        );
    }
    if !client_affinity(pool) {
        let _ = writeln!(
            s,
            "    tcp-request connection set-var({PORT_VARIABLE}) src_port"
        );
    }
    let _ = writeln!(s, "    default_backend {}", pool.id);
    Some(s)
}

fn client_affinity(pool: &Pool) -> bool {
    pool.algorithm == Algorithm::Hash(HashKey::ClientAddress)
}

/// The pool's backend; `servers` gets each member's server slot.
pub(super) fn backend(pool: &Pool, tcp: &TcpLimits, servers: &mut Vec<Server>) -> String {
    let mut s = format!("\nbackend {}\n", pool.id);
    if client_affinity(pool) {
        let timeout = pool.settings.client_affinity_timeout_s.unwrap_or(10_800);
        let _ = write!(
            s,
            "    balance source\n    hash-type consistent\n    stick-table type ipv6 size 1m expire {timeout}s\n    stick on src\n"
        );
    } else {
        let _ = write!(
            s,
            "    balance hash src,concat(:,{PORT_VARIABLE})\n    hash-type consistent\n"
        );
    }
    // Not bounded by the number of members: the shape stays the same when members change.
    let tries = tcp.tries.max(1);
    let _ = writeln!(s, "    retries {}\n    option redispatch 1", tries - 1);
    let options = server_options(pool);
    for member in &pool.members {
        let server = super::backend::server(pool, member);
        let disabled = if server.ready { "" } else { " disabled" };
        let addr = SocketAddr::new(server.address, server.port);
        let _ = writeln!(
            s,
            "    server {} {addr} weight {}{options}{disabled}",
            server.name, server.weight
        );
        servers.push(server);
    }
    for name in super::backend::spares(pool) {
        let _ = writeln!(s, "    server {name} 0.0.0.0:0 weight 1{options} disabled");
    }
    s
}

/// The options of every server line of the pool, spare slots included (with a leading
/// space).
fn server_options(pool: &Pool) -> &'static str {
    match pool.settings.proxy_protocol {
        Some(ProxyProtocol::V2) => " send-proxy-v2",
        None => "",
    }
}
