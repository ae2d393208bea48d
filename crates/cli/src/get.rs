//! `portico get KIND`: what a running Portico serves, read from its admin JSON API and printed
//! as a kubectl-like table, or as JSON or YAML.

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use portico_app::offline::Escaped;
use serde_json::Value;
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    #[value(alias = "loadbalancer", alias = "lb", alias = "lbs")]
    Loadbalancers,
    #[value(alias = "ingress", alias = "ing")]
    Ingresses,
    #[value(alias = "pool")]
    Pools,
    #[value(alias = "diagnostic", alias = "diag")]
    Diagnostics,
    #[value(alias = "gatewayclass", alias = "gc")]
    Gatewayclasses,
    #[value(alias = "gateway", alias = "gtw")]
    Gateways,
    #[value(alias = "httproute")]
    Httproutes,
    #[value(alias = "grpcroute")]
    Grpcroutes,
    #[value(alias = "tcproute")]
    Tcproutes,
    #[value(alias = "udproute")]
    Udproutes,
    #[value(alias = "tlsroute")]
    Tlsroutes,
    #[value(alias = "backendtlspolicy", alias = "btlspolicy")]
    Backendtlspolicies,
    #[value(alias = "listenerset", alias = "lset")]
    Listenersets,
}

impl Kind {
    /// The Gateway API kinds' admin API path (their objects print as a v1 `List`).
    fn gateway_api_path(self) -> Option<&'static str> {
        match self {
            Kind::Gatewayclasses => Some("/api/v1/gatewayclasses"),
            Kind::Gateways => Some("/api/v1/gateways"),
            Kind::Httproutes => Some("/api/v1/httproutes"),
            Kind::Grpcroutes => Some("/api/v1/grpcroutes"),
            Kind::Tcproutes => Some("/api/v1/tcproutes"),
            Kind::Udproutes => Some("/api/v1/udproutes"),
            Kind::Tlsroutes => Some("/api/v1/tlsroutes"),
            Kind::Backendtlspolicies => Some("/api/v1/backendtlspolicies"),
            Kind::Listenersets => Some("/api/v1/listenersets"),
            _ => None,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    /// The table with more columns.
    Wide,
}

#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// What to list: loadbalancers (lb), ingresses (ing), pools, diagnostics, or the Gateway
    /// API objects with the status Portico would write: gatewayclasses (gc), gateways (gtw),
    /// httproutes, grpcroutes, tcproutes, udproutes, tlsroutes, backendtlspolicies,
    /// listenersets (lset) (with -o json or yaml: a v1 List of the objects).
    kind: Kind,
    /// The admin API of the Portico to ask (`portico run`/`agent` listen on 127.0.0.1:9180 by
    /// default, `portico controller` on 127.0.0.1:9181).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9180")]
    server: String,
    /// Output format; a table without it.
    #[arg(short = 'o', long, value_name = "json|yaml|wide")]
    output: Option<Output>,
}

pub async fn run(args: &GetArgs) -> anyhow::Result<ExitCode> {
    let items = match args.kind {
        Kind::Loadbalancers | Kind::Pools => fetch(&args.server, "/api/v1/loadbalancers").await?,
        Kind::Ingresses => fetch_all(&args.server, "/api/v1/ingresses").await?,
        Kind::Gatewayclasses
        | Kind::Gateways
        | Kind::Httproutes
        | Kind::Grpcroutes
        | Kind::Tcproutes
        | Kind::Udproutes
        | Kind::Tlsroutes
        | Kind::Backendtlspolicies
        | Kind::Listenersets => {
            let path = args.kind.gateway_api_path().unwrap_or_default();
            fetch_all(&args.server, path).await?
        }
        Kind::Diagnostics => {
            let mut all = fetch_all(&args.server, "/api/v1/diagnostics").await?;
            let ingresses = fetch_all(&args.server, "/api/v1/ingresses").await?;
            for ingress in ingresses {
                if let Some(Value::Array(d)) = ingress.get("diagnostics") {
                    all.extend(d.iter().cloned());
                }
            }
            all
        }
    };
    let items = match args.kind {
        Kind::Pools => pools(&items),
        _ => items,
    };
    let printed = match args.kind.gateway_api_path() {
        Some(_) => serde_json::json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items,
        }),
        None => Value::Array(items.clone()),
    };
    let out = match args.output {
        Some(Output::Json) => serde_json::to_string_pretty(&printed)? + "\n",
        Some(Output::Yaml) => serde_saphyr::to_string(&printed).context("writing YAML")?,
        Some(Output::Wide) => table(args.kind, &items, true),
        None => table(args.kind, &items, false),
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// Every item of a paged list (`?limit=&offset=`, `X-Total-Count`).
async fn fetch_all(server: &str, path: &str) -> anyhow::Result<Vec<Value>> {
    const PAGE: usize = 5000;
    let mut all = Vec::new();
    loop {
        let page = fetch(server, &format!("{path}?limit={PAGE}&offset={}", all.len())).await?;
        let n = page.len();
        all.extend(page);
        if n < PAGE {
            return Ok(all);
        }
    }
}

/// `GET path` on the admin API at `server`, as a JSON array.
async fn fetch(server: &str, path: &str) -> anyhow::Result<Vec<Value>> {
    let what = || format!("asking the admin API at {server} (--server)");
    let stream = tokio::net::TcpStream::connect(server)
        .await
        .with_context(|| format!("{}: is Portico running there?", what()))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .with_context(what)?;
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, server)
        .body(Empty::<Bytes>::new())?;
    let resp = sender.send_request(req).await.with_context(what)?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .with_context(what)?
        .to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        bail!("{}: {status}: {}", what(), Escaped(text.trim()));
    }
    match serde_json::from_slice(&body).with_context(what)? {
        Value::Array(items) => Ok(items),
        other => Ok(vec![other]),
    }
}

/// The pools of every load balancer, each with the load balancer's name.
fn pools(load_balancers: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for lb in load_balancers {
        for pool in lb["pools"].as_array().into_iter().flatten() {
            let mut pool = pool.clone();
            if let Value::Object(map) = &mut pool {
                map.insert("loadBalancer".to_owned(), lb["name"].clone());
            }
            out.push(pool);
        }
    }
    out
}

fn table(kind: Kind, items: &[Value], wide: bool) -> String {
    let (mut header, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        Kind::Loadbalancers => (
            vec![
                "NAME",
                "PROVIDER",
                "VIP",
                "FLOATING-IP",
                "ACTIVE",
                "STANDBY",
                "LISTENERS",
                "POOLS",
            ],
            items.iter().map(|lb| lb_row(lb, wide)).collect(),
        ),
        Kind::Ingresses => (
            vec!["NAMESPACE", "NAME", "CLASS", "ADDRESS", "DIAGNOSTICS"],
            items.iter().map(|i| ingress_row(i, wide)).collect(),
        ),
        Kind::Pools => (
            vec!["LOADBALANCER", "NAME", "ALGORITHM", "PROTOCOL", "MEMBERS"],
            items.iter().map(|p| pool_row(p, wide)).collect(),
        ),
        Kind::Diagnostics => (
            vec!["SEVERITY", "OBJECT", "FIELD", "MESSAGE"],
            items.iter().map(diagnostic_row).collect(),
        ),
        Kind::Gatewayclasses => (
            vec!["NAME", "CONTROLLER", "ACCEPTED"],
            items.iter().map(|c| class_row(c, wide)).collect(),
        ),
        Kind::Gateways => (
            vec!["NAMESPACE", "NAME", "CLASS", "ADDRESS", "PROGRAMMED"],
            items.iter().map(|g| gateway_row(g, wide)).collect(),
        ),
        Kind::Httproutes
        | Kind::Grpcroutes
        | Kind::Tcproutes
        | Kind::Udproutes
        | Kind::Tlsroutes => (
            vec!["NAMESPACE", "NAME", "HOSTNAMES", "PARENTS"],
            items.iter().map(|r| route_row(r, wide)).collect(),
        ),
        Kind::Backendtlspolicies => (
            vec!["NAMESPACE", "NAME", "TARGETS", "HOSTNAME", "ANCESTORS"],
            items.iter().map(|p| policy_row(p, wide)).collect(),
        ),
        Kind::Listenersets => (
            vec!["NAMESPACE", "NAME", "GATEWAY", "PROGRAMMED"],
            items.iter().map(|l| listener_set_row(l, wide)).collect(),
        ),
    };
    if wide {
        match kind {
            Kind::Loadbalancers => header.extend(["EPOCH", "ORIGIN", "ID"]),
            Kind::Ingresses => header.push("OWNED"),
            Kind::Pools => header.extend(["SERVICE", "ID"]),
            Kind::Diagnostics => {}
            Kind::Gatewayclasses => header.push("MESSAGE"),
            Kind::Gateways | Kind::Listenersets => header.extend(["ACCEPTED", "LISTENERS"]),
            Kind::Httproutes
            | Kind::Grpcroutes
            | Kind::Tcproutes
            | Kind::Udproutes
            | Kind::Tlsroutes
            | Kind::Backendtlspolicies => {
                header.push("RESOLVEDREFS");
            }
        }
    }
    if rows.is_empty() {
        return "No resources found.\n".to_owned();
    }
    render(&header, &rows)
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "<none>".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn lb_row(lb: &Value, wide: bool) -> Vec<String> {
    let placement = &lb["placement"];
    let listeners: Vec<String> = (lb["listeners"].as_array().into_iter().flatten())
        .map(|l| format!("{}/{}", s(&l["protocol"]), s(&l["port"])))
        .collect();
    let pools = lb["pools"].as_array().map_or(0, Vec::len);
    let mut row = vec![
        s(&lb["name"]),
        s(&lb["provider"]),
        s(&lb["vip"]),
        s(&lb["floating_ip"]),
        s(&placement["active"]),
        s(&placement["standby"]),
        listeners.join(","),
        pools.to_string(),
    ];
    if wide {
        let origin = &lb["origin"];
        let origin = match origin["namespace"].as_str() {
            Some(ns) => format!("{} {ns}/{}", s(&origin["kind"]), s(&origin["name"])),
            None => format!("{} {}", s(&origin["kind"]), s(&origin["name"])),
        };
        row.extend([s(&placement["epoch"]), origin, s(&lb["id"])]);
    }
    row
}

fn ingress_row(i: &Value, wide: bool) -> Vec<String> {
    let addresses: Vec<String> = (i["status"]["loadBalancer"]["ingress"].as_array())
        .into_iter()
        .flatten()
        .map(|a| {
            s(if a["ip"].is_null() {
                &a["hostname"]
            } else {
                &a["ip"]
            })
        })
        .collect();
    let diagnostics = i["diagnostics"].as_array().map_or(0, Vec::len);
    let mut row = vec![
        s(&i["namespace"]),
        s(&i["name"]),
        s(&i["ingressClassName"]),
        if addresses.is_empty() {
            "<none>".to_owned()
        } else {
            addresses.join(",")
        },
        diagnostics.to_string(),
    ];
    if wide {
        row.push(s(&i["owned"]));
    }
    row
}

fn pool_row(p: &Value, wide: bool) -> Vec<String> {
    let members = p["members"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let ready = members.iter().filter(|m| m["ready"] == true).count();
    let algorithm = match &p["algorithm"] {
        Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
        other => s(other),
    };
    let mut row = vec![
        s(&p["loadBalancer"]),
        s(&p["name"]),
        algorithm,
        s(&p["protocol"]),
        format!("{ready}/{}", members.len()),
    ];
    if wide {
        let service = &p["service"];
        row.extend([
            format!(
                "{}/{}:{}",
                s(&service["namespace"]),
                s(&service["name"]),
                s(&p["service_port"])
            ),
            s(&p["id"]),
        ]);
    }
    row
}

/// The status (and reason) of the condition `type_` in `conditions`, `<none>` without it.
fn condition(conditions: &Value, type_: &str) -> (String, String) {
    let found = (conditions.as_array().into_iter().flatten()).find(|c| c["type"] == type_);
    match found {
        Some(c) => (s(&c["status"]), s(&c["reason"])),
        None => ("<none>".to_owned(), String::new()),
    }
}

fn class_row(c: &Value, wide: bool) -> Vec<String> {
    let (accepted, _) = condition(&c["status"]["conditions"], "Accepted");
    let mut row = vec![
        s(&c["metadata"]["name"]),
        s(&c["spec"]["controllerName"]),
        accepted,
    ];
    if wide {
        let found = (c["status"]["conditions"].as_array().into_iter().flatten())
            .find(|c| c["type"] == "Accepted");
        row.push(found.map_or_else(String::new, |c| s(&c["message"])));
    }
    row
}

fn gateway_row(g: &Value, wide: bool) -> Vec<String> {
    let status = &g["status"];
    let addresses: Vec<String> = (status["addresses"].as_array().into_iter().flatten())
        .map(|a| s(&a["value"]))
        .collect();
    let (programmed, reason) = condition(&status["conditions"], "Programmed");
    let mut row = vec![
        s(&g["metadata"]["namespace"]),
        s(&g["metadata"]["name"]),
        s(&g["spec"]["gatewayClassName"]),
        none_if_empty(&addresses),
        with_reason(programmed, &reason),
    ];
    if wide {
        let (accepted, reason) = condition(&status["conditions"], "Accepted");
        let listeners: Vec<String> = (status["listeners"].as_array().into_iter().flatten())
            .map(|l| format!("{}({})", s(&l["name"]), s(&l["attachedRoutes"])))
            .collect();
        row.extend([with_reason(accepted, &reason), none_if_empty(&listeners)]);
    }
    row
}

/// A ListenerSet: its Gateway (`namespace/name`), whether it is programmed (wide: accepted,
/// and its listeners with their attached routes).
fn listener_set_row(l: &Value, wide: bool) -> Vec<String> {
    let status = &l["status"];
    let parent = &l["spec"]["parentRef"];
    let namespace = parent["namespace"]
        .as_str()
        .map_or_else(|| s(&l["metadata"]["namespace"]), str::to_owned);
    let (programmed, reason) = condition(&status["conditions"], "Programmed");
    let mut row = vec![
        s(&l["metadata"]["namespace"]),
        s(&l["metadata"]["name"]),
        format!("{namespace}/{}", s(&parent["name"])),
        with_reason(programmed, &reason),
    ];
    if wide {
        let (accepted, reason) = condition(&status["conditions"], "Accepted");
        let listeners: Vec<String> = (status["listeners"].as_array().into_iter().flatten())
            .map(|l| format!("{}({})", s(&l["name"]), s(&l["attachedRoutes"])))
            .collect();
        row.extend([with_reason(accepted, &reason), none_if_empty(&listeners)]);
    }
    row
}

/// Each parent in the route's status (Portico's and other controllers'), as
/// `gateway[/section]: <Accepted status> (reason)`.
/// A BackendTLSPolicy: its targets (`Service name[:port]`), hostname and, per Gateway it
/// reaches, whether it is accepted (wide: its references resolved).
fn policy_row(p: &Value, wide: bool) -> Vec<String> {
    let targets: Vec<String> = (p["spec"]["targetRefs"].as_array().into_iter().flatten())
        .map(|t| match t["sectionName"].as_str() {
            Some(port) => format!("{}:{port}", s(&t["name"])),
            None => s(&t["name"]),
        })
        .collect();
    let ancestors = p["status"]["ancestors"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let each = |type_: &str| -> Vec<String> {
        (ancestors.iter())
            .map(|a| {
                let (status, reason) = condition(&a["conditions"], type_);
                format!(
                    "{}: {}",
                    s(&a["ancestorRef"]["name"]),
                    with_reason(status, &reason)
                )
            })
            .collect()
    };
    let mut row = vec![
        s(&p["metadata"]["namespace"]),
        s(&p["metadata"]["name"]),
        none_if_empty(&targets),
        s(&p["spec"]["validation"]["hostname"]),
        none_if_empty(&each("Accepted")),
    ];
    if wide {
        row.push(none_if_empty(&each("ResolvedRefs")));
    }
    row
}

fn route_row(r: &Value, wide: bool) -> Vec<String> {
    let hostnames: Vec<String> = (r["spec"]["hostnames"].as_array().into_iter().flatten())
        .map(s)
        .collect();
    let parents = r["status"]["parents"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let each = |type_: &str| -> Vec<String> {
        parents
            .iter()
            .map(|p| {
                let (status, reason) = condition(&p["conditions"], type_);
                let name = s(&p["parentRef"]["name"]);
                match p["parentRef"]["sectionName"].as_str() {
                    Some(section) => format!("{name}/{section}: {}", with_reason(status, &reason)),
                    None => format!("{name}: {}", with_reason(status, &reason)),
                }
            })
            .collect()
    };
    let mut row = vec![
        s(&r["metadata"]["namespace"]),
        s(&r["metadata"]["name"]),
        none_if_empty(&hostnames),
        none_if_empty(&each("Accepted")),
    ];
    if wide {
        row.push(none_if_empty(&each("ResolvedRefs")));
    }
    row
}

fn with_reason(status: String, reason: &str) -> String {
    match (status.as_str(), reason) {
        ("True", _) | (_, "") => status,
        _ => format!("{status} ({reason})"),
    }
}

fn none_if_empty(items: &[String]) -> String {
    if items.is_empty() {
        "<none>".to_owned()
    } else {
        items.join(",")
    }
}

fn diagnostic_row(d: &Value) -> Vec<String> {
    let o = &d["object"];
    let object = match o["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{} {ns}/{}", s(&o["kind"]), s(&o["name"])),
        _ => format!("{} {}", s(&o["kind"]), s(&o["name"])),
    };
    let field = s(&d["field"]);
    vec![
        s(&d["severity"]),
        object,
        if field.is_empty() {
            "-".to_owned()
        } else {
            field
        },
        s(&d["message"]),
    ]
}

/// Columns left-aligned, three spaces apart, control characters escaped.
fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| Escaped(c).to_string()).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let cells: Vec<&str> = cells.collect();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let _ = write!(out, "{cell:<w$}   ");
            }
        }
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    for row in &rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_escape_control_characters() {
        let items = vec![
            json!({"severity": "error", "object": {"kind": "Ingress", "namespace": "ns", "name": "a\u{1b}[31m"}, "field": "spec", "message": "bad"}),
            json!({"severity": "warning", "object": {"kind": "File", "name": "x.yaml"}, "field": "", "message": "m"}),
        ];
        let out = table(Kind::Diagnostics, &items, false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("SEVERITY   OBJECT"), "{out}");
        assert!(out.contains("Ingress ns/a\\u{1b}[31m"), "{out}");
        let col = lines[0].find("FIELD").unwrap();
        assert_eq!(lines[1].find("spec"), Some(col));
        assert_eq!(lines[2].find("- "), Some(col), "{out}");
        assert!(
            lines[2].contains("File x.yaml") && lines[2].ends_with('m'),
            "{out}"
        );
        assert_eq!(table(Kind::Pools, &[], false), "No resources found.\n");
    }
}
