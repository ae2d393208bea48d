//! Shared by the integration tests: a fake API server, clients to it, a feed that plays the
//! Kubernetes source (lists Ingresses, computes the report), and polling helpers.
#![allow(dead_code, clippy::unwrap_used)]

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use portico_fake_apiserver::FakeApiServer;
use portico_model::{Diagnostic, ObjectRef};
use portico_report::{Report, ReportSettings, Reporter};
use portico_status::{IngressView, LoadBalancerAddress, Snapshot};
use portico_translate::{ObjectKey, Objects};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub const PUBLISH: &str = "10.0.0.1";
pub const LEASE_NAMESPACE: &str = "portico";

pub struct Cluster {
    pub server: FakeApiServer,
    dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> Cluster {
        let server = FakeApiServer::start().await;
        let dir = tempfile::tempdir().unwrap();
        server.write_kubeconfig(&dir.path().join("kubeconfig"));
        Cluster { server, dir }
    }

    /// A client whose requests carry `agent` as User-Agent, to tell replicas apart.
    pub async fn client(&self, agent: &str) -> Client {
        let kubeconfig = Kubeconfig::read_from(self.dir.path().join("kubeconfig")).unwrap();
        let options = KubeConfigOptions::default();
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        config
            .headers
            .push((http::header::USER_AGENT, agent.parse().unwrap()));
        Client::try_from(config).unwrap()
    }

    /// A reporter named `identity` fed by `reports`, and the sender that stops it.
    pub async fn reporter(
        &self,
        settings: ReportSettings,
        reports: watch::Receiver<Arc<Report>>,
    ) -> (Reporter, watch::Sender<bool>) {
        let client = self.client(&settings.identity.clone()).await;
        let (stop, shutdown) = watch::channel(false);
        (
            portico_report::spawn(client, settings, reports, shutdown),
            stop,
        )
    }

    /// The IPs in an Ingress's status, as stored.
    pub fn status(&self, name: &str) -> Vec<String> {
        let ingress = self
            .server
            .get("networking.k8s.io/v1", "Ingress", Some("shop"), name)
            .unwrap_or(Value::Null);
        let entries = ingress["status"]["loadBalancer"]["ingress"].as_array();
        entries
            .into_iter()
            .flatten()
            .filter_map(|e| e["ip"].as_str().map(str::to_owned))
            .collect()
    }

    /// The status patches of one Ingress.
    pub fn status_patches(&self, name: &str) -> Vec<portico_fake_apiserver::Request> {
        let path = format!("/namespaces/shop/ingresses/{name}/status");
        let patches = self.server.status_patches();
        patches
            .into_iter()
            .filter(|r| r.path.ends_with(&path))
            .collect()
    }

    pub fn lease(&self) -> Value {
        self.server
            .get(
                "coordination.k8s.io/v1",
                "Lease",
                Some(LEASE_NAMESPACE),
                "portico-leader",
            )
            .unwrap_or(Value::Null)
    }
}

/// Short periods, so the tests that do not measure the defaults run fast.
pub fn fast(identity: &str) -> ReportSettings {
    let mut s = ReportSettings::new(identity.to_owned(), LEASE_NAMESPACE.to_owned());
    s.lease_duration = Duration::from_secs(2);
    s.retry_period = Duration::from_millis(200);
    s.status_interval = Duration::from_millis(100);
    s
}

/// An Ingress in namespace `shop`. Class `portico` is ours; annotation `test/error` becomes an
/// error diagnostic about it.
pub fn ingress(name: &str, class: &str, status: &[&str], error: Option<&str>) -> Value {
    let entries: Vec<Value> = status.iter().map(|ip| json!({ "ip": ip })).collect();
    let mut annotations = json!({});
    if let Some(e) = error {
        annotations["test/error"] = json!(e);
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": { "name": name, "namespace": "shop", "annotations": annotations },
        "spec": {
            "ingressClassName": class,
            "defaultBackend": { "service": { "name": "web", "port": { "number": 80 } } }
        },
        "status": { "loadBalancer": { "ingress": entries } }
    })
}

/// Plays the source and the app: every 50 ms lists the Ingresses and sends a new report when
/// it changed (so a status write comes back with some lag, like through a watch).
pub async fn feed(cluster: &Cluster) -> (watch::Receiver<Arc<Report>>, JoinHandle<()>) {
    feed_lagging(cluster, Duration::ZERO).await
}

/// Like [`feed`], but the Ingresses reported are those listed `lag` earlier: a watch that
/// lags behind the writes.
pub async fn feed_lagging(
    cluster: &Cluster,
    lag: Duration,
) -> (watch::Receiver<Arc<Report>>, JoinHandle<()>) {
    let api = Api::<Ingress>::all(cluster.client("feed").await);
    let (tx, rx) = watch::channel(Arc::new(Report::default()));
    let task = tokio::spawn(async move {
        let mut listed: VecDeque<(Instant, Vec<Ingress>)> = VecDeque::new();
        loop {
            if let Ok(list) = api.list(&ListParams::default()).await {
                listed.push_back((Instant::now(), list.items));
            }
            while listed.len() > 1 && listed[1].0.elapsed() >= lag {
                listed.pop_front();
            }
            if let Some((_, items)) = listed.front().filter(|(at, _)| at.elapsed() >= lag) {
                let next = report_of(items.clone());
                tx.send_if_modified(|current| {
                    let changed = **current != next;
                    if changed {
                        *current = Arc::new(next);
                    }
                    changed
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (rx, task)
}

fn report_of(items: Vec<Ingress>) -> Report {
    let publish = vec![LoadBalancerAddress {
        ip: Some(PUBLISH.to_owned()),
        hostname: None,
    }];
    let mut objects = Objects::default();
    let mut views = Vec::new();
    for ingress in items {
        let meta = &ingress.metadata;
        let key = ObjectKey::new(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        );
        let class = ingress
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.clone());
        let owned = class.as_deref() == Some("portico");
        let error = meta.annotations.as_ref().and_then(|a| a.get("test/error"));
        let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
        let diagnostics: Vec<Diagnostic> = error
            .map(|e| Diagnostic::error(object, "spec", e.clone()))
            .into_iter()
            .collect();
        let addresses = if owned { publish.clone() } else { vec![] };
        let (ns, name) = (key.namespace.clone(), key.name.clone());
        views.push(IngressView::new(
            ns,
            name,
            class,
            owned,
            addresses,
            diagnostics,
        ));
        std::sync::Arc::make_mut(&mut objects.ingresses).insert(key, Arc::new(ingress.into()));
    }
    let snapshot = Snapshot {
        ingresses: views.into(),
        ..Snapshot::default()
    };
    portico_report::report(&objects, &snapshot, &publish, "")
}

/// Polls `check` every 20 ms until it holds or `within` passed; whether it held.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `leader` is `value`; whether it was within `within`.
pub async fn leads(leader: &mut watch::Receiver<bool>, value: bool, within: Duration) -> bool {
    tokio::time::timeout(within, leader.wait_for(|l| *l == value))
        .await
        .is_ok_and(|r| r.is_ok())
}
