//! Pure: one LoadBalancer → its haproxy.conf, crt-list and route maps (`global` with a stats
//! socket, `defaults`, a `frontend` per listener named by its UUID that looks the request up
//! in the listener's route maps ([`routes`]: host and path → backend, a fixed number of lines
//! however many Ingresses), a `backend` per pool named by its UUID with `server <member-uuid>
//! <ip>:<port> weight <w>`), with exact Ingress v1 semantics and the built-in proxy's 404 /
//! 503 / 502 answers.
//!
//! Every value from the model that is not Portico's own (ids, numbers, addresses) is quoted by
//! [`crate::quote`]; map entries hold visible ASCII only; a rule value haproxy cannot carry
//! makes its policy unserved, with a diagnostic on the Ingress it came from.

mod access;
mod auth;
mod backend;
mod balance;
mod conditions;
mod descriptors;
mod errors;
mod frontend;
mod global;
mod groups;
mod limits;
mod policy;
mod reduce;
mod regex;
mod rewrite;
pub mod routes;
mod sni;
mod tcp;

use portico_model::{Diagnostic, Limits, LoadBalancer, MemberId, ObjectRef, PoolId};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// File names inside the load balancer's directory.
pub const CONFIG_FILE: &str = "haproxy.conf";
pub const CRT_LIST_FILE: &str = "crt-list.txt";
pub const STATS_SOCKET: &str = "haproxy.sock";
pub const BAD_GATEWAY_FILE: &str = "502.http";
pub const DEFAULT_CERTIFICATE_FILE: &str = "default.pem";
/// The stick table that counts each client address's open connections.
pub const CLIENT_TABLE: &str = "client_connections";
pub use backend::SPARE_SLOTS;
pub use descriptors::{Checks, Fit, MIN_MAXCONN, Needs, Reduction, fit};
pub(crate) use frontend::bind_fix;
pub(crate) use tcp::is_l4;

/// The body haproxy answers with when every connection to a pool's members failed: the
/// built-in proxy's 502.
pub const BAD_GATEWAY_RESPONSE: &str = "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 16\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n502 Bad Gateway\n";

/// Where one load balancer's haproxy listens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Binds {
    /// For the HTTP listener.
    pub http: Option<SocketAddr>,
    /// For the TERMINATED_HTTPS listener.
    pub https: Option<SocketAddr>,
    /// Bind even while the address is not on any interface: haproxy's `transparent`, which
    /// sets IP_TRANSPARENT and, without CAP_NET_ADMIN, falls back to IP_FREEBIND (haproxy 2.6
    /// has no `freebind` keyword). For VIPs: a standby listens on them before it holds them.
    pub transparent: bool,
    /// A second address on the same ports: the load balancer's floating IP, which moves with
    /// its VIP.
    pub floating: Option<std::net::IpAddr>,
}

impl Binds {
    /// Every address and port bound: the HTTP and HTTPS addresses, and the floating IP on
    /// their ports.
    pub fn all(&self) -> Vec<SocketAddr> {
        let own = [self.http, self.https].into_iter().flatten();
        let floating = self.floating.into_iter().flat_map(|ip| {
            [self.http, self.https]
                .into_iter()
                .flatten()
                .map(move |a| SocketAddr::new(ip, a.port()))
        });
        own.chain(floating).collect()
    }
}

/// Deadlines of a Service's load balancer (TCP listeners): the `--l4-*` flags, as provider
/// `l4` applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLimits {
    /// `timeout connect`: connecting to one member.
    pub connect_timeout: std::time::Duration,
    /// `timeout client` and `timeout server`: a connection without bytes either way for this
    /// long is closed.
    pub idle_timeout: std::time::Duration,
    /// Most members one connection is tried on (`retries` is one less).
    pub tries: usize,
}

impl Default for TcpLimits {
    /// Provider `l4`'s defaults.
    fn default() -> Self {
        TcpLimits {
            connect_timeout: std::time::Duration::from_secs(5),
            idle_timeout: std::time::Duration::from_secs(3600),
            tries: 3,
        }
    }
}

/// What the render needs besides the load balancer.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The load balancer's directory (absolute): the stats socket, certificates and error
    /// files live there.
    pub dir: &'a Path,
    pub binds: Binds,
    /// The certificate file (inside `dir`) of each Secret with usable material.
    pub certificates: &'a BTreeMap<ObjectRef, String>,
    /// The CA bundle file (inside `dir`) of each `proxy-ssl-secret` with a usable bundle.
    pub ca_files: &'a BTreeMap<ObjectRef, String>,
    /// The users of basic-auth Secrets (`auth-secret`): their userlists ([`auth`]).
    pub credentials: &'a portico_model::Credentials,
    /// Deadlines, sizes and connection caps.
    pub limits: &'a Limits,
    /// Deadlines of Services' TCP listeners.
    pub tcp: TcpLimits,
    /// The unix datagram socket access log lines go to; `None`: no access log.
    pub access_log: Option<&'a Path>,
    /// The hard descriptor limit haproxy inherits (`None`: unlimited or unknown): `maxconn`
    /// and the health checks are fitted to it ([`fit`]).
    pub descriptors: Option<u64>,
}

/// One `server` line's runtime state: what the runtime API can change without a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pub backend: PoolId,
    pub name: MemberId,
    pub address: IpAddr,
    pub port: u16,
    pub weight: u32,
    pub ready: bool,
}

/// The files of one load balancer, and what the render could not serve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// haproxy.conf.
    pub config: String,
    /// crt-list.txt: certificate file and SNI host, one per line.
    pub crt_list: String,
    /// Every server, in configuration order.
    pub servers: Vec<Server>,
    /// The route maps (file name in the directory → key → backend), see [`routes`].
    pub maps: routes::Maps,
    /// Each pool's spare server slots (see [`SPARE_SLOTS`]).
    pub spares: BTreeMap<PoolId, Vec<String>>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Rendered {
    /// The configuration without its members: two renders whose shapes are equal differ only
    /// in their members (which spare slots and the runtime API can take: address, weight,
    /// readiness). A member's server line is left out when its options are those of its
    /// pool's spare slots; otherwise (cookie affinity: a cookie per member) its options stay,
    /// so adding or removing such a member changes the shape.
    pub fn shape(&self) -> String {
        let mut spare_options: BTreeMap<&str, &str> = BTreeMap::new();
        let mut backend = "";
        for line in self.config.lines() {
            if let Some(name) = line.strip_prefix("backend ") {
                backend = name;
            }
            if let Some((name, options)) = server_parts(line)
                && name.starts_with("portico-spare-")
            {
                spare_options.insert(backend, options);
            }
        }
        let mut out = Vec::new();
        let mut backend = "";
        for line in self.config.lines() {
            if let Some(name) = line.strip_prefix("backend ") {
                backend = name;
            }
            match server_parts(line) {
                Some((name, _)) if name.starts_with("portico-spare-") => out.push(line.to_owned()),
                Some((_, options)) if spare_options.get(backend) == Some(&options) => {}
                Some((_, options)) => out.push(format!("    server * {options}")),
                None => out.push(line.to_owned()),
            }
        }
        out.join("\n")
    }
}

/// A server line's name and its options: what follows the address and weight, without
/// `disabled`.
fn server_parts(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("    server ")?;
    let (name, rest) = rest.split_once(' ')?;
    let rest = rest.strip_suffix(" disabled").unwrap_or(rest);
    let (_address, rest) = rest.split_once(" weight ")?;
    Some((name, rest.split_once(' ').map_or("", |(_, o)| o)))
}

/// Pure: the servers of `pools` in the model's haproxy load balancers, per pool, when each of
/// them can change through the runtime API alone: `None` when one uses cookie affinity (its
/// members' server lines carry their own cookie, so only a reload changes them). Pools no
/// haproxy load balancer has are left out.
pub(crate) fn pool_servers(
    model: &portico_model::Model,
    pools: &std::collections::HashSet<PoolId>,
) -> Option<BTreeMap<PoolId, Vec<Server>>> {
    let mut out = BTreeMap::new();
    let haproxy = (model.load_balancers.iter()).filter(|lb| lb.provider == crate::PROVIDER);
    for pool in haproxy.flat_map(|lb| &lb.pools) {
        if !pools.contains(&pool.id) || out.contains_key(&pool.id) {
            continue;
        }
        // Cookie affinity, or a passthrough pool whose `mode tcp` backend has the same
        // members under another name (sni::tcp_backend): the render says what changes.
        if pool.settings.affinity.is_some() || passes_through(model, pool.id) {
            return None;
        }
        let servers = pool.members.iter().map(|m| backend::server(pool, m));
        out.insert(pool.id, servers.collect());
    }
    Some(out)
}

/// Whether a haproxy load balancer of `model` passes TLS through to `pool`.
fn passes_through(model: &portico_model::Model, pool: PoolId) -> bool {
    let haproxy = (model.load_balancers.iter()).filter(|lb| lb.provider == crate::PROVIDER);
    let tls = haproxy.flat_map(|lb| lb.listeners.iter().filter_map(|l| l.tls.as_ref()));
    tls.flat_map(|t| &t.passthrough).any(|e| e.pool == pool)
}

/// Renders `lb`'s haproxy.conf and crt-list (a Service's load balancer: see [`tcp`]).
pub fn render(lb: &LoadBalancer, input: &Input<'_>) -> Rendered {
    if tcp::is_l4(lb) {
        return tcp::render(lb, input, &input.tcp);
    }
    let mut out = Rendered::default();
    let fit = fit(input.descriptors, &needs(lb, input));
    out.diagnostics.extend(fit.diagnostic(&lb.origin));
    let mut text = global::header(lb, input, None, fit.maxconn, &mut out.diagnostics);
    let mut specials = backend::Specials::default();
    for listener in lb.listeners.iter() {
        text.push_str(&frontend::frontend(
            lb,
            listener,
            input,
            &mut specials,
            &mut out,
        ));
    }
    text.push_str(&sni::render(lb, input, &mut out));
    for pool in &lb.pools {
        out.spares.insert(pool.id, backend::spares(pool));
    }
    text.push_str(&backend::pools(
        lb,
        &mut out.servers,
        fit.checks,
        input,
        &mut out.diagnostics,
    ));
    out.crt_list = crt_list(lb, input, &mut out.diagnostics);
    text.push_str(&specials.render(lb, input.binds.https));
    text.push_str(&global::client_table());
    text.push_str(&limits::stick_tables(lb));
    text.push_str(&auth::userlists(lb, input.credentials));
    out.config = text;
    out.diagnostics.sort();
    out.diagnostics.dedup();
    out
}

/// What `lb`'s haproxy needs descriptors for: its binds, its checked servers (spare slots
/// included), the connections asked for.
fn needs(lb: &LoadBalancer, input: &Input<'_>) -> Needs {
    let mut needs = Needs {
        // With passthrough hosts, the HTTPS frontend binds the internal hop too.
        // and with terminated TLSRoute hosts, the stream frontend binds a second one.
        listeners: input.binds.all().len()
            + usize::from(lb.listeners.iter().any(sni::hops))
            + usize::from(lb.listeners.iter().any(sni::streams)),
        max_connections: input.limits.max_connections,
        ..Needs::default()
    };
    for pool in &lb.pools {
        let servers = pool.members.len() + backend::spares(pool).len();
        match (&pool.settings.active, &pool.settings.passive) {
            (Some(_), _) => needs.active_checks += servers,
            (None, passive) if passive.failures > 0 => needs.passive_checks += servers,
            (None, _) => {}
        }
    }
    needs
}

/// One line per SNI host whose Secret has usable material: `<file> <host>`. haproxy prefers
/// an exact name to a wildcard and gives unknown names the bind's first (default) certificate.
fn crt_list(lb: &LoadBalancer, input: &Input<'_>, diagnostics: &mut Vec<Diagnostic>) -> String {
    let mut lines = String::new();
    let tls = lb.listeners.iter().filter_map(|l| l.tls.as_ref());
    for sni in tls.flat_map(|t| &t.sni) {
        let Some(file) = input.certificates.get(&sni.certificate) else {
            continue;
        };
        if !is_sni_host(&sni.host) {
            let message = format!(
                "TLS host {:?} is not a DNS name haproxy can select by SNI; it gets the default certificate",
                sni.host
            );
            diagnostics.push(Diagnostic::warning(sni.source.clone(), "spec.tls", message));
            continue;
        }
        lines.push_str(&format!("{file} {}\n", sni.host));
    }
    lines
}

/// A lower-case DNS name, optionally `*.` then one: nothing that crt-list reads as syntax.
fn is_sni_host(host: &str) -> bool {
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label_ok = |l: &str| {
        !l.is_empty()
            && !l.starts_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod guard_tests;
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
