//! TLSRoutes → SNI passthrough on a Gateway's TLS listeners (`tls.mode: Passthrough`), and
//! SNI-routed TLS termination on those of `tls.mode: Terminate`.
//!
//! A Terminate listener is served the same way, its entries marked `terminate`: the
//! listener's `certificateRefs` join the SNI certificates of the TERMINATED_HTTPS listener
//! (its hostname, as for HTTPS), and a handshake whose server name is one of its routes' hosts
//! is answered here and its decrypted stream sent to the route's backend.
//!
//! A TLS listener is served on the TERMINATED_HTTPS listener of its port: its hosts go to
//! [`portico_model::ListenerTls::passthrough`], checked before any certificate is chosen, so
//! an HTTPS listener on the same port keeps terminating its own hosts beside them. A route's
//! hosts on a listener are the intersection of its `hostnames` and the listener's hostname,
//! wildcards included; on a host two routes name, the older (creation timestamp, then
//! namespace/name) is served.
//!
//! The built-in proxy's passthrough hands a host's stream to one pool, so a route's rule
//! serves one backendRef: the one with a weight above zero. Several weighted backendRefs are
//! refused (`Accepted: False`, `UnsupportedValue`) rather than served as one; a backendRef
//! that does not resolve gets `ResolvedRefs: False` with the API's reason, and its hosts pass
//! through nowhere (the handshake then meets the listener's default certificate, which a
//! verifying client refuses). Only the built-in proxy peeks SNI: a TLS listener of a Gateway
//! served by another provider is refused (`UnsupportedProtocol`) in status and a diagnostic.

use super::attach::{admitting, intersect, parent_verdicts, resolved_refs};
use super::listeners::{ListenerState, Prepared};
use super::status::Refusal;
use super::{ParentVerdict, backends};
use crate::backend::PoolKey;
use crate::pool::pool_id;
use crate::{ObjectKey, Objects};
use portico_gateway::{BackendRef, ParentReference, TlsRoute};
use portico_model::{Diagnostic, LoadBalancerId, ObjectRef, PoolId, SniPassthrough};
use std::collections::BTreeMap;

pub(crate) const TLS_ROUTE: &str = "TLSRoute";

/// The route kinds a listener of `protocol` takes, for TLS.
pub(crate) fn kinds_for(protocol: &str) -> Option<&'static [&'static str]> {
    (protocol == "TLS").then_some(&[TLS_ROUTE][..])
}

/// A passed-through host of a Gateway, its backend and the route that named it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub host: String,
    pub backend: PoolKey,
    pub source: ObjectRef,
    /// From a TLS listener of `tls.mode: Terminate`: decrypted here, then sent.
    pub terminate: bool,
}

/// A Gateway served by neither the built-in proxy nor haproxy cannot pass TLS through nor
/// terminate it for TLSRoutes: its TLS listeners are refused, named in a diagnostic.
pub(crate) fn refuse_unserved(
    gateway: &mut Prepared<'_>,
    provider: &str,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if provider == "proxy" || provider == "haproxy" {
        return;
    }
    for i in 0..gateway.listeners.len() {
        let listener = &gateway.listeners[i];
        if !(listener.accepted.is_ok() && (listener.terminate || listener.passthrough)) {
            continue;
        }
        let message = if listener.terminate {
            format!(
                "provider {provider} does not serve TLS listeners of tls.mode Terminate (the built-in proxy and haproxy do)"
            )
        } else {
            format!(
                "provider {provider} does not serve TLS passthrough (the built-in proxy and haproxy do)"
            )
        };
        let (object, field) = gateway.listener_field(i);
        let text = format!("UnsupportedProtocol: {message}");
        diagnostics.push(Diagnostic::warning(object, field, text));
        gateway.listeners[i].accepted = Err(("UnsupportedProtocol", message));
    }
}

/// Attaches every TLSRoute, oldest first, to the TLS listeners of `gateways` it may use; its
/// hosts become the Gateways' passthrough entries. The verdicts of the routes with a
/// parentRef to one of our Gateways.
pub(crate) fn attach(
    objects: &Objects,
    gateways: &mut [Prepared<'_>],
    diagnostics: &mut Vec<Diagnostic>,
) -> BTreeMap<ObjectKey, Vec<ParentVerdict>> {
    let mut routes: Vec<(&ObjectKey, &TlsRoute)> = (objects.tls_routes.iter())
        .map(|(k, r)| (k, &**r))
        .collect();
    // No timestamp (a manifest file) counts as the oldest.
    routes.sort_by_cached_key(|(k, r)| (r.metadata.creation_timestamp.clone(), (*k).clone()));
    let mut verdicts = BTreeMap::new();
    for (key, route) in routes {
        let parents = attach_one(key, route, objects, gateways, diagnostics);
        if !parents.is_empty() {
            verdicts.insert(key.clone(), parents);
        }
    }
    verdicts
}

fn attach_one(
    key: &ObjectKey,
    route: &TlsRoute,
    objects: &Objects,
    gateways: &mut [Prepared<'_>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ParentVerdict> {
    let object = ObjectRef::new(TLS_ROUTE, &key.namespace, &key.name);
    let parents = &route.spec.parent_refs;
    let check = |diagnostics: &mut Vec<Diagnostic>| {
        let (backend, unresolved) = backend(key, route, objects);
        (backend, resolved_refs(&object, unresolved, diagnostics))
    };
    let listen = |backend: &Option<PoolKey>,
                  parent: &ParentReference,
                  g: usize,
                  gateways: &mut [Prepared<'_>]| {
        listen((key, route), parent, &mut gateways[g], backend.as_ref())
    };
    parent_verdicts(
        &object,
        (parents, &key.namespace),
        gateways,
        diagnostics,
        check,
        listen,
    )
}

/// The backend of the route's hosts (`None`: it does not resolve, or no share has weight),
/// or why the route is refused; and the backendRef that does not resolve, if any.
type Backend = Result<Option<PoolKey>, Refusal>;

fn backend(
    key: &ObjectKey,
    route: &TlsRoute,
    objects: &Objects,
) -> (Backend, Option<(String, Refusal)>) {
    let rules = &route.spec.rules;
    if rules.len() > 1 {
        let message = format!("spec.rules: {} rules; a TLSRoute has one", rules.len());
        return (Err(("UnsupportedValue", message)), None);
    }
    let refs: &[BackendRef] = rules.first().map_or(&[], |r| &r.backend_refs);
    let from = (TLS_ROUTE, key.namespace.as_str());
    let unresolved = (refs.iter().enumerate()).find_map(|(b, backend)| {
        let field = format!("spec.rules[0].backendRefs[{b}]");
        backends::resolve(backend, from, objects)
            .err()
            .map(|e| (field, e))
    });
    let weighted: Vec<&BackendRef> = (refs.iter()).filter(|b| b.effective_weight() > 0).collect();
    let backend = match weighted[..] {
        [] => Ok(None),
        [one] => Ok(backends::resolve(one, from, objects).ok()),
        _ => Err((
            "UnsupportedValue",
            format!(
                "spec.rules[0].backendRefs: {} backends with weights; TLS passthrough serves one backend per route",
                weighted.len()
            ),
        )),
    };
    (backend, unresolved)
}

/// Attaches the route to the TLS listeners of `gateway` that `parent` selects, that admit it
/// and whose hostname meets one of its hostnames; their hosts pass through to `backend`.
fn listen(
    (key, route): (&ObjectKey, &TlsRoute),
    parent: &ParentReference,
    gateway: &mut Prepared<'_>,
    backend: Option<&PoolKey>,
) -> Result<(), Refusal> {
    let takes = |l: &ListenerState<'_>| l.kinds.contains(&TLS_ROUTE);
    let allowed = admitting(gateway, parent, &key.namespace, TLS_ROUTE, takes)?;
    let source = ObjectRef::new(TLS_ROUTE, &key.namespace, &key.name);
    let mut attached = false;
    for i in allowed {
        let listener = gateway.listeners[i].spec.hostname.as_deref();
        // SNI routing needs a name: a route and listener both without one meet nowhere.
        let hosts: Vec<String> = (intersect(listener, &route.spec.hostnames).into_iter())
            .flatten()
            .collect();
        if hosts.is_empty() {
            continue;
        }
        attached = true;
        gateway.listeners[i].attached += 1;
        let terminate = gateway.listeners[i].terminate;
        let Some(backend) = backend else { continue };
        for host in hosts {
            if !gateway.passthrough.iter().any(|e| e.host == host) {
                gateway.passthrough.push(Entry {
                    host,
                    backend: backend.clone(),
                    source: source.clone(),
                    terminate,
                });
            }
        }
    }
    if !attached {
        let message = "no hostname of the route intersects a TLS listener's hostname".to_owned();
        return Err(("NoMatchingListenerHostname", message));
    }
    Ok(())
}

/// The passthrough entries of `gateway`'s load balancer `lb`, ordered by host; their pools go
/// to `used`.
pub(crate) fn entries(
    gateway: &Prepared<'_>,
    lb: LoadBalancerId,
    used: &mut BTreeMap<PoolId, PoolKey>,
) -> Vec<SniPassthrough> {
    let mut out: Vec<SniPassthrough> = (gateway.passthrough.iter())
        .map(|entry| {
            let pool = pool_id(lb, &entry.backend);
            used.entry(pool).or_insert_with(|| entry.backend.clone());
            SniPassthrough {
                host: entry.host.clone(),
                pool,
                source: entry.source.clone(),
                terminate: entry.terminate,
            }
        })
        .collect();
    out.sort_by(|a, b| a.host.cmp(&b.host));
    out
}

/// The hostnames of `gateway`'s served TLS listeners of mode Terminate (among `served`):
/// a name they cover that no route's entry takes is refused, not served as HTTPS. A listener
/// without hostname refuses nothing (HTTPS listeners' hosts share its port); ordered.
pub(crate) fn refused(gateway: &Prepared<'_>, served: &[usize]) -> Vec<String> {
    let listeners = served.iter().map(|&i| &gateway.listeners[i]);
    let mut hosts: Vec<String> = (listeners.filter(|l| l.terminate))
        .filter_map(|l| l.spec.hostname.as_deref())
        .map(str::to_ascii_lowercase)
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}
