//! Ingress backends → the Service port they name, or why there is none.

use crate::annotations::Upstream;
use crate::{KeptService, KeptServiceBackend, ObjectKey, Objects};
use k8s_openapi::api::core::v1::ServicePort;
use portico_model::{Diagnostic, ObjectRef};
use std::fmt;
use std::sync::Arc;

/// A Service port as the Ingress wrote it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PortRef {
    Number(i32),
    Name(String),
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortRef::Number(n) => n.fmt(f),
            PortRef::Name(name) => f.write_str(name),
        }
    }
}

/// One pool per (namespace, service, port as written, upstream settings).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PoolKey {
    pub service: ObjectKey,
    pub port: PortRef,
    /// The naming Ingress's upstream annotations.
    pub upstream: Arc<Upstream>,
}

impl PoolKey {
    /// The key of a service backend; `None` when the port names neither number nor name, which
    /// admission has already rejected.
    pub(crate) fn of(
        namespace: &str,
        backend: &KeptServiceBackend,
        upstream: &Arc<Upstream>,
    ) -> Option<Self> {
        let port = backend.port.as_ref()?;
        let port = match (port.number.filter(|n| *n != 0), port.name.as_deref()) {
            (Some(number), _) => PortRef::Number(number),
            (None, Some(name)) if !name.is_empty() => PortRef::Name(name.to_owned()),
            _ => return None,
        };
        let service = ObjectKey::new(namespace, &backend.name);
        Some(PoolKey {
            service,
            port,
            upstream: upstream.clone(),
        })
    }
}

/// Why a backend has no endpoints to offer; the route still exists and answers 503.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BackendError {
    #[error("service \"{0}\" not found")]
    ServiceNotFound(ObjectKey),
    #[error("service \"{0}\" is of type ExternalName, which is not supported; it has no endpoints")]
    ExternalName(ObjectKey),
    #[error("service \"{service}\" has no port {port}")]
    PortNotFound { service: ObjectKey, port: PortRef },
}

impl BackendError {
    /// The backend field, below `…backend`, that the problem is about.
    fn field(&self) -> &'static str {
        match self {
            BackendError::ServiceNotFound(_) | BackendError::ExternalName(_) => "service.name",
            BackendError::PortNotFound {
                port: PortRef::Number(_),
                ..
            } => "service.port.number",
            BackendError::PortNotFound {
                port: PortRef::Name(_),
                ..
            } => "service.port.name",
        }
    }

    /// A warning on the Ingress `object`, at `backend_field` (e.g. `spec.defaultBackend`).
    pub(crate) fn diagnostic(&self, object: &ObjectRef, backend_field: &str) -> Diagnostic {
        let field = format!("{backend_field}.{}", self.field());
        Diagnostic::warning(object.clone(), field, self.to_string())
    }
}

/// The Service and the port of it that `key` names.
pub(crate) fn resolve<'a>(
    objects: &'a Objects,
    key: &PoolKey,
) -> Result<(&'a KeptService, &'a ServicePort), BackendError> {
    let service = objects
        .services
        .get(&key.service)
        .ok_or_else(|| BackendError::ServiceNotFound(key.service.clone()))?;
    if service.spec.type_.as_deref() == Some("ExternalName") {
        return Err(BackendError::ExternalName(key.service.clone()));
    }
    let port = service.spec.ports.iter().find(|p| match &key.port {
        PortRef::Number(n) => p.port == *n,
        PortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
    });
    let not_found = || BackendError::PortNotFound {
        service: key.service.clone(),
        port: key.port.clone(),
    };
    Ok((service, port.ok_or_else(not_found)?))
}
