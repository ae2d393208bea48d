//! Routes → listeners: each parentRef to one of our Gateways is checked against its listeners
//! (`sectionName`, `port`, allowed namespaces and kinds, hostname intersection) and gets its
//! verdict; an accepted route is attached to every listener it may use.

use super::listener_sets::{is_listener_set, named};
use super::listeners::{Attachment, ListenerState, Prepared};
use super::reuse::Attached;
use super::status::{Refusal, verdict};
use super::{ParentVerdict, backends};
use crate::regex_hosts::compiles;
use crate::{ObjectKey, Objects};
use portico_gateway::{HttpRoute, HttpRouteMatch, ParentReference};
use portico_model::{Diagnostic, ObjectRef};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The verdicts of `route`'s parentRefs to our Gateways (none: the route is not ours), and
/// its attachments on those Gateways (also added to `out`).
pub(crate) fn attach<'a>(
    (key, route, rank): (&'a ObjectKey, &'a HttpRoute, usize),
    gateways: &mut [Prepared<'a>],
    objects: &Objects,
    diagnostics: &mut Vec<Diagnostic>,
    out: &mut Vec<Arc<Attached>>,
) -> Vec<ParentVerdict> {
    let kind = super::kind(route);
    let object = ObjectRef::new(kind, &key.namespace, &key.name);
    let parents = &route.spec.parent_refs;
    let check = |diagnostics: &mut Vec<Diagnostic>| {
        let supported = unsupported(route).map_or(Ok(()), Err);
        let rules = &route.spec.rules;
        let unresolved = backends::unresolved(rules, (kind, &key.namespace), objects);
        (supported, resolved_refs(&object, unresolved, diagnostics))
    };
    let listen = |(): &(), parent: &ParentReference, g: usize, gateways: &mut [Prepared<'a>]| {
        listen((key, route, rank), parent, &mut gateways[g], out)
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

/// The verdicts on a route's parentRefs to Gateways of ours (none: the route is not ours).
/// `check`, run once at the first such parentRef, says whether the route is supported (with
/// what `listen` needs) and whether its references resolve; `listen` attaches the route to
/// the Gateway `g` a parentRef names.
pub(super) fn parent_verdicts<'a, T>(
    object: &ObjectRef,
    (parents, namespace): (&[ParentReference], &str),
    gateways: &mut [Prepared<'a>],
    diagnostics: &mut Vec<Diagnostic>,
    mut check: impl FnMut(&mut Vec<Diagnostic>) -> (Result<T, Refusal>, Result<(), Refusal>),
    mut listen: impl FnMut(&T, &ParentReference, usize, &mut [Prepared<'a>]) -> Result<(), Refusal>,
) -> Vec<ParentVerdict> {
    let mut verdicts = Vec::new();
    let mut checked = None;
    for (index, parent) in parents.iter().enumerate() {
        let Some(g) = ours(parent, namespace, gateways) else {
            continue;
        };
        let (supported, resolved) = checked.get_or_insert_with(|| check(diagnostics));
        let accepted = match supported {
            Err(refusal) => Err(refusal.clone()),
            Ok(t) => listen(t, parent, g, gateways),
        };
        let entry = (index, gateways[g].key);
        verdicts.push(parent_verdict(
            object,
            entry,
            &accepted,
            resolved,
            diagnostics,
        ));
    }
    verdicts
}

/// The index of the Gateway of ours that `parent` names, or whose ListenerSet it names, if
/// any.
fn ours(parent: &ParentReference, namespace: &str, gateways: &[Prepared<'_>]) -> Option<usize> {
    if super::listener_sets::is_listener_set(parent) {
        return (gateways.iter()).position(|g| named(g, parent, namespace).is_some());
    }
    if !parent.is_gateway() {
        return None;
    }
    let namespace = parent.namespace_or(namespace);
    (gateways.iter()).position(|g| g.key.namespace == namespace && g.key.name == parent.name)
}

/// Attaches the route to the listeners of `gateway` that `parent` selects and that take it.
fn listen<'a>(
    (key, route, rank): (&'a ObjectKey, &'a HttpRoute, usize),
    parent: &ParentReference,
    gateway: &mut Prepared<'a>,
    out: &mut Vec<Arc<Attached>>,
) -> Result<(), Refusal> {
    let kind = super::kind(route);
    let allowed = admitting(gateway, parent, &key.namespace, kind, |l| l.takes(route))?;
    let mut attached = false;
    for i in allowed {
        let listener = gateway.listeners[i].spec.hostname.as_deref();
        let hosts = intersect(listener, &route.spec.hostnames);
        if hosts.is_empty() {
            continue;
        }
        attached = true;
        let memo = Arc::new(Attached {
            gateway: gateway.key.clone(),
            listener: i,
            hosts,
            built: OnceLock::new(),
        });
        out.push(memo.clone());
        gateway.add(Attachment {
            route: key,
            spec: route,
            rank,
            attached: memo,
        });
    }
    if !attached {
        let message = "no hostname of the route intersects a listener's hostname".to_owned();
        return Err(("NoMatchingListenerHostname", message));
    }
    Ok(())
}

/// The listeners of `gateway` that `parent` selects (its sectionName and port) and that admit
/// routes of `kind` from namespace `route` (`takes`: the listener takes this route's kind);
/// the refusal when none does.
pub(super) fn admitting(
    gateway: &Prepared<'_>,
    parent: &ParentReference,
    route: &str,
    kind: &str,
    takes: impl Fn(&ListenerState<'_>) -> bool,
) -> Result<Vec<usize>, Refusal> {
    // A parentRef to the Gateway selects its own listeners, one to a ListenerSet that set's.
    let owner = named(gateway, parent, route).filter(|_| is_listener_set(parent));
    let selected: Vec<usize> = (gateway.listeners.iter().enumerate())
        .filter(|(_, l)| l.owner == owner)
        .filter(|(_, l)| (parent.section_name.as_deref()).is_none_or(|s| s == l.spec.name))
        .filter(|(_, l)| parent.port.is_none_or(|p| p == l.spec.port))
        .map(|(i, _)| i)
        .collect();
    if selected.is_empty() {
        let message = "no listener has the sectionName and port of the parentRef".to_owned();
        return Err(("NoMatchingParent", message));
    }
    let allowed: Vec<usize> = (selected.into_iter())
        .filter(|&i| {
            let listener = &gateway.listeners[i];
            admits(listener, gateway, route) && takes(listener)
        })
        .collect();
    if allowed.is_empty() {
        let message = format!("no listener it selects admits {kind}s of this namespace");
        return Err(("NotAllowedByListeners", message));
    }
    Ok(allowed)
}

/// Whether `listener` (of `gateway`) takes routes from namespace `route`: `Selector` matches
/// the labels of the Namespace (none when it is not known).
fn admits(listener: &ListenerState<'_>, gateway: &Prepared<'_>, route: &str) -> bool {
    let from = match listener.spec.routes_from() {
        "All" => true,
        "Same" => gateway.namespace_of(listener) == route,
        "Selector" => listener.spec.routes_selector().is_some_and(|selector| {
            let namespace = gateway.namespaces.get(route);
            let labels = namespace.and_then(|n| n.metadata.labels.as_ref());
            super::selector::selects(selector, labels)
        }),
        _ => false,
    };
    listener.served() && from
}

/// The hostnames requests must have to reach a route on a listener: the intersection of the
/// listener's hostname and the route's (lower-cased; `None` is any host).
pub(crate) fn intersect(listener: Option<&str>, route: &[String]) -> Vec<Option<String>> {
    let listener = listener.map(str::to_ascii_lowercase);
    if route.is_empty() {
        return vec![listener];
    }
    let mut hosts: Vec<Option<String>> = Vec::new();
    for host in route.iter().map(|h| h.to_ascii_lowercase()) {
        let both = match &listener {
            None => Some(host),
            Some(l) => meet(l, &host),
        };
        if let Some(both) = both.map(Some)
            && !hosts.contains(&both)
        {
            hosts.push(both);
        }
    }
    hosts
}

/// Whether hostname `wild` covers `host`: `*.s` covers `x.s`, `x.y.s` and `*.x.s`.
pub(crate) fn covers(wild: &str, host: &str) -> bool {
    (wild.strip_prefix("*.")).is_some_and(|s| portico_model::matching::suffix_matches(s, host))
}

/// The more specific of two hostnames when one includes the other (`*.` wildcards match one
/// or more labels), else none.
fn meet(a: &str, b: &str) -> Option<String> {
    if a == b || covers(a, b) {
        Some(b.to_owned())
    } else if covers(b, a) {
        Some(a.to_owned())
    } else {
        None
    }
}

/// What in the route Portico does not serve, as an `UnsupportedValue` refusal naming the
/// field: unknown match types, regular expressions that do not compile, filters it does not
/// serve or that do not hold.
fn unsupported(route: &HttpRoute) -> Option<Refusal> {
    for (r, rule) in route.spec.rules.iter().enumerate() {
        if let Err(refusal) = super::filters::check(r, rule) {
            return Some(refusal);
        }
        for (m, matched) in rule.matches.iter().enumerate() {
            let field = format!("spec.rules[{r}].matches[{m}]");
            if let Some(refusal) = unsupported_match(&field, matched) {
                return Some(refusal);
            }
        }
    }
    None
}

/// What in one match Portico cannot serve: an unknown match type, a regular expression that
/// does not compile.
fn unsupported_match(field: &str, matched: &HttpRouteMatch) -> Option<Refusal> {
    let refuse = |at: String, what: String| Some(("UnsupportedValue", format!("{at}: {what}")));
    let (path_type, path) = matched.path_match();
    match path_type {
        "Exact" | "PathPrefix" => {}
        "RegularExpression" => {
            if let Err(e) = compiles(&super::rules::whole(path)) {
                return refuse(
                    format!("{field}.path.value"),
                    format!("does not compile: {e}"),
                );
            }
        }
        other => {
            return refuse(
                format!("{field}.path.type"),
                format!("unknown type {other:?}"),
            );
        }
    }
    let values = (matched.headers.iter().map(|h| ("headers", h)))
        .chain(matched.query_params.iter().map(|q| ("queryParams", q)));
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (kind, value) in values {
        let i = seen.entry(kind).or_default();
        let at = format!("{field}.{kind}[{i}]");
        *i += 1;
        match value.match_type() {
            "Exact" => {}
            "RegularExpression" => {
                if let Err(e) = compiles(&super::rules::whole(&value.value)) {
                    return refuse(format!("{at}.value"), format!("does not compile: {e}"));
                }
            }
            other => return refuse(format!("{at}.type"), format!("unknown type {other:?}")),
        }
    }
    None
}

/// A route's `ResolvedRefs`: a backendRef that does not resolve (`unresolved`: its field and
/// why) is a warning on the route as well.
pub(super) fn resolved_refs(
    object: &ObjectRef,
    unresolved: Option<(String, Refusal)>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<(), Refusal> {
    match unresolved {
        None => Ok(()),
        Some((field, refusal)) => {
            let message = format!("{}: {}", refusal.0, refusal.1);
            diagnostics.push(Diagnostic::warning(object.clone(), field, message));
            Err(refusal)
        }
    }
}

/// The verdict on a route's parentRef `index` to `gateway`: Accepted and ResolvedRefs; a
/// refusal is a diagnostic on the parentRef too (an error for an unsupported value, else a
/// warning).
pub(super) fn parent_verdict(
    object: &ObjectRef,
    (index, gateway): (usize, &ObjectKey),
    accepted: &Result<(), Refusal>,
    resolved: &Result<(), Refusal>,
    diagnostics: &mut Vec<Diagnostic>,
) -> ParentVerdict {
    if let Err((reason, message)) = accepted {
        let field = format!("spec.parentRefs[{index}]");
        let message = format!("not accepted by Gateway {gateway}: {reason}: {message}");
        diagnostics.push(match *reason {
            "UnsupportedValue" => Diagnostic::error(object.clone(), field, message),
            _ => Diagnostic::warning(object.clone(), field, message),
        });
    }
    ParentVerdict {
        index,
        conditions: vec![
            verdict("Accepted", accepted),
            verdict("ResolvedRefs", resolved),
        ],
    }
}
