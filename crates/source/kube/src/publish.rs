//! `--publish-service`: the addresses of a Service (of type LoadBalancer) that Ingress status
//! shows, followed as the Service changes.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use portico_translate::ObjectKey;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Pure: the addresses of `service` for Ingress status, as ingress-nginx publishes them: its
/// load balancer's ingress points (IP, else hostname), else its `spec.externalIPs`.
pub fn service_addresses(service: &Service) -> Vec<String> {
    let status = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref());
    let points = status
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    let mut addresses: Vec<String> = points
        .iter()
        .filter_map(|p| p.ip.clone().or_else(|| p.hostname.clone()))
        .filter(|a| !a.is_empty())
        .collect();
    if addresses.is_empty() {
        let spec = service.spec.as_ref();
        addresses = spec
            .and_then(|s| s.external_ips.clone())
            .unwrap_or_default();
    }
    addresses.sort();
    addresses.dedup();
    addresses
}

/// Follows Service `key`: the receiver holds its addresses (none while it does not exist).
pub fn publish_service(
    client: Client,
    key: ObjectKey,
) -> (watch::Receiver<Vec<String>>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Vec::new());
    let task = tokio::spawn(async move {
        let api: Api<Service> = Api::namespaced(client, &key.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
        let stream = watcher(api, config).default_backoff().applied_objects();
        let mut stream = std::pin::pin!(stream);
        // `applied_objects` gives no deletions; a deleted Service keeps its last addresses
        // until it is created again, as a load balancer's address outlives a brief recreate.
        while let Some(event) = stream.next().await {
            match event {
                Ok(service) => {
                    let addresses = service_addresses(&service);
                    if addresses.is_empty() {
                        tracing::warn!(service = %key, "--publish-service has no load-balancer address yet");
                    }
                    tx.send_if_modified(|current| {
                        let changed = *current != addresses;
                        *current = addresses;
                        changed
                    });
                }
                Err(error) => {
                    tracing::warn!(service = %key, %error, "watching --publish-service failed; retrying")
                }
            }
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, ServiceSpec, ServiceStatus,
    };

    fn service(points: &[(Option<&str>, Option<&str>)], external: &[&str]) -> Service {
        let ingress = points
            .iter()
            .map(|(ip, host)| LoadBalancerIngress {
                ip: ip.map(str::to_owned),
                hostname: host.map(str::to_owned),
                ..LoadBalancerIngress::default()
            })
            .collect();
        Service {
            spec: Some(ServiceSpec {
                external_ips: Some(external.iter().map(|s| s.to_string()).collect()),
                ..ServiceSpec::default()
            }),
            status: Some(ServiceStatus {
                load_balancer: Some(LoadBalancerStatus {
                    ingress: Some(ingress),
                }),
                ..ServiceStatus::default()
            }),
            ..Service::default()
        }
    }

    #[test]
    fn load_balancer_points_then_external_ips() {
        let s = service(
            &[
                (Some("203.0.113.9"), None),
                (None, Some("lb.example.com")),
                (Some("203.0.113.9"), None),
            ],
            &["198.51.100.1"],
        );
        assert_eq!(service_addresses(&s), ["203.0.113.9", "lb.example.com"]);
        let pending = service(&[], &["198.51.100.1"]);
        assert_eq!(service_addresses(&pending), ["198.51.100.1"]);
        assert!(service_addresses(&Service::default()).is_empty());
    }
}
