//! ListenerSets: more listeners for a Gateway, written in other objects. A Gateway of ours
//! takes the ListenerSets naming it that its `allowedListeners` admits (none by default);
//! their listeners are merged after its own (the Gateway's first, then the ListenerSets by
//! creation time, then namespace/name), served on its addresses as its own are, and a
//! listener that conflicts with one earlier in that order is the one `Conflicted`. Routes
//! attach to them with a parentRef of kind `ListenerSet`; a parentRef to the Gateway reaches
//! only the Gateway's own listeners.

use super::listeners::{ListenerState, Prepared, listener_verdict};
use super::status::{Condition, Refusal};
use super::{GROUP_KIND_SET, ListenerVerdict};
use crate::{ObjectKey, Objects};
use k8s_openapi::api::core::v1::Namespace;
use portico_gateway::{Gateway, ListenerSet, ParentReference};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A ListenerSet naming a Gateway of ours, and whether the Gateway takes it.
#[derive(Debug)]
pub(crate) struct SetState<'a> {
    pub key: &'a ObjectKey,
    /// `NotAllowed` (the Gateway's `allowedListeners`) or `ParentNotAccepted`; when `Ok`,
    /// its listeners are among the Gateway's.
    pub taken: Result<(), Refusal>,
}

/// A ListenerSet's conditions and its listeners', and its Gateway.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListenerSetVerdict {
    pub gateway: ObjectKey,
    pub conditions: Vec<Condition>,
    /// In `spec.listeners` order; none when the Gateway does not take it.
    pub listeners: Vec<ListenerVerdict>,
}

/// The ListenerSets whose `parentRef` names Gateway `gateway`, in precedence order: oldest
/// first (no timestamp, as read from a file, counts as the oldest), then namespace/name.
pub(crate) fn naming<'a>(
    gateway: &ObjectKey,
    objects: &'a Objects,
) -> Vec<(&'a ObjectKey, &'a ListenerSet)> {
    let mut sets: Vec<(&ObjectKey, &ListenerSet)> = (objects.listener_sets.iter())
        .filter(|(key, set)| {
            let parent = &set.spec.parent_ref;
            parent.is_gateway()
                && parent.namespace_or(&key.namespace) == gateway.namespace
                && parent.name == gateway.name
        })
        .map(|(k, s)| (k, &**s))
        .collect();
    sets.sort_by(|(a_key, a), (b_key, b)| {
        let created = |s: &ListenerSet| s.metadata.creation_timestamp.clone();
        (created(a), *a_key).cmp(&(created(b), *b_key))
    });
    sets
}

/// Whether `gateway` (in namespace `at`) takes ListenerSets of namespace `set`, by its
/// `allowedListeners.namespaces.from`.
pub(crate) fn allowed(
    gateway: &Gateway,
    at: &str,
    set: &str,
    namespaces: &BTreeMap<String, Arc<Namespace>>,
) -> Result<(), Refusal> {
    let from = gateway.spec.listeners_from();
    let taken = match from {
        "All" => true,
        "Same" => at == set,
        "Selector" => gateway.spec.listeners_selector().is_some_and(|selector| {
            super::selector::check(selector).is_ok() && {
                let labels = namespaces.get(set).and_then(|n| n.metadata.labels.as_ref());
                super::selector::selects(selector, labels)
            }
        }),
        _ => false,
    };
    if taken {
        return Ok(());
    }
    let message = format!(
        "Gateway {at}/{} takes no ListenerSets of namespace {set:?} (allowedListeners.namespaces.from {from})",
        gateway.metadata.name.as_deref().unwrap_or_default()
    );
    Err(("NotAllowed", message))
}

/// The index in `gateway.sets` of the ListenerSet a route's parentRef (the route in
/// namespace `route`) names, if it is one of those.
pub(crate) fn named(
    gateway: &Prepared<'_>,
    parent: &ParentReference,
    route: &str,
) -> Option<usize> {
    let namespace = parent.namespace_or(route);
    (gateway.sets.iter()).position(|s| s.key.namespace == namespace && s.key.name == parent.name)
}

/// Whether a route's parentRef names a ListenerSet.
pub(crate) fn is_listener_set(parent: &ParentReference) -> bool {
    let (group, kind) = GROUP_KIND_SET;
    parent.group.as_deref().unwrap_or(group) == group && parent.kind.as_deref() == Some(kind)
}

/// The verdict on ListenerSet `s` of `gateway`.
pub(crate) fn verdict(gateway: &Prepared<'_>, s: usize) -> ListenerSetVerdict {
    let set = &gateway.sets[s];
    let own: Vec<&ListenerState<'_>> = (gateway.listeners.iter())
        .filter(|l| l.owner == Some(s))
        .collect();
    let accepted = match &set.taken {
        Err((reason, message)) => Err((*reason, message.clone())),
        Ok(()) if !own.iter().any(|l| l.accepted.is_ok()) => {
            Err(("ListenersNotValid", "no listener can be served".to_owned()))
        }
        Ok(()) => Ok(()),
    };
    let mut accepted = super::status::verdict("Accepted", &accepted);
    let invalid = own.iter().filter(|l| !l.served()).count();
    if accepted.status && invalid > 0 {
        accepted.reason = "ListenersNotValid";
        accepted.message = format!("{invalid} listeners are not served");
    }
    let programmed = if accepted.status {
        Condition::holds("Programmed")
    } else {
        let reason = match accepted.reason {
            "ListenersNotValid" => "Invalid",
            other => other,
        };
        Condition::new("Programmed", false, reason, &accepted.message)
    };
    ListenerSetVerdict {
        gateway: gateway.key.clone(),
        conditions: vec![accepted, programmed],
        listeners: own.into_iter().map(listener_verdict).collect(),
    }
}

/// How many of `gateway`'s ListenerSets are attached (taken, and accepted); `None` when the
/// Gateway neither allows ListenerSets nor is named by one (its status leaves the field out).
pub(crate) fn attached(gateway: &Prepared<'_>) -> Option<i32> {
    if gateway.sets.is_empty() && gateway.gateway.spec.allowed_listeners.is_none() {
        return None;
    }
    let accepted = (0..gateway.sets.len())
        .filter(|&s| verdict(gateway, s).conditions[0].status)
        .count();
    Some(i32::try_from(accepted).unwrap_or(i32::MAX))
}
