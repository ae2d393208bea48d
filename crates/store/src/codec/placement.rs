//! Placements and address allocations in the key-value layout.
//!
//! - `placement/<lb-uuid>`: where the load balancer runs (`{schema, kind: "Placement", data:
//!   {active, standby, epoch}}`), written by the leader in the same commit as `desired/`; agents
//!   mirror the subtree.
//! - Address allocations have no key of their own: a load balancer's header
//!   (`desired/lb/<uuid>`) holds its `vip` and `floatingIp`, and a new leader reads them back
//!   as the previous allocations ([`addresses`]).

use super::decode::parse;
use super::encode::envelope;
use super::{DESIRED, PLACEMENT};
use crate::kv::{Key, View};
use bytes::Bytes;
use portico_model::{Diagnostic, LoadBalancer, LoadBalancerId, ObjectRef, Placement};
use std::collections::BTreeMap;
use std::net::IpAddr;

const KIND_PLACEMENT: &str = "Placement";

/// The key of a load balancer's placement.
pub fn placement_key(id: LoadBalancerId) -> Key {
    format!("{PLACEMENT}{id}")
}

/// Every placement as keys and values.
pub fn encode_placements(placements: &BTreeMap<LoadBalancerId, Placement>) -> BTreeMap<Key, Bytes> {
    placements
        .iter()
        .map(|(id, p)| (placement_key(*id), envelope(KIND_PLACEMENT, p)))
        .collect()
}

/// The placements under `placement/` in `view`; a value that does not decode is a diagnostic
/// naming its key.
pub fn decode_placements(view: &View) -> (BTreeMap<LoadBalancerId, Placement>, Vec<Diagnostic>) {
    let mut placements = BTreeMap::new();
    let mut diagnostics = Vec::new();
    for (key, entry) in view.entries.iter() {
        let Some(id) = key.strip_prefix(PLACEMENT) else {
            continue;
        };
        let id = serde_json::Value::String(id.to_owned());
        let decoded = serde_json::from_value::<LoadBalancerId>(id)
            .map_err(|e| format!("the key does not end in a load balancer id: {e}"))
            .and_then(|id| Ok((id, parse::<Placement>(&entry.value, KIND_PLACEMENT)?)));
        match decoded {
            Ok((id, p)) => {
                placements.insert(id, p);
            }
            Err(message) => {
                let object = ObjectRef::new("StoreKey", "", key);
                diagnostics.push(Diagnostic::error(object, "value", message));
            }
        }
    }
    (placements, diagnostics)
}

/// The addresses (VIP, floating IP) that the load balancer headers under `desired/lb/` hold:
/// what the last leader allocated. Unreadable headers are skipped (the decoder reports them).
pub fn addresses(view: &View) -> BTreeMap<LoadBalancerId, (Option<IpAddr>, Option<IpAddr>)> {
    let prefix = format!("{DESIRED}lb/");
    let headers = view.entries.iter().filter(|(key, _)| {
        key.strip_prefix(&prefix)
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
    });
    headers
        .filter_map(|(_, entry)| parse::<LoadBalancer>(&entry.value, "LoadBalancer").ok())
        .map(|lb| (lb.id, (lb.vip, lb.floating_ip)))
        .collect()
}
