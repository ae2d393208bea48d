//! The errors of the application: why a process cannot start.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr} for {what}: {source}{}", bind_hint(source))]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Source(#[from] portico_source_file::SourceError),
    #[error("{what} {addr}: {reason}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        reason: String,
    },
    #[error(transparent)]
    Haproxy(#[from] portico_provider_haproxy::StartError),
    #[error("cannot open the access log ({what}): {source}")]
    AccessLog {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Kubernetes(#[from] portico_source_kube::ClientError),
    #[error("{0} (--state-dir)")]
    StateDir(#[from] portico_statedir::StateDirError),
    #[error("upgrade: {0}")]
    Upgrade(String),
}

/// What to do about a failed bind.
fn bind_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::AddrInUse => {
            "; another process listens there: stop it, or give another address to the flag"
        }
        std::io::ErrorKind::PermissionDenied => {
            "; ports below 1024 need root or CAP_NET_BIND_SERVICE: use a higher port or grant it"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "; the address is not on this machine: give one of its addresses (or 0.0.0.0)"
        }
        _ => "",
    }
}
