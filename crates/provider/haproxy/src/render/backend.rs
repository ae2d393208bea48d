//! One `backend` per pool (named by its UUID), and Portico's own backends: 404 when nothing
//! matches, a policy's rejection, the HTTP → HTTPS redirect.

use super::Server;
use portico_model::{Diagnostic, LoadBalancer, Pool, PoolId, PoolProtocol};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;

const PLAIN: &str = "content-type \"text/plain; charset=utf-8\"";
/// haproxy's largest server weight.
const MAX_WEIGHT: u32 = 256;

/// The pools the frontends name, and which of Portico's own backends they need.
#[derive(Debug, Default)]
pub(super) struct Specials {
    pools: BTreeSet<PoolId>,
    no_route: bool,
    rejects: BTreeSet<u16>,
    redirects: BTreeSet<u16>,
}

impl Specials {
    pub(super) fn pool(&mut self, pool: PoolId) {
        self.pools.insert(pool);
    }

    pub(super) fn no_route(&mut self) -> String {
        self.no_route = true;
        "portico_no_route".to_owned()
    }

    /// A status haproxy's `return` cannot send becomes 403, as in the proxy.
    pub(super) fn reject(&mut self, status: u16) -> String {
        let status = if (200..=599).contains(&status) {
            status
        } else {
            403
        };
        self.rejects.insert(status);
        format!("portico_reject_{status}")
    }

    /// A code haproxy's `redirect` cannot send becomes 308.
    pub(super) fn redirect(&mut self, status: u16) -> String {
        let status = if matches!(status, 301 | 302 | 303 | 307 | 308) {
            status
        } else {
            308
        };
        self.redirects.insert(status);
        format!("portico_redirect_https_{status}")
    }

    /// Empty backends (503) for named pools the load balancer does not have, then Portico's own.
    pub(super) fn render(&self, lb: &LoadBalancer, https: Option<SocketAddr>) -> String {
        let mut s = String::new();
        for id in self.pools.iter().filter(|id| lb.pool(**id).is_none()) {
            s.push_str(&pool_header(*id, "    balance roundrobin\n", ""));
        }
        if self.no_route {
            s.push_str(&returning("portico_no_route", 404));
        }
        for status in &self.rejects {
            s.push_str(&returning(&format!("portico_reject_{status}"), *status));
        }
        let port = match https.map(|a| a.port()) {
            None | Some(443) => String::new(),
            Some(port) => format!(":{port}"),
        };
        for code in &self.redirects {
            let _ = write!(
                s,
                "\nbackend portico_redirect_https_{code}\n    http-request redirect location \"https://%[var(txn.host)]{port}%[pathq]\" code {code}\n"
            );
        }
        s
    }
}

/// A backend that answers `status` with a short text body, as the proxy does.
fn returning(name: &str, status: u16) -> String {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!(
        "\nbackend {name}\n    http-request return status {status} {PLAIN} string \"{status} {reason}\\n\"\n"
    )
}

/// `balance` holds the balancing lines; `first` comes before the 503 answer (the access
/// log's pool name).
fn pool_header(id: PoolId, balance: &str, first: &str) -> String {
    format!(
        "\nbackend {id}\n{balance}{first}    http-request return status 503 {PLAIN} string \"503 Service Unavailable\\n\" if {{ nbsrv eq 0 }} !{{ stopping }}\n"
    )
}

/// The backends of the load balancer's pools, in pool order; `servers` gets each server.
pub(super) fn pools(
    lb: &LoadBalancer,
    servers: &mut Vec<Server>,
    logged: bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    let mut s = String::new();
    for pool in &lb.pools {
        let balance = super::balance::backend_lines(pool, diagnostics);
        s.push_str(&pool_header(
            pool.id,
            &balance,
            &super::access::backend(pool, logged),
        ));
        for member in &pool.members {
            let server = Server {
                backend: pool.id,
                name: member.id,
                address: member.address,
                port: member.port,
                weight: member.weight.min(MAX_WEIGHT),
                ready: member.ready,
            };
            s.push_str(&server_line(pool, &server));
            servers.push(server);
        }
    }
    s
}

fn server_line(pool: &Pool, server: &Server) -> String {
    let proto = match pool.protocol {
        PoolProtocol::H2c => " proto h2",
        PoolProtocol::Http => "",
        PoolProtocol::Https => " ssl verify none",
        PoolProtocol::H2 => " ssl verify none alpn h2",
    };
    let disabled = if server.ready { "" } else { " disabled" };
    let addr = SocketAddr::new(server.address, server.port);
    let options = super::balance::server_options(pool, server.name);
    format!(
        "    server {} {addr} weight {}{proto}{options}{disabled}\n",
        server.name, server.weight
    )
}
