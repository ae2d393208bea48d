//! ListenerSets on the real binary in file mode with the built-in proxy and haproxy: a Gateway that
//! allows them serves their listeners as its own, on its address and port; a route attached
//! to a ListenerSet's listener (parentRef kind ListenerSet, sectionName) is served for that
//! listener's hostname; a ListenerSet the Gateway does not take is `NotAllowed` and serves
//! nothing; the statuses say so (admin API).

use crate::conformance::Provider;
use crate::gateway_api::{OURS, class, object, route};
use crate::{backends, expect_routes, support::*};
use serde_json::Value;
use std::time::{Duration, Instant};

const NS: &str = "gw-lset";

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn conditions(v: &Value) -> Vec<String> {
    (v.as_array().into_iter().flatten())
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

/// Gateway `gw` with an HTTP listener for `gw.test` on 80; `from`: its
/// `allowedListeners.namespaces.from`, if any.
fn gateway(from: Option<&str>) -> String {
    let allowed = from.map_or(String::new(), |f| {
        format!("  allowedListeners: {{namespaces: {{from: {f}}}}}\n")
    });
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: portico\n{allowed}  listeners: [{{name: http, port: 80, protocol: HTTP, hostname: gw.test}}]\n"
    )
}

fn listener_set(ns: &str, name: &str, host: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  parentRef: {{name: gw, namespace: {NS}}}\n  listeners: [{{name: extra, port: 80, protocol: HTTP, hostname: {host}}}]\n"
    )
}

fn manifests(from: Option<&str>) -> String {
    let to_set = "{parentRefs: [{kind: ListenerSet, name: more, sectionName: extra}], rules: [{backendRefs: [{name: infra-v2, port: 80}]}]}";
    let to_blocked = "{parentRefs: [{kind: ListenerSet, name: blocked, namespace: other}], rules: [{backendRefs: [{name: infra-v2, port: 80}]}]}";
    let own = "{parentRefs: [{name: gw}], rules: [{backendRefs: [{name: infra-v1, port: 80}]}]}";
    class("portico", OURS)
        + &gateway(from)
        + &listener_set(NS, "more", "set.test")
        + &listener_set("other", "blocked", "blocked.test")
        + &route(NS, "via-set", to_set)
        + &route(NS, "via-blocked", to_blocked)
        + &route(NS, "own", own)
}

/// Polls the admin API's object at `path` until `check` holds of it.
async fn wait_object(
    p: &Portico,
    path: &str,
    ns: &str,
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let o = object(p, path, ns, name).await;
        if check(&o) {
            return o;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{ns}/{name}: {o:#}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

proxy_and_haproxy!(served_on_the_gateways_port_and_a_set_not_allowed_serves_nothing);

/// A route on a ListenerSet's listener is served on the Gateway's port; a ListenerSet the
/// Gateway does not take serves nothing.
async fn served_on_the_gateways_port_and_a_set_not_allowed_serves_nothing(provider: Provider) {
    let m = backends(NS, &[("infra-v1", 1), ("infra-v2", 1)]).await;
    m.write("gw.yaml", &manifests(Some("Same")));
    let p = provider.start(m.path()).await;
    p.wait_route("set.test", "/", 200, "infra-v2").await;
    expect_routes(
        &p,
        &[
            ("set.test", "/a", 200, "infra-v2"),
            ("gw.test", "/a", 200, "infra-v1"),
            ("blocked.test", "/a", 404, ""),
        ],
    )
    .await;
    let programmed = |o: &Value| {
        conditions(&o["status"]["conditions"])
            == ["Accepted=True/Accepted", "Programmed=True/Programmed"]
    };
    let more = wait_object(&p, "/api/v1/listenersets", NS, "more", programmed).await;
    let listener = &more["status"]["listeners"][0];
    assert_eq!(listener["name"], "extra", "{more:#}");
    assert_eq!(listener["attachedRoutes"], 1, "{more:#}");
    assert_eq!(
        conditions(&listener["conditions"]),
        [
            "Accepted=True/Accepted",
            "Programmed=True/Programmed",
            "ResolvedRefs=True/ResolvedRefs",
            "Conflicted=False/NoConflicts"
        ]
    );
    let blocked = object(&p, "/api/v1/listenersets", "other", "blocked").await;
    assert_eq!(
        conditions(&blocked["status"]["conditions"]),
        ["Accepted=False/NotAllowed", "Programmed=False/NotAllowed"],
        "{blocked:#}"
    );
    let table = crate::get::get(&p, &["listenersets", "-o", "wide"]);
    assert!(
        table.contains("gw-lset/gw") && table.contains("NotAllowed") && table.contains("extra(1)"),
        "{table}"
    );
    let gw = wait_object(&p, "/api/v1/gateways", NS, "gw", |g| {
        g["status"]["attachedListenerSets"] == 1
    })
    .await;
    assert_eq!(
        gw["status"]["listeners"].as_array().map(Vec::len),
        Some(1),
        "{gw:#}"
    );

    // The Gateway stops allowing ListenerSets: their listeners go, its own stays.
    m.write("gw.yaml", &manifests(None));
    p.wait_route("set.test", "/", 404, "").await;
    expect_routes(&p, &[("gw.test", "/a", 200, "infra-v1")]).await;
    let more = wait_object(&p, "/api/v1/listenersets", NS, "more", |o| {
        conditions(&o["status"]["conditions"])
            .first()
            .map(String::as_str)
            == Some("Accepted=False/NotAllowed")
    })
    .await;
    assert!(more["status"]["listeners"].is_null(), "{more:#}");
}
