//! The errors of the etcd backend. None of them carries a password or key material.

use crate::config::ConfigError;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("reading the TLS file {path}: {source}")]
    TlsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot connect to etcd at {endpoints}: {reason}")]
    Connect { endpoints: String, reason: String },
    #[error("etcd did not answer {what} within {timeout:?}")]
    Timeout {
        what: &'static str,
        timeout: Duration,
    },
    #[error("etcd {what}: {reason}")]
    Request {
        what: &'static str,
        reason: String,
        /// Retrying cannot help (refused credentials or permissions, a malformed request).
        permanent: bool,
        /// The member could not be reached (or had no leader): another one may answer.
        unavailable: bool,
    },
    #[error("the lease ran out or could not be kept alive")]
    LeaseLost,
    #[error("not the leader: the election key {key} is gone or belongs to another campaign")]
    NotLeader { key: String },
    #[error("key `{key}` is outside the desired/ and placement/ subtrees")]
    OutsideDesired { key: String },
    #[error("the op on `{key}` is {size} bytes, more than one txn may carry ({limit})")]
    OpTooLarge {
        key: String,
        size: usize,
        limit: usize,
    },
    #[error("the commit marker holds `{value}`, not a generation number")]
    BadMarker { value: String },
}

impl EtcdError {
    pub(crate) fn request(what: &'static str, status: &tonic::Status) -> Self {
        let code = status.code();
        EtcdError::Request {
            what,
            reason: chain(status),
            permanent: matches!(
                code,
                tonic::Code::InvalidArgument
                    | tonic::Code::PermissionDenied
                    | tonic::Code::Unauthenticated
            ),
            unavailable: code == tonic::Code::Unavailable,
        }
    }

    /// A stream (watch, keep-alive) that ended or was canceled: worth opening again.
    pub(crate) fn broken(what: &'static str, reason: String) -> Self {
        EtcdError::Request {
            what,
            reason,
            permanent: false,
            unavailable: false,
        }
    }

    /// A request refused for its auth token, which has been renewed: worth trying again.
    pub(crate) fn token_refused(what: &'static str, status: &tonic::Status) -> Self {
        EtcdError::Request {
            what,
            reason: chain(status),
            permanent: false,
            unavailable: false,
        }
    }

    /// Whether another try may reach another member (UNAVAILABLE).
    pub(crate) fn is_unavailable(&self) -> bool {
        matches!(
            self,
            EtcdError::Request {
                unavailable: true,
                ..
            }
        )
    }

    /// Whether retrying the same request cannot succeed.
    pub fn is_permanent(&self) -> bool {
        match self {
            EtcdError::Request { permanent, .. } => *permanent,
            EtcdError::Config(_) | EtcdError::TlsFile { .. } | EtcdError::OutsideDesired { .. } => {
                true
            }
            EtcdError::OpTooLarge { .. } => true,
            _ => false,
        }
    }
}

/// An error and its sources on one line: tonic's transport errors hide the useful part
/// (refused connection, TLS alert) a few sources down.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}
