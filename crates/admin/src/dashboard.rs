//! A small read-only HTML page: Ingresses with their addresses and diagnostics, load balancers
//! with their policies. Every user string is HTML-escaped.

use crate::Snapshot;
use std::fmt::Write;

pub(crate) fn render(snap: &Snapshot) -> String {
    let mut out = String::with_capacity(4096);
    out.push_str("<!doctype html><html><head><meta charset=\"utf-8\"><title>Portico</title>");
    out.push_str(
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}",
    );
    out.push_str(".error{color:#b00}.warning{color:#a60}</style></head><body>");
    let _ = write!(out, "<h1>Portico</h1><p>generation {} · ", snap.generation);
    out.push_str(if snap.ready { "ready" } else { "not ready" });
    out.push_str("</p><h2>Ingresses</h2><table><tr><th>namespace/name</th><th>class</th><th>address</th><th>diagnostics</th></tr>");
    for ing in snap.ingresses.iter().take(ROWS) {
        let addr: Vec<&str> = ing
            .status
            .load_balancer
            .ingress
            .iter()
            .filter_map(|a| a.ip.as_deref())
            .collect();
        let _ = write!(
            out,
            "<tr><td>{}/{}</td><td>{}</td><td>{}</td><td>",
            esc(&ing.namespace),
            esc(&ing.name),
            esc(ing.ingress_class_name.as_deref().unwrap_or("")),
            esc(&addr.join(", "))
        );
        for d in &ing.diagnostics {
            let class = if d.is_error() { "error" } else { "warning" };
            let _ = write!(
                out,
                "<div class=\"{class}\">{}: {}</div>",
                esc(&d.field),
                esc(&d.message)
            );
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</table>");
    more(&mut out, snap.ingresses.len(), "/api/v1/ingresses");
    out.push_str("<h2>Load balancers</h2>");
    for lb in snap.model.load_balancers.iter().take(ROWS) {
        let _ = write!(
            out,
            "<h3>{} <small>{} · provider {}</small></h3><ol>",
            esc(&lb.name),
            lb.id,
            esc(&lb.provider)
        );
        for l in lb.listeners.iter() {
            for p in l.policies.iter().take(ROWS) {
                let rules: Vec<String> = p
                    .rules
                    .iter()
                    .map(|r| format!("{:?} {:?} {}", r.rule_type, r.compare_type, r.value))
                    .collect();
                let _ = write!(
                    out,
                    "<li>{} → {:?} <small>({})</small></li>",
                    esc(&rules.join(" AND ")),
                    p.action,
                    esc(&p.source.to_string())
                );
            }
        }
        out.push_str("</ol>");
        let policies: usize = lb.listeners.iter().map(|l| l.policies.len()).sum();
        let shown: usize = lb
            .listeners
            .iter()
            .map(|l| l.policies.len().min(ROWS))
            .sum();
        if policies > shown {
            let _ = write!(
                out,
                "<p>… and {} more policies: /api/v1/loadbalancers/{}</p>",
                policies - shown,
                lb.id
            );
        }
    }
    more(
        &mut out,
        snap.model.load_balancers.len(),
        "/api/v1/loadbalancers",
    );
    if !snap.diagnostics.is_empty() {
        out.push_str("<h2>Other diagnostics</h2><ul>");
        for d in snap.diagnostics.iter().take(ROWS) {
            let _ = write!(out, "<li>{}</li>", esc(&d.to_string()));
        }
        out.push_str("</ul>");
        more(&mut out, snap.diagnostics.len(), "/api/v1/diagnostics");
    }
    out.push_str("</body></html>\n");
    out
}

/// Rows of each list shown; the page stays small whatever the cluster's size.
const ROWS: usize = 500;

/// "… and N more" below a list of `total` items cut at [`ROWS`], pointing at the JSON API.
fn more(out: &mut String, total: usize, api: &str) {
    if total > ROWS {
        let _ = write!(
            out,
            "<p>… and {} more: <a href=\"{api}\">{api}</a> (paged with ?limit= and ?offset=)</p>",
            total - ROWS
        );
    }
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboard_escapes_user_strings() {
        assert_eq!(
            esc("<script>\"x\"&'"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;"
        );
    }
}
