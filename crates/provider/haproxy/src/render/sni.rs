//! TLS passthrough on the HTTPS port (`ssl-passthrough`, TLSRoutes on `tls.mode: Passthrough`
//! listeners): when the TERMINATED_HTTPS listener has passthrough hosts, a `mode tcp` frontend
//! takes the HTTPS address, waits for the ClientHello (`tcp-request inspect-delay`,
//! `req.ssl_hello_type 1`) and reads its server name (`req.ssl_sni`):
//!
//! - a passthrough host (its exact name, else its longest `*.suffix`, any number of labels:
//!   the built-in proxy's matching) goes, unterminated, to a `mode tcp` backend of its pool's
//!   members (as a Service's ports balance: see [`super::tcp`]);
//! - every other connection goes through an internal hop, a unix socket in the load
//!   balancer's directory, to the terminating HTTPS frontend, which binds that socket instead
//!   of the address. `send-proxy-v2` on the hop and `accept-proxy` on its bind keep the
//!   client's address for `X-Forwarded-For`, the access log and source ranges.
//!
//! Without passthrough hosts the configuration is what it was: the HTTPS frontend binds the
//! address itself.

use super::{Input, Rendered};
use portico_model::{Diagnostic, Listener, LoadBalancer, Pool, PoolId, Protocol, SniPassthrough};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The internal hop's socket (one per load balancer: it has one TERMINATED_HTTPS listener).
pub const HOP_SOCKET: &str = "https.sock";

/// The session variable holding the ClientHello's server name, as the proxy compares it:
/// lower-cased, without a trailing dot.
const SNI_VARIABLE: &str = "sess.portico_sni";

/// Whether `listener`'s HTTPS frontend binds the internal hop instead of the address: it has
/// passthrough hosts.
pub(super) fn hops(listener: &Listener) -> bool {
    listener.protocol == Protocol::TerminatedHttps
        && listener
            .tls
            .as_ref()
            .is_some_and(|t| !t.passthrough.is_empty())
}

/// The hop's address (`unix@` and its socket path, aliased as the stats socket is when the
/// directory is long) as one quoted word, or why it cannot be one.
pub(super) fn hop_address(input: &Input<'_>) -> Result<String, String> {
    let path = crate::files::socket(input.dir, HOP_SOCKET);
    let address = format!("unix@{}", path.to_string_lossy());
    crate::quote::word(&address).map_err(|e| e.to_string())
}

/// The passthrough frontend of `lb`'s HTTPS listener, the hop's backend and the `mode tcp`
/// backends of its pools ([`tcp_backend`]: beside their HTTP backends, which the same pools
/// may have for plain HTTP); empty without passthrough hosts. A host haproxy cannot select by
/// SNI is refused with a diagnostic.
pub(super) fn render(lb: &LoadBalancer, input: &Input<'_>, out: &mut Rendered) -> String {
    let passing = lb.listeners.iter().filter(|l| hops(l));
    let Some((listener, tls)) = passing.filter_map(|l| Some((l, l.tls.as_ref()?))).next() else {
        return String::new();
    };
    let Some(addr) = input.binds.https else {
        return String::new();
    };
    let entries = &tls.passthrough;
    let hop = match hop_address(input) {
        Ok(hop) => hop,
        Err(why) => {
            let message = format!("TLS passthrough is not served by haproxy: {why}");
            (out.diagnostics).push(Diagnostic::error(lb.origin.clone(), "", message));
            return String::new();
        }
    };
    let mut served: Vec<&SniPassthrough> = Vec::new();
    for entry in entries {
        if entry.terminate {
            // Translation refuses such listeners for haproxy; never pass them through raw.
            let message = format!(
                "TLS of host {:?} (TLSRoute {}/{}) is to be terminated and its stream sent on: haproxy does not serve TLS listeners of tls.mode Terminate",
                entry.host, entry.source.namespace, entry.source.name
            );
            (out.diagnostics).push(Diagnostic::error(
                lb.origin.clone(),
                "spec.listeners",
                message,
            ));
            continue;
        }
        match refusal(entry) {
            Some(why) => out.diagnostics.push(Diagnostic::error(
                entry.source.clone(),
                "spec",
                format!(
                    "TLS passthrough of host {:?} is not served by haproxy: {why}",
                    entry.host
                ),
            )),
            None => served.push(entry),
        }
    }
    let transparent = if input.binds.transparent {
        " transparent"
    } else {
        ""
    };
    let accept_proxy = if input.limits.proxy_protocol {
        " accept-proxy"
    } else {
        ""
    };
    // `defaults` is for HTTP: its access log format (HTTP fields, refused in `mode tcp`) and
    // HTTP-only option are overridden. Passthrough connections are not logged.
    let mut s = format!(
        "\nfrontend {}-sni\n    mode tcp\n    no log\n    log-format \"-\"\n    no option idle-close-on-response\n",
        listener.id
    );
    let floating = input.binds.floating.into_iter();
    let addrs =
        std::iter::once(addr).chain(floating.map(|ip| std::net::SocketAddr::new(ip, addr.port())));
    for a in addrs {
        let _ = writeln!(s, "    bind {a}{transparent}{accept_proxy}");
    }
    let timeout = super::global::millis(input.limits.header_timeout);
    let _ = write!(
        s,
        "    tcp-request inspect-delay {timeout}\n    \
         tcp-request content set-var({SNI_VARIABLE}) req.ssl_sni,lower,regsub('\\.$','')\n    \
         tcp-request content set-var({port}) src_port\n    \
         tcp-request content accept if {{ req.ssl_hello_type 1 }}\n",
        port = super::tcp::PORT_VARIABLE,
    );
    for line in use_backends(&served) {
        let _ = writeln!(s, "    {line}");
    }
    let _ = write!(
        s,
        "    default_backend {id}-terminate\n\nbackend {id}-terminate\n    mode tcp\n    server https {hop} send-proxy-v2\n",
        id = listener.id,
    );
    let mut rendered = BTreeSet::new();
    for entry in &served {
        if !rendered.insert(entry.pool) {
            continue;
        }
        let name = tcp_backend(entry.pool);
        match lb.pool(entry.pool) {
            Some(pool) => {
                let mut pool = Pool::clone(pool);
                pool.id = name;
                out.spares.insert(name, super::backend::spares(&pool));
                let backend = super::tcp::backend(&pool, &input.tcp, &mut out.servers);
                let header = format!("\nbackend {name}\n");
                let body = backend.strip_prefix(&header).unwrap_or(&backend);
                let _ = write!(s, "{header}    mode tcp\n{body}");
            }
            // A pool the load balancer does not have: no server, connections are closed.
            None => {
                let _ = write!(s, "\nbackend {name}\n    mode tcp\n");
            }
        }
    }
    s
}

/// Why `entry` cannot be served, if it cannot.
fn refusal(entry: &SniPassthrough) -> Option<&'static str> {
    if !super::is_sni_host(&entry.host) {
        return Some("it is not a lower-case DNS name (or `*.` and one)");
    }
    None
}

/// The name of `pool`'s `mode tcp` backend (its own id names its HTTP backend). Its servers
/// are the pool's members under this name: the runtime API changes them as any other's.
pub(crate) fn tcp_backend(pool: PoolId) -> PoolId {
    PoolId::derive(&format!("{pool}/passthrough"))
}

/// Pure: the `use_backend` lines of the served entries in the order haproxy must try them:
/// exact names first, then wildcards by longest suffix (the proxy's matching). Hosts are
/// checked DNS names ([`super::is_sni_host`]): nothing in them is haproxy syntax.
pub(super) fn use_backends(entries: &[&SniPassthrough]) -> Vec<String> {
    let mut exact = Vec::new();
    let mut wildcard = Vec::new();
    for entry in entries {
        match entry.host.strip_prefix("*.") {
            Some(suffix) => wildcard.push((suffix, tcp_backend(entry.pool))),
            None => exact.push(format!(
                "use_backend {} if {{ var({SNI_VARIABLE}) -m str {} }}",
                tcp_backend(entry.pool),
                entry.host
            )),
        }
    }
    wildcard.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
    let wildcards = wildcard.into_iter().map(|(suffix, pool)| {
        format!("use_backend {pool} if {{ var({SNI_VARIABLE}) -m end .{suffix} }}")
    });
    exact.into_iter().chain(wildcards).collect()
}
