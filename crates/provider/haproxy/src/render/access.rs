//! The access log and `X-Request-Id`, the same as the built-in proxy's: haproxy sends one
//! JSON line per request (`log-format`, values from the client through the `json` converter)
//! to Portico's unix datagram socket, which writes it where the proxy's lines go.

use crate::quote;
use portico_model::{LoadBalancer, Pool};
use std::path::Path;

/// The `global` line that sends logs to `socket`, without a syslog header.
pub(super) fn global(socket: Option<&Path>) -> String {
    let Some(Ok(socket)) = socket.map(quote::path) else {
        return String::new();
    };
    format!("    log {socket} len 8192 format raw local0 info\n")
}

/// The `defaults` lines: the line's format, where the load balancer's name is a literal.
pub(super) fn defaults(lb: &LoadBalancer, on: bool) -> String {
    if !on {
        return String::new();
    }
    let fields = [
        r#"\"time\":\"%[date,utime(%Y-%m-%dT%H:%M:%SZ)]\""#,
        r#"\"request_id\":\"%[var(txn.request_id),json(utf8s)]\""#,
        r#"\"client\":\"%ci\""#,
        r#"\"host\":\"%[var(txn.request_host),json(utf8s)]\""#,
        r#"\"method\":\"%[var(txn.method),json(utf8s)]\""#,
        r#"\"path\":\"%[var(txn.path),json(utf8s)]\""#,
        r#"\"status\":%ST"#,
        r#"\"bytes_in\":%U"#,
        r#"\"bytes_out\":%B"#,
        r#"\"request_time_ms\":%Ta"#,
        r#"\"upstream_time_ms\":%Tr"#,
        r#"\"upstream_addr\":\"%si:%sp\""#,
        &format!(r#"\"load_balancer\":\"{}\""#, literal(&lb.name)),
        r#"\"pool\":\"%[var(txn.pool)]\""#,
    ];
    format!(
        "    log global\n    option dontlognull\n    log-format \"{{{}}}\"\n",
        fields.join(",")
    )
}

/// At the top of a frontend's `http-request` rules, before any `deny`: the request's id
/// (the client's, else a new UUID), passed upstream; with the log on, what the line shows
/// of the request, kept in variables (the request is gone by the time the line is written).
pub(super) fn frontend(on: bool) -> String {
    let mut s = String::from(
        "    http-request set-header X-Request-Id %[uuid] unless { req.hdr(x-request-id) -m found }\n",
    );
    if on {
        s.push_str(
            "    http-request set-var(txn.request_id) req.fhdr(x-request-id)\n\
             \x20   http-request set-var(txn.request_host) req.fhdr(host)\n\
             \x20   http-request set-var(txn.method) method\n\
             \x20   http-request set-var(txn.path) path\n",
        );
    }
    s
}

/// A pool backend's first rule, with the log on: its name, for the line.
pub(super) fn backend(pool: &Pool, on: bool) -> String {
    if !on {
        return String::new();
    }
    format!(
        "    http-request set-var(txn.pool) str({})\n",
        literal(&pool.name)
    )
}

/// A name of Portico's making (Kubernetes names, ports) written inside the log format as it
/// is; anything else becomes `_`, so no name can break the JSON or the configuration.
fn literal(name: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/' | ':');
    name.chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_break_the_line_are_made_plain() {
        assert_eq!(literal("ingressclass/portico"), "ingressclass/portico");
        assert_eq!(literal("a\"b%c\\d e\n"), "a_b_c_d_e_");
    }
}
