//! Test support for `portico run --kubernetes`: a fake API server loaded with the same
//! manifests the file-source tests write, and Portico started against it.

use crate::support::Portico;
use portico_fake_apiserver::FakeApiServer;
use portico_source_file::{Object, parse_documents};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fake API server with a kubeconfig pointing at it.
pub struct Cluster {
    pub api: FakeApiServer,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn new() -> Self {
        Self::with(FakeApiServer::start().await)
    }

    /// A cluster without the Gateway API's CRDs.
    pub async fn without_gateway_api() -> Self {
        Self::without(&[portico_fake_apiserver::GATEWAY_API]).await
    }

    /// A cluster without these API groups or group versions.
    pub async fn without(groups: &[&str]) -> Self {
        Self::with(FakeApiServer::start_without(groups).await)
    }

    fn with(api: FakeApiServer) -> Self {
        let dir = tempfile::tempdir().unwrap();
        api.write_kubeconfig(&dir.path().join("kubeconfig"));
        Cluster { api, dir }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Creates or replaces every object of a manifest text (YAML or JSON), as `kubectl apply`:
    /// an object's status (a subresource) is kept unless the manifest has one.
    pub fn apply(&self, text: &str) {
        let parsed = parse_documents("test manifest", text);
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        for object in parsed.objects {
            let mut value = to_json(&object);
            if value.get("status").is_none_or(Value::is_null) {
                let meta = &value["metadata"];
                let (api, kind) = (value["apiVersion"].as_str(), value["kind"].as_str());
                let (ns, name) = (meta["namespace"].as_str(), meta["name"].as_str());
                let stored = self.api.get(api.unwrap(), kind.unwrap(), ns, name.unwrap());
                if let Some(status) = stored.and_then(|s| s.get("status").cloned()) {
                    value["status"] = status;
                }
            }
            self.api.apply(value);
        }
    }

    /// Applies every file of a manifest directory (the file-source tests' `Manifests`).
    pub fn apply_dir(&self, dir: &Path) {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect();
        files.sort();
        for file in files {
            self.apply(&std::fs::read_to_string(file).unwrap());
        }
    }

    /// The stored Ingress.
    pub fn ingress(&self, ns: &str, name: &str) -> Value {
        let got = self
            .api
            .get("networking.k8s.io/v1", "Ingress", Some(ns), name);
        got.unwrap_or(Value::Null)
    }

    /// Polls until the stored Ingress's `status.loadBalancer.ingress` is `want`.
    pub async fn wait_status(&self, ns: &str, name: &str, want: Value) -> Duration {
        self.wait_object_status("networking.k8s.io/v1", "Ingress", ns, name, want)
            .await
    }

    /// Polls until the stored object's `status.loadBalancer.ingress` is `want` (20 s at most).
    pub async fn wait_object_status(
        &self,
        api_version: &str,
        kind: &str,
        ns: &str,
        name: &str,
        want: Value,
    ) -> Duration {
        let start = Instant::now();
        loop {
            let object = self.api.get(api_version, kind, Some(ns), name);
            let object = object.unwrap_or(Value::Null);
            let got = &object["status"]["loadBalancer"]["ingress"];
            let got = if got.is_null() {
                &Value::Array(vec![])
            } else {
                got
            };
            if *got == want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "status of {kind} {ns}/{name} is {got}, want {want}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// PATCHes of Ingress status served so far, as (ingress name, addresses written).
    pub fn status_patches(&self) -> Vec<(String, Value)> {
        self.api
            .status_patches()
            .into_iter()
            .filter(|r| r.path.contains("/ingresses/"))
            .filter(|r| r.status < 300)
            .map(|r| {
                let name = r
                    .path
                    .trim_end_matches("/status")
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned();
                let body = r.body.unwrap_or(Value::Null);
                (name, body["status"]["loadBalancer"]["ingress"].clone())
            })
            .collect()
    }
}

fn to_json(object: &Object) -> Value {
    let value = match object {
        Object::Ingress(key, o) => serde_json::to_value(o.to_ingress(key)),
        Object::IngressClass(o) => serde_json::to_value(&**o),
        Object::Service(key, o) => serde_json::to_value(o.to_service(key)),
        Object::EndpointSlice(o) => return slice_json(o),
        Object::Endpoints(o) => serde_json::to_value(&**o),
        Object::Secret(o) => serde_json::to_value(&**o),
        Object::GatewayClass(o) => serde_json::to_value(&**o),
        Object::Gateway(o) => serde_json::to_value(&**o),
        Object::HttpRoute(o) => serde_json::to_value(&**o),
        Object::GrpcRoute(o) => serde_json::to_value(&**o),
        Object::ReferenceGrant(o) => serde_json::to_value(&**o),
        Object::TcpRoute(o) => serde_json::to_value(&**o),
        Object::UdpRoute(o) => serde_json::to_value(&**o),
        Object::BackendTlsPolicy(o) => serde_json::to_value(&**o),
        Object::ConfigMap(o) => serde_json::to_value(&**o),
        Object::TlsRoute(o) => serde_json::to_value(&**o),
        Object::ListenerSet(o) => serde_json::to_value(&**o),
        Object::Namespace(o) => serde_json::to_value(&**o),
    };
    value.unwrap()
}

/// An EndpointSlice again from what the file source keeps of it (the fields Portico reads).
fn slice_json(slice: &portico_translate::CompactSlice) -> Value {
    let first = slice
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.iter())
        .next();
    let address_type = match first {
        _ if !slice.ip => "FQDN",
        Some(std::net::IpAddr::V6(_)) => "IPv6",
        _ => "IPv4",
    };
    let ports: Vec<Value> = (slice.ports.iter())
        .map(|p| serde_json::json!({"name": p.name, "port": p.port}))
        .collect();
    let endpoints: Vec<Value> = (slice.endpoints.iter())
        .map(|e| {
            let addresses: Vec<String> = e.addresses.iter().map(|a| a.to_string()).collect();
            serde_json::json!({"addresses": addresses, "conditions": {"ready": e.ready}})
        })
        .collect();
    let mut labels = serde_json::Map::new();
    if let Some(service) = &slice.service {
        labels.insert("kubernetes.io/service-name".into(), service.clone().into());
    }
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"namespace": slice.namespace, "name": slice.name, "labels": labels},
        "addressType": address_type,
        "ports": ports,
        "endpoints": endpoints,
    })
}

impl Portico {
    /// `portico run --kubernetes` against `cluster`, with `extra` flags; returns once ready
    /// (every kind listed and the first snapshot served).
    pub async fn start_kube(cluster: &Cluster, extra: &[&str]) -> Portico {
        Portico::spawn(&Self::kube_args(cluster, extra)).await
    }

    /// Like [`Portico::start_kube`], logging at `warn` into the file `log`.
    pub async fn start_kube_logging(cluster: &Cluster, log: &Path) -> Portico {
        Portico::spawn_logging(&Self::kube_args(cluster, &[]), "warn", log).await
    }

    fn kube_args(cluster: &Cluster, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "run".into(),
            "--kubernetes".into(),
            format!("--kubeconfig={}", cluster.kubeconfig().display()),
            "--election-namespace=default".into(),
        ];
        args.extend(
            [
                "--http-listen=127.0.0.1:0",
                "--https-listen=127.0.0.1:0",
                "--admin-listen=127.0.0.1:0",
            ]
            .map(String::from),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}
