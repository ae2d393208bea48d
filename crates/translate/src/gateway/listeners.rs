//! A Gateway of ours prepared for its routes: its address, and each listener's verdict (which
//! protocol it is served as, its conflicts, route kinds and certificates), its own listeners
//! followed by those of the ListenerSets it takes ([`super::listener_sets`]).

use super::listener_sets::SetState;
use super::status::{Condition, Refusal, verdict};
use super::{GatewayVerdict, ListenerVerdict};
use crate::{ObjectKey, Objects};
use k8s_openapi::api::core::v1::Namespace;
use portico_gateway::{GROUP, Gateway, Listener, SecretObjectReference};
use portico_model::{Diagnostic, ObjectRef, Protocol};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

/// A route attached to one listener: what the listener's policies are built from.
#[derive(Debug, Clone)]
pub(crate) struct Attachment<'a> {
    pub route: &'a ObjectKey,
    pub spec: &'a portico_gateway::HttpRoute,
    /// The route's place in age order (oldest first).
    pub rank: usize,
    /// The listener, the hostnames, and the policies once built: what the route's memo
    /// keeps.
    pub attached: Arc<super::reuse::Attached>,
}

#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    pub key: &'a ObjectKey,
    pub gateway: &'a Gateway,
    pub listeners: Vec<ListenerState<'a>>,
    pub address: Result<Option<IpAddr>, Refusal>,
    /// `spec.infrastructure.parametersRef`: none resolves, Portico reads no parameters.
    pub parameters: Result<(), Refusal>,
    pub attachments: Vec<Attachment<'a>>,
    /// SNI hosts of its TLS listeners whose streams pass through, with the TLSRoute and the
    /// backend that take them (oldest route first per host).
    pub passthrough: Vec<super::tlsroutes::Entry>,
    /// The Namespaces known (for listeners that admit routes by a namespace selector).
    pub namespaces: Arc<BTreeMap<String, Arc<Namespace>>>,
    /// The ListenerSets naming it, in precedence order.
    pub sets: Vec<SetState<'a>>,
}

#[derive(Debug)]
pub(crate) struct ListenerState<'a> {
    pub spec: &'a Listener,
    /// The ListenerSet it comes from (an index in [`Prepared::sets`]); `None`: the Gateway's.
    pub owner: Option<usize>,
    /// Its index in its owner's `spec.listeners`.
    pub index: usize,
    /// The model protocol it is served as.
    pub protocol: Option<Protocol>,
    pub accepted: Result<(), Refusal>,
    pub conflict: Option<&'static str>,
    pub resolved: Result<(), Refusal>,
    /// The route kinds that may attach (`HTTPRoute`, `GRPCRoute`).
    pub kinds: Vec<&'static str>,
    /// The Secrets of its certificates (HTTPS), resolved.
    pub certificates: Vec<ObjectKey>,
    pub attached: i32,
    /// A TLS listener of `tls.mode: Passthrough`: served on the TERMINATED_HTTPS listener
    /// of its port, its hosts' streams not terminated.
    pub passthrough: bool,
    /// A TLS listener of `tls.mode: Terminate`: served on the TERMINATED_HTTPS listener of its
    /// port with its certificates, its hosts' decrypted streams sent to their TLSRoutes'
    /// backends (not HTTP).
    pub terminate: bool,
}

impl ListenerState<'_> {
    /// Accepted, without conflict, its references resolved: routes attached to it are served.
    pub(crate) fn served(&self) -> bool {
        self.accepted.is_ok() && self.conflict.is_none() && self.resolved.is_ok()
    }

    /// Whether routes of `route`'s kind may attach.
    pub(crate) fn takes(&self, route: &portico_gateway::HttpRoute) -> bool {
        self.kinds.contains(&super::kind(route))
    }
}

impl<'a> Prepared<'a> {
    /// Attaches a route to one of its listeners.
    pub(crate) fn add(&mut self, attachment: Attachment<'a>) {
        if let Some(listener) = self.listeners.get_mut(attachment.attached.listener) {
            listener.attached += 1;
        }
        self.attachments.push(attachment);
    }

    pub(crate) fn accepted(&self) -> bool {
        self.address.is_ok() && self.parameters.is_ok() && self.own().any(|l| l.accepted.is_ok())
    }

    /// The Gateway's own listeners (not its ListenerSets').
    fn own(&self) -> impl Iterator<Item = &ListenerState<'_>> {
        self.listeners.iter().filter(|l| l.owner.is_none())
    }

    /// The object listener `i` is written in and its field there (for diagnostics).
    pub(crate) fn listener_field(&self, i: usize) -> (ObjectRef, String) {
        let l = &self.listeners[i];
        let field = format!("spec.listeners[{}]", l.index);
        match l.owner {
            None => {
                let key = self.key;
                (ObjectRef::new("Gateway", &key.namespace, &key.name), field)
            }
            Some(s) => {
                let key = self.sets[s].key;
                (
                    ObjectRef::new("ListenerSet", &key.namespace, &key.name),
                    field,
                )
            }
        }
    }

    /// The namespace listener `l` was written in (a route from there is of the `Same` one).
    pub(crate) fn namespace_of(&self, l: &ListenerState<'_>) -> &str {
        match l.owner {
            None => &self.key.namespace,
            Some(s) => &self.sets[s].key.namespace,
        }
    }

    pub(crate) fn verdict(&self) -> GatewayVerdict {
        let invalid = self.own().filter(|l| !l.served()).count();
        let accepted = match (&self.parameters, &self.address) {
            (Err(refusal), _) | (_, Err(refusal)) => Err(refusal.clone()),
            _ if !self.accepted() => {
                Err(("ListenersNotValid", "no listener can be served".to_owned()))
            }
            _ => Ok(()),
        };
        let mut accepted = verdict("Accepted", &accepted);
        if accepted.status && invalid > 0 {
            accepted.reason = "ListenersNotValid";
            accepted.message = format!("{invalid} listeners are not served");
        }
        let programmed = if accepted.status {
            Condition::holds("Programmed")
        } else {
            Condition::new("Programmed", false, "Invalid", &accepted.message)
        };
        GatewayVerdict {
            conditions: vec![accepted, programmed],
            listeners: self.own().map(listener_verdict).collect(),
            requested: self.address.clone().ok().flatten(),
            attached_listener_sets: super::listener_sets::attached(self),
        }
    }
}

pub(crate) fn listener_verdict(l: &ListenerState<'_>) -> ListenerVerdict {
    let programmed = if l.served() {
        Condition::holds("Programmed")
    } else {
        Condition::new("Programmed", false, "Invalid", "the listener is not served")
    };
    let conflicted = match l.conflict {
        Some(reason) => Condition::new(
            "Conflicted",
            true,
            reason,
            "another listener shares its port",
        ),
        None => Condition::new("Conflicted", false, "NoConflicts", ""),
    };
    let kinds = (l.kinds.iter())
        .map(|k| (GROUP.to_owned(), (*k).to_owned()))
        .collect();
    ListenerVerdict {
        name: l.spec.name.clone(),
        supported_kinds: kinds,
        attached_routes: l.attached,
        conditions: vec![
            verdict("Accepted", &l.accepted),
            programmed,
            verdict("ResolvedRefs", &l.resolved),
            conflicted,
        ],
    }
}

/// Prepares Gateway `key`: its address and its listeners' verdicts, then those of the
/// ListenerSets it takes; problems are also diagnostics on the Gateway (or ListenerSet).
pub(crate) fn prepare<'a>(
    key: &'a ObjectKey,
    gateway: &'a Gateway,
    objects: &'a Objects,
    diagnostics: &mut Vec<Diagnostic>,
) -> Prepared<'a> {
    let object = ObjectRef::new("Gateway", &key.namespace, &key.name);
    let address = address(gateway);
    if let Err((_, message)) = &address {
        diagnostics.push(Diagnostic::error(object.clone(), "spec.addresses", message));
    }
    let parameters = parameters(gateway);
    if let Err((_, message)) = &parameters {
        let field = "spec.infrastructure.parametersRef";
        diagnostics.push(Diagnostic::error(object.clone(), field, message));
    }
    let owner = ("Gateway", key);
    let mut listeners: Vec<ListenerState<'a>> = (gateway.spec.listeners.iter().enumerate())
        .map(|(i, l)| listener(owner, (None, i), l, objects))
        .collect();
    let mut prepared = Prepared {
        key,
        gateway,
        listeners: Vec::new(),
        address,
        parameters,
        attachments: Vec::new(),
        passthrough: Vec::new(),
        namespaces: objects.namespaces.clone(),
        sets: Vec::new(),
    };
    let parent_accepted = prepared.address.is_ok()
        && prepared.parameters.is_ok()
        && listeners.iter().any(|l| l.accepted.is_ok());
    for (s, (set_key, set)) in super::listener_sets::naming(key, objects)
        .into_iter()
        .enumerate()
    {
        let namespaces = &objects.namespaces;
        let mut taken =
            super::listener_sets::allowed(gateway, &key.namespace, &set_key.namespace, namespaces);
        if taken.is_ok() && !parent_accepted {
            let message = format!("Gateway {key} is not accepted");
            taken = Err(("ParentNotAccepted", message));
        }
        if taken.is_ok() {
            let owner = ("ListenerSet", set_key);
            let own = set.spec.listeners.iter().enumerate();
            listeners.extend(own.map(|(i, l)| listener(owner, (Some(s), i), l, objects)));
        }
        prepared.sets.push(super::listener_sets::SetState {
            key: set_key,
            taken,
        });
    }
    conflicts(&mut listeners);
    one_port_per_protocol(&mut listeners);
    prepared.listeners = listeners;
    for (i, l) in prepared.listeners.iter().enumerate() {
        let (object, field) = prepared.listener_field(i);
        for (reason, message) in [&l.accepted, &l.resolved]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            let message = format!("{reason}: {message}");
            diagnostics.push(Diagnostic::warning(object.clone(), field.clone(), message));
        }
    }
    prepared
}

/// A Gateway naming `infrastructure.parametersRef` is refused: Portico defines no parameters
/// resource, so no reference resolves (the API's `InvalidParameters`).
fn parameters(gateway: &Gateway) -> Result<(), Refusal> {
    let infrastructure = gateway.spec.rest.get("infrastructure");
    let Some(r) = infrastructure.and_then(|i| i.get("parametersRef")) else {
        return Ok(());
    };
    let field = |f: &str| {
        r.get(f)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let message = format!(
        "parameters {}/{} {:?} do not resolve: Portico reads no Gateway parameters",
        field("group"),
        field("kind"),
        field("name")
    );
    Err(("InvalidParameters", message))
}

/// The first `IPAddress` of `spec.addresses` (none: the address comes from a pool or the
/// default listeners); another type of address is refused.
fn address(gateway: &Gateway) -> Result<Option<IpAddr>, Refusal> {
    let mut first = None;
    for a in &gateway.spec.addresses {
        let unsupported = |message: String| Err(("UnsupportedAddress", message));
        if a.address_type() != "IPAddress" {
            return unsupported(format!(
                "address type {:?} is not supported",
                a.address_type()
            ));
        }
        let Some(value) = a.value.as_deref().filter(|v| !v.is_empty()) else {
            continue;
        };
        match value.parse::<IpAddr>() {
            Ok(ip) => {
                first.get_or_insert(ip);
            }
            Err(_) => return unsupported(format!("{value:?} is not an IP address")),
        }
    }
    Ok(first)
}

/// The state of listener `spec`, written in `owner` (its kind and key), at `at` (its
/// ListenerSet, if any, and its index there).
fn listener<'a>(
    owner: (&str, &ObjectKey),
    (set, index): (Option<usize>, usize),
    spec: &'a Listener,
    objects: &Objects,
) -> ListenerState<'a> {
    let mut state = ListenerState {
        spec,
        owner: set,
        index,
        protocol: None,
        accepted: Ok(()),
        conflict: None,
        resolved: Ok(()),
        kinds: Vec::new(),
        certificates: Vec::new(),
        attached: 0,
        passthrough: false,
        terminate: false,
    };
    match spec.protocol.as_str() {
        "HTTP" => state.protocol = Some(Protocol::Http),
        "HTTPS" => match spec.tls.as_ref().map(|t| t.tls_mode()) {
            Some("Passthrough") => {
                let message = "tls.mode Passthrough is for TLS listeners, not HTTPS".to_owned();
                state.accepted = Err(("UnsupportedProtocol", message));
            }
            _ => {
                state.protocol = Some(Protocol::TerminatedHttps);
                state.resolved = certificates(owner, spec, objects, &mut state.certificates);
            }
        },
        "TLS" => match spec.tls.as_ref().map(|t| t.tls_mode()) {
            Some("Passthrough") => {
                state.protocol = Some(Protocol::TerminatedHttps);
                state.passthrough = true;
            }
            _ => {
                state.protocol = Some(Protocol::TerminatedHttps);
                state.terminate = true;
                state.resolved = certificates(owner, spec, objects, &mut state.certificates);
            }
        },
        "TCP" => state.protocol = Some(Protocol::Tcp),
        "UDP" => state.protocol = Some(Protocol::Udp),
        other => {
            let message =
                format!("protocol {other:?} is not served yet (HTTP, HTTPS, TLS, TCP and UDP are)");
            state.accepted = Err(("UnsupportedProtocol", message));
        }
    }
    if state.accepted.is_ok()
        && let Err(message) = routes_selector(spec)
    {
        state.accepted = Err(("UnsupportedValue", message));
    }
    if state.accepted.is_ok() {
        let served = (super::l4routes::kinds_for(&spec.protocol))
            .or_else(|| super::tlsroutes::kinds_for(&spec.protocol))
            .unwrap_or(&SERVED);
        let (kinds, invalid) = route_kinds(spec, served);
        state.kinds = kinds;
        if let (Some(kind), Ok(())) = (invalid, &state.resolved) {
            let message = format!("route kind {kind:?} is not served on this listener");
            state.resolved = Err(("InvalidRouteKinds", message));
        }
    }
    state
}

/// With `allowedRoutes.namespaces.from: Selector`, whether its selector is there and can be
/// evaluated.
fn routes_selector(spec: &Listener) -> Result<(), String> {
    if spec.routes_from() != "Selector" {
        return Ok(());
    }
    let field = "allowedRoutes.namespaces.selector";
    match spec.routes_selector() {
        None => Err(format!("{field}: from Selector needs a selector")),
        Some(selector) => super::selector::check(selector).map_err(|e| format!("{field}.{e}")),
    }
}

/// The route kinds served on HTTP and HTTPS listeners.
const SERVED: [&str; 2] = ["HTTPRoute", super::GRPC_ROUTE];

/// The route kinds `allowedRoutes.kinds` admits (none named: the protocol's default, HTTPRoute
/// and GRPCRoute), and the first kind named that is not served.
fn route_kinds(spec: &Listener, served: &[&'static str]) -> (Vec<&'static str>, Option<String>) {
    let kinds = spec.allowed_kinds();
    if kinds.is_empty() {
        return (served.to_vec(), None);
    }
    let served = |k: &portico_gateway::RouteGroupKind| {
        let ours = k.group.as_deref().unwrap_or(GROUP) == GROUP;
        served.iter().copied().find(|s| ours && k.kind == *s)
    };
    let invalid = kinds.iter().find(|k| served(k).is_none());
    let mut taken: Vec<&'static str> = kinds.iter().filter_map(served).collect();
    taken.dedup();
    (taken, invalid.map(|k| k.kind.clone()))
}

/// Resolves the `certificateRefs` of an HTTPS listener or a TLS one of mode Terminate into `out`; the first that does not
/// resolve is the refusal.
fn certificates(
    owner: (&str, &ObjectKey),
    spec: &Listener,
    objects: &Objects,
    out: &mut Vec<ObjectKey>,
) -> Result<(), Refusal> {
    let refs = spec
        .tls
        .as_ref()
        .map_or(&[][..], |t| &t.certificate_refs[..]);
    if refs.is_empty() {
        let message = format!(
            "an {} listener that terminates TLS needs tls.certificateRefs",
            spec.protocol
        );
        return Err(("InvalidCertificateRef", message));
    }
    for r in refs {
        out.push(certificate(owner, r, objects)?);
    }
    Ok(())
}

fn certificate(
    (kind, owner): (&str, &ObjectKey),
    r: &SecretObjectReference,
    objects: &Objects,
) -> Result<ObjectKey, Refusal> {
    let invalid = |message: String| Err(("InvalidCertificateRef", message));
    if r.group_kind() != ("", "Secret") {
        let (group, kind) = r.group_kind();
        return invalid(format!(
            "certificateRef to {kind} of group {group:?}: only Secrets are"
        ));
    }
    let namespace = r.namespace.as_deref().unwrap_or(&owner.namespace);
    let key = ObjectKey::new(namespace, &r.name);
    if namespace != owner.namespace
        && !super::backends::granted(objects, (kind, &owner.namespace), ("Secret", &key))
    {
        let message = format!(
            "no ReferenceGrant in {namespace:?} lets {kind}s of {:?} use Secret {key}",
            owner.namespace
        );
        return Err(("RefNotPermitted", message));
    }
    let Some(secret) = objects.secrets.get(&key) else {
        return invalid(format!("Secret {key} not found"));
    };
    let data = secret.data.as_ref();
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    if !(has("tls.crt") && has("tls.key")) {
        return invalid(format!("Secret {key} has no tls.crt and tls.key"));
    }
    Ok(key)
}

/// Listeners on one port with other protocols conflict (`ProtocolConflict`), except HTTPS
/// and TLS, which share a port as the API allows (terminated hosts beside passed-through
/// ones); with compatible protocols and the same hostname, they conflict too
/// (`HostnameConflict`). Listeners of one object both conflict; between a Gateway's and
/// its ListenerSets' (or two ListenerSets'), only the later one in precedence order does.
fn conflicts(listeners: &mut [ListenerState<'_>]) {
    let n = listeners.len();
    for i in 0..n {
        for j in 0..n {
            let (a, b) = (&listeners[i].spec, &listeners[j].spec);
            let precedes = listeners[i].owner != listeners[j].owner && i < j;
            if i == j || a.port != b.port || precedes {
                continue;
            }
            // UDP shares a port number with a TCP-based protocol (another transport).
            let reason = if (a.protocol == "UDP") != (b.protocol == "UDP") {
                continue;
            } else if a.protocol != b.protocol && !tls_beside_https(&a.protocol, &b.protocol) {
                "ProtocolConflict"
            } else if host_key(a) == host_key(b) {
                "HostnameConflict"
            } else {
                continue;
            };
            listeners[i].conflict.get_or_insert(reason);
        }
    }
}

fn tls_beside_https(a: &str, b: &str) -> bool {
    matches!((a, b), ("HTTPS", "TLS") | ("TLS", "HTTPS"))
}

fn host_key(listener: &Listener) -> Option<String> {
    listener.hostname.as_deref().map(str::to_ascii_lowercase)
}

/// A load balancer has one HTTP and one TERMINATED_HTTPS listener: the first port of each
/// protocol is served, the listeners on other ports are refused (`PortUnavailable`).
fn one_port_per_protocol(listeners: &mut [ListenerState<'_>]) {
    let mut first: Vec<(Protocol, i32)> = Vec::new();
    for l in listeners.iter_mut().filter(|l| l.accepted.is_ok()) {
        // TCP and UDP listeners each have their own port.
        let Some(protocol) = l
            .protocol
            .filter(|p| !matches!(p, Protocol::Tcp | Protocol::Udp))
        else {
            continue;
        };
        match first.iter().find(|(p, _)| *p == protocol) {
            None => first.push((protocol, l.spec.port)),
            Some((_, port)) if *port == l.spec.port => {}
            Some((_, port)) => {
                let message = format!(
                    "Portico serves one port per protocol on a Gateway; this protocol is served on port {port}"
                );
                l.accepted = Err(("PortUnavailable", message));
            }
        }
    }
}
