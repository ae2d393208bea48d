#![allow(clippy::unwrap_used)]

use super::*;

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).unwrap()
}

#[test]
fn a_gateway_decodes_with_its_listeners_and_keeps_unknown_fields() {
    let gateway: Gateway = yaml(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: shop}
spec:
  gatewayClassName: portico
  addresses: [{value: 10.0.0.7}]
  infrastructure: {labels: {a: b}}
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    hostname: '*.example.com'
    futureField: 3
    allowedRoutes: {namespaces: {from: All}}
  - name: https
    port: 443
    protocol: HTTPS
    tls: {certificateRefs: [{name: cert}], options: {x: v}}
",
    );
    let spec = &gateway.spec;
    assert_eq!(spec.addresses[0].address_type(), "IPAddress");
    assert_eq!(spec.listeners[0].routes_from(), "All");
    assert_eq!(spec.listeners[1].routes_from(), "Same");
    let tls = spec.listeners[1].tls.as_ref().unwrap();
    assert_eq!(tls.tls_mode(), "Terminate");
    assert_eq!(tls.certificate_refs[0].group_kind(), ("", "Secret"));
    assert!(spec.rest.contains_key("infrastructure"));
    let printed = serde_json::to_value(&gateway).unwrap();
    assert_eq!(printed["spec"]["infrastructure"]["labels"]["a"], "b");
    assert_eq!(printed["spec"]["listeners"][1]["tls"]["options"]["x"], "v");
}

#[test]
fn an_httproute_gets_the_apis_defaults() {
    let route: HttpRoute = yaml(
        "apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: web, sectionName: http}]
  rules:
  - backendRefs: [{name: svc, port: 8080}]
  - matches: [{path: {type: Exact, value: /a}, headers: [{name: X-A, value: '1'}]}]
",
    );
    let rules = &route.spec.rules;
    let matches = rules[0].effective_matches();
    assert_eq!(matches[0].path_match(), ("PathPrefix", "/"));
    assert_eq!(rules[0].backend_refs[0].group_kind(), ("", "Service"));
    assert_eq!(rules[0].backend_refs[0].effective_weight(), 1);
    assert_eq!(rules[1].matches[0].path_match(), ("Exact", "/a"));
    assert_eq!(rules[1].matches[0].headers[0].match_type(), "Exact");
    let parent = &route.spec.parent_refs[0];
    assert!(parent.is_gateway());
    assert_eq!(parent.namespace_or("shop"), "shop");
}

#[test]
fn a_parent_of_another_kind_is_no_gateway() {
    let parent: ParentReference = yaml("{name: s, kind: Service, group: ''}");
    assert!(!parent.is_gateway());
}

#[test]
fn a_reference_grant_permits_only_what_it_names() {
    let grant: ReferenceGrant = yaml(
        "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: '', kind: Service, name: web}]
",
    );
    let from = (GROUP, "HTTPRoute", "shop");
    assert!(grant.permits(from, ("", "Service", "web")));
    assert!(!grant.permits(from, ("", "Service", "db")));
    assert!(!grant.permits((GROUP, "HTTPRoute", "other"), ("", "Service", "web")));
}

#[test]
fn read_versions_are_v1_and_v1beta1_of_the_group() {
    assert!(is_read_version("gateway.networking.k8s.io/v1"));
    assert!(is_read_version("gateway.networking.k8s.io/v1beta1"));
    assert!(!is_read_version("gateway.networking.k8s.io/v1alpha2"));
    assert!(!is_read_version("networking.k8s.io/v1"));
}

#[test]
fn kinds_name_their_resources_for_the_api() {
    use k8s_openapi::Resource;
    assert_eq!(HttpRoute::KIND, "HTTPRoute");
    assert_eq!(HttpRoute::URL_PATH_SEGMENT, "httproutes");
    assert_eq!(GatewayClass::API_VERSION, "gateway.networking.k8s.io/v1");
}

#[test]
fn tcp_and_udp_routes_read_v1_and_v1alpha2_as_one_shape() {
    assert!(is_l4_route_version("gateway.networking.k8s.io/v1alpha2"));
    assert!(is_l4_route_version("gateway.networking.k8s.io/v1"));
    assert!(!is_l4_route_version("gateway.networking.k8s.io/v1beta1"));
    let route: TcpRoute = yaml(
        "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db, namespace: shop}
spec:
  parentRefs: [{name: edge, sectionName: pg}]
  rules:
  - backendRefs: [{name: pg, port: 5432, weight: 3}, {name: pg-canary, port: 5432}]
    futureField: x
",
    );
    let rule = &route.spec.rules[0];
    assert_eq!(
        route.spec.parent_refs[0].section_name.as_deref(),
        Some("pg")
    );
    assert_eq!(rule.backend_refs[0].effective_weight(), 3);
    assert_eq!(rule.backend_refs[1].effective_weight(), 1);
    assert!(rule.rest.contains_key("futureField"));
    let udp: UdpRoute =
        yaml("{kind: UDPRoute, spec: {rules: [{backendRefs: [{name: dns, port: 53}]}]}}");
    assert_eq!(udp.spec.rules[0].backend_refs[0].name, "dns");
    use k8s_openapi::Resource;
    assert_eq!(UdpRoute::URL_PATH_SEGMENT, "udproutes");
    assert_eq!(TcpRoute::KIND, "TCPRoute");
}

#[test]
fn tls_routes_read_v1_v1alpha3_and_v1alpha2_as_one_shape() {
    for version in ["v1", "v1alpha3", "v1alpha2"] {
        assert!(is_tls_route_version(&format!(
            "gateway.networking.k8s.io/{version}"
        )));
    }
    assert!(!is_tls_route_version("gateway.networking.k8s.io/v1beta1"));
    let route: TlsRoute = yaml(
        "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: db, namespace: shop}
spec:
  parentRefs: [{name: edge, sectionName: tls, port: 443}]
  hostnames: [db.example.com, \"*.example.net\"]
  rules:
  - backendRefs: [{name: db, port: 8443, weight: 3}]
",
    );
    assert_eq!(route.spec.hostnames, ["db.example.com", "*.example.net"]);
    assert_eq!(route.spec.parent_refs[0].port, Some(443));
    assert_eq!(route.spec.rules[0].backend_refs[0].effective_weight(), 3);
    use k8s_openapi::Resource;
    assert_eq!(TlsRoute::URL_PATH_SEGMENT, "tlsroutes");
    assert_eq!(TlsRoute::KIND, "TLSRoute");
}

#[test]
fn a_listener_set_decodes_its_parent_and_listeners_and_a_gateway_its_allowed_listeners() {
    use k8s_openapi::Resource;
    let set: ListenerSet = yaml(
        "apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: team}
spec:
  parentRef: {name: web, namespace: shop}
  listeners:
  - name: b
    port: 8080
    protocol: HTTP
    hostname: b.example.com
",
    );
    assert!(set.spec.parent_ref.is_gateway());
    assert_eq!(set.spec.parent_ref.namespace_or("team"), "shop");
    assert_eq!(set.spec.listeners[0].port, 8080);
    assert_eq!(set.spec.listeners[0].routes_from(), "Same");
    assert_eq!(ListenerSet::URL_PATH_SEGMENT, "listenersets");
    assert_eq!(ListenerSet::KIND, "ListenerSet");
    let gateway: Gateway = yaml(
        "spec:
  gatewayClassName: portico
  allowedListeners: {namespaces: {from: All}}
",
    );
    assert_eq!(gateway.spec.listeners_from(), "All");
    let default: Gateway = yaml("spec: {gatewayClassName: portico}");
    assert_eq!(default.spec.listeners_from(), "None");
    let printed = serde_json::to_value(&gateway).unwrap();
    assert_eq!(
        printed["spec"]["allowedListeners"]["namespaces"]["from"],
        "All"
    );
}
