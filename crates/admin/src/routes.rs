use crate::views::{self, Filter};
use crate::{Admin, assets};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use portico_model::{LoadBalancer, Placement};
use portico_status::Snapshot;
use serde::Serialize;

pub(crate) type Body = Full<Bytes>;

/// The one place where admin requests become responses.
pub(crate) fn handle<B>(admin: &Admin, req: Request<B>) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    if !host_allowed(admin, &req) {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            "this admin API answers IP addresses, localhost and the names given with \
             --admin-host only\n",
        );
    }
    let snap = admin.snapshot.load();
    let path = req.uri().path();
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" if snap.ready => text(StatusCode::OK, &with_detail("ready", &snap.detail)),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            &with_detail("not ready: first sync not served yet", &snap.detail),
        ),
        "/metrics" => metrics(admin),
        "/api/v1/ingresses" => {
            let query = req.uri().query();
            let f = Filter::parse(query);
            let ingresses: Vec<_> = (snap.ingresses.iter())
                .filter(|i| {
                    let class = i.ingress_class_name.as_deref().unwrap_or_default();
                    f.text(&format!("{}/{}", i.namespace, i.name)) || f.text(class)
                })
                .collect();
            page(&ingresses, query)
        }
        "/api/v1/services" => {
            let query = req.uri().query();
            let f = Filter::parse(query);
            let services: Vec<_> = (snap.services.iter())
                .filter(|s| f.text(&format!("{}/{}", s.namespace, s.name)))
                .collect();
            page(&services, query)
        }
        "/api/v1/diagnostics" => page(&snap.diagnostics, req.uri().query()),
        // The Gateway API objects with the status Portico would write, paged.
        "/api/v1/gatewayclasses" => page(&snap.gateway_api.classes, req.uri().query()),
        "/api/v1/gateways" => page(&snap.gateway_api.gateways, req.uri().query()),
        "/api/v1/httproutes" => page(&snap.gateway_api.routes, req.uri().query()),
        "/api/v1/grpcroutes" => page(&snap.gateway_api.grpc_routes, req.uri().query()),
        "/api/v1/tcproutes" => page(&snap.gateway_api.tcp_routes, req.uri().query()),
        "/api/v1/udproutes" => page(&snap.gateway_api.udp_routes, req.uri().query()),
        "/api/v1/tlsroutes" => page(&snap.gateway_api.tls_routes, req.uri().query()),
        "/api/v1/listenersets" => page(&snap.gateway_api.listener_sets, req.uri().query()),
        "/api/v1/backendtlspolicies" => {
            page(&snap.gateway_api.backend_tls_policies, req.uri().query())
        }
        "/api/v1/loadbalancers" => json(&load_balancers(&snap)),
        "/api/v1/pools" => json(&pools(admin, &snap.model)),
        "/api/v1/summary" => json(&views::summary(&snap, &admin.registry)),
        "/" | "/dashboard" => assets::index(),
        _ => {
            if let Some(asset) = path.strip_prefix("/assets/") {
                return assets::asset(asset);
            }
            match path.strip_prefix("/api/v1/loadbalancers/") {
                Some(rest) => load_balancer_part(&snap, rest, req.uri().query()),
                None => text(StatusCode::NOT_FOUND, "not found\n"),
            }
        }
    }
}

/// `{id}`, `{id}/policies` or `{id}/pools` (paged, filtered with `?q=`; policies also with
/// `?source=namespace/name`).
fn load_balancer_part(snap: &Snapshot, rest: &str, query: Option<&str>) -> Response<Body> {
    let (id, part) = rest.split_once('/').unwrap_or((rest, ""));
    let found =
        (snap.model.load_balancers.iter()).find(|lb| lb.id.to_string() == id || lb.name == id);
    let Some(lb) = found else {
        return text(StatusCode::NOT_FOUND, "no such load balancer\n");
    };
    let filter = Filter::parse(query);
    match part {
        "" => json(&view(snap, lb)),
        "policies" => page(&views::policies(lb, &filter), query),
        "pools" => page(&views::pools(lb, &filter), query),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Whether the request's `Host` (without port) is an IP address, `localhost` (or a name
/// under it), or one of `--admin-host`; a request without `Host` (HTTP/1.0) is allowed.
fn host_allowed<B>(admin: &Admin, req: &Request<B>) -> bool {
    let host = match req.headers().get(header::HOST) {
        None => return req.uri().host().is_none_or(|h| name_allowed(admin, h)),
        Some(h) => match h.to_str() {
            Ok(h) => h,
            Err(_) => return false,
        },
    };
    let name = match host.strip_prefix('[') {
        // An IPv6 literal: `[::1]:9180`.
        Some(rest) => {
            return rest
                .split(']')
                .next()
                .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
        }
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name_allowed(admin, name)
}

fn name_allowed(admin: &Admin, name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name.parse::<std::net::IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || admin.hosts.contains(&name)
}

/// Items per page of a list when `limit` is not given, and the most a page may hold.
pub const DEFAULT_PAGE: usize = 1000;
pub const MAX_PAGE: usize = 10_000;

/// One page of `items`: `?limit=N&offset=M` (limit at most [`MAX_PAGE`], [`DEFAULT_PAGE`]
/// without one); the whole count in `X-Total-Count`.
fn page<T: Serialize>(items: &[T], query: Option<&str>) -> Response<Body> {
    let mut limit = DEFAULT_PAGE;
    let mut offset = 0;
    for pair in query.unwrap_or_default().split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let parsed = value.parse::<usize>();
        match (key, parsed) {
            ("limit", Ok(n)) => limit = n.min(MAX_PAGE),
            ("offset", Ok(n)) => offset = n,
            ("limit" | "offset", Err(_)) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "limit and offset must be whole numbers\n",
                );
            }
            _ => {}
        }
    }
    let start = offset.min(items.len());
    let end = start.saturating_add(limit).min(items.len());
    let mut resp = json(&items[start..end]);
    resp.headers_mut()
        .insert("x-total-count", header::HeaderValue::from(items.len()));
    resp
}

/// The data planes' pools now, each named as the model names it.
fn pools(admin: &Admin, model: &portico_model::Model) -> Vec<crate::PoolHealthView> {
    let mut pools = admin.pool_health();
    for view in pools.iter_mut().filter(|v| v.name.is_empty()) {
        let all = model.load_balancers.iter().flat_map(|lb| lb.pools.iter());
        if let Some(pool) = all.into_iter().find(|p| p.id.to_string() == view.id) {
            view.name = pool.name.clone();
        }
    }
    pools
}

/// `first`, then each detail line.
fn with_detail(first: &str, detail: &[String]) -> String {
    let mut out = format!("{first}\n");
    for line in detail {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A load balancer as the API shows it: the model's, with its placement.
#[derive(Serialize)]
struct LoadBalancerView<'a> {
    #[serde(flatten)]
    lb: &'a LoadBalancer,
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<&'a Placement>,
}

fn view<'a>(snap: &'a Snapshot, lb: &'a LoadBalancer) -> LoadBalancerView<'a> {
    LoadBalancerView {
        lb,
        placement: snap.placements.get(&lb.id),
    }
}

fn load_balancers(snap: &Snapshot) -> Vec<LoadBalancerView<'_>> {
    let lbs = snap.model.load_balancers.iter();
    lbs.map(|lb| view(snap, lb)).collect()
}

fn metrics(admin: &Admin) -> Response<Body> {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, &admin.registry).is_err() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics encoding failed\n",
        );
    }
    respond(
        StatusCode::OK,
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        out,
    )
}

fn json<T: Serialize + ?Sized>(value: &T) -> Response<Body> {
    match serde_json::to_string_pretty(value) {
        Ok(s) => respond(StatusCode::OK, "application/json", s + "\n"),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("encoding failed: {e}\n"),
        ),
    }
}

pub(crate) fn text(status: StatusCode, body: &str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body.to_owned())
}

pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IngressView;
    use portico_model::{LoadBalancer, LoadBalancerId, Model};
    use prometheus_client::registry::Registry;
    use std::sync::Arc;

    fn admin(ready: bool) -> Arc<Admin> {
        let a = Admin::new(Arc::new(Registry::default()));
        let lb = LoadBalancer {
            id: LoadBalancerId::derive("loadbalancer/portico"),
            name: "ingressclass/portico".into(),
            origin: portico_model::ObjectRef::new("IngressClass", "", "portico"),
            provider: "proxy".into(),
            vip: None,
            floating_ip: None,
            listeners: Default::default(),
            pools: vec![],
        };
        let view = IngressView::new(
            "ns".into(),
            "web".into(),
            Some("portico".into()),
            true,
            vec![],
            vec![],
        );
        let model = Arc::new(Model {
            load_balancers: vec![lb],
        });
        a.publish(Snapshot {
            generation: 3,
            ready,
            model,
            placements: Arc::new(
                [(
                    LoadBalancerId::derive("loadbalancer/portico"),
                    portico_model::Placement {
                        active: "n1".into(),
                        standby: Some("n2".into()),
                        epoch: 4,
                    },
                )]
                .into(),
            ),
            ingresses: vec![view].into(),
            services: vec![portico_status::ServiceView::new(
                "apps".into(),
                "dns".into(),
                vec![],
            )],
            diagnostics: vec![],
            detail: vec![],
            gateway_api: Default::default(),
            applied_at: None,
        });
        a
    }

    fn get(a: &Admin, path: &str) -> (StatusCode, String) {
        let resp = handle(a, Request::get(path).body(()).unwrap());
        let status = resp.status();
        let body = resp.into_body();
        let bytes = futures_body(body);
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn futures_body(body: Body) -> Bytes {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(body.collect()).unwrap().to_bytes()
    }

    #[test]
    fn readyz_follows_the_snapshot() {
        assert_eq!(
            get(&admin(false), "/readyz").0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(get(&admin(true), "/readyz").0, StatusCode::OK);
        assert_eq!(get(&admin(false), "/healthz").0, StatusCode::OK);
    }

    #[test]
    fn load_balancer_is_found_by_uuid_and_unknown_is_404() {
        let a = admin(true);
        let id = LoadBalancerId::derive("loadbalancer/portico").to_string();
        let (status, body) = get(&a, &format!("/api/v1/loadbalancers/{id}"));
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("\"provider\": \"proxy\""), "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["placement"]["active"], "n1");
        assert_eq!(v["placement"]["epoch"], 4);
        let (_, all) = get(&a, "/api/v1/loadbalancers");
        let all: serde_json::Value = serde_json::from_str(&all).unwrap();
        assert_eq!(all[0]["placement"]["standby"], "n2");
        assert_eq!(
            get(&a, "/api/v1/loadbalancers/nope").0,
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn ingresses_are_listed_with_status_and_class() {
        let (status, body) = get(&admin(true), "/api/v1/ingresses");
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v[0]["ingressClassName"], "portico");
        assert_eq!(
            v[0]["status"]["loadBalancer"]["ingress"],
            serde_json::json!([])
        );
    }

    #[test]
    fn services_are_listed_and_filtered() {
        let (status, body) = get(&admin(true), "/api/v1/services");
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v[0]["namespace"].as_str(), v[0]["name"].as_str()),
            (Some("apps"), Some("dns"))
        );
        let (_, body) = get(&admin(true), "/api/v1/services?q=nothing");
        assert_eq!(body.trim(), "[]");
    }

    #[test]
    fn writes_are_refused() {
        let a = admin(true);
        let resp = handle(&a, Request::post("/api/v1/ingresses").body(()).unwrap());
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn only_ip_addresses_localhost_and_configured_names_are_answered() {
        let a = admin(true);
        let with_host = |host: &str| {
            let req = Request::get("/api/v1/ingresses")
                .header(header::HOST, host)
                .body(())
                .unwrap();
            handle(&a, req).status()
        };
        for ok in [
            "127.0.0.1:9180",
            "localhost:9180",
            "LOCALHOST",
            "[::1]:9180",
            "10.1.2.3",
            "app.localhost",
        ] {
            assert_eq!(with_host(ok), StatusCode::OK, "{ok}");
        }
        for refused in [
            "evil.example:9180",
            "127.0.0.1.evil.example",
            "[evil]:1",
            "localhost.evil",
        ] {
            assert_eq!(
                with_host(refused),
                StatusCode::MISDIRECTED_REQUEST,
                "{refused}"
            );
        }
        let named = Admin::with_hosts(
            Arc::new(Registry::default()),
            vec!["Portico.Internal".into()],
        );
        let req = Request::get("/healthz")
            .header(header::HOST, "portico.internal:9180")
            .body(())
            .unwrap();
        assert_eq!(handle(&named, req).status(), StatusCode::OK);
    }

    #[test]
    fn lists_are_paged() {
        let a = admin(true);
        let (status, body) = get(&a, "/api/v1/ingresses?limit=0");
        assert_eq!((status, body.trim()), (StatusCode::OK, "[]"));
        let (_, body) = get(&a, "/api/v1/ingresses?offset=0&limit=5");
        assert!(body.contains("\"web\""), "{body}");
        let (_, body) = get(&a, "/api/v1/ingresses?offset=7");
        assert_eq!(body.trim(), "[]");
        assert_eq!(
            get(&a, "/api/v1/ingresses?limit=x").0,
            StatusCode::BAD_REQUEST
        );
        let resp = handle(
            &a,
            Request::get("/api/v1/ingresses?limit=0").body(()).unwrap(),
        );
        assert_eq!(resp.headers()["x-total-count"], "1");
    }
}
