//! The Gateway API in Kubernetes mode: GatewayClasses, Gateways and HTTPRoutes created through
//! the (fake) API server are served and changed without a restart; the leader writes their
//! status through the status subresource, leaves another controller's objects and parent
//! entries alone, and writes only when the status changes. A cluster without the CRDs still
//! serves Ingresses and says once that the Gateway API is absent.

use crate::kube_support::Cluster;
use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NS: &str = "shop";
const OURS: &str = "portico.dev/gateway-controller";
const THEIRS: &str = "example.com/gateway-controller";
const V1: &str = "gateway.networking.k8s.io/v1";

fn class(name: &str, controller: &str) -> String {
    format!(
        "---\napiVersion: {V1}\nkind: GatewayClass\nmetadata: {{name: {name}}}\nspec: {{controllerName: {controller}}}\n"
    )
}

fn gateway(name: &str, class: &str) -> String {
    format!(
        "---\napiVersion: {V1}\nkind: Gateway\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  gatewayClassName: {class}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
    )
}

fn route(name: &str, host: &str, parents: &str, backend: &str) -> String {
    format!(
        "---\napiVersion: {V1}\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  parentRefs: {parents}\n  hostnames: [{host}]\n  rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]\n"
    )
}

async fn services(cluster: &Cluster, names: &[&str]) {
    for name in names {
        let pods = echo_pods(name, 1).await;
        cluster.apply(&service(NS, name, &ready(&pods)));
    }
}

fn stored(cluster: &Cluster, kind: &str, ns: Option<&str>, name: &str) -> Value {
    cluster.api.get(V1, kind, ns, name).unwrap_or(Value::Null)
}

/// `type=status/reason` of each condition in `conditions`.
fn verdicts(conditions: &Value) -> Vec<String> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let all = conditions.as_array().cloned().unwrap_or_default();
    (all.iter())
        .map(|c| format!("{}={}/{}", s(&c["type"]), s(&c["status"]), s(&c["reason"])))
        .collect()
}

/// Our parent entries of a stored route: (parent name, its conditions).
fn our_parents(cluster: &Cluster, name: &str) -> Vec<(String, Vec<String>)> {
    let route = stored(cluster, "HTTPRoute", Some(NS), name);
    let parents = route["status"]["parents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ours = parents.iter().filter(|p| p["controllerName"] == OURS);
    ours.map(|p| {
        let name = p["parentRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (name, verdicts(&p["conditions"]))
    })
    .collect()
}

/// Polls `check` until it holds (20 s at most), showing `what` when it never does.
async fn eventually(what: &str, mut check: impl FnMut() -> Option<String>) {
    let start = Instant::now();
    loop {
        let Some(wrong) = check() else { return };
        assert!(start.elapsed() < Duration::from_secs(20), "{what}: {wrong}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn parents_are(cluster: &Cluster, name: &str, want: &[(&str, &[&str])]) -> Option<String> {
    let got = our_parents(cluster, name);
    let want: Vec<(String, Vec<String>)> = (want.iter())
        .map(|(n, c)| ((*n).to_owned(), c.iter().map(|c| (*c).to_owned()).collect()))
        .collect();
    (got != want).then(|| format!("got {got:?}, want {want:?}"))
}

const ACCEPTED: &[&str] = &["Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"];

#[tokio::test]
async fn gateway_api_objects_from_the_api_are_served_changed_and_get_their_status() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web", "api"]).await;
    cluster.apply(&(class("portico", OURS) + &class("other", THEIRS)));
    cluster.apply(&(gateway("gw", "portico") + &gateway("their-gw", "other")));
    // A route attached to both Gateways, whose other controller wrote its entry already.
    let both = "[{name: gw}, {name: their-gw}]";
    let mut shared: Value = serde_yaml_route(&route("shared", "shared.example", both, "web"));
    let theirs = json!({"parentRef": {"name": "their-gw"}, "controllerName": THEIRS,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    shared["status"] = json!({"parents": [theirs.clone()]});
    cluster.api.apply(shared);
    cluster.apply(&route("shop", "shop.example", "[{name: gw}]", "web"));
    let p = Portico::start_kube(&cluster, &[]).await;

    p.wait_route("shop.example", "/", 200, "web").await;
    p.wait_route("shared.example", "/", 200, "web").await;
    eventually("shop's status", || {
        parents_are(&cluster, "shop", &[("gw", ACCEPTED)])
    })
    .await;
    eventually("shared's status", || {
        parents_are(&cluster, "shared", &[("gw", ACCEPTED)])
    })
    .await;
    let shared = stored(&cluster, "HTTPRoute", Some(NS), "shared");
    let entries = shared["status"]["parents"].as_array().unwrap();
    assert_eq!(
        entries[0], theirs,
        "another controller's entry is kept as it was"
    );
    assert_eq!(entries.len(), 2, "{shared}");
    let gw = stored(&cluster, "Gateway", Some(NS), "gw");
    eventually("the Gateway's status", || {
        let gw = stored(&cluster, "Gateway", Some(NS), "gw");
        let got = verdicts(&gw["status"]["conditions"]);
        let want = ["Accepted=True/Accepted", "Programmed=True/Programmed"];
        (got != want).then(|| format!("{got:?}"))
    })
    .await;
    let gw_now = stored(&cluster, "Gateway", Some(NS), "gw");
    let listener = &gw_now["status"]["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 2, "{gw_now}");
    assert_eq!(listener["supportedKinds"][0]["kind"], "HTTPRoute");
    assert_eq!(
        gw_now["status"]["conditions"][0]["observedGeneration"],
        gw["metadata"]["generation"]
    );
    assert!(!gw_now["status"]["addresses"].as_array().unwrap().is_empty());
    // Written in the same pass as the Gateway's, maybe answered after it.
    eventually("our class's status", || {
        let ours = stored(&cluster, "GatewayClass", None, "portico");
        let got = verdicts(&ours["status"]["conditions"]);
        (got != ["Accepted=True/Accepted"]).then(|| format!("{got:?}"))
    })
    .await;
    // Another controller's class and Gateway get no status from Portico.
    assert!(stored(&cluster, "GatewayClass", None, "other")["status"].is_null());
    assert!(stored(&cluster, "Gateway", Some(NS), "their-gw")["status"].is_null());

    // Changed: shop now goes to api, and a route names a missing Service.
    let accepted_at = gw_now["status"]["conditions"][0]["lastTransitionTime"].clone();
    cluster.apply(&route("shop", "shop.example", "[{name: gw}]", "api"));
    p.wait_route("shop.example", "/", 200, "api").await;
    cluster.apply(&route(
        "broken",
        "broken.example",
        "[{name: gw}]",
        "missing",
    ));
    let refused: &[&str] = &[
        "Accepted=True/Accepted",
        "ResolvedRefs=False/BackendNotFound",
    ];
    eventually("broken's status", || {
        parents_are(&cluster, "broken", &[("gw", refused)])
    })
    .await;
    p.wait_route("broken.example", "/", 500, "").await;
    eventually("attachedRoutes", || {
        let gw = stored(&cluster, "Gateway", Some(NS), "gw");
        let n = &gw["status"]["listeners"][0]["attachedRoutes"];
        (*n != 3).then(|| n.to_string())
    })
    .await;
    let gw_now = stored(&cluster, "Gateway", Some(NS), "gw");
    assert_eq!(
        gw_now["status"]["conditions"][0]["lastTransitionTime"], accepted_at,
        "a condition that did not change keeps its time"
    );

    // Deleted.
    assert!(cluster.api.delete(V1, "HTTPRoute", Some(NS), "shop"));
    p.wait_route("shop.example", "/", 404, "").await;

    // Written only when it changes: the class once, the other controller's objects never.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let patches = cluster.api.status_patches();
    let to = |part: &str| patches.iter().filter(|r| r.path.contains(part)).count();
    assert_eq!(to("/gatewayclasses/portico/"), 1, "{patches:?}");
    assert_eq!(to("/gatewayclasses/other/") + to("/gateways/their-gw/"), 0);
    let shop = to("/httproutes/shop/");
    assert!((1..=2).contains(&shop), "shop written {shop} times");
}

/// A route manifest as the JSON object the API server stores.
fn serde_yaml_route(manifest: &str) -> Value {
    let parsed = portico_source_file::parse_documents("route", manifest);
    let Some(portico_source_file::Object::HttpRoute(route)) = parsed.objects.first() else {
        panic!("not a route: {:?}", parsed.diagnostics);
    };
    serde_json::to_value(&**route).unwrap()
}

#[tokio::test]
async fn a_cluster_without_the_gateway_api_serves_ingresses_and_says_so_once() {
    let cluster = Cluster::without_gateway_api().await;
    services(&cluster, &["web"]).await;
    cluster.apply(&ingress(
        NS,
        "shop",
        "2026-01-01T00:00:00Z",
        &[("shop.example", "/", "Prefix", "web", "http")],
    ));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("portico.log");
    let p = Portico::start_kube_logging(&cluster, &log).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    cluster
        .wait_status(NS, "shop", json!([{"ip": "127.0.0.1"}]))
        .await;
    // A change is still applied (every kind counts as listed).
    cluster.apply(&ingress(
        NS,
        "shop",
        "2026-01-01T00:00:00Z",
        &[("shop.example", "/v2", "Prefix", "web", "http")],
    ));
    p.wait_route("shop.example", "/v2", 200, "web").await;
    let text = std::fs::read_to_string(&log).unwrap();
    let absent = text.matches("the Gateway API is absent").count();
    assert_eq!(absent, 1, "{text}");
    let asked = cluster.api.requests();
    let watched = asked
        .iter()
        .filter(|r| r.path.contains("gateway.networking.k8s.io/v"));
    assert_eq!(
        watched.count(),
        0,
        "nothing of the group is asked for but discovery"
    );
}

#[tokio::test]
async fn a_cluster_with_only_v1beta1_is_read_and_written_in_v1beta1() {
    let cluster = Cluster::without(&["gateway.networking.k8s.io/v1"]).await;
    services(&cluster, &["web"]).await;
    let beta = |manifest: String| manifest.replace(V1, "gateway.networking.k8s.io/v1beta1");
    cluster.apply(&beta(class("portico", OURS) + &gateway("gw", "portico")));
    cluster.apply(&beta(route("shop", "shop.example", "[{name: gw}]", "web")));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    eventually("the v1beta1 route's status", || {
        let route = cluster.api.get(
            "gateway.networking.k8s.io/v1beta1",
            "HTTPRoute",
            Some(NS),
            "shop",
        );
        let route = route.unwrap_or(Value::Null);
        let got = verdicts(&route["status"]["parents"][0]["conditions"]);
        (got != ACCEPTED).then(|| format!("{got:?}"))
    })
    .await;
    let patched = cluster.api.status_patches();
    assert!(
        patched.iter().all(|r| r.path.contains("/v1beta1/")),
        "{patched:?}"
    );
}

#[tokio::test]
async fn a_gateway_kind_portico_may_not_list_does_not_keep_ingresses_from_being_served() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    cluster.apply(&ingress(
        NS,
        "shop",
        "2026-01-01T00:00:00Z",
        &[("shop.example", "/", "Prefix", "web", "http")],
    ));
    // An RBAC without the Gateway API's routes (a deployment of an older version).
    cluster
        .api
        .fail_next("GET", "/gateway.networking.k8s.io/v1/httproutes", 403);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("portico.log");
    let p = Portico::start_kube_logging(&cluster, &log).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("not permitted to list"), "{text}");
}

/// A GRPCRoute created through the API is served (its backend over h2c) and gets its parent
/// entry through the status subresource; a call its matches do not name is not routed; deleted,
/// it is no longer served.
#[tokio::test]
async fn a_grpc_route_from_the_api_is_served_and_gets_its_status() {
    let cluster = Cluster::new().await;
    let greeter = portico_testkit::grpc_backend("greeter").await;
    cluster.apply(&service(NS, "greeter", &ready(&[greeter])));
    cluster.apply(&(class("portico", OURS) + &gateway("gw", "portico")));
    let grpc = |backend: &str| {
        format!(
            "---\napiVersion: {V1}\nkind: GRPCRoute\nmetadata: {{name: calls, namespace: {NS}}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [grpc.example]\n  rules: [{{matches: [{{method: {{service: helloworld.Greeter, method: SayHello}}}}], backendRefs: [{{name: {backend}, port: 80}}]}}]\n"
        )
    };
    cluster.apply(&grpc("greeter"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route(
        "grpc.example",
        "/helloworld.Greeter/SayHello",
        200,
        "greeter",
    )
    .await;
    p.wait_route("grpc.example", "/helloworld.Greeter/SayBye", 404, "")
        .await;
    let ours = || {
        let route = stored(&cluster, "GRPCRoute", Some(NS), "calls");
        let parents = route["status"]["parents"].as_array().cloned();
        let mine = parents
            .into_iter()
            .flatten()
            .find(|p| p["controllerName"] == OURS);
        mine.map(|p| verdicts(&p["conditions"])).unwrap_or_default()
    };
    eventually("the GRPCRoute's status", || {
        let got = ours();
        (got != ACCEPTED).then(|| format!("{got:?}"))
    })
    .await;
    // A backend that does not exist: ResolvedRefs says so, written through the API.
    cluster.apply(&grpc("missing"));
    eventually("the GRPCRoute's refused backend", || {
        let got = ours();
        let want = [
            "Accepted=True/Accepted",
            "ResolvedRefs=False/BackendNotFound",
        ];
        (got != want).then(|| format!("{got:?}"))
    })
    .await;
    assert!(cluster.api.delete(V1, "GRPCRoute", Some(NS), "calls"));
    p.wait_route("grpc.example", "/helloworld.Greeter/SayHello", 404, "")
        .await;
}

/// A ListenerSet created through the API adds its listener to a Gateway that allows it: a
/// route attached to that listener is served, and the leader writes the ListenerSet's status
/// (and the Gateway's `attachedListenerSets`) through the status subresource.
#[tokio::test]
async fn a_listener_set_from_the_api_is_served_and_gets_its_status() {
    let cluster = Cluster::new().await;
    services(&cluster, &["web"]).await;
    let gateway = format!(
        "---\napiVersion: {V1}\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: portico\n  allowedListeners: {{namespaces: {{from: Same}}}}\n  listeners: [{{name: http, port: 80, protocol: HTTP, hostname: gw.example}}]\n"
    );
    let set = format!(
        "---\napiVersion: {V1}\nkind: ListenerSet\nmetadata: {{name: more, namespace: {NS}}}\nspec:\n  parentRef: {{name: gw}}\n  listeners: [{{name: extra, port: 80, protocol: HTTP, hostname: set.example}}]\n"
    );
    cluster.apply(&(class("portico", OURS) + &gateway + &set));
    let parents = "[{kind: ListenerSet, name: more, sectionName: extra}]";
    cluster.apply(&route("via-set", "set.example", parents, "web"));
    let p = Portico::start_kube(&cluster, &[]).await;
    p.wait_route("set.example", "/", 200, "web").await;
    eventually("the ListenerSet's status", || {
        let set = stored(&cluster, "ListenerSet", Some(NS), "more");
        let got = verdicts(&set["status"]["conditions"]);
        let attached = &set["status"]["listeners"][0]["attachedRoutes"];
        let want = ["Accepted=True/Accepted", "Programmed=True/Programmed"];
        (got != want || *attached != 1).then(|| format!("{set}"))
    })
    .await;
    eventually("the Gateway's attachedListenerSets", || {
        let gw = stored(&cluster, "Gateway", Some(NS), "gw");
        (gw["status"]["attachedListenerSets"] != 1).then(|| format!("{gw}"))
    })
    .await;
    eventually("the route's status", || {
        parents_are(&cluster, "via-set", &[("more", ACCEPTED)])
    })
    .await;
}

/// Our parent entry's conditions of HTTPRoute `ns/name`.
fn route_verdicts(cluster: &Cluster, ns: &str, name: &str) -> Vec<String> {
    let route = stored(cluster, "HTTPRoute", Some(ns), name);
    let parents = route["status"]["parents"].as_array().cloned();
    let mine = (parents.into_iter().flatten()).find(|p| p["controllerName"] == OURS);
    mine.map(|p| verdicts(&p["conditions"])).unwrap_or_default()
}

/// `allowedRoutes.namespaces.from: Selector` in Kubernetes mode: the Namespaces' labels are
/// watched, so a route in a namespace the selector matches is served and one in another is
/// `NotAllowedByListeners`; relabelling a namespace through the API moves both, no restart.
#[tokio::test]
async fn a_listener_with_a_namespace_selector_follows_the_namespaces_labels() {
    let cluster = Cluster::new().await;
    let namespace = |name: &str, labels: &str| {
        format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"
        )
    };
    cluster.apply(&(namespace(NS, "") + &namespace("team-a", "expose: 'yes'")));
    cluster.apply(&namespace("team-b", "other: 'x'"));
    for ns in ["team-a", "team-b"] {
        let pods = echo_pods(ns, 1).await;
        cluster.apply(&service(ns, "web", &ready(&pods)));
        cluster.apply(&format!(
            "---\napiVersion: {V1}\nkind: HTTPRoute\nmetadata: {{name: r, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: gw, namespace: {NS}}}]\n  hostnames: [{ns}.example]\n  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]\n"
        ));
    }
    let gateway = format!(
        "---\napiVersion: {V1}\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: portico\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n    allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{expose: 'yes'}}}}}}}}\n"
    );
    cluster.apply(&(class("portico", OURS) + &gateway));
    let p = Portico::start_kube(&cluster, &[]).await;

    const REFUSED: &[&str] = &["Accepted=False/NotAllowedByListeners"];
    p.wait_route("team-a.example", "/", 200, "team-a").await;
    p.wait_route("team-b.example", "/", 404, "").await;
    let verdicts_are = |ns: &'static str, want: &'static [&'static str]| {
        let cluster = &cluster;
        move || {
            let got = route_verdicts(cluster, ns, "r");
            (got.first().map(String::as_str) != want.first().copied())
                .then(|| format!("{ns}: got {got:?}, want {want:?}"))
        }
    };
    eventually("team-a's route accepted", verdicts_are("team-a", ACCEPTED)).await;
    eventually("team-b's route refused", verdicts_are("team-b", REFUSED)).await;

    // Relabelled through the API: team-b is selected, team-a no longer.
    cluster.apply(&namespace("team-b", "other: 'x', expose: 'yes'"));
    cluster.apply(&namespace("team-a", ""));
    p.wait_route("team-b.example", "/", 200, "team-b").await;
    p.wait_route("team-a.example", "/", 404, "").await;
    eventually("team-b's route accepted", verdicts_are("team-b", ACCEPTED)).await;
    eventually("team-a's route refused", verdicts_are("team-a", REFUSED)).await;
}

/// With `--namespace`, only that Namespace is read (a field selector on its name), as metadata
/// only: every route watched is there. Its labels still decide, and a relabel applies.
#[tokio::test]
async fn a_namespaced_portico_reads_only_its_own_namespace_as_metadata() {
    let cluster = Cluster::new().await;
    let namespace = |name: &str, labels: &str| {
        format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{{labels}}}}}\n"
        )
    };
    cluster.apply(&(namespace(NS, "expose: 'yes'") + &namespace("other", "expose: 'yes'")));
    services(&cluster, &["web"]).await;
    let gateway = format!(
        "---\napiVersion: {V1}\nkind: Gateway\nmetadata: {{name: gw, namespace: {NS}}}\nspec:\n  gatewayClassName: portico\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n    allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{expose: 'yes'}}}}}}}}\n"
    );
    cluster.apply(&(class("portico", OURS) + &gateway));
    cluster.apply(&route("shop", "shop.example", "[{name: gw}]", "web"));
    let p = Portico::start_kube(&cluster, &["--namespace", NS]).await;
    p.wait_route("shop.example", "/", 200, "web").await;
    cluster.apply(&namespace(NS, ""));
    p.wait_route("shop.example", "/", 404, "").await;

    let asked = cluster.api.requests();
    let reads: Vec<_> = (asked.iter())
        .filter(|r| r.path == "/api/v1/namespaces")
        .collect();
    assert!(!reads.is_empty(), "{asked:?}");
    for r in reads {
        let query = r.query.replace("%3D", "=").replace("%2F", "/");
        assert!(
            query.contains(&format!("fieldSelector=metadata.name={NS}")),
            "{r:?}"
        );
        let accept = r.accept.clone().unwrap_or_default();
        assert!(accept.contains("as=PartialObjectMetadata"), "{r:?}");
    }
}
