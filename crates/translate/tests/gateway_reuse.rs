//! The memo per HTTPRoute and GRPCRoute: a translation after a change equals one from scratch,
//! and redoes only the routes the change touches (a route added, changed or removed; a
//! Service a route names; a listener; a ReferenceGrant).

mod support;

use portico_model::Model;
use portico_translate::{Config, Memo, Objects, Previous, translate, translate_incremental};
use serde_json::{Value, json};
use support::{load_values, service};

/// An HTTPRoute (or a GRPCRoute: `grpc`) on Gateway `gateway` of namespace `default`.
#[derive(Clone, Copy)]
struct Route {
    name: &'static str,
    namespace: &'static str,
    created: &'static str,
    path: &'static str,
    /// namespace/name of its backend Service.
    backend: (&'static str, &'static str),
    gateway: &'static str,
    grpc: bool,
}

const fn route(name: &'static str, created: &'static str, gateway: &'static str) -> Route {
    Route {
        name,
        namespace: "default",
        created,
        path: "/",
        backend: ("default", "a"),
        gateway,
        grpc: false,
    }
}

/// Two Gateways of ours, their routes, the Services `a` and `b`, and a ReferenceGrant that
/// lets HTTPRoutes of `other` use Services of `default`.
#[derive(Clone)]
struct World {
    routes: Vec<Route>,
    /// The port of Service `b` (the routes name port 80).
    b_port: u16,
    /// The hostname of `gw`'s HTTP listener.
    listener_host: &'static str,
    grant: bool,
    /// A status message on route `a-route` (what the status writer's echo brings back).
    status: &'static str,
}

fn world() -> World {
    World {
        routes: vec![
            Route {
                path: "/a",
                ..route("a-route", "2026-01-01T00:00:01Z", "gw")
            },
            Route {
                path: "/b",
                backend: ("default", "b"),
                ..route("b-route", "2026-01-01T00:00:02Z", "gw")
            },
            Route {
                path: "/c",
                ..route("c-route", "2026-01-01T00:00:03Z", "gw2")
            },
            Route {
                namespace: "other",
                path: "/x",
                backend: ("default", "b"),
                ..route("x-route", "2026-01-01T00:00:04Z", "gw")
            },
            Route {
                grpc: true,
                ..route("g-route", "2026-01-01T00:00:05Z", "gw")
            },
        ],
        b_port: 80,
        listener_host: "*.test",
        grant: true,
        status: "",
    }
}

fn gateway(name: &str, listeners: Value) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"gatewayClassName": "portico", "listeners": listeners}})
}

fn route_doc(r: &Route, status: &str) -> Value {
    let (namespace, name) = r.backend;
    let backend = json!({"name": name, "namespace": namespace, "port": 80});
    let parent = json!({"name": r.gateway, "namespace": "default"});
    let metadata = json!({"name": r.name, "namespace": r.namespace,
        "creationTimestamp": r.created});
    let mut doc = if r.grpc {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": metadata,
            "spec": {"parentRefs": [parent], "hostnames": ["g.test"], "rules": [{
                "matches": [{"method": {"service": "shop.Cart", "method": "Get"}}],
                "backendRefs": [backend]}]}})
    } else {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": metadata,
            "spec": {"parentRefs": [parent], "hostnames": ["h.test"], "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": r.path}}],
                "backendRefs": [backend]}]}})
    };
    if !status.is_empty() {
        doc["status"] = json!({"parents": [{"parentRef": parent,
            "controllerName": "portico.dev/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                "message": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]});
    }
    doc
}

fn docs(w: &World) -> Vec<Value> {
    let mut docs = vec![
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "portico"},
            "spec": {"controllerName": "portico.dev/gateway-controller"}}),
        gateway(
            "gw",
            json!([{"name": "http", "port": 80, "protocol": "HTTP",
                "hostname": w.listener_host,
                "allowedRoutes": {"namespaces": {"from": "All"}}}]),
        ),
        gateway(
            "gw2",
            json!([{"name": "http", "port": 8080, "protocol": "HTTP"}]),
        ),
    ];
    docs.extend(service("default", "a", "10.0.0.1"));
    let mut b = service("default", "b", "10.0.0.2");
    b[0]["spec"]["ports"][0]["port"] = json!(w.b_port);
    docs.extend(b);
    if w.grant {
        docs.push(json!({"apiVersion": "gateway.networking.k8s.io/v1beta1",
            "kind": "ReferenceGrant", "metadata": {"name": "g", "namespace": "default"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                "namespace": "other"}], "to": [{"group": "", "kind": "Service"}]}}));
    }
    for r in &w.routes {
        let status = if r.name == "a-route" { w.status } else { "" };
        docs.push(route_doc(r, status));
    }
    docs
}

/// Translates `new` after `old` (served as `model`) through `memo`; asserts that it equals a
/// translation from scratch. The model, and how many routes were taken from their memos.
fn step(old: &Objects, model: &Model, new: &Objects, memo: &mut Memo) -> (Model, usize) {
    let config = Config::default();
    let previous = Previous {
        objects: old,
        model,
    };
    let incremental = translate_incremental(new, &config, Some(previous), memo);
    assert_eq!(
        incremental,
        translate(new, &config),
        "equals a full translation"
    );
    in_evaluation_order(&incremental.model);
    (incremental.model, memo.routes_reused())
}

/// Asserts that every listener's policies are as `order::sort` puts them (the translation
/// orders a Gateway's policies by the keys its memos keep, not by `order::sort`).
fn in_evaluation_order(model: &Model) {
    for listener in model
        .load_balancers
        .iter()
        .flat_map(|lb| lb.listeners.iter())
    {
        let mut sorted = listener.policies.clone();
        sorted.reverse();
        portico_model::order::sort(&mut sorted);
        assert_eq!(sorted, listener.policies, "listener {}", listener.name);
    }
}

/// Starts from `world()`, then applies each change in turn: how many of the routes each
/// translation took from its memo.
fn reused_after(changes: &[fn(&mut World)]) -> Vec<usize> {
    let mut w = world();
    let mut old = load_values(docs(&w));
    let mut memo = Memo::default();
    let mut model = translate_incremental(&old, &Config::default(), None, &mut memo).model;
    let mut reused = Vec::new();
    for change in changes {
        change(&mut w);
        let new = load_values(docs(&w));
        let (next, n) = step(&old, &model, &new, &mut memo);
        reused.push(n);
        (old, model) = (new, next);
    }
    reused
}

#[test]
fn a_changed_route_is_translated_again_and_the_others_are_reused() {
    let reused = reused_after(&[|w| w.routes[1].path = "/moved", |w| w.status = "echo"]);
    assert_eq!(
        reused,
        [4, 5],
        "one route redone; a status alone redoes none"
    );
}

#[test]
fn an_added_older_route_shifts_the_others_precedence_without_translating_them() {
    let reused = reused_after(&[
        |w| {
            let oldest = route("first", "2025-01-01T00:00:00Z", "gw");
            w.routes.push(Route {
                path: "/a",
                ..oldest
            });
        },
        |w| w.routes.retain(|r| r.name != "first"),
        |w| w.routes.retain(|r| r.name != "g-route"),
    ]);
    assert_eq!(
        reused,
        [5, 5, 4],
        "added, then removed: only the route itself"
    );
}

#[test]
fn a_changed_service_redoes_the_routes_that_name_it() {
    // b-route and x-route name Service b; its port changes (unresolved), then back.
    let reused = reused_after(&[|w| w.b_port = 81, |w| w.b_port = 80]);
    assert_eq!(reused, [3, 3]);
}

#[test]
fn a_changed_listener_redoes_the_routes_of_its_gateway_only() {
    // gw's listener no longer takes h.test: its four routes are refused, gw2's is reused.
    let reused = reused_after(&[
        |w| w.listener_host = "*.example",
        |w| w.listener_host = "*.test",
    ]);
    assert_eq!(reused, [1, 1]);
}

#[test]
fn a_changed_reference_grant_redoes_the_routes_that_cross_namespaces() {
    let reused = reused_after(&[|w| w.grant = false, |w| w.grant = true]);
    assert_eq!(
        reused,
        [4, 4],
        "x-route alone names a Service of another namespace"
    );
}

/// A Gateway that takes ListenerSets of its namespace, one ListenerSet whose listener has
/// `hostname`, and a route attached to that listener (parentRef of kind ListenerSet).
fn listener_set_docs(hostname: &str) -> Vec<Value> {
    listener_set_docs_in("set", hostname)
}

/// The same, the ListenerSet named `set` (the route still names `set`).
fn listener_set_docs_in(set: &str, hostname: &str) -> Vec<Value> {
    let mut gw = gateway(
        "gw",
        json!([{"name": "http", "port": 80, "protocol": "HTTP", "hostname": "gw.test"}]),
    );
    gw["spec"]["allowedListeners"] = json!({"namespaces": {"from": "Same"}});
    let mut docs = vec![
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "portico"},
            "spec": {"controllerName": "portico.dev/gateway-controller"}}),
        gw,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": set, "namespace": "default",
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"parentRef": {"name": "gw"},
                "listeners": [{"name": "extra", "port": 80, "protocol": "HTTP",
                    "hostname": hostname}]}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "via-set", "namespace": "default",
                "creationTimestamp": "2026-01-01T00:00:01Z"},
            "spec": {"parentRefs": [{"kind": "ListenerSet", "name": "set",
                "sectionName": "extra"}],
                "rules": [{"backendRefs": [{"name": "a", "port": 80}]}]}}),
    ];
    docs.extend(service("default", "a", "10.0.0.1"));
    docs
}

#[test]
fn a_changed_listener_set_redoes_the_routes_attached_to_it() {
    let old = load_values(listener_set_docs("one.test"));
    let mut memo = Memo::default();
    let model = translate_incremental(&old, &Config::default(), None, &mut memo).model;
    let new = load_values(listener_set_docs("two.test"));
    let (_, reused) = step(&old, &model, &new, &mut memo);
    assert_eq!(reused, 0, "the route on the changed ListenerSet is redone");
}

#[test]
fn a_listener_moved_to_another_listener_set_redoes_the_routes_attached_to_it() {
    let old = load_values(listener_set_docs("one.test"));
    let mut memo = Memo::default();
    let model = translate_incremental(&old, &Config::default(), None, &mut memo).model;
    // The same listener, now another ListenerSet's: the route's parent is gone.
    let new = load_values(listener_set_docs_in("set2", "one.test"));
    let (_, reused) = step(&old, &model, &new, &mut memo);
    assert_eq!(reused, 0, "the route whose ListenerSet went is redone");
}

/// Toggles a field of `w` between two values.
fn toggle<T: PartialEq + Copy>(field: &mut T, a: T, b: T) {
    *field = if *field == a { b } else { a };
}

/// The route named `name`, if the world has it.
fn named<'a>(w: &'a mut World, name: &str) -> Option<&'a mut Route> {
    w.routes.iter_mut().find(|r| r.name == name)
}

/// The changes the randomized test draws from: a route's path, a route moved between the
/// Gateways, a route's backend moved to another namespace, a Service's port, a listener's
/// hostname, the ReferenceGrant, a status echo, and an older route (tying with another's path)
/// added or removed.
const CHANGES: &[fn(&mut World)] = &[
    |w| {
        if let Some(r) = named(w, "a-route") {
            toggle(&mut r.path, "/a", "/b");
        }
    },
    |w| {
        if let Some(r) = named(w, "b-route") {
            toggle(&mut r.gateway, "gw", "gw2");
        }
    },
    |w| {
        if let Some(r) = named(w, "c-route") {
            toggle(&mut r.gateway, "gw2", "gw");
            toggle(&mut r.path, "/c", "/a");
        }
    },
    |w| {
        if let Some(r) = named(w, "x-route") {
            toggle(&mut r.backend, ("default", "b"), ("other", "b"));
        }
    },
    |w| toggle(&mut w.b_port, 80, 81),
    |w| toggle(&mut w.listener_host, "*.test", "h.test"),
    |w| toggle(&mut w.grant, true, false),
    |w| toggle(&mut w.status, "", "echo"),
    |w| match w.routes.iter().position(|r| r.name == "first") {
        Some(i) => {
            w.routes.remove(i);
        }
        None => w.routes.push(Route {
            path: "/a",
            ..route("first", "2025-01-01T00:00:00Z", "gw")
        }),
    },
    |w| match w.routes.iter().position(|r| r.name == "g-route") {
        Some(i) => {
            w.routes.remove(i);
        }
        None => w.routes.push(Route {
            grpc: true,
            ..route("g-route", "2026-01-01T00:00:05Z", "gw")
        }),
    },
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Chains of random route, Service, listener and ReferenceGrant changes: each translation
    /// through the memos equals one from scratch, every listener in `order::sort`'s order
    /// (`step` asserts both).
    #[test]
    fn random_changes_translate_as_from_scratch(
        picks in proptest::collection::vec(0..CHANGES.len(), 1..12)
    ) {
        let changes: Vec<fn(&mut World)> = picks.iter().map(|&i| CHANGES[i]).collect();
        reused_after(&changes);
    }
}
