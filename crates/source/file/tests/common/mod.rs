//! Manifest text for the tests, and helpers to watch it change.
#![allow(dead_code)]

pub mod watching;

pub fn service(namespace: &str, name: &str, port: u16) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  ports:\n  - name: http\n    port: {port}\n"
    )
}

pub fn ingress(namespace: &str, name: &str, service: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  rules:\n  - host: {name}.test\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: {service}\n            port:\n              number: 80\n"
    )
}

pub fn ingress_class(name: &str, default: bool) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: {name}\n  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"{default}\"\nspec:\n  controller: portico.dev/ingress-controller\n"
    )
}
