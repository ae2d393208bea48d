use portico_model::ObjectRef;
use portico_translate::ObjectKey;
use std::time::Duration;

/// A failed request to the API server, with the object it was about (the kube error boxed: it
/// is large). The loops log these and try again later; none ends a loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Lease {namespace}/{name}: {source}")]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("Lease {namespace}/{name}: no answer within {after:?}")]
    LeaseTimeout {
        namespace: String,
        name: String,
        after: Duration,
    },
    #[error("status of {kind:?} {key}: {source}")]
    Status {
        kind: crate::StatusKind,
        key: ObjectKey,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("status of {kind} {key}: {source}")]
    GatewayStatus {
        kind: &'static str,
        key: ObjectKey,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("Event about {object}: {source}")]
    Event {
        object: ObjectRef,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The HTTP status code of an API error response, if the error is one.
pub(crate) fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

impl Error {
    /// The HTTP status code the API server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Lease { source, .. }
            | Error::Status { source, .. }
            | Error::GatewayStatus { source, .. }
            | Error::Event { source, .. } => code(source),
            Error::LeaseTimeout { .. } => None,
        }
    }
}
