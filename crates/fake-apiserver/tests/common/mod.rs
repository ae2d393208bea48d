//! Shared by the integration tests: a started fake and a kube client built from its kubeconfig.

#![allow(dead_code)]

use kube::config::{KubeConfigOptions, Kubeconfig};
use portico_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use std::time::Duration;

/// A fake API server and a client configured through the kubeconfig it writes.
pub async fn start() -> (FakeApiServer, kube::Client) {
    connect(FakeApiServer::start().await).await
}

/// A client for `server`, configured through the kubeconfig it writes.
pub async fn connect(server: FakeApiServer) -> (FakeApiServer, kube::Client) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    server.write_kubeconfig(&path);
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config).expect("client");
    (server, client)
}

pub fn ingress(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"rules": [{"host": format!("{name}.example")}]},
    })
}

/// The API error code of a kube result, if it failed with one.
pub fn api_code<T>(result: Result<T, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// Bounds every wait in a test, so a broken fake fails instead of hanging.
pub async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}
