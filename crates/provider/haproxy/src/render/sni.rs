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
//! - a host whose TLS is terminated and sent on (TLSRoutes on `tls.mode: Terminate`
//!   listeners) goes through a second hop, a unix socket too, to a `mode tcp` frontend that
//!   terminates TLS with the HTTPS frontend's certificates (the same crt-list, no ALPN) and
//!   sends each name's decrypted stream (`ssl_fc_sni`) to its pool's `mode tcp` backend;
//! - a name such a listener covers that no route takes goes to a backend without server:
//!   the connection is closed.
//!
//! Without passthrough hosts the configuration is what it was: the HTTPS frontend binds the
//! address itself.

use super::{Input, Rendered};
use portico_model::{Diagnostic, Listener, LoadBalancer, Pool, PoolId, Protocol, SniPassthrough};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The internal hop's socket (one per load balancer: it has one TERMINATED_HTTPS listener).
pub const HOP_SOCKET: &str = "https.sock";

/// The socket of the hop to the frontend that terminates the TLS of TLSRoutes' hosts (on
/// `tls.mode: Terminate` listeners) and sends their streams on.
pub const STREAM_SOCKET: &str = "tls-stream.sock";

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
        match refusal(entry) {
            Some(why) => out.diagnostics.push(Diagnostic::error(
                entry.source.clone(),
                "spec",
                format!(
                    "TLS {} of host {:?} is not served by haproxy: {why}",
                    if entry.terminate {
                        "termination"
                    } else {
                        "passthrough"
                    },
                    entry.host
                ),
            )),
            None => served.push(entry),
        }
    }
    let refused: Vec<&str> = (tls.refused.iter())
        .filter(|h| super::is_sni_host(h))
        .map(String::as_str)
        .collect();
    let terminating = served.iter().any(|e| e.terminate);
    let stream = match terminating.then(|| stream_address(input)).transpose() {
        Ok(stream) => stream,
        Err(why) => {
            let message = format!("TLS termination of TLSRoutes is not served by haproxy: {why}");
            (out.diagnostics).push(Diagnostic::error(lb.origin.clone(), "", message));
            served.retain(|e| !e.terminate);
            None
        }
    };
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
    let id = listener.id;
    // `defaults` is for HTTP: its access log format (HTTP fields, refused in `mode tcp`) and
    // HTTP-only option are overridden. Passthrough connections are not logged.
    let tcp_frontend = |name: String| {
        format!(
            "\nfrontend {name}\n    mode tcp\n    no log\n    log-format \"-\"\n    no option idle-close-on-response\n"
        )
    };
    let mut s = tcp_frontend(format!("{id}-sni"));
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
    // Terminated hosts go through the stream hop, refused ones to a backend without server.
    let (stream_backend, refuse_backend) = (format!("{id}-stream"), format!("{id}-refuse"));
    let mut routes: Vec<(&str, String)> = (served.iter())
        .map(|e| {
            let backend = match e.terminate {
                true => stream_backend.clone(),
                false => tcp_backend(e.pool).to_string(),
            };
            (e.host.as_str(), backend)
        })
        .collect();
    let routed: BTreeSet<&str> = routes.iter().map(|(h, _)| *h).collect();
    let refusals = refused.iter().filter(|h| !routed.contains(**h));
    routes.extend(refusals.map(|h| (*h, refuse_backend.clone())));
    for line in use_backends(&routes, &format!("var({SNI_VARIABLE})")) {
        let _ = writeln!(s, "    {line}");
    }
    let _ = write!(
        s,
        "    default_backend {id}-terminate\n\nbackend {id}-terminate\n    mode tcp\n    server https {hop} send-proxy-v2\n",
    );
    if !refused.is_empty() || stream.is_some() {
        // No server: its connections are closed.
        let _ = write!(s, "\nbackend {refuse_backend}\n    mode tcp\n");
    }
    if let Some(stream) = &stream {
        // The terminating hop of TLSRoutes on `tls.mode: Terminate` listeners: the same
        // certificates as the HTTPS frontend, no ALPN (the stream is not HTTP), then each
        // host's decrypted stream to its pool's `mode tcp` backend.
        let list = crate::quote::path(&input.dir.join(super::CRT_LIST_FILE));
        let list = list.unwrap_or_default();
        let default = super::DEFAULT_CERTIFICATE_FILE;
        let _ = write!(
            s,
            "\nbackend {stream_backend}\n    mode tcp\n    server stream {stream} send-proxy-v2\n"
        );
        s.push_str(&tcp_frontend(stream_backend.clone()));
        let _ = write!(
            s,
            "    bind {stream} accept-proxy ssl crt {default} crt-list {list} ssl-min-ver TLSv1.2\n    \
             tcp-request content set-var({SNI_VARIABLE}) ssl_fc_sni,lower,regsub('\\.$','')\n    \
             tcp-request content set-var({port}) src_port\n",
            port = super::tcp::PORT_VARIABLE,
        );
        let terminated: Vec<(&str, String)> = (served.iter())
            .filter(|e| e.terminate)
            .map(|e| (e.host.as_str(), tcp_backend(e.pool).to_string()))
            .collect();
        for line in use_backends(&terminated, &format!("var({SNI_VARIABLE})")) {
            let _ = writeln!(s, "    {line}");
        }
        let _ = writeln!(s, "    default_backend {refuse_backend}");
    }
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

/// The stream hop's address (a second unix socket in the load balancer's directory), as
/// [`hop_address`].
pub(super) fn stream_address(input: &Input<'_>) -> Result<String, String> {
    let path = crate::files::socket(input.dir, STREAM_SOCKET);
    let address = format!("unix@{}", path.to_string_lossy());
    crate::quote::word(&address).map_err(|e| e.to_string())
}

/// Whether `listener` has hosts whose TLS haproxy terminates and sends on as a stream (a
/// second internal hop).
pub(super) fn streams(listener: &Listener) -> bool {
    listener.protocol == Protocol::TerminatedHttps
        && (listener.tls.as_ref()).is_some_and(|t| t.passthrough.iter().any(|e| e.terminate))
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

/// Pure: the `use_backend` lines of `(host, backend)` routes, matched on `sample` (the
/// lower-cased server name), in the order haproxy must try them: exact names first, then
/// wildcards by longest suffix (the proxy's matching). Hosts are checked DNS names
/// ([`super::is_sni_host`]): nothing in them is haproxy syntax.
pub(super) fn use_backends(routes: &[(&str, String)], sample: &str) -> Vec<String> {
    let mut exact = Vec::new();
    let mut wildcard = Vec::new();
    for (host, backend) in routes {
        match host.strip_prefix("*.") {
            Some(suffix) => wildcard.push((suffix, backend)),
            None => exact.push(format!(
                "use_backend {backend} if {{ {sample} -m str {host} }}"
            )),
        }
    }
    wildcard.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
    let wildcards = wildcard.into_iter().map(|(suffix, backend)| {
        format!("use_backend {backend} if {{ {sample} -m end .{suffix} }}")
    });
    exact.into_iter().chain(wildcards).collect()
}
