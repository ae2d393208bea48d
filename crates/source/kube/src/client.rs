//! The API client: `--kubeconfig`, else kube's inference (KUBECONFIG, ~/.kube/config, then the
//! in-cluster service account).

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::path::Path;

/// Why no client could be made. Each variant holds kube's message (not its error as a source),
/// so that a printed chain says it once.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
    #[error("no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config): {0}")]
    Infer(String),
    #[error("building the Kubernetes client: {0}")]
    Client(String),
}

/// A client for `kubeconfig` when given, else for the inferred configuration.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let error = |reason: kube::config::KubeconfigError| ClientError::Kubeconfig {
                path: path.display().to_string(),
                reason: reason.to_string(),
            };
            let file = Kubeconfig::read_from(path).map_err(error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(error)?
        }
        None => (Config::infer().await).map_err(|e| ClientError::Infer(e.to_string()))?,
    };
    Client::try_from(config).map_err(|e| ClientError::Client(e.to_string()))
}
