//! One `backend` per pool (named by its UUID), and Portico's own backends: 404 when nothing
//! matches, a policy's rejection, the HTTP → HTTPS redirect.

use super::{Checks, Server};
use portico_model::{
    Diagnostic, Limits, LoadBalancer, MemberId, Pool, PoolId, PoolProtocol, PoolSettings,
    SubjectAltName,
};
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
    /// Gateway API redirects by backend name: their `http-request redirect` lines.
    gateway_redirects: std::collections::BTreeMap<String, String>,
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

    /// A Gateway API RequestRedirect without a path change (see
    /// [`super::frontend::redirect_line`]): its backend's name.
    pub(super) fn gateway_redirect(&mut self, line: String) -> String {
        let name = format!("portico_redirect_{}", portico_model::stable_uuid(&line));
        self.gateway_redirects.insert(name.clone(), line);
        name
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
        for (name, line) in &self.gateway_redirects {
            let _ = write!(s, "\nbackend {name}\n    {line}\n");
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
/// `checks`: which servers may carry `check` (the descriptor limit's [`super::fit`]).
pub(super) fn pools(
    lb: &LoadBalancer,
    servers: &mut Vec<Server>,
    checks: Checks,
    input: &super::Input<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    let limits = input.limits;
    let timed = route_timeouts(lb);
    let mut s = String::new();
    for pool in &lb.pools {
        let proto = protocol(pool, input, diagnostics);
        let balance = super::balance::backend_lines(pool, checks, diagnostics);
        let mut first = super::access::backend(pool, input.access_log.is_some());
        first.push_str(&settings(pool, limits));
        if timed {
            first.push_str(ROUTE_TIMEOUT);
        }
        s.push_str(&pool_header(pool.id, &balance, &first));
        let options = |member| super::balance::server_options(pool, member, checks);
        for member in &pool.members {
            let server = server(pool, member);
            s.push_str(&server_line(&proto, &server, &options(server.name)));
            servers.push(server);
        }
        s.push_str(&spare_lines(pool, &proto, &options(MemberId::derive(""))));
    }
    s
}

/// A route's timeout (HTTPRoute `timeouts`, in milliseconds in `txn.timeout`, set by its
/// policy's lines: [`super::policy`]) as the server timeout of the request: haproxy takes
/// `set-timeout` in a backend only.
pub(super) const ROUTE_TIMEOUT: &str =
    "    http-request set-timeout server var(txn.timeout) if { var(txn.timeout) -m found }\n";

/// Whether a policy of `lb` (or one of its shares) has HTTPRoute timeouts: only then do its
/// backends read `txn.timeout`.
fn route_timeouts(lb: &LoadBalancer) -> bool {
    let timed = |o: Option<&portico_model::PolicyOptions>| {
        o.is_some_and(|o| o.timeouts != portico_model::Timeouts::default())
    };
    let policies = lb.listeners.iter().flat_map(|l| &l.policies);
    policies.into_iter().any(|p| {
        let shares = match &p.action {
            portico_model::PolicyAction::RedirectToPools { pools } => pools.as_slice(),
            _ => &[],
        };
        timed(p.options.as_deref()) || shares.iter().any(|s| timed(s.options.as_deref()))
    })
}

/// The server slot contents of `pool`'s `member`.
pub(super) fn server(pool: &Pool, member: &portico_model::Member) -> Server {
    Server {
        backend: pool.id,
        name: member.id,
        address: member.address,
        port: member.port,
        weight: member.weight.min(MAX_WEIGHT),
        ready: member.ready,
    }
}

/// Spare server slots per pool: a member added later takes one through the runtime API
/// instead of a reload (a replaced member takes the slot of the one it replaces). One: every
/// server with checks counts a file descriptor at start, so spares cost descriptors (see
/// [`super::fit`]). None for cookie affinity, whose cookie value is the member's own.
pub const SPARE_SLOTS: usize = 1;

/// The name of spare slot `n` (from 1).
fn spare_name(n: usize) -> String {
    format!("portico-spare-{n}")
}

/// The names of `pool`'s spare slots.
pub(super) fn spares(pool: &Pool) -> Vec<String> {
    let n = if pool.settings.affinity.is_some() {
        0
    } else {
        SPARE_SLOTS
    };
    (1..=n).map(spare_name).collect()
}

/// The spare slots: the members' `options`, no address, in maintenance.
fn spare_lines(pool: &Pool, proto: &str, options: &str) -> String {
    spares(pool)
        .iter()
        .map(|name| format!("    server {name} 0.0.0.0:0 weight 1{proto}{options} disabled\n"))
        .collect()
}

/// The pool's settings, as the built-in proxy applies them: who may use it (403), the body
/// size (413), timeouts and retries. Every value is a number or an address range the model
/// parsed: nothing here is the user's text.
fn settings(pool: &Pool, limits: &Limits) -> String {
    let settings = &pool.settings;
    let mut s = String::new();
    if !settings.deny_sources.is_empty() {
        let ranges: Vec<String> = settings
            .deny_sources
            .iter()
            .map(|c| c.to_string())
            .collect();
        let _ = writeln!(
            s,
            "    http-request deny deny_status 403 if {{ src {} }}",
            ranges.join(" ")
        );
    }
    if !settings.allow_sources.is_empty() {
        let ranges: Vec<String> = settings
            .allow_sources
            .iter()
            .map(|c| c.to_string())
            .collect();
        let _ = writeln!(
            s,
            "    http-request deny deny_status 403 unless {{ src {} }}",
            ranges.join(" ")
        );
    }
    let max_body = settings.max_body_bytes.unwrap_or(limits.max_body_bytes);
    if max_body > 0 {
        let _ = writeln!(
            s,
            "    http-request deny deny_status 413 if {{ req.hdr_val(content-length) gt {max_body} }}"
        );
        // A chunked body has no length up front: haproxy waits for up to the limit and one
        // byte more, as far as its buffer holds (docs/upstreams.md).
        if max_body < CHUNKED_CHECK_MAX {
            let _ = writeln!(
                s,
                "    http-request wait-for-body time {} at-least {} if {{ req.hdr(transfer-encoding) -m found }}
    http-request deny deny_status 413 if {{ req.body_size gt {max_body} }}",
                super::global::millis(limits.body_timeout),
                max_body + 1
            );
        }
    }
    let connect = settings
        .connect_timeout()
        .unwrap_or(PoolSettings::DEFAULT_CONNECT_TIMEOUT);
    let _ = writeln!(s, "    timeout connect {}", super::global::millis(connect));
    if let Some(read) = settings.read_timeout() {
        let _ = writeln!(s, "    timeout server {}", super::global::millis(read));
    }
    let members = pool.members.len().max(1);
    let tries = match usize::try_from(settings.tries()).unwrap_or(usize::MAX) {
        0 => members,
        tries => tries.min(members),
    };
    // A retry goes to another server (`redispatch 1`), after a failed connect, or after a
    // close without any response byte for an idempotent request without a body, as in the
    // proxy: haproxy itself would replay any request it kept.
    let _ = writeln!(
        s,
        "    retries {}
    option redispatch 1
    retry-on conn-failure empty-response
    http-request disable-l7-retry if !{{ method GET HEAD OPTIONS TRACE PUT DELETE }} || {{ req.hdr_val(content-length) gt 0 }} || {{ req.hdr(transfer-encoding) -m found }}",
        tries - 1
    );
    s
}

/// Chunked bodies are measured only below this size: haproxy holds what it waits for in one
/// buffer (`tune.bufsize`, the head's limit plus 1 KiB).
const CHUNKED_CHECK_MAX: u64 = 8 * 1024;

/// The `server` parameters of the pool's protocol. TLS: `verify none` unless the pool asks to
/// verify; then against the pool's CA bundle file (`proxy-ssl-secret`) and its server name.
/// Without a usable bundle, the default certificate file stands in as the CA (Portico's own
/// self-signed certificate or the operator's, which no member's chain names as its issuer):
/// verification fails closed (502), never open. A BackendTLSPolicy's `subjectAltNames` other
/// than the server name alone haproxy cannot check: verification fails closed, with a
/// diagnostic on the Service.
fn protocol(pool: &Pool, input: &super::Input<'_>, diagnostics: &mut Vec<Diagnostic>) -> String {
    let alpn = match pool.protocol {
        PoolProtocol::H2c => return " proto h2".to_owned(),
        PoolProtocol::Http => return String::new(),
        PoolProtocol::Https => "",
        PoolProtocol::H2 => " alpn h2",
    };
    let tls = pool.settings.upstream_tls.clone().unwrap_or_default();
    let service = &pool.service;
    let name = tls
        .server_name
        .clone()
        .unwrap_or_else(|| format!("{}.{}.svc", service.name, service.namespace));
    let Ok(name) = crate::quote::word(&name) else {
        return " ssl verify none".to_owned();
    };
    // haproxy checks the certificate against the SNI it sends (`verifyhost` only applies
    // without SNI), so it cannot require a name other than the server name: a list of
    // subjectAltNames that is not just that name fails closed, the default certificate file
    // as the only CA (it signed no member's certificate).
    let unverifiable = match &tls.subject_alt_names[..] {
        [] => false,
        [SubjectAltName::Hostname(host)] => Some(host) != tls.server_name.as_ref(),
        _ => true,
    };
    if unverifiable && tls.verify {
        diagnostics.push(Diagnostic::warning(
            pool.service.clone(),
            "BackendTLSPolicy spec.validation.subjectAltNames",
            format!(
                "provider haproxy checks the backend's certificate against the hostname it sends as SNI and cannot require other names: connections to port {} fail (502); the built-in proxy checks them",
                pool.service_port
            ),
        ));
    }
    let verify = if tls.verify {
        let file = tls.ca.as_ref().and_then(|ca| input.ca_files.get(ca));
        let file = file.filter(|_| !unverifiable);
        let file = file.map_or(super::DEFAULT_CERTIFICATE_FILE, String::as_str);
        let Ok(ca) = crate::quote::path(&input.dir.join(file)) else {
            return " ssl verify required ca-file /dev/null".to_owned();
        };
        format!(" verify required ca-file {ca} verifyhost {name}")
    } else {
        " verify none".to_owned()
    };
    let sni = if tls.sni {
        format!(" sni str({name})")
    } else {
        String::new()
    };
    format!(" ssl{verify}{sni}{alpn}")
}

fn server_line(proto: &str, server: &Server, options: &str) -> String {
    let disabled = if server.ready { "" } else { " disabled" };
    let addr = SocketAddr::new(server.address, server.port);
    format!(
        "    server {} {addr} weight {}{proto}{options}{disabled}\n",
        server.name, server.weight
    )
}
