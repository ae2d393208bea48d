//! Black-box tests: the real `portico` binary against echo backends on 127.0.0.1.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod kube_support;
mod raw_client;
mod support;
mod tls_support;

mod access_log;
mod admin;
mod allocator;
mod backends;
mod bad_input;
mod balancing;
mod classes;
mod conformance;
mod demo;
mod distributed;
mod drain;
mod haproxy;
mod host_rules;
mod kubernetes;
mod limits;
mod live;
mod merging;
mod path_rules;
mod paths;
mod seed_examples;
mod tls;
mod upgrades;
mod vips;
mod websocket;

use support::*;

/// Starts echo backends for each (service, pods), writes their Services into `backends.yaml`
/// of a new manifest directory in namespace `ns`.
pub async fn backends(ns: &str, services: &[(&str, usize)]) -> Manifests {
    let m = Manifests::new();
    let mut y = String::new();
    for (name, pods) in services {
        y.push_str(&service(ns, name, &ready(&echo_pods(name, *pods).await)));
    }
    m.write("backends.yaml", &y);
    m
}

/// Asserts each (host, path) → (status, service); service "" means no backend answered.
pub async fn expect_routes(p: &Portico, cases: &[(&str, &str, u16, &str)]) {
    let mut failures = Vec::new();
    for (host, path, status, svc) in cases {
        let r = p.get(host, path).await;
        if r.status != *status || r.service() != *svc {
            failures.push(format!(
                "{host}{path}: wanted {status} {svc:?}, got {} {:?}",
                r.status,
                r.service()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "routing mismatches:\n{}",
        failures.join("\n")
    );
}
