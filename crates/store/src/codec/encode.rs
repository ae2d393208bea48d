//! Desired state → key-value entries.

use super::{
    CertificateValue, DESIRED, Envelope, Fragment, KIND_CERTIFICATE, KIND_FRAGMENT,
    KIND_LOAD_BALANCER, KIND_POOL, ListenerPart, object_hash,
};
use crate::kv::Key;
use crate::{Certificates, SCHEMA};
use bytes::Bytes;
use portico_model::{Listener, ListenerId, LoadBalancer, Model, ObjectRef};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every key and value of `model` and `certificates` (see the module's key layout).
pub fn encode(model: &Model, certificates: &Certificates) -> BTreeMap<Key, Bytes> {
    let mut out = BTreeMap::new();
    for lb in &model.load_balancers {
        encode_load_balancer(lb, &mut out);
    }
    for (secret, material) in certificates {
        let value = CertificateValue {
            secret: secret.clone(),
            chain_pem: String::from_utf8_lossy(material.chain_pem()).into_owned(),
            key_pem: String::from_utf8_lossy(material.key_pem()).into_owned(),
        };
        let key = format!("{DESIRED}cert/{}", object_hash(secret));
        out.insert(key, envelope(KIND_CERTIFICATE, &value));
    }
    out
}

type Parts<'lb> = BTreeMap<&'lb ObjectRef, BTreeMap<ListenerId, ListenerPart>>;

fn encode_load_balancer(lb: &LoadBalancer, out: &mut BTreeMap<Key, Bytes>) {
    let base = format!("{DESIRED}lb/{}", lb.id);
    let mut fragments: Parts<'_> = BTreeMap::new();
    for listener in lb.listeners.iter() {
        for policy in &listener.policies {
            let mut stored = policy.clone();
            stored.position = 0;
            part(&mut fragments, &policy.source, listener.id)
                .policies
                .push(stored);
        }
        for sni in listener.tls.iter().flat_map(|t| &t.sni) {
            part(&mut fragments, &sni.source, listener.id)
                .sni
                .push(sni.clone());
        }
    }
    let header = LoadBalancer {
        listeners: Arc::new(lb.listeners.iter().map(skeleton).collect()),
        pools: vec![],
        ..lb.clone()
    };
    out.insert(base.clone(), envelope(KIND_LOAD_BALANCER, &header));
    for (source, parts) in fragments {
        let fragment = Fragment {
            source: source.clone(),
            listeners: parts.into_values().collect(),
        };
        let key = format!("{base}/src/{}", object_hash(source));
        out.insert(key, envelope(KIND_FRAGMENT, &fragment));
    }
    for pool in &lb.pools {
        let key = format!("{base}/pool/{}", pool.id);
        out.insert(key, envelope(KIND_POOL, pool));
    }
}

/// The part of `source`'s fragment for `listener`.
fn part<'p, 'lb>(
    fragments: &'p mut Parts<'lb>,
    source: &'lb ObjectRef,
    listener: ListenerId,
) -> &'p mut ListenerPart {
    fragments
        .entry(source)
        .or_default()
        .entry(listener)
        .or_insert_with(|| ListenerPart {
            listener,
            policies: vec![],
            sni: vec![],
        })
}

/// A listener without its policies and SNI entries (they live in the fragments).
fn skeleton(listener: &Listener) -> Listener {
    let mut tls = listener.tls.clone();
    if let Some(tls) = &mut tls {
        tls.sni.clear();
    }
    Listener {
        policies: vec![],
        tls,
        ..listener.clone()
    }
}

pub(super) fn envelope<T: Serialize>(kind: &str, data: &T) -> Bytes {
    let envelope = Envelope {
        schema: SCHEMA,
        kind: kind.to_owned(),
        data,
    };
    // The model's types serialize infallibly (no maps with non-string keys, no foreign types).
    Bytes::from(serde_json::to_vec(&envelope).unwrap_or_default())
}
