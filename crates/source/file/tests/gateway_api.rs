#![allow(clippy::unwrap_used)]

use portico_model::{ObjectRef, Severity};
use portico_source_file::{Object, parse_documents};
use portico_translate::ObjectKey;

const GATEWAY_KINDS: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico, namespace: ignored}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata: {name: web}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: shop}
spec:
  parentRefs: [{name: web, namespace: default}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: g, namespace: default}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: t}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: tls}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1alpha3
kind: TLSRoute
metadata: {name: tls3}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: TLSRoute
metadata: {name: not-read}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: more}
spec:
  parentRef: {name: web}
  listeners: [{name: extra, port: 8080, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ListenerSet
metadata: {name: not-read-either}
spec: {parentRef: {name: web}}
---
apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XListenerSet
metadata: {name: experimental-not-read}
spec: {parentRef: {name: web}}
"#;

#[test]
fn gateway_api_kinds_are_read_beside_the_others_with_the_api_servers_namespace_defaults() {
    let parsed = parse_documents("gw.yaml", GATEWAY_KINDS);
    assert_eq!(parsed.diagnostics, vec![]);
    let refs: Vec<ObjectRef> = parsed.objects.iter().map(Object::object_ref).collect();
    assert_eq!(
        refs,
        [
            ObjectRef::new("GatewayClass", "", "portico"),
            ObjectRef::new("Gateway", "default", "web"),
            ObjectRef::new("HTTPRoute", "shop", "r"),
            ObjectRef::new("ReferenceGrant", "default", "g"),
            ObjectRef::new("TCPRoute", "default", "t"),
            ObjectRef::new("TLSRoute", "default", "tls"),
            ObjectRef::new("TLSRoute", "default", "tls3"),
            ObjectRef::new("ListenerSet", "default", "more"),
        ]
    );
}

#[test]
fn a_bad_gateway_is_reported_by_field_and_the_rest_is_kept() {
    let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bad, namespace: shop}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: eighty, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good, namespace: shop}
spec: {}
"#;
    let parsed = parse_documents("bad.yaml", text);
    assert_eq!(parsed.diagnostics.len(), 1, "{:?}", parsed.diagnostics);
    let d = &parsed.diagnostics[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.object, ObjectRef::new("Gateway", "shop", "bad"));
    assert_eq!(d.field, "spec.listeners[0].port");
    assert_eq!(parsed.objects.len(), 1);
    assert_eq!(parsed.objects[0].kind(), "HTTPRoute");
}

#[test]
fn loaded_objects_hold_the_gateway_api_maps() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gw.yaml"), GATEWAY_KINDS).unwrap();
    let loaded = portico_source_file::load(&[dir.path().to_owned()], Default::default());
    let objects = &loaded.objects;
    assert!(objects.gateway_classes.contains_key("portico"));
    assert!(
        objects
            .gateways
            .contains_key(&ObjectKey::new("default", "web"))
    );
    assert!(
        objects
            .http_routes
            .contains_key(&ObjectKey::new("shop", "r"))
    );
    assert!(
        objects
            .reference_grants
            .contains_key(&ObjectKey::new("default", "g"))
    );
}
