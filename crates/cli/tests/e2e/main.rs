//! Black-box tests: the real `portico` binary against echo backends on 127.0.0.1.
#![allow(clippy::unwrap_used)] // tests may unwrap

/// One test per (scenario, provider) for the two L7 providers: `<module>::proxy::<scenario>`
/// and `<module>::haproxy::<scenario>`, each calling `super::<scenario>(Provider::…)`.
macro_rules! proxy_and_haproxy {
    ($($scenario:ident),* $(,)?) => {
        mod proxy {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario($crate::conformance::Provider::Proxy).await
            })*
        }
        mod haproxy {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario($crate::conformance::Provider::Haproxy).await
            })*
        }
    };
}

mod cdp;
mod kube_support;
mod netns;
mod raw_client;
mod support;
mod tls_support;
mod unprivileged;

mod access_log;
mod active_standby;
mod admin;
mod agent_restart;
mod agent_upgrade;
mod allocator;
mod annotations;
mod architecture;
mod backends;
mod bad_input;
mod balancing;
mod basic_auth;
mod canary;
mod classes;
mod compression;
mod conformance;
mod dashboard;
mod demo;
mod distributed;
mod drain;
mod error_pages;
mod external_auth;
mod failover;
mod gateway_api;
mod gateway_backend_tls;
mod gateway_core;
mod gateway_http;
mod gateway_kube;
mod gateway_l4;
mod gateway_listener_sets;
mod gateway_tls;
mod get;
mod haproxy;
mod haproxy_auth;
mod haproxy_limits;
mod host_rules;
mod hostile;
mod hot_upgrade;
mod hsts;
mod http3;
mod ingress_nginx;
mod kubernetes;
mod l4;
mod l4_collisions;
mod l4_limits;
mod l4_proxy_protocol;
mod limits;
mod live;
mod merging;
mod migrate;
mod migrate_gateway;
mod otlp;
mod passthrough;
mod path_rules;
mod paths;
mod proxy_protocol;
mod rate_limits;
mod request_bodies;
mod seed_examples;
mod server_header;
mod take_over;
mod tls;
mod upgrades;
mod upstreams;
mod vips;
mod websocket;
mod www_redirect;

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
