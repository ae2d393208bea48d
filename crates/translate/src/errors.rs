//! ingress-nginx's default backend: the `default-backend` annotation's Service and the
//! controller-wide `--default-backend-service`, each a pool of the load balancer, and the
//! error pages (`custom-http-errors`) a policy takes from one of them.

use crate::annotations::Location;
use crate::backend::{PoolKey, PortRef};
use crate::route::{Backend, RouteSpec};
use crate::source::{ClassIds, Source};
use crate::{ObjectKey, Objects};
use portico_model::{Diagnostic, ErrorPages, ObjectRef, PoolId};

/// The pool key of a default backend: the Service's first port, as ingress-nginx takes it,
/// with the default upstream settings. `Err` says why there is none.
pub(crate) fn backend_key(objects: &Objects, service: &ObjectKey) -> Result<PoolKey, String> {
    let Some(found) = objects.services.get(service) else {
        return Err(format!("service \"{service}\" not found"));
    };
    let Some(port) = found.spec.ports.first() else {
        return Err(format!("service \"{service}\" has no port"));
    };
    Ok(PoolKey {
        service: service.clone(),
        port: PortRef::Number(port.port),
        upstream: crate::annotations::Upstream::default_arc(),
    })
}

/// The `default-backend` annotation's backend of an Ingress, or a warning naming the
/// annotation when its Service does not resolve (the Ingress is served without it).
pub(crate) fn annotation_backend(
    object: &ObjectRef,
    location: &Location,
    ids: &ClassIds,
    objects: &Objects,
    (services, diagnostics): (&mut Vec<ObjectKey>, &mut Vec<Diagnostic>),
) -> Option<Box<Backend>> {
    let (annotation, name) = location.default_backend.as_ref()?;
    let service = ObjectKey::new(&object.namespace, name);
    services.push(service.clone());
    match backend_key(objects, &service) {
        Ok(key) => Some(Box::new(Backend::new(ids, key))),
        Err(why) => {
            let field = format!("metadata.annotations[{annotation}]");
            let message = format!("{why}; no default backend for this Ingress");
            diagnostics.push(Diagnostic::warning(object.clone(), field, message));
            None
        }
    }
}

/// The controller-wide default backend on a load balancer (`--default-backend-service`): its
/// pool, and the codes whose pages it serves for Ingresses without a `custom-http-errors` of
/// their own (`--custom-http-errors`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ControllerErrors<'a> {
    pub pool: PoolId,
    pub codes: &'a [u16],
}

/// The error pages of a route of `source` forwarded to its pool: from the Ingress's own
/// default backend (which also answers when the route's pool has no ready member), else the
/// controller-wide one for `custom-http-errors`; none without either. The codes are the
/// Ingress's `custom-http-errors`, else `--custom-http-errors` (as ingress-nginx's annotation
/// overrides its ConfigMap key).
pub(crate) fn error_pages(
    source: &Source,
    spec: &RouteSpec,
    controller: Option<ControllerErrors<'_>>,
) -> Option<ErrorPages> {
    let own = source.error_backend.as_ref().map(|b| b.pool);
    let codes = match (&source.location.custom_errors, controller) {
        (own_codes, _) if !own_codes.is_empty() => own_codes.as_slice(),
        (_, Some(controller)) => controller.codes,
        (_, None) => &[],
    };
    let controller = controller.map(|c| c.pool);
    let pool = own.or(controller.filter(|_| !codes.is_empty()))?;
    let key = &spec.backend.key;
    Some(ErrorPages {
        pool,
        unavailable: own.is_some(),
        codes: codes.to_vec(),
        namespace: source.key.namespace.clone(),
        ingress: source.key.name.clone(),
        service: key.service.name.clone(),
        service_port: key.port.to_string(),
    })
}
