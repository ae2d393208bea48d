//! Endpoint-only changes: detected exactly, and patched into the model exactly as a full
//! translation would have it; incremental translations equal full ones.

mod support;

use portico_model::Model;
use portico_translate::{
    Config, Memo, ObjectKey, Objects, Previous, endpoint_only_change, refresh_members, translate,
    translate_incremental,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use support::{ingress, load_values, rule, service, slice};

fn cluster(a_ip: &str, extra_path: Option<&str>) -> Vec<Value> {
    let mut paths = vec![("/a", "Prefix", "a"), ("/b", "Prefix", "b")];
    if let Some(p) = extra_path {
        paths.push((p, "Exact", "a"));
    }
    let mut docs = vec![ingress(
        "default",
        "web",
        None,
        json!({"rules": [rule("h.test", &paths)]}),
    )];
    docs.extend(service("default", "a", a_ip));
    docs.extend(service("default", "b", "10.0.0.2"));
    docs
}

fn services(names: &[&str]) -> BTreeSet<ObjectKey> {
    names.iter().map(|n| ObjectKey::new("default", n)).collect()
}

#[test]
fn a_changed_slice_names_its_service_and_nothing_else_changed() {
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.9", None));
    assert_eq!(endpoint_only_change(&old, &new), Some(services(&["a"])));
    assert_eq!(endpoint_only_change(&old, &old), Some(services(&[])));
}

#[test]
fn an_added_slice_of_a_service_is_an_endpoint_change() {
    let old = load_values(cluster("10.0.0.1", None));
    let mut docs = cluster("10.0.0.1", None);
    let endpoints = json!([{"addresses": ["10.0.0.3"]}]);
    docs.push(slice(
        "default",
        "b-2",
        "b",
        "IPv4",
        json!([{"name": "http", "port": 8080}]),
        endpoints,
    ));
    assert_eq!(
        endpoint_only_change(&old, &load_values(docs)),
        Some(services(&["b"]))
    );
}

#[test]
fn an_ingress_change_needs_a_full_translation() {
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.1", Some("/new")));
    assert_eq!(endpoint_only_change(&old, &new), None);
}

/// Ingresses in several namespaces, one of which (`b/web`) gets `extra` as another path.
fn ingresses(extra: Option<&str>) -> Vec<Value> {
    let mut docs = vec![];
    for (namespace, name) in [("a", "web"), ("b", "api"), ("b", "web"), ("c", "web")] {
        let mut paths = vec![("/", "Prefix", "a")];
        if let (Some(p), ("b", "web")) = (extra, (namespace, name)) {
            paths.push((p, "Exact", "a"));
        }
        let host = format!("{name}.{namespace}.test");
        let spec = json!({"rules": [rule(&host, &paths)]});
        docs.push(ingress(namespace, name, None, spec));
        docs.extend(service(namespace, "a", "10.0.0.1"));
    }
    docs
}

/// Translates `new` incrementally after `old`, whose translation gave `model`.
fn after(old: &Objects, model: &Model, new: &Objects, memo: &mut Memo) -> Model {
    let previous = Previous {
        objects: old,
        model,
    };
    translate_incremental(new, &Config::default(), Some(previous), memo).model
}

#[test]
fn a_changed_ingress_is_prepared_again_and_the_others_are_reused() {
    let config = Config::default();
    let old = load_values(ingresses(None));
    let new = load_values(ingresses(Some("/new")));
    let mut memo = Memo::default();
    let first = translate_incremental(&old, &config, None, &mut memo).model;
    assert_eq!(memo.reused(), 0);
    let second = after(&old, &first, &new, &mut memo);
    assert_eq!(memo.reused(), 3, "every Ingress but b/web is reused");
    assert_eq!(second, translate(&new, &config).model);
    let third = after(&new, &second, &new, &mut memo);
    assert_eq!(memo.reused(), 4, "nothing changed: all four are reused");

    // b/api deleted, b/new added before b/web in key order: the walk skips one, misses one.
    let docs = ingresses(Some("/new")).into_iter().map(|mut doc| {
        if doc["kind"] == "Ingress" && doc["metadata"]["name"] == "api" {
            doc["metadata"]["name"] = json!("new");
        }
        doc
    });
    let renamed = load_values(docs.collect());
    let fourth = after(&new, &third, &renamed, &mut memo);
    assert_eq!(memo.reused(), 3, "a/web, b/web and c/web");
    assert_eq!(fourth, translate(&renamed, &config).model);
}

/// The policies of the Ingress named `name` on the first listener, by pointer.
fn policies_of<'m>(model: &'m Model, name: &str) -> Vec<&'m Arc<portico_model::L7Policy>> {
    let lb = &model.load_balancers[0];
    (lb.listeners[0].policies.iter())
        .filter(|p| p.source.name == name)
        .collect()
}

#[test]
fn an_unchanged_ingress_keeps_its_policies_and_a_changed_canary_changes_its_main_route() {
    let config = Config::default();
    let docs = |weight: &str, extra: Option<&str>| {
        let mut docs = ingresses(extra);
        let spec = json!({"rules": [rule("web.a.test", &[("/", "Prefix", "b")])]});
        let mut canary = ingress("a", "canary", None, spec);
        canary["metadata"]["annotations"] = json!({
            "nginx.ingress.kubernetes.io/canary": "true",
            "nginx.ingress.kubernetes.io/canary-weight": weight,
            "nginx.ingress.kubernetes.io/canary-by-header": "x-canary",
        });
        docs.push(canary);
        docs
    };
    let old = load_values(docs("10", None));
    let mut memo = Memo::default();
    let first = translate_incremental(&old, &config, None, &mut memo).model;
    // Another Ingress changed: the others' policies are the same pointers.
    let new = load_values(docs("10", Some("/new")));
    let second = after(&old, &first, &new, &mut memo);
    assert_eq!(second, translate(&new, &config).model);
    let (api, now) = (policies_of(&first, "api"), policies_of(&second, "api"));
    assert!(!api.is_empty() && api.len() == now.len());
    assert!(api.iter().zip(&now).all(|(a, b)| Arc::ptr_eq(a, b)));
    // Only the canary changed: the main route's policies (its split) change with it.
    let newer = load_values(docs("30", Some("/new")));
    let third = after(&new, &second, &newer, &mut memo);
    assert_eq!(third, translate(&newer, &config).model);
    assert_ne!(policies_of(&second, "web"), policies_of(&third, "web"));
}

#[test]
fn an_ingress_whose_status_alone_changed_is_reused_and_one_with_new_annotations_is_not() {
    let config = Config::default();
    let old = load_values(ingresses(None));
    let mut memo = Memo::default();
    let first = translate_incremental(&old, &config, None, &mut memo).model;
    // Portico's own status write coming back: a new status and resourceVersion.
    let written = ingresses(None).into_iter().map(|mut doc| {
        if doc["kind"] == "Ingress" && doc["metadata"]["name"] == "api" {
            doc["metadata"]["resourceVersion"] = json!("7");
            doc["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}});
        }
        doc
    });
    let written = load_values(written.collect());
    let second = after(&old, &first, &written, &mut memo);
    assert_eq!(
        memo.reused(),
        4,
        "the status alone does not prepare b/api again"
    );
    assert_eq!(second, translate(&written, &config).model);
    // The prepared Ingress now holds the new version: the old one is no longer referenced.
    let key = ObjectKey::new("b", "api");
    assert_eq!(std::sync::Arc::strong_count(&old.ingresses[&key]), 1);
    let annotated = ingresses(None).into_iter().map(|mut doc| {
        if doc["kind"] == "Ingress" && doc["metadata"]["name"] == "api" {
            doc["metadata"]["annotations"] = json!({"portico.dev/ssl-redirect": "false"});
        }
        doc
    });
    let annotated = load_values(annotated.collect());
    let third = after(&written, &second, &annotated, &mut memo);
    assert_eq!(memo.reused(), 3, "new annotations prepare b/api again");
    assert_eq!(third, translate(&annotated, &config).model);
}

#[test]
fn refreshed_members_equal_a_full_translation() {
    let config = Config::default();
    let old = load_values(cluster("10.0.0.1", None));
    let new = load_values(cluster("10.0.0.9", None));
    let mut model = translate(&old, &config).model;
    let changed = refresh_members(&mut model, &new, &services(&["a"]));
    assert_eq!(model, translate(&new, &config).model);
    assert_eq!(changed.len(), 1, "only pool default_a_80 changed");
    // Refreshing a service whose endpoints did not change changes nothing.
    assert!(refresh_members(&mut model, &new, &services(&["b"])).is_empty());
}

/// One generated cluster: a few Ingresses (some of another class, some invalid), Services that
/// may be missing, and their endpoints.
#[derive(Debug, Clone)]
struct World {
    ingresses: Vec<GenIngress>,
    services: Vec<Option<u8>>,
    /// The `portico` IngressClass: none, shared, dedicated, or a bad topology.
    topology: u8,
}

#[derive(Debug, Clone)]
enum Change {
    Ingress(Option<GenIngress>),
    Service(Option<u8>),
    Topology(u8),
}

const HOSTS: [&str; 4] = ["a.test", "b.test", "*.w.test", ""];
const PATHS: [&str; 3] = ["/", "/a", "/a/b"];

type GenIngress = (
    u8,
    bool,
    bool,
    Vec<(u8, u8, bool, u8, u8)>,
    Option<(u8, u8)>,
);

fn gen_ingress() -> impl Strategy<Value = GenIngress> {
    let route = (0..4u8, 0..3u8, any::<bool>(), 0..4u8, 0..3u8);
    (
        0..3u8,
        any::<bool>(),
        prop::bool::weighted(0.1),
        prop::collection::vec(route, 0..4),
        prop::option::of((0..4u8, 0..3u8)),
    )
}

/// A world and the worlds that follow it, each one change away from the one before: an
/// Ingress replaced, added or removed, or a Service's endpoints changed, added or removed.
fn worlds() -> impl Strategy<Value = Vec<World>> {
    let first = (
        prop::collection::vec(gen_ingress(), 0..4),
        prop::collection::vec(prop::option::of(0..3u8), 3),
        0..4u8,
    );
    let change = prop_oneof![
        (
            any::<prop::sample::Index>(),
            prop::option::of(gen_ingress())
        )
            .prop_map(|(i, n)| (i, Change::Ingress(n))),
        (any::<prop::sample::Index>(), prop::option::of(0..3u8))
            .prop_map(|(i, s)| (i, Change::Service(s))),
        (any::<prop::sample::Index>(), 0..4u8).prop_map(|(i, t)| (i, Change::Topology(t))),
    ];
    let worlds = (first, prop::collection::vec(change, 0..6));
    worlds.prop_map(|((ingresses, services, topology), changes)| {
        let mut world = World {
            ingresses,
            services,
            topology,
        };
        let mut worlds = vec![world.clone()];
        for (index, change) in changes {
            match change {
                Change::Ingress(Some(ingress))
                    if world.ingresses.len() < 4 && index.index(2) == 0 =>
                {
                    world.ingresses.push(ingress);
                }
                Change::Ingress(Some(ingress)) if !world.ingresses.is_empty() => {
                    let i = index.index(world.ingresses.len());
                    world.ingresses[i] = ingress;
                }
                Change::Ingress(_) if !world.ingresses.is_empty() => {
                    let i = index.index(world.ingresses.len());
                    world.ingresses.remove(i);
                }
                Change::Ingress(_) => {}
                Change::Service(service) => world.services[index.index(3)] = service,
                Change::Topology(t) => world.topology = t,
            }
            worlds.push(world.clone());
        }
        worlds
    })
}

fn port(p: u8) -> Value {
    match p {
        0 => json!({"number": 80}),
        1 => json!({"number": 81}),
        _ => json!({"name": "http"}),
    }
}

fn backend(service: u8, p: u8) -> Value {
    json!({"service": {"name": format!("s{service}"), "port": port(p)}})
}

impl World {
    fn docs(&self) -> Vec<Value> {
        let mut docs = Vec::new();
        if self.topology > 0 {
            let topology = ["", "shared", "dedicated", "bad"][usize::from(self.topology)];
            docs.push(
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                "metadata": {"name": "portico", "annotations": {"portico.dev/topology": topology}},
                "spec": {"controller": "portico.dev/ingress-controller"}}),
            );
        }
        for (i, (age, ours, invalid, routes, default)) in self.ingresses.iter().enumerate() {
            let rules: Vec<Value> = routes
                .iter()
                .map(|(host, path, exact, service, p)| {
                    let host = if *invalid {
                        "Bad_Host"
                    } else {
                        HOSTS[*host as usize]
                    };
                    let path_type = if *exact { "Exact" } else { "Prefix" };
                    let path = json!({"path": PATHS[*path as usize], "pathType": path_type,
                                      "backend": backend(*service, *p)});
                    json!({"host": host, "http": {"paths": [path]}})
                })
                .collect();
            let mut spec = json!({"rules": rules});
            spec["ingressClassName"] = json!(if *ours { "portico" } else { "other" });
            if let Some((service, p)) = default {
                spec["defaultBackend"] = backend(*service, *p);
            }
            let created = format!("2026-01-0{}T00:00:00Z", age + 1);
            docs.push(ingress("default", &format!("i{i}"), Some(&created), spec));
        }
        for (s, ip) in self.services.iter().enumerate() {
            if let Some(ip) = ip {
                let mut objects = service("default", &format!("s{s}"), &format!("10.0.0.{ip}"));
                // s2 is also an `l4` load balancer, s1 a LoadBalancer Service of no class
                // (not Portico's without --l4-all-services).
                if s >= 1 {
                    objects[0]["spec"]["type"] = json!("LoadBalancer");
                }
                if s == 2 {
                    objects[0]["spec"]["loadBalancerClass"] = json!("portico.dev/l4");
                    objects[0]["spec"]["sessionAffinity"] = json!("ClientIP");
                }
                docs.extend(objects);
            }
        }
        docs
    }
}

/// Objects for `docs` that keep `previous`'s allocation for every object that did not change,
/// as the sources do.
fn reload(previous: &Objects, docs: Vec<Value>) -> Objects {
    fn keep<K: Ord + Clone, V: PartialEq>(
        old: &BTreeMap<K, Arc<V>>,
        new: &mut BTreeMap<K, Arc<V>>,
    ) {
        for (key, value) in new.iter_mut() {
            if let Some(old) = old.get(key).filter(|o| **o == *value) {
                *value = old.clone();
            }
        }
    }
    let mut objects = load_values(docs);
    keep(&previous.ingresses, Arc::make_mut(&mut objects.ingresses));
    keep(
        &previous.ingress_classes,
        Arc::make_mut(&mut objects.ingress_classes),
    );
    keep(&previous.services, Arc::make_mut(&mut objects.services));
    keep(
        &previous.endpoint_slices,
        Arc::make_mut(&mut objects.endpoint_slices),
    );
    objects
}

proptest! {
    /// What the pipeline does on every change (the endpoint fast path, else an incremental
    /// translation) always gives the model and diagnostics of a full translation.
    #[test]
    fn incremental_translation_equals_a_full_one(worlds in worlds()) {
        let config = Config::default();
        let mut memo = Memo::default();
        let mut served: Option<(Objects, Model)> = None;
        for world in worlds {
            let objects = match &served {
                Some((previous, _)) => reload(previous, world.docs()),
                None => load_values(world.docs()),
            };
            let full = translate(&objects, &config);
            let model = match served.take() {
                Some((previous, mut model)) => {
                    match endpoint_only_change(&previous, &objects) {
                        Some(services) => {
                            refresh_members(&mut model, &objects, &services);
                            model
                        }
                        None => {
                            let previous = Previous { objects: &previous, model: &model };
                            let t = translate_incremental(&objects, &config, Some(previous), &mut memo);
                            prop_assert_eq!(&t.diagnostics, &full.diagnostics);
                            prop_assert_eq!(&t.ingresses, &full.ingresses);
                            t.model
                        }
                    }
                }
                None => translate_incremental(&objects, &config, None, &mut memo).model,
            };
            prop_assert_eq!(&model, &full.model);
            served = Some((objects, model));
        }
    }
}

/// What a Gateway-side world varies: the Ingress's extra path, the endpoints of the route's
/// backend `a` and of its mirror `m`, the certificate's bytes, the route's path.
#[derive(Clone, Copy)]
struct Mixed {
    extra: Option<&'static str>,
    a_ip: &'static str,
    m_ip: &'static str,
    cert: &'static str,
    route_path: &'static str,
}

const MIXED: Mixed = Mixed {
    extra: None,
    a_ip: "10.0.0.1",
    m_ip: "10.0.0.5",
    cert: "eA==",
    route_path: "/",
};

/// An Ingress beside a Gateway (HTTP and HTTPS with a Secret) whose HTTPRoute sends to `a`
/// and mirrors to `m`.
fn mixed(w: Mixed) -> Vec<Value> {
    let mut docs = cluster("10.0.0.1", w.extra);
    docs.extend(service("default", "m", w.m_ip));
    docs.retain(|d| !(d["kind"] == "EndpointSlice" && d["metadata"]["name"] == "a-1"));
    docs.extend(service("default", "a", w.a_ip).into_iter().skip(1));
    docs.push(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "portico"}, "spec": {"controllerName": "portico.dev/gateway-controller"}}));
    docs.push(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "cert", "namespace": "default"},
        "data": {"tls.crt": w.cert, "tls.key": "eA=="}}),
    );
    docs.push(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "portico", "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "https", "port": 443, "protocol": "HTTPS",
             "tls": {"certificateRefs": [{"name": "cert"}]}}]}}),
    );
    let mirror = json!({"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}}});
    docs.push(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": w.route_path}}],
            "filters": [mirror],
            "backendRefs": [{"name": "a", "port": 80}]}]}}),
    );
    docs
}

/// Translates `new` incrementally after `old`, whose served model is `model`; asserts that the
/// result equals a full translation and returns it with whether the Gateway's share was reused.
/// `w` with backend `a`'s endpoint moved to 10.0.0.9 after `before`, and `model` with the
/// endpoints patched in as the served model would be (an endpoint-only change).
fn endpoints_patched(before: &Objects, w: Mixed, model: &Model) -> (Objects, Model) {
    let endpoints = load_values(mixed(Mixed {
        a_ip: "10.0.0.9",
        ..w
    }));
    let changed = endpoint_only_change(before, &endpoints).expect("endpoints only");
    let mut patched = model.clone();
    assert!(!refresh_members(&mut patched, &endpoints, &changed).is_empty());
    (endpoints, patched)
}

fn step(old: &Objects, model: &Model, new: &Objects, memo: &mut Memo) -> (Model, bool) {
    let previous = Previous {
        objects: old,
        model,
    };
    let config = Config::default();
    let incremental = translate_incremental(new, &config, Some(previous), memo);
    assert_eq!(
        incremental,
        translate(new, &config),
        "equals a full translation"
    );
    assert!(
        (incremental.model.load_balancers.iter()).any(|lb| lb.origin.kind == "Gateway"),
        "the Gateway is served"
    );
    (incremental.model, memo.gateway_reused())
}

#[test]
fn the_gateways_share_is_reused_while_its_routes_services_and_secrets_are_unchanged() {
    let config = Config::default();
    let mut memo = Memo::default();
    let base = load_values(mixed(MIXED));
    let first = translate_incremental(&base, &config, None, &mut memo).model;
    assert!(!memo.gateway_reused());

    // An Ingress change leaves the Gateway's share as it was.
    let w = Mixed {
        extra: Some("/new"),
        ..MIXED
    };
    let ingress_changed = load_values(mixed(w));
    let (model, reused) = step(&base, &first, &ingress_changed, &mut memo);
    assert!(reused, "an Ingress change reuses the Gateway's share");

    // Endpoints of the route's backend change alone (patched into the served model), then an
    // Ingress: the reused load balancer takes the patched pool.
    let (endpoints, patched) = endpoints_patched(&ingress_changed, w, &model);
    let w = Mixed {
        extra: Some("/newer"),
        a_ip: "10.0.0.9",
        ..w
    };
    let after_endpoints = load_values(mixed(w));
    let (model, reused) = step(&endpoints, &patched, &after_endpoints, &mut memo);
    assert!(reused, "endpoint changes do not make the share stale");

    // With the mirror's Service changing in the same batch, the share is translated again;
    // so it is for the Secret a listener names and for the route itself.
    let mut old = after_endpoints;
    let mut model = model;
    for w in [
        Mixed {
            m_ip: "10.0.0.6",
            ..w
        },
        Mixed {
            m_ip: "10.0.0.6",
            cert: "eQ==",
            ..w
        },
        Mixed {
            m_ip: "10.0.0.6",
            cert: "eQ==",
            route_path: "/shop",
            ..w
        },
    ] {
        let new = load_values(mixed(w));
        let (next, reused) = step(&old, &model, &new, &mut memo);
        assert!(!reused, "an input of the Gateway's share changed");
        (old, model) = (new, next);
    }
    let (_, reused) = step(&old, &model, &old, &mut memo);
    assert!(reused, "nothing changed");
}

/// One GatewayClass, one Gateway with an HTTP listener, and 10,000 HTTPRoutes on it (two
/// PathPrefix rules each to two of the 5,000 Services `s0`…); route `r4321`'s first path moved
/// when `moved`.
fn timing_routes(moved: bool) -> Vec<Value> {
    let mut docs = vec![
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "portico"},
               "spec": {"controllerName": "portico.dev/gateway-controller"}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "gw", "namespace": "default"},
               "spec": {"gatewayClassName": "portico",
                        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                                       "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
    ];
    for i in 0..10_000 {
        let a = if moved && i == 4_321 {
            format!("/moved{i}")
        } else {
            format!("/a{i}")
        };
        docs.push(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": format!("r{i}"), "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [format!("h{}.test", i / 5)],
                "rules": [
                    {"matches": [{"path": {"type": "PathPrefix", "value": a}}],
                     "backendRefs": [{"name": format!("s{}", i % 5_000), "port": 80}]},
                    {"matches": [{"path": {"type": "PathPrefix", "value": format!("/b{i}")}}],
                     "backendRefs": [{"name": format!("s{}", (i + 1) % 5_000), "port": 80}]}]}}),
        );
    }
    docs
}

/// 10,000 Ingresses of one class, two paths each to two of the 5,000 Services `s0`…; Ingress
/// `i4321`'s first path moved when `moved`.
fn timing_ingresses(moved: bool) -> Vec<Value> {
    let mut docs = Vec::new();
    for i in 0..10_000 {
        let a = if moved && i == 4_321 {
            format!("/moved{i}")
        } else {
            format!("/a{i}")
        };
        let b = format!("/b{i}");
        let host = format!("i{}.test", i / 5);
        let (s1, s2) = (format!("s{}", i % 5_000), format!("s{}", (i + 1) % 5_000));
        let paths = [
            (a.as_str(), "Prefix", s1.as_str()),
            (b.as_str(), "Prefix", s2.as_str()),
        ];
        let spec = json!({"rules": [rule(&host, &paths)]});
        docs.push(ingress("default", &format!("i{i}"), None, spec));
    }
    docs
}

/// The 5,000 Services `s0`… with one endpoint each.
fn timing_services() -> Vec<Value> {
    let mut docs = Vec::new();
    for s in 0..5_000 {
        let ip = format!("10.{}.{}.1", s / 250, s % 250);
        docs.extend(service("default", &format!("s{s}"), &ip));
    }
    docs
}

/// `objects` with the HTTPRoute `r4321` of `moved` in place of its own.
fn with_route_moved(objects: &Objects, moved: &Objects) -> Objects {
    let mut new = objects.clone();
    let key = ObjectKey::new("default", "r4321");
    Arc::make_mut(&mut new.http_routes).insert(key.clone(), moved.http_routes[&key].clone());
    new
}

/// `objects` with the Ingress `i4321` of `moved` in place of its own.
fn with_ingress_moved(objects: &Objects, moved: &Objects) -> Objects {
    let mut new = objects.clone();
    let key = ObjectKey::new("default", "i4321");
    Arc::make_mut(&mut new.ingresses).insert(key.clone(), moved.ingresses[&key].clone());
    new
}

/// Times, at 10,000 HTTPRoutes on one Gateway (two PathPrefix rules each, 5,000 Services), a
/// one-route change translated incrementally against a full translation. `cargo test -p
/// portico-translate --release --test incremental -- --ignored --nocapture gateway_timing`.
#[test]
#[ignore = "a measurement: run it on its own, in release"]
fn gateway_timing() {
    let config = Config::default();
    let old = load_values([timing_routes(false), timing_services()].concat());
    let moved = load_values(timing_routes(true));
    let new = with_route_moved(&old, &moved);
    let (full, incremental, memo) = timed_change(&old, &new, &config);
    println!(
        "10,000 HTTPRoutes: full translation {full:?}, one route changed {incremental:?} \
         ({} routes reused)",
        memo.routes_reused()
    );
}

/// 10,000 Ingresses of one class, two paths each, one of them moved: the incremental
/// translation's time.
#[test]
#[ignore = "a measurement: run it on its own, in release"]
fn ingress_timing() {
    let config = Config::default();
    let old = load_values([timing_ingresses(false), timing_services()].concat());
    let new = load_values([timing_ingresses(true), timing_services()].concat());
    let (full, incremental, memo) = timed_change(&old, &new, &config);
    println!(
        "10,000 Ingresses: full translation {full:?}, one Ingress changed {incremental:?} \
         ({} reused)",
        memo.reused()
    );
}

/// The shape of the end-to-end benchmark: 10,000 HTTPRoutes on one Gateway beside 10,000
/// Ingresses of one class (both on the default listeners, over the same 5,000 Services); one
/// route changed, then one Ingress changed, each translated incrementally over the last.
/// `cargo test -p portico-translate --release --test incremental -- --ignored --nocapture
/// both_timing`.
#[test]
#[ignore = "a measurement: run it on its own, in release"]
fn both_timing() {
    let config = Config::default();
    let docs = [
        timing_ingresses(false),
        timing_routes(false),
        timing_services(),
    ];
    let old = load_values(docs.concat());
    let route = with_route_moved(&old, &load_values(timing_routes(true)));
    let both = with_ingress_moved(&route, &load_values(timing_ingresses(true)));
    let (full, incremental, mut memo) = timed_change(&old, &route, &config);
    println!("both: full translation {full:?}, one HTTPRoute changed {incremental:?}");
    let mut last = translate(&route, &config).model;
    for (name, from, to) in [("Ingress", &route, &both), ("HTTPRoute", &both, &route)] {
        let t = std::time::Instant::now();
        let previous = Previous {
            objects: from,
            model: &last,
        };
        let next = translate_incremental(to, &config, Some(previous), &mut memo);
        println!("both: one {name} changed {:?}", t.elapsed());
        assert_eq!(next.model, translate(to, &config).model);
        last = next.model;
    }
}

/// Translates `old` from scratch, then `new` incrementally over it, checking the result against
/// `new` translated from scratch: the two times and the memo.
fn timed_change(
    old: &Objects,
    new: &Objects,
    config: &Config,
) -> (std::time::Duration, std::time::Duration, Memo) {
    use std::time::Instant;
    let t = Instant::now();
    let mut memo = Memo::default();
    let first = translate_incremental(old, config, None, &mut memo);
    let full = t.elapsed();
    let previous = Previous {
        objects: old,
        model: &first.model,
    };
    let t = Instant::now();
    let second = translate_incremental(new, config, Some(previous), &mut memo);
    let incremental = t.elapsed();
    assert_eq!(second.model, translate(new, config).model);
    (full, incremental, memo)
}

/// Translates `new` incrementally after `old` (served as `model`), asserting that it equals a
/// full translation; the model and whether the Ingress side's share was reused.
fn ingress_step(old: &Objects, model: &Model, new: &Objects, memo: &mut Memo) -> (Model, bool) {
    let previous = Previous {
        objects: old,
        model,
    };
    let config = Config::default();
    let incremental = translate_incremental(new, &config, Some(previous), memo);
    assert_eq!(
        incremental,
        translate(new, &config),
        "equals a full translation"
    );
    (incremental.model, memo.ingress_reused())
}

#[test]
fn the_ingress_share_is_reused_while_only_gateway_api_objects_change() {
    let config = Config::default();
    let mut memo = Memo::default();
    let base = load_values(mixed(MIXED));
    let first = translate_incremental(&base, &config, None, &mut memo).model;
    assert!(!memo.ingress_reused(), "nothing to reuse yet");

    // The HTTPRoute moves: the Ingress side is taken whole.
    let w = Mixed {
        route_path: "/shop",
        ..MIXED
    };
    let route_moved = load_values(mixed(w));
    let (model, reused) = ingress_step(&base, &first, &route_moved, &mut memo);
    assert!(reused, "a route change reuses the Ingress side's share");
    assert_eq!(memo.reused(), 1, "its prepared Ingress stays");

    // Endpoints of the Ingress's backend `a` change alone (patched into the served model),
    // then the route: the reused load balancer takes the patched pool.
    let (endpoints, patched) = endpoints_patched(&route_moved, w, &model);
    let w = Mixed {
        a_ip: "10.0.0.9",
        route_path: "/cart",
        ..w
    };
    let after_endpoints = load_values(mixed(w));
    let (model, reused) = ingress_step(&endpoints, &patched, &after_endpoints, &mut memo);
    assert!(reused, "endpoint changes do not make the share stale");

    // An Ingress change, a Service's endpoints in the same batch as a route change, a
    // Secret: translated again.
    let mut old = after_endpoints;
    let mut model = model;
    for w in [
        Mixed {
            extra: Some("/new"),
            ..w
        },
        Mixed {
            extra: Some("/new"),
            m_ip: "10.0.0.6",
            route_path: "/",
            ..w
        },
        Mixed {
            extra: Some("/new"),
            m_ip: "10.0.0.6",
            route_path: "/",
            cert: "eQ==",
            ..w
        },
    ] {
        let new = load_values(mixed(w));
        let (next, reused) = ingress_step(&old, &model, &new, &mut memo);
        assert!(!reused, "an input of the Ingress side changed");
        (old, model) = (new, next);
    }
    let (_, reused) = ingress_step(&old, &model, &old, &mut memo);
    assert!(reused, "nothing changed");
}
