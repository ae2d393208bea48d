//! kubectl-style YAML for one Ingress and for one Service with its EndpointSlices (pure).
//!
//! An EndpointSlice carries its ports for all of its endpoints, so a Service whose endpoints
//! listen on several backend ports gets one slice per port; with one backend port it gets
//! exactly one slice.

use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// One endpoint of a Service: its address, port and readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    pub ready: bool,
}

impl Endpoint {
    /// A ready endpoint on 127.0.0.1 at `port`.
    pub fn local(port: u16) -> Self {
        Endpoint {
            ip: Ipv4Addr::LOCALHOST,
            port,
            ready: true,
        }
    }
}

pub const NAMESPACE: &str = "scale";

/// One path of an Ingress rule and the Service (port 80) it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressPath {
    pub host: String,
    pub path: String,
    pub service: String,
}

/// A networking.k8s.io/v1 Ingress of class `portico`; consecutive paths of one host share a
/// rule. `created` seconds after 2024-01-01T00:00:00Z is its creationTimestamp. With a TLS
/// Secret, a `spec.tls` entry without hosts (it covers the rule hosts) names it, and the HTTP
/// requests stay on HTTP (`portico.dev/ssl-redirect: "false"`) so the traffic is the same.
pub fn ingress(name: &str, created: usize, paths: &[IngressPath], tls: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\n  creationTimestamp: \"{ts}\"\n",
        ts = timestamp(created)
    );
    if tls.is_some() {
        y.push_str("  annotations:\n    portico.dev/ssl-redirect: \"false\"\n");
    }
    y.push_str("spec:\n  ingressClassName: portico\n");
    if let Some(secret) = tls {
        let _ = writeln!(y, "  tls:\n  - secretName: {secret}");
    }
    y.push_str("  rules:\n");
    let mut host = None;
    for p in paths {
        if host != Some(&p.host) {
            let _ = write!(y, "  - host: {}\n    http:\n      paths:\n", p.host);
            host = Some(&p.host);
        }
        let _ = write!(
            y,
            "      - path: {}\n        pathType: Prefix\n        backend:\n          service:\n            name: {}\n            port:\n              number: 80\n",
            p.path, p.service
        );
    }
    y
}

/// A `kubernetes.io/tls` Secret with PEM `chain` and `key` (as `stringData`).
pub fn tls_secret(name: &str, chain: &str, key: &str) -> String {
    let block = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        block(chain),
        block(key)
    )
}

/// A v1 Service (port 80 named `http`) and its EndpointSlices: `endpoints` grouped into one
/// slice per distinct port.
pub fn service(name: &str, endpoints: &[Endpoint]) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  ports:\n  - name: http\n    port: 80\n"
    );
    for (port, endpoints) in group(endpoints) {
        slice(&mut y, name, port, &endpoints);
    }
    y
}

fn slice(y: &mut String, service: &str, port: u16, endpoints: &[Endpoint]) {
    let _ = write!(
        y,
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-{port}\n  namespace: {NAMESPACE}\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\nports:\n- name: http\n  port: {port}\nendpoints:\n"
    );
    for e in endpoints {
        let _ = write!(
            y,
            "- addresses: [\"{}\"]\n  conditions:\n    ready: {}\n",
            e.ip, e.ready
        );
    }
}

/// The endpoints of each distinct port, ports in order of first appearance.
fn group(endpoints: &[Endpoint]) -> Vec<(u16, Vec<Endpoint>)> {
    let mut out: Vec<(u16, Vec<Endpoint>)> = Vec::new();
    for e in endpoints {
        match out.iter_mut().find(|(p, _)| *p == e.port) {
            Some((_, group)) => group.push(*e),
            None => out.push((e.port, vec![*e])),
        }
    }
    out
}

/// RFC 3339 time `seconds` after 2024-01-01T00:00:00Z, for up to 28 days.
fn timestamp(seconds: usize) -> String {
    let day = 1 + (seconds / 86_400) % 28;
    let (h, m, s) = (seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    format!("2024-01-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(host: &str, path: &str) -> IngressPath {
        IngressPath {
            host: host.into(),
            path: path.into(),
            service: "svc-1".into(),
        }
    }

    #[test]
    fn paths_of_one_host_share_a_rule() {
        let y = ingress(
            "ing-1",
            0,
            &[path("a", "/p0"), path("a", "/p1"), path("b", "/p0")],
            None,
        );
        assert_eq!(y.matches("- host:").count(), 2);
        assert_eq!(y.matches("pathType: Prefix").count(), 3);
        assert!(!y.contains("tls"));
    }

    #[test]
    fn a_tls_ingress_names_its_secret_and_stays_on_http() {
        let y = ingress("ing-1", 0, &[path("a", "/p0")], Some("tls-ing-1"));
        assert!(y.contains("  tls:\n  - secretName: tls-ing-1\n"), "{y}");
        assert!(y.contains("portico.dev/ssl-redirect: \"false\""), "{y}");
    }

    #[test]
    fn a_tls_secret_keeps_its_pem_lines() {
        let y = tls_secret("s", "-----BEGIN CERTIFICATE-----\nAAA\n", "K\n");
        assert!(y.contains(
            "  tls.crt: |\n    -----BEGIN CERTIFICATE-----\n    AAA\n  tls.key: |\n    K\n"
        ));
    }

    #[test]
    fn one_slice_per_distinct_port() {
        let y = service("svc-1", &[1, 2, 1, 3].map(Endpoint::local));
        assert_eq!(y.matches("kind: EndpointSlice").count(), 3);
        assert_eq!(y.matches("127.0.0.1").count(), 4);
    }

    #[test]
    fn endpoints_keep_their_address_and_readiness() {
        let pod = Endpoint {
            ip: Ipv4Addr::new(127, 1, 0, 7),
            port: 1,
            ready: false,
        };
        let y = service("svc-1", &[Endpoint::local(1), pod]);
        assert_eq!(y.matches("kind: EndpointSlice").count(), 1);
        assert!(
            y.contains("- addresses: [\"127.0.0.1\"]\n  conditions:\n    ready: true\n- addresses: [\"127.1.0.7\"]\n  conditions:\n    ready: false\n"),
            "{y}"
        );
    }

    #[test]
    fn timestamps_count_seconds_from_new_year() {
        assert_eq!(timestamp(0), "2024-01-01T00:00:00Z");
        assert_eq!(timestamp(86_400 + 3_661), "2024-01-02T01:01:01Z");
    }
}
