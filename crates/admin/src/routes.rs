use crate::{Admin, dashboard};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use serde::Serialize;

type Body = Full<Bytes>;

/// The one place where admin requests become responses.
pub(crate) fn handle<B>(admin: &Admin, req: Request<B>) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
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
        "/api/v1/ingresses" => json(&snap.ingresses),
        "/api/v1/diagnostics" => json(&snap.diagnostics),
        "/api/v1/loadbalancers" => json(&snap.model.load_balancers),
        "/api/v1/pools" => json(&pools(admin, &snap.model)),
        "/" | "/dashboard" => html(dashboard::render(&snap)),
        _ => match path.strip_prefix("/api/v1/loadbalancers/") {
            Some(id) => load_balancer(&snap.model, id),
            None => text(StatusCode::NOT_FOUND, "not found\n"),
        },
    }
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

fn load_balancer(model: &portico_model::Model, id: &str) -> Response<Body> {
    let found = model
        .load_balancers
        .iter()
        .find(|lb| lb.id.to_string() == id || lb.name == id);
    match found {
        Some(lb) => json(lb),
        None => text(StatusCode::NOT_FOUND, "no such load balancer\n"),
    }
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

fn html(body: String) -> Response<Body> {
    respond(StatusCode::OK, "text/html; charset=utf-8", body)
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body.to_owned())
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
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
    use crate::{IngressView, Snapshot};
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
            ingresses: vec![view],
            diagnostics: vec![],
            detail: vec![],
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
    fn writes_are_refused() {
        let a = admin(true);
        let resp = handle(&a, Request::post("/api/v1/ingresses").body(()).unwrap());
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
