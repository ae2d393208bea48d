//! One `frontend` per listener: the bind, the normalized host, and the lookups in the
//! listener's route maps ([`super::routes`]) that choose the backend.

use super::backend::Specials;
use super::reduce::reduce;
use super::routes;
use super::{CRT_LIST_FILE, DEFAULT_CERTIFICATE_FILE, Input, Rendered};
use crate::quote;
use portico_model::{Diagnostic, L7Policy, Listener, LoadBalancer, PolicyAction, Protocol};
use std::fmt::Write as _;
use std::net::SocketAddr;

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
    s.push_str(&server_line(input.limits.server_header));
    if listener.protocol == Protocol::TerminatedHttps {
        s.push_str(&hsts_line(&input.limits.hsts));
    }
    s.push_str(&compression_lines(input.limits.compression));
    let mut table = routes::Table::new();
    let mut regex = super::regex::RegexRoutes::of(listener);
    let mut own = String::new();
    for policy in &listener.policies {
        if let Some(what) = unsupported(policy) {
            out.diagnostics.push(not_served(policy, what));
            continue;
        }
        // What the policy guards before its own lines: ingress-nginx's limits, then its
        // basic auth (nginx's preaccess, then access phase).
        let when = format!("if {{ var(txn.policy) -m str {} }}", policy.id);
        let mut guard = super::limits::lines(policy, &when, input.limits.limit_status);
        let credentials = input.credentials;
        guard.push_str(&super::auth::lines(
            policy,
            &when,
            credentials,
            &mut out.diagnostics,
        ));
        let mut routes = Routes {
            table: &mut table,
            regex: &mut regex,
        };
        match policy_entries(listener, policy, &guard, specials, &mut routes) {
            Ok(lines) => own.push_str(&lines),
            Err(Skipped::Unmappable) => out.diagnostics.push(unmappable(policy)),
            Err(Skipped::Refused(refused)) => {
                out.diagnostics.push(refused_option(policy, &refused));
            }
            Err(Skipped::Condition(refused)) => {
                out.diagnostics.push(refused_condition(policy, &refused));
            }
        }
    }
    let (maps, mut groups) = super::groups::resolve(&table, listener.id);
    out.maps.extend(maps);
    groups.add_suffixes(regex.suffixes());
    if !groups.suffixes.is_empty() {
        for kind in ["exact", "prefix"] {
            let file = routes::map_name(listener.id, "suffix", kind);
            out.maps.entry(file).or_default();
        }
    }
    let rules = listener.policies.iter().flat_map(|p| &p.rules);
    s.push_str(&super::conditions::query_lines(rules));
    s.push_str(&routes::frontend_lines(listener.id, &groups, &regex));
    s.push_str(&own);
    s.push_str(routes::USE_BACKEND);
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

/// What a policy asks that this provider's route maps cannot express, if anything: Gateway
/// API wildcards (several labels), some of the Gateway API's filters, external auth.
fn unsupported(policy: &L7Policy) -> Option<&'static str> {
    if let PolicyAction::RequestRedirect(redirect) = &policy.action
        && redirect_line(redirect).is_none()
    {
        return Some(
            "a RequestRedirect whose hostname or path haproxy cannot write (a path holding % or \\)",
        );
    }
    let shares = match &policy.action {
        PolicyAction::RedirectToPools { pools } => &pools[..],
        _ => &[][..],
    };
    let options = (policy.options.iter()).chain(shares.iter().filter_map(|s| s.options.as_ref()));
    for options in options {
        if let Some(what) = gateway_filters(options) {
            return Some(what);
        }
        // Served without its check, an Ingress with auth-url would be open: left out instead.
        if options.external_auth.is_some() {
            return Some("external auth (auth-url)");
        }
    }
    // A policy's own are served ([`super::auth`], [`super::limits`]); a share's are not.
    for options in shares.iter().filter_map(|s| s.options.as_ref()) {
        if options.basic_auth.is_some() {
            return Some("basic auth (auth-type: basic) on a backendRef");
        }
        if options.rate_limit.is_some() {
            return Some("rate limits (limit-rps, ...) on a backendRef");
        }
    }
    None
}

/// A Gateway API RequestRedirect as haproxy's `http-request redirect` (scheme, host, port
/// and status; the query kept, the path kept or rewritten first: [`super::rewrite`]); none
/// for one whose new path haproxy cannot write, or whose hostname is not plain letters,
/// digits, dots and dashes.
pub(super) fn redirect_line(redirect: &portico_model::Redirect) -> Option<String> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    };
    if !plain(&redirect.scheme) {
        return None;
    }
    // The path rewritten first, in the redirect's own backend: `pathq` then has the new path.
    let rewrite = match &redirect.path {
        Some(path) => super::rewrite::actions(path, "RequestRedirect").ok()?,
        None => Vec::new(),
    };
    let rewrite: String = (rewrite.iter())
        .map(|a| format!("http-request {a}\n    "))
        .collect();
    let host = match &redirect.hostname {
        Some(host) if plain(host) => host.clone(),
        Some(_) => return None,
        None => "%[var(txn.host)]".to_owned(),
    };
    let code = redirect.status;
    if redirect.same_scheme {
        return Some(format!(
            "{rewrite}{SAME_PORT}http-request redirect location \"%[ssl_fc,iif(https,http)]://{host}%[var(txn.same_port)]%[pathq]\" code {code}"
        ));
    }
    let well_known = matches!(
        (redirect.scheme.as_str(), redirect.port),
        ("http", 80) | ("https", 443)
    );
    let port = if well_known {
        String::new()
    } else {
        format!(":{}", redirect.port)
    };
    let scheme = &redirect.scheme;
    Some(format!(
        "{rewrite}http-request redirect location \"{scheme}://{host}{port}%[pathq]\" code {code}"
    ))
}

/// A redirect that keeps the request's scheme and port (`from-to-www-redirect`): the port
/// its `Host` named, with its colon, unless it is the scheme's well-known one.
const SAME_PORT: &str = "http-request set-var(txn.same_port) req.hdr(host),regsub('^[^:]*',''),regsub('^:443$','') if { ssl_fc }
    http-request set-var(txn.same_port) req.hdr(host),regsub('^[^:]*',''),regsub('^:80$','') if !{ ssl_fc }
    ";

/// The first Gateway API filter among a policy's options that haproxy does not render.
fn gateway_filters(options: &portico_model::PolicyOptions) -> Option<&'static str> {
    if !options.mirrors.is_empty() {
        Some("a RequestMirror filter")
    } else {
        None
    }
}

fn not_served(policy: &L7Policy, what: &str) -> Diagnostic {
    Diagnostic::error(
        portico_model::ObjectRef::clone(&policy.source),
        "spec.rules",
        format!(
            "policy {} needs {what}, which the haproxy provider does not serve yet; it is not served by haproxy (use the proxy provider)",
            policy.id
        ),
    )
}

/// `Server` on every response without one, haproxy's own answers included
/// (`http-after-response`), as the built-in proxy adds it (`--server-header`).
fn server_line(server: Option<&str>) -> String {
    let Some(name) = server.and_then(|s| quote::word(s).ok()) else {
        return String::new();
    };
    format!(
        "    http-after-response set-header Server {name} unless {{ res.hdr(server) -m found }}\n"
    )
}

/// `Strict-Transport-Security` (`--hsts-max-age`) on the HTTPS frontend's responses without
/// one; an Ingress's own (`portico.dev/hsts-max-age`) is the built-in proxy's only.
fn hsts_line(hsts: &portico_model::Hsts) -> String {
    let Some(value) = hsts.value().and_then(|v| quote::word(&v).ok()) else {
        return String::new();
    };
    format!(
        "    http-after-response set-header Strict-Transport-Security {value} unless {{ res.hdr(strict-transport-security) -m found }}\n"
    )
}

/// haproxy 2.6 compresses with gzip (libslz) only: when `--compression` offers gzip, the
/// types the built-in proxy compresses (haproxy keeps encoded responses and `no-transform`
/// ones as they are).
fn compression_lines(compression: portico_model::Compression) -> String {
    if !compression
        .codings()
        .any(|c| c == portico_model::Coding::Gzip)
    {
        return String::new();
    }
    "    compression algo gzip\n    compression type text/html text/plain text/css text/javascript text/xml application/json application/javascript application/xml image/svg+xml\n".to_owned()
}

fn refused_option(policy: &L7Policy, refused: &super::policy::Refused) -> Diagnostic {
    Diagnostic::error(
        portico_model::ObjectRef::clone(&policy.source),
        "metadata.annotations",
        format!(
            "{} of policy {} {}; it is not served by haproxy",
            refused.field, policy.id, refused.why
        ),
    )
}

fn refused_condition(policy: &L7Policy, refused: &super::policy::Refused) -> Diagnostic {
    Diagnostic::error(
        portico_model::ObjectRef::clone(&policy.source),
        "spec.rules",
        format!(
            "a {} of policy {} {}; it is not served by haproxy",
            refused.field, policy.id, refused.why
        ),
    )
}

fn unmappable(policy: &L7Policy) -> Diagnostic {
    Diagnostic::error(
        portico_model::ObjectRef::clone(&policy.source),
        "spec.rules",
        format!(
            "a host or path of policy {} holds a space, a control character or a non-ASCII byte, which haproxy's route maps cannot hold (and no request can carry); it is not served by haproxy",
            policy.id
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
    // The bind succeeds while the address is not on any interface (see Binds::transparent).
    let transparent = if input.binds.transparent {
        " transparent"
    } else {
        ""
    };
    // Every connection starts with a PROXY protocol header (`--proxy-protocol`).
    let accept_proxy = if input.limits.proxy_protocol {
        " accept-proxy"
    } else {
        ""
    };
    // The floating IP, when there is one, on the same port and with the same options.
    let addrs = |addr: SocketAddr| {
        let floating = input.binds.floating;
        std::iter::once(addr).chain(floating.map(|ip| SocketAddr::new(ip, addr.port())))
    };
    match listener.protocol {
        Protocol::Http => Some(
            addrs(input.binds.http?)
                .map(|a| format!("    bind {a}{transparent}{accept_proxy}\n"))
                .collect(),
        ),
        Protocol::TerminatedHttps => {
            let list = quote::path(&input.dir.join(CRT_LIST_FILE)).ok()?;
            let tls = format!(
                "ssl crt {DEFAULT_CERTIFICATE_FILE} crt-list {list} alpn h2,http/1.1 ssl-min-ver TLSv1.2"
            );
            let https = input.binds.https?;
            // With passthrough hosts, the SNI frontend holds the address (super::sni).
            if super::sni::hops(listener) {
                let hop = super::sni::hop_address(input).ok()?;
                return Some(format!("    bind {hop} accept-proxy {tls}\n"));
            }
            Some(
                addrs(https)
                    .map(|addr| format!("    bind {addr}{transparent}{accept_proxy} {tls}\n"))
                    .collect(),
            )
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

/// What to do about a `bind` line haproxy could not bind, from its alerts (which name the
/// address): empty when they show no bind failure.
pub(crate) fn bind_fix(alerts: &str) -> &'static str {
    if !alerts.contains("cannot bind socket") {
        ""
    } else if alerts.contains("Address already in use") {
        "; another process listens on that address and port: stop it, or give the load balancer another address or port (portico.dev/vip, portico.dev/http-port, portico.dev/https-port)"
    } else if alerts.contains("Permission denied") {
        "; ports below 1024 need CAP_NET_BIND_SERVICE for haproxy (run Portico with it, or lower net.ipv4.ip_unprivileged_port_start)"
    } else if alerts.contains("Cannot assign requested address") {
        "; that address is on no interface of this node (VIPs are bound with `transparent` and need no more; --http-listen and --https-listen must be local): check the address, or set the sysctl net.ipv4.ip_nonlocal_bind=1 (net.ipv6.ip_nonlocal_bind for IPv6)"
    } else {
        "; check that the address is this node's or a VIP, and that no other process listens on it"
    }
}

/// Where a listener's policies go: the route maps' table, or the lines of its regex hosts.
struct Routes<'a> {
    table: &'a mut routes::Table,
    regex: &'a mut super::regex::RegexRoutes,
}

/// Why a policy got no map entries.
enum Skipped {
    Unmappable,
    /// An option (annotation or filter) that cannot be written.
    Refused(super::policy::Refused),
    /// A match that cannot be written.
    Condition(super::policy::Refused),
}

/// The table entries of one policy (nothing when its rules never match), and its own lines:
/// those of its options, and of each share's options (a Gateway API backendRef's filters),
/// which the map value of the policy (`<backend>~<policy>`) or of the share
/// (`<backend>~<policy>.<n>`) names.
fn policy_entries(
    listener: &Listener,
    policy: &L7Policy,
    guard: &str,
    specials: &mut Specials,
    routes: &mut Routes<'_>,
) -> Result<String, Skipped> {
    let Some((host, path)) = reduce(&policy.rules) else {
        return Ok(String::new());
    };
    let when = super::conditions::when(&policy.rules).map_err(Skipped::Condition)?;
    let mut lines = super::errors::unavailable(policy, specials).map_err(Skipped::Refused)?;
    lines.push_str(&super::policy::lines(policy, guard).map_err(Skipped::Refused)?);
    let named = |backend: String, id: &dyn std::fmt::Display, own: bool| {
        if own {
            format!("{backend}~{id}")
        } else {
            backend
        }
    };
    let shares = match &policy.action {
        PolicyAction::RedirectToPools { pools } => {
            let mut shares = Vec::new();
            for (n, share) in pools.iter().enumerate() {
                let backend = match share.pool {
                    Some(pool) => {
                        specials.pool(pool);
                        pool.to_string()
                    }
                    // A backendRef that does not resolve: its share answers 500.
                    None => specials.reject(500),
                };
                let id = format!("{}.{n}", policy.id);
                let own = super::policy::lines_of(&id, share.options.as_deref(), "")
                    .map_err(Skipped::Refused)?;
                let value = match (share.pool, &share.options) {
                    (Some(_), Some(_)) => named(backend, &id, !own.is_empty()),
                    (Some(_), None) => named(backend, &policy.id, !lines.is_empty()),
                    (None, _) => backend,
                };
                lines.push_str(&own);
                shares.push((value, share.weight));
            }
            shares
        }
        action => {
            let backend = single_backend(action, specials).map_err(Skipped::Refused)?;
            let Some(backend) = backend else {
                return Ok(String::new());
            };
            vec![(named(backend, &policy.id, !lines.is_empty()), 1)]
        }
    };
    let entry = routes::Entry { when, shares };
    if routes.regex.takes(&host) {
        use super::regex::NotWritten;
        match routes.regex.add(policy, (&host, &path), &entry) {
            Ok(()) => {}
            Err(NotWritten::Unmappable) => return Err(Skipped::Unmappable),
            Err(NotWritten::Refused(refused)) => return Err(Skipped::Condition(refused)),
        }
        return Ok(lines);
    }
    routes::add(routes.table, listener.id, &host, &path, &entry)
        .map_err(|_| Skipped::Unmappable)?;
    Ok(lines)
}

/// The backend of an action that is not a split; none for a redirect haproxy is not given.
fn single_backend(
    action: &PolicyAction,
    specials: &mut Specials,
) -> Result<Option<String>, super::policy::Refused> {
    Ok(Some(match action {
        PolicyAction::RedirectToPool { pool } => {
            specials.pool(*pool);
            pool.to_string()
        }
        PolicyAction::Reject { status } => specials.reject(*status),
        PolicyAction::RedirectToHttps { status } => specials.redirect(*status),
        PolicyAction::RequestRedirect(redirect) => match redirect_line(redirect) {
            Some(line) => specials.gateway_redirect(line),
            None => return Ok(None),
        },
        PolicyAction::RedirectToPools { .. } => return Ok(None),
        PolicyAction::RedirectToUrl { status, url } => {
            let line = super::policy::redirect_to_url(*status, url)?;
            specials.gateway_redirect(line)
        }
    }))
}
