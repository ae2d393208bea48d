//! Where the objects come from: manifest files, or the Kubernetes API with its reporter
//! (status, Events, the leader Lease).

use crate::run::AppError;
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

/// The running source.
pub(crate) enum Source {
    Files(FileSource),
    Kube {
        source: KubeSource,
        /// `--publish-service`'s addresses, when given.
        publish: Option<(watch::Receiver<Vec<String>>, tokio::task::JoinHandle<()>)>,
        reporter: portico_report::Reporter,
        reports: watch::Sender<Arc<portico_report::Report>>,
    },
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
                Ok(Source::Kube {
                    source,
                    publish,
                    reporter,
                    reports,
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
        if let Source::Kube { reports, .. } = self {
            let report = portico_report::report(objects, snapshot, publish);
            reports.send_replace(Arc::new(report));
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
                reports,
            } => {
                drop(source);
                if let Some((_, task)) = publish {
                    task.abort();
                }
                reporter.stopped().await;
                drop(reports);
            }
        }
    }
}
