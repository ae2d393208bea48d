//! Services of type LoadBalancer → `l4` load balancers: which Services are served, and their
//! listeners and pools (the golden case `l4-services` shows a whole one).
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use portico_model::Protocol;
use portico_translate::{Config, translate};

const SERVICES: &str = include_str!("golden/l4-services/input.yaml");

#[test]
fn only_the_l4_class_is_served_unless_all_services_are() {
    let objects = support::load(SERVICES);
    let names = |config: &Config| -> Vec<String> {
        let t = translate(&objects, config);
        t.model
            .load_balancers
            .iter()
            .map(|lb| lb.name.clone())
            .collect()
    };
    assert_eq!(names(&Config::default()), ["service/apps/dns"]);
    let all = Config {
        l4_all_services: true,
        ..Config::default()
    };
    let mut served = names(&all);
    served.sort();
    assert_eq!(served, ["service/apps/dns", "service/apps/plain"]);

    let t = translate(&objects, &all);
    let plain = (t.model.load_balancers.iter())
        .find(|lb| lb.name == "service/apps/plain")
        .expect("plain is served");
    assert_eq!(plain.provider, "l4");
    assert_eq!(plain.listeners.len(), 1);
    let listener = &plain.listeners[0];
    assert_eq!((listener.protocol, listener.port), (Protocol::Tcp, 80));
    assert_eq!(listener.default_pool, Some(plain.pools[0].id));
    assert_eq!(plain.pools[0].service_port, "80");
    assert!(plain.pools[0].settings.is_default());
}

/// A Service of class `portico.dev/l4` on `loadBalancerIP: 192.0.2.10` with `ports` (flow
/// YAML list items) and an optional creation time.
fn on_shared_ip(name: &str, created: Option<&str>, ports: &str) -> String {
    let created = created.map_or(String::new(), |t| format!(", creationTimestamp: \"{t}\""));
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: apps{created}}}\nspec:\n  type: LoadBalancer\n  loadBalancerClass: portico.dev/l4\n  loadBalancerIP: 192.0.2.10\n  ports: [{ports}]\n"
    )
}

/// Translates and assigns addresses (pool 198.51.100.0/24) and resolves collisions, as the
/// compile step does.
fn compile(yaml: &str) -> (portico_model::Model, Vec<portico_model::Diagnostic>) {
    let objects = support::load(yaml);
    let config = Config {
        vip_pool: Some("198.51.100.0/24".parse().unwrap()),
        ..Config::default()
    };
    let mut t = translate(&objects, &config);
    let previous = portico_translate::Allocations::new();
    let (_, mut diagnostics) =
        portico_translate::assign_addresses(&mut t.model, &objects, &config, &previous);
    diagnostics.extend(portico_translate::l4_collisions(&mut t.model, &objects));
    (t.model, diagnostics)
}

fn ports_of(model: &portico_model::Model, name: &str) -> Vec<String> {
    let lb = (model.load_balancers.iter())
        .find(|lb| lb.name == format!("service/apps/{name}"))
        .expect("served");
    lb.listeners.iter().map(|l| l.name.clone()).collect()
}

#[test]
fn services_share_a_load_balancer_ip_on_different_ports() {
    let yaml = on_shared_ip("a", None, "{name: x, port: 80}")
        + &on_shared_ip(
            "b",
            None,
            "{name: x, port: 81}, {name: yy, port: 80, protocol: UDP}",
        );
    let (model, diagnostics) = compile(&yaml);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let vips: Vec<_> = model.load_balancers.iter().map(|lb| lb.vip).collect();
    assert_eq!(vips, [Some("192.0.2.10".parse().unwrap()); 2]);
    assert_eq!(ports_of(&model, "a"), ["TCP:80"]);
    assert_eq!(ports_of(&model, "b"), ["TCP:81", "UDP:80"]);
}

#[test]
fn the_oldest_service_keeps_a_colliding_port_and_the_other_is_told_who_has_it() {
    // `a` is newer than `b`: `b` keeps TCP 80; `a` keeps its other port.
    let yaml = on_shared_ip(
        "a",
        Some("2026-02-01T00:00:00Z"),
        "{name: x, port: 443}, {name: yy, port: 80}",
    ) + &on_shared_ip("b", Some("2026-01-01T00:00:00Z"), "{name: web, port: 80}");
    let (model, diagnostics) = compile(&yaml);
    assert_eq!(ports_of(&model, "b"), ["TCP:80"]);
    assert_eq!(
        ports_of(&model, "a"),
        ["TCP:443"],
        "nothing else is blocked"
    );
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!(d.object.to_string(), "Service apps/a");
    assert_eq!(d.field, "spec.ports[1]");
    assert_eq!(
        d.message,
        "TCP 192.0.2.10:80 is already served for Service apps/b (spec.ports[0]); this port is not served"
    );
}

#[test]
fn without_creation_times_the_first_by_namespace_and_name_keeps_the_port() {
    let yaml = on_shared_ip("z", None, "{name: x, port: 80}")
        + &on_shared_ip("m", None, "{name: x, port: 80}");
    let (model, diagnostics) = compile(&yaml);
    assert_eq!(ports_of(&model, "m"), ["TCP:80"]);
    assert!(ports_of(&model, "z").is_empty());
    assert_eq!(diagnostics[0].object.to_string(), "Service apps/z");
    assert!(diagnostics[0].message.contains("Service apps/m"));
}

#[test]
fn one_service_listing_a_port_twice_keeps_the_first() {
    let yaml = on_shared_ip("d", None, "{name: x, port: 53}, {name: yy, port: 53}");
    let (model, diagnostics) = compile(&yaml);
    assert_eq!(ports_of(&model, "d"), ["TCP:53"]);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].field, "spec.ports[1]");
    assert!(diagnostics[0].message.contains("(spec.ports[0])"));
}

#[test]
fn a_load_balancer_ip_that_is_no_address_is_a_warning_and_the_pool_gives_one() {
    let yaml = on_shared_ip("q", None, "{name: x, port: 80}").replace("192.0.2.10", "nope");
    let (model, diagnostics) = compile(&yaml);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].field, "spec.loadBalancerIP");
    let vip = model.load_balancers[0].vip.unwrap();
    assert!(vip.to_string().starts_with("198.51.100."), "{vip}");
}

/// The Service `pp` with `portico.dev/proxy-protocol: <value>`, a TCP and a UDP port.
fn proxied(value: &str) -> (portico_model::Model, Vec<portico_model::Diagnostic>) {
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: pp\n  namespace: apps\n  annotations: {{portico.dev/proxy-protocol: \"{value}\"}}\nspec:\n  type: LoadBalancer\n  loadBalancerClass: portico.dev/l4\n  ports: [{{name: web, port: 80}}, {{name: dns, port: 53, protocol: UDP}}]\n"
    );
    let t = translate(&support::load(&yaml), &Config::default());
    (t.model, t.diagnostics)
}

#[test]
fn proxy_protocol_v2_is_set_on_tcp_pools_and_udp_ports_are_told_they_get_none() {
    use portico_model::ProxyProtocol;
    let (model, diagnostics) = proxied("v2");
    let lb = &model.load_balancers[0];
    let setting = |port: u16| {
        let listener = lb.listeners.iter().find(|l| l.port == port).unwrap();
        let pool = lb.pool(listener.default_pool.unwrap()).unwrap();
        pool.settings.proxy_protocol
    };
    assert_eq!(setting(80), Some(ProxyProtocol::V2));
    assert_eq!(setting(53), None);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].field, "spec.ports[1]");

    let (model, diagnostics) = proxied("none");
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let pools = &model.load_balancers[0].pools;
    assert!(pools.iter().all(|p| p.settings.proxy_protocol.is_none()));
}

#[test]
fn an_unknown_proxy_protocol_version_is_a_warning_and_sends_none() {
    let (model, diagnostics) = proxied("v1");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!(d.field, "metadata.annotations[portico.dev/proxy-protocol]");
    assert_eq!(
        d.message,
        "\"v1\" is not a PROXY protocol version (v2 or none); none is sent"
    );
    let pools = &model.load_balancers[0].pools;
    assert!(pools.iter().all(|p| p.settings.proxy_protocol.is_none()));
}
