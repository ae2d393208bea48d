//! The pure half of the status writer: which Ingresses and Services need a status patch, and
//! the patch.
//!
//! Rules, per Ingress or Service:
//! - nothing is written where the observed status already equals the desired one;
//! - a desired list of addresses (owned and served) is written over anything else;
//! - an empty desired list (not owned, or not served) only clears a status this controller
//!   wrote: one equal to the publish addresses, or one this process wrote itself. Another
//!   controller's addresses are never cleared;
//! - after a write, the same Ingress is not written again while the source still reports the
//!   resourceVersion it had before the write (the watch lags behind); once the source reports
//!   a newer version that disagrees, it is written again.

use crate::report::{Report, StatusKind, StatusReport};
use portico_status::LoadBalancerAddress;
use portico_translate::ObjectKey;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One status write: set `status.loadBalancer.ingress` of the `kind` object `key` to
/// `addresses`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPatch {
    pub kind: StatusKind,
    pub key: ObjectKey,
    pub addresses: Arc<[LoadBalancerAddress]>,
    /// The uid of the Ingress the patch was planned for: the patch carries it, so that an
    /// Ingress deleted and created again meanwhile refuses it (409 Conflict) instead of taking
    /// a status meant for its predecessor.
    pub uid: Option<String>,
    /// The resourceVersion the source reported when the patch was planned.
    pub seen: Option<String>,
}

/// What this process believes it wrote, per object. Starts empty on becoming leader.
#[derive(Debug, Default)]
pub struct StatusLedger {
    ingresses: HashMap<ObjectKey, Written>,
    services: HashMap<ObjectKey, Written>,
    /// The addresses of the latest entry, shared by the next entry with the same.
    last: Option<Arc<[LoadBalancerAddress]>>,
}

/// What was written to one object: the addresses, and the resourceVersion the source had
/// reported when the write was planned. Kept for every Ingress the controller ever wrote, so
/// kept small: the key is not repeated, and one list of addresses is shared by every object
/// that got the same (at scale, nearly all got the publish addresses).
#[derive(Debug)]
struct Written {
    addresses: Arc<[LoadBalancerAddress]>,
    seen: Option<String>,
}

impl StatusLedger {
    fn kind(&self, kind: StatusKind) -> &HashMap<ObjectKey, Written> {
        match kind {
            StatusKind::Ingress => &self.ingresses,
            StatusKind::Service => &self.services,
        }
    }

    /// The patches that make the report true; forgets Ingresses that are gone.
    pub fn plan(&mut self, report: &Report) -> Vec<StatusPatch> {
        // Hashed: 10,000 Ingresses each searched for in the report made every pass quadratic.
        let ingresses = present(&report.ingresses);
        self.ingresses.retain(|key, _| ingresses.contains(key));
        let services = present(&report.services);
        self.services.retain(|key, _| services.contains(key));
        let mut patches = Vec::new();
        for i in report.ingresses.iter().chain(&report.services) {
            let written = self.kind(i.kind).get(&i.key);
            if i.observed == i.desired {
                continue;
            }
            let lagging =
                written.is_some_and(|w| *w.addresses == *i.desired && w.seen == i.resource_version);
            if lagging {
                continue;
            }
            let ours = *i.observed == *report.publish
                || written.is_some_and(|w| *w.addresses == *i.observed);
            if i.desired.is_empty() && !ours {
                continue;
            }
            patches.push(StatusPatch {
                kind: i.kind,
                key: i.key.clone(),
                addresses: i.desired.clone(),
                uid: i.uid.clone(),
                seen: i.resource_version.clone(),
            });
        }
        patches
    }
}

fn present(reports: &[StatusReport]) -> HashSet<&ObjectKey> {
    reports.iter().map(|i| &i.key).collect()
}

impl StatusLedger {
    /// Records a patch the API server accepted.
    pub fn written(&mut self, patch: StatusPatch) {
        let StatusPatch {
            kind,
            key,
            addresses,
            seen,
            ..
        } = patch;
        let last = self.last.take().filter(|last| **last == *addresses);
        let addresses = last.unwrap_or(addresses);
        self.last = Some(addresses.clone());
        let map = match kind {
            StatusKind::Ingress => &mut self.ingresses,
            StatusKind::Service => &mut self.services,
        };
        map.insert(key, Written { addresses, seen });
    }
}

/// The JSON merge patch for the status subresource. An empty list becomes `null`, which
/// removes the field (RFC 7386) like a status nobody wrote. With `uid`, the patch is refused
/// by an object with another uid (the API server's uid precondition).
pub fn patch_body(uid: Option<&str>, addresses: &[LoadBalancerAddress]) -> Value {
    let ingress = if addresses.is_empty() {
        Value::Null
    } else {
        Value::Array(addresses.iter().map(address).collect())
    };
    let mut body = json!({ "status": { "loadBalancer": { "ingress": ingress } } });
    if let Some(uid) = uid {
        body["metadata"] = json!({ "uid": uid });
    }
    body
}

fn address(a: &LoadBalancerAddress) -> Value {
    let mut entry = Map::new();
    if let Some(ip) = &a.ip {
        entry.insert("ip".to_owned(), Value::String(ip.clone()));
    }
    if let Some(hostname) = &a.hostname {
        entry.insert("hostname".to_owned(), Value::String(hostname.clone()));
    }
    Value::Object(entry)
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
