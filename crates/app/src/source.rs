//! Where the objects come from: manifest files, or the Kubernetes API with its reporter
//! (status, Events, the leader Lease).

use crate::error::AppError;
use portico_source_file::{FileSource, Loaded};
use portico_source_kube::KubeSource;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// Where the objects come from.
#[derive(Debug, Clone)]
pub enum SourceSettings {
    /// Manifest files and directories, watched for changes (the embedded default).
    Files(Vec<PathBuf>, portico_source_file::ReadLimits),
    /// The Kubernetes API (`--kubernetes`).
    Kubernetes(Box<KubeSettings>),
}

/// `portico run --kubernetes`: the API server, what to watch, and who reports.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    /// `--kubeconfig`; none: KUBECONFIG, ~/.kube/config, then in-cluster.
    pub kubeconfig: Option<PathBuf>,
    /// `--namespace`: watch only this namespace.
    pub namespace: Option<String>,
    /// `--publish-service`: Ingress status shows this Service's load-balancer addresses.
    pub publish_service: Option<portico_translate::ObjectKey>,
    /// This replica's identity and its leader Lease (status and Events are written by the
    /// leader only).
    pub report: portico_report::ReportSettings,
}

/// The objects of the Kubernetes API once listed (every kind), for commands that read them
/// once (`portico migrate --kubernetes`): the same watchers as `run`, stopped after the first
/// snapshot. `None` when the lists did not complete within `wait`.
pub async fn load_kubernetes_once(
    kubeconfig: Option<&std::path::Path>,
    namespace: Option<String>,
    translate: &portico_translate::Config,
    wait: std::time::Duration,
) -> Result<Option<Arc<Loaded>>, AppError> {
    let client = portico_source_kube::client(kubeconfig).await?;
    let scope = portico_source_kube::Scope { namespace };
    let source = KubeSource::start(client, scope, translate.clone());
    let mut updates = source.subscribe();
    match tokio::time::timeout(wait, updates.changed()).await {
        Ok(Ok(())) => Ok(Some(updates.borrow_and_update().clone())),
        _ => Ok(None),
    }
}

/// The running source.
pub(crate) enum Source {
    Files(FileSource),
    Kube {
        source: KubeSource,
        /// `--publish-service`'s addresses, when given.
        publish: Option<(watch::Receiver<Vec<String>>, tokio::task::JoinHandle<()>)>,
        reporter: portico_report::Reporter,
        /// What the next report is made from, for the task that makes it.
        inputs: watch::Sender<Option<Arc<ReportInput>>>,
        reporting: tokio::task::JoinHandle<()>,
        /// `--gateway-controller-name`, for the reports.
        gateway_controller: Arc<str>,
    },
}

/// What a report is made from (see [`portico_report::report`]).
pub(crate) struct ReportInput {
    objects: portico_translate::Objects,
    snapshot: portico_admin::Snapshot,
    publish: Vec<portico_admin::LoadBalancerAddress>,
    /// `--gateway-controller-name`: whose Gateway API objects are ours.
    gateway_controller: Arc<str>,
}

/// Makes the reports apart from the controller's loop (comparing 10,000 Ingresses' status
/// takes milliseconds the next change should not wait for), the latest input only, and hands
/// them to the writer in order.
fn spawn_reporting(
    reports: watch::Sender<Arc<portico_report::Report>>,
) -> (
    watch::Sender<Option<Arc<ReportInput>>>,
    tokio::task::JoinHandle<()>,
) {
    let (inputs, mut rx) = watch::channel(None::<Arc<ReportInput>>);
    let task = tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let Some(input) = rx.borrow_and_update().clone() else {
                continue;
            };
            let made = tokio::task::spawn_blocking(move || {
                let controller = &input.gateway_controller;
                portico_report::report(&input.objects, &input.snapshot, &input.publish, controller)
            });
            match made.await {
                Ok(report) => {
                    reports.send_replace(Arc::new(report));
                }
                Err(_) => break,
            }
        }
    });
    (inputs, task)
}

impl Source {
    pub(crate) async fn start(
        source: &SourceSettings,
        translate: &portico_translate::Config,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Source, AppError> {
        match source {
            SourceSettings::Files(manifests, limits) => Ok(Source::Files(
                portico_source_file::watch(manifests.clone(), *limits)?,
            )),
            SourceSettings::Kubernetes(kube) => {
                let client = portico_source_kube::client(kube.kubeconfig.as_deref()).await?;
                let scope = portico_source_kube::Scope {
                    namespace: kube.namespace.clone(),
                };
                let source = KubeSource::start(client.clone(), scope, translate.clone());
                let publish = (kube.publish_service.clone())
                    .map(|key| portico_source_kube::publish_service(client.clone(), key));
                let (reports, rx) = watch::channel(Arc::new(portico_report::Report::default()));
                let reporter =
                    portico_report::spawn(client, kube.report.clone(), rx, shutdown.clone());
                let (inputs, reporting) = spawn_reporting(reports);
                Ok(Source::Kube {
                    source,
                    publish,
                    reporter,
                    inputs,
                    reporting,
                    gateway_controller: Arc::from(translate.gateway_controller.as_str()),
                })
            }
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Loaded>> {
        match self {
            Source::Files(f) => f.subscribe(),
            Source::Kube { source, .. } => source.subscribe(),
        }
    }

    /// Gives a superseded load back to be freed where it was allocated (files).
    pub(crate) fn retire(&self, loaded: Arc<Loaded>) {
        match self {
            Source::Files(f) => f.retire(loaded),
            Source::Kube { .. } => drop(loaded),
        }
    }

    /// `--publish-service`'s addresses, when it is followed.
    pub(crate) fn published(&mut self) -> Option<&mut watch::Receiver<Vec<String>>> {
        match self {
            Source::Kube {
                publish: Some((rx, _)),
                ..
            } => Some(rx),
            _ => None,
        }
    }

    /// Hands a report to the writer (Kubernetes only; the leader writes it).
    pub(crate) fn report(
        &self,
        objects: &portico_translate::Objects,
        snapshot: &portico_admin::Snapshot,
        publish: &[portico_admin::LoadBalancerAddress],
    ) {
        if let Source::Kube {
            inputs,
            gateway_controller,
            ..
        } = self
        {
            inputs.send_replace(Some(Arc::new(ReportInput {
                objects: objects.clone(),
                snapshot: snapshot.clone(),
                publish: publish.to_vec(),
                gateway_controller: gateway_controller.clone(),
            })));
        }
    }

    /// Stops watching; the reporter releases its Lease.
    pub(crate) async fn stop(self) {
        match self {
            Source::Files(f) => drop(f),
            Source::Kube {
                source,
                publish,
                reporter,
                inputs,
                reporting,
                ..
            } => {
                drop(source);
                if let Some((_, task)) = publish {
                    task.abort();
                }
                reporter.stopped().await;
                drop(inputs);
                let _ = reporting.await;
            }
        }
    }
}
