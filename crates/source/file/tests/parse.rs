#![allow(clippy::unwrap_used)]

mod common;

use common::{ingress, service};
use portico_model::{ObjectRef, Severity};
use portico_source_file::{Object, parse_documents};

const ALL_KINDS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: portico}
spec: {controller: portico.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
ports: [{port: 8080}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: shop}
subsets: [{addresses: [{ip: 10.0.0.2}], ports: [{port: 8080}]}]
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: shop}
type: kubernetes.io/tls
data: {tls.crt: Y2VydA==, tls.key: a2V5}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored, namespace: shop}
spec: {replicas: 1}
"#;

fn kinds(objects: &[Object]) -> Vec<&'static str> {
    objects.iter().map(Object::kind).collect()
}

#[test]
fn all_six_kinds_are_read_and_other_kinds_ignored() {
    let parsed = parse_documents("all.yaml", ALL_KINDS);
    assert_eq!(parsed.diagnostics, vec![]);
    let expected = [
        "Ingress",
        "IngressClass",
        "Service",
        "EndpointSlice",
        "Endpoints",
        "Secret",
    ];
    assert_eq!(kinds(&parsed.objects), expected);
    let Object::Secret(secret) = &parsed.objects[5] else {
        panic!("not a Secret")
    };
    assert_eq!(secret.data.as_ref().unwrap()["tls.key"].0, b"key");
    let Object::EndpointSlice(slice) = &parsed.objects[3] else {
        panic!("not a slice")
    };
    let address: std::net::IpAddr = "10.0.0.1".parse().unwrap();
    assert_eq!(*slice.endpoints[0].addresses, [address]);
}

#[test]
fn a_json_object_is_read() {
    let text = r#"{"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 80}]}}"#;
    let parsed = parse_documents("svc.json", text);
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(
        parsed.objects[0].object_ref(),
        ObjectRef::new("Service", "shop", "web")
    );
}

#[test]
fn a_json_list_yields_its_items() {
    let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "c"}}]}"#;
    let parsed = parse_documents("list.json", text);
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(kinds(&parsed.objects), ["Service", "IngressClass"]);
}

#[test]
fn a_typed_list_lends_its_kind_to_items_that_omit_it() {
    let text =
        "apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";
    let parsed = parse_documents("list.yaml", text);
    assert_eq!(parsed.diagnostics, vec![]);
    let refs: Vec<_> = parsed.objects.iter().map(Object::object_ref).collect();
    assert_eq!(
        refs,
        [
            ObjectRef::new("Service", "default", "a"),
            ObjectRef::new("Service", "default", "b")
        ]
    );
}

#[test]
fn invalid_yaml_is_an_error_naming_the_file_and_document_and_spares_the_others() {
    let text = format!(
        "{}---\nkind: Service\nmetadata: [unclosed\n  name: x\n{}",
        service("a", "one", 80),
        service("a", "two", 80)
    );
    let parsed = parse_documents("dir/broken.yaml", &text);
    assert_eq!(parsed.objects.len(), 2, "{:?}", parsed.diagnostics);
    let [d] = &parsed.diagnostics[..] else {
        panic!("{:?}", parsed.diagnostics)
    };
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.object, ObjectRef::new("File", "", "dir/broken.yaml"));
    assert_eq!(d.field, "document[1]");
    // The second document starts on line 11; the error is on its fourth line.
    assert!(d.message.contains("line 14"), "{}", d.message);
}

#[test]
fn a_bad_field_names_the_object_and_field_and_spares_the_others() {
    let bad = service("shop", "bad", 80).replace("port: 80", "port: \"abc\"");
    let text = format!(
        "{}{bad}{}",
        ingress("shop", "web", "web"),
        service("shop", "web", 80)
    );
    let parsed = parse_documents("shop.yaml", &text);
    assert_eq!(kinds(&parsed.objects), ["Ingress", "Service"]);
    let [d] = &parsed.diagnostics[..] else {
        panic!("{:?}", parsed.diagnostics)
    };
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.object, ObjectRef::new("Service", "shop", "bad"));
    assert_eq!(d.field, "spec.ports[0].port");
    assert!(d.message.contains("abc"), "{}", d.message);
}

#[test]
fn a_missing_namespace_defaults_to_default_but_not_for_ingress_classes() {
    let text = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: c, namespace: stray}\n";
    let parsed = parse_documents("ns.yaml", text);
    assert_eq!(parsed.objects[0].names(), ("default", "web"));
    assert_eq!(parsed.objects[1].names(), ("", "c"));
}

#[test]
fn empty_and_comment_only_documents_are_skipped() {
    let text = format!(
        "---\n---\n# nothing here\n---\n\n{}---\n",
        service("a", "web", 80)
    );
    let parsed = parse_documents("empty.yaml", &text);
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(kinds(&parsed.objects), ["Service"]);
    assert_eq!(
        parse_documents("blank.yaml", "  \n# c\n"),
        Default::default()
    );
}

#[test]
fn an_object_without_a_name_is_an_error() {
    let parsed = parse_documents(
        "a.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
    );
    assert!(parsed.objects.is_empty());
    assert_eq!(parsed.diagnostics[0].field, "metadata.name");
    assert_eq!(
        parsed.diagnostics[0].object,
        ObjectRef::new("Service", "x", "")
    );
}

#[test]
fn a_document_without_kind_is_an_error_naming_the_file() {
    let parsed = parse_documents("a.yaml", "apiVersion: v1\nmetadata: {name: x}\n");
    assert_eq!(
        parsed.diagnostics[0].object,
        ObjectRef::new("File", "", "a.yaml")
    );
    assert_eq!(parsed.diagnostics[0].field, "document[0]");
}

#[test]
fn bad_secret_data_is_reported_without_its_content() {
    let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {key: \"hunter2 is not base64!\"}\n";
    let parsed = parse_documents("s.yaml", text);
    let d = &parsed.diagnostics[0];
    assert_eq!(d.object, ObjectRef::new("Secret", "default", "s"));
    assert!(d.field.starts_with("data"), "{}", d.field);
    assert!(!d.message.contains("hunter2"), "{}", d.message);
    assert!(parsed.objects.is_empty());
}

#[test]
fn invalid_json_in_a_json_file_is_an_error_naming_the_file() {
    let parsed = parse_documents("x.json", "{\"apiVersion\": \"v1\",");
    assert_eq!(
        parsed.diagnostics[0].object,
        ObjectRef::new("File", "", "x.json")
    );
    assert!(parsed.diagnostics[0].is_error());
}

#[test]
fn yaml_flow_style_is_not_mistaken_for_json() {
    let parsed = parse_documents(
        "flow.yaml",
        "{apiVersion: v1, kind: Service, metadata: {name: web}}\n",
    );
    assert_eq!(parsed.diagnostics, vec![]);
    assert_eq!(kinds(&parsed.objects), ["Service"]);
}

#[test]
fn a_secret_prints_without_its_data() {
    let parsed = parse_documents("all.yaml", ALL_KINDS);
    let printed = format!("{:?}", parsed.objects[5]);
    assert!(printed.contains("Secret shop/tls"), "{printed}");
    assert!(
        !printed.contains("107, 101, 121") && !printed.contains("key\""),
        "{printed}"
    );
}

#[test]
fn diagnostics_are_capped_per_file_ending_with_how_many_more() {
    let mut yaml = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for _ in 0..1000 {
        yaml.push_str("- 1\n");
    }
    let parsed = parse_documents("huge.yaml", &yaml);
    assert_eq!(parsed.diagnostics.len(), 101);
    let last = parsed.diagnostics.last().unwrap();
    assert!(
        last.message.starts_with("… and 900 more problems"),
        "{}",
        last.message
    );
}
