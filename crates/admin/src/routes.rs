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
        "/readyz" if snap.ready => text(StatusCode::OK, "ready\n"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready: first sync not served yet\n"),
        "/metrics" => metrics(admin),
        "/api/v1/ingresses" => json(&snap.ingresses),
        "/api/v1/diagnostics" => json(&snap.diagnostics),
        "/api/v1/loadbalancers" => json(&snap.model.load_balancers),
        "/" | "/dashboard" => html(dashboard::render(&snap)),
        _ => match path.strip_prefix("/api/v1/loadbalancers/") {
            Some(id) => load_balancer(&snap.model, id),
            None => text(StatusCode::NOT_FOUND, "not found\n"),
        },
    }
}

fn load_balancer(model: &portico_model::Model, id: &str) -> Response<Body> {
    let found = model.load_balancers.iter().find(|lb| lb.id.to_string() == id || lb.name == id);
    match found {
        Some(lb) => json(lb),
        None => text(StatusCode::NOT_FOUND, "no such load balancer\n"),
    }
}

fn metrics(admin: &Admin) -> Response<Body> {
    let mut out = String::new();
    if prometheus_client::encoding::text::encode(&mut out, &admin.registry).is_err() {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "metrics encoding failed\n");
    }
    respond(StatusCode::OK, "application/openmetrics-text; version=1.0.0; charset=utf-8", out)
}

fn json<T: Serialize + ?Sized>(value: &T) -> Response<Body> {
    match serde_json::to_string_pretty(value) {
        Ok(s) => respond(StatusCode::OK, "application/json", s + "\n"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding failed: {e}\n")),
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
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    resp
}
