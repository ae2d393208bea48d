//! The key layout and value format of the desired state in a key-value store, and back.
//!
//! Keys (relative to the store's prefix):
//! - `desired/lb/<lb-uuid>`: a load balancer with its listeners, without their policies and
//!   SNI entries;
//! - `desired/lb/<lb-uuid>/src/<hash of the source object>`: the policies and SNI entries one
//!   source object (an Ingress) gives that load balancer's listeners;
//! - `desired/lb/<lb-uuid>/pool/<pool-uuid>`: one pool with its members;
//! - `desired/cert/<hash of the Secret>`: certificate material (key material: protect the store);
//! - `desired/ca/<hash of the Secret>`: a CA bundle that pools verify their members against;
//! - `desired/auth/<hash of the Secret>`: a basic-auth Secret's users and password hashes
//!   (hashes only, as the Secret holds them; checked again when read);
//! - `agents/<node>`: an agent's [`Feedback`](crate::Feedback);
//! - `placement/<lb-uuid>`: where a load balancer runs (see [`placement`]); its addresses (VIP,
//!   floating IP) are in its header.
//!
//! So a change to one Ingress writes that Ingress's fragment and, when they change, the pools it
//! names; an endpoint change writes one pool: the bytes written per change do not grow with
//! the number of Ingresses. Policy positions are not stored: the reader puts the policies back
//! in evaluation order (`portico_model::order`), which is a function of their rules.
//! A reader that decoded the previous state applies a changed fragment to the listeners it
//! assembled then, in place (`assemble.rs`), instead of ordering every policy again.
//!
//! Every value is an envelope `{"schema": 1, "kind": …, "data": …}`; a value that does not
//! decode, or of another schema, is a diagnostic naming its key, and the rest is served.

mod assemble;
mod decode;
mod encode;
mod placement;

pub use decode::Decoder;
pub use encode::{Encoder, count, encode, encode_each};
pub use placement::{addresses, decode_placements, encode_placements, placement_key};

use portico_model::{L7Policy, ListenerId, ObjectRef, SniCertificate};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The subtree of the desired state.
pub const DESIRED: &str = "desired/";
/// The subtree of the agents' feedback.
pub const AGENTS: &str = "agents/";
/// The subtree of the placements (written with the desired state, mirrored by agents).
pub const PLACEMENT: &str = "placement/";

/// The key of an agent's feedback.
pub fn agent_key(node: &str) -> String {
    format!("{AGENTS}{node}")
}

#[derive(Debug, Serialize, Deserialize)]
struct Envelope<T> {
    schema: u32,
    kind: String,
    data: T,
}

const KIND_LOAD_BALANCER: &str = "LoadBalancer";
const KIND_FRAGMENT: &str = "Fragment";
const KIND_POOL: &str = "Pool";
const KIND_CERTIFICATE: &str = "Certificate";
const KIND_CA_BUNDLE: &str = "CaBundle";
const KIND_CREDENTIALS: &str = "Credentials";

/// What one source object gives a load balancer's listeners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Fragment {
    source: ObjectRef,
    listeners: Vec<ListenerPart>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ListenerPart {
    listener: ListenerId,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    policies: Vec<Arc<L7Policy>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sni: Vec<SniCertificate>,
}

/// A Secret's certificate material as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CertificateValue {
    secret: ObjectRef,
    chain_pem: String,
    key_pem: String,
}

/// A Secret's CA bundle as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CaBundleValue {
    secret: ObjectRef,
    ca_pem: String,
}

/// A basic-auth Secret's users and password hashes as stored (hashes only: what the Secret
/// holds; checked again when read).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CredentialsValue {
    secret: ObjectRef,
    users: std::collections::BTreeMap<String, String>,
}

/// A stable, key-safe name for an object: hex of a SHA-1 of its identity.
fn object_hash(object: &ObjectRef) -> String {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    for part in [&object.kind, &object.namespace, &object.name] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod rebuilt_tests;
#[cfg(test)]
mod tests;
