//! Desired state → key-value entries.

use super::{
    CaBundleValue, CertificateValue, CredentialsValue, DESIRED, Envelope, Fragment, KIND_CA_BUNDLE,
    KIND_CERTIFICATE, KIND_CREDENTIALS, KIND_FRAGMENT, KIND_LOAD_BALANCER, KIND_POOL, ListenerPart,
    object_hash,
};
use crate::kv::Key;
use crate::{CaBundles, Certificates, SCHEMA};
use bytes::Bytes;
use portico_model::Credentials;
use portico_model::{
    L7Policy, Listener, ListenerId, LoadBalancer, Model, ObjectRef, SniCertificate,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// Every key and value of `model`, `certificates`, `ca_bundles` and `credentials` (see the
/// module's key layout).
pub fn encode(
    model: &Model,
    certificates: &Certificates,
    ca_bundles: &CaBundles,
    credentials: &Credentials,
) -> BTreeMap<Key, Bytes> {
    Encoder::default().encode(model, certificates, ca_bundles, credentials)
}

/// [`encode`] for one state after another: a fragment or a pool whose content did not change
/// since the last call keeps its bytes without being serialized again (a hash of its content,
/// positions left out, decides), so a one-Ingress change costs a walk of the model, not a
/// serialization of all of it.
#[derive(Debug, Default)]
pub struct Encoder {
    last: HashMap<Key, (u64, Bytes)>,
}

impl Encoder {
    /// Every key and value of `model`, `certificates`, `ca_bundles` and `credentials`.
    pub fn encode(
        &mut self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
        credentials: &Credentials,
    ) -> BTreeMap<Key, Bytes> {
        let mut out = BTreeMap::new();
        let mut next = HashMap::with_capacity(self.last.len());
        for lb in &model.load_balancers {
            self.encode_load_balancer(lb, &mut out, &mut next);
        }
        encode_certificates(certificates, &mut out);
        encode_ca_bundles(ca_bundles, &mut out);
        encode_credentials(credentials, &mut out);
        self.last = next;
        out
    }

    /// The bytes of `key` for content of hash `hash`: the last ones when the hash is the same.
    fn value(
        &self,
        key: Key,
        hash: u64,
        make: impl FnOnce() -> Bytes,
        out: &mut BTreeMap<Key, Bytes>,
        next: &mut HashMap<Key, (u64, Bytes)>,
    ) {
        let bytes = match self.last.get(&key) {
            Some((h, bytes)) if *h == hash => bytes.clone(),
            _ => make(),
        };
        next.insert(key.clone(), (hash, bytes.clone()));
        out.insert(key, bytes);
    }

    fn encode_load_balancer(
        &self,
        lb: &LoadBalancer,
        out: &mut BTreeMap<Key, Bytes>,
        next: &mut HashMap<Key, (u64, Bytes)>,
    ) {
        let base = format!("{DESIRED}lb/{}", lb.id);
        let mut fragments: Refs<'_> = BTreeMap::new();
        for listener in lb.listeners.iter() {
            for policy in &listener.policies {
                let part = fragments.entry(&policy.source).or_default();
                part.entry(listener.id).or_default().0.push(policy);
            }
            for sni in listener.tls.iter().flat_map(|t| &t.sni) {
                let part = fragments.entry(&sni.source).or_default();
                part.entry(listener.id).or_default().1.push(sni);
            }
        }
        let header = LoadBalancer {
            listeners: Arc::new(lb.listeners.iter().map(skeleton).collect()),
            pools: vec![],
            ..lb.clone()
        };
        out.insert(base.clone(), envelope(KIND_LOAD_BALANCER, &header));
        for (source, parts) in fragments {
            let key = format!("{base}/src/{}", object_hash(source));
            let hash = fragment_hash(source, &parts);
            let make = || {
                let fragment = Fragment {
                    source: source.clone(),
                    listeners: parts
                        .iter()
                        .map(|(id, (policies, sni))| ListenerPart {
                            listener: *id,
                            policies: policies.iter().map(|p| stored(p)).collect(),
                            sni: sni.iter().map(|s| (*s).clone()).collect(),
                        })
                        .collect(),
                };
                envelope(KIND_FRAGMENT, &fragment)
            };
            self.value(key, hash, make, out, next);
        }
        for pool in &lb.pools {
            let key = format!("{base}/pool/{}", pool.id);
            let hash = {
                let mut h = DefaultHasher::new();
                pool.hash(&mut h);
                h.finish()
            };
            self.value(key, hash, || envelope(KIND_POOL, pool), out, next);
        }
    }
}

/// One source's policies and SNI entries by listener, borrowed from the model.
type Refs<'lb> =
    BTreeMap<&'lb ObjectRef, BTreeMap<ListenerId, (Vec<&'lb L7Policy>, Vec<&'lb SniCertificate>)>>;

/// A policy as stored: without its position.
fn stored(policy: &L7Policy) -> L7Policy {
    L7Policy {
        position: 0,
        ..policy.clone()
    }
}

/// The content of one source's fragment, positions left out.
fn fragment_hash(
    source: &ObjectRef,
    parts: &BTreeMap<ListenerId, (Vec<&L7Policy>, Vec<&SniCertificate>)>,
) -> u64 {
    let mut h = DefaultHasher::new();
    source.hash(&mut h);
    for (listener, (policies, sni)) in parts {
        listener.hash(&mut h);
        policies.len().hash(&mut h);
        for p in policies {
            (&p.id, &p.action, &p.rules, &p.source).hash(&mut h);
        }
        sni.hash(&mut h);
    }
    h.finish()
}

fn encode_certificates(certificates: &Certificates, out: &mut BTreeMap<Key, Bytes>) {
    for (secret, material) in certificates {
        let value = CertificateValue {
            secret: secret.clone(),
            chain_pem: String::from_utf8_lossy(material.chain_pem()).into_owned(),
            key_pem: String::from_utf8_lossy(material.key_pem()).into_owned(),
        };
        let key = format!("{DESIRED}cert/{}", object_hash(secret));
        out.insert(key, envelope(KIND_CERTIFICATE, &value));
    }
}

fn encode_ca_bundles(ca_bundles: &CaBundles, out: &mut BTreeMap<Key, Bytes>) {
    for (secret, bundle) in ca_bundles {
        let value = CaBundleValue {
            secret: secret.clone(),
            ca_pem: String::from_utf8_lossy(bundle.pem()).into_owned(),
        };
        let key = format!("{DESIRED}ca/{}", object_hash(secret));
        out.insert(key, envelope(KIND_CA_BUNDLE, &value));
    }
}

fn encode_credentials(credentials: &Credentials, out: &mut BTreeMap<Key, Bytes>) {
    for (secret, users) in credentials {
        let value = CredentialsValue {
            secret: secret.clone(),
            users: (users.entries()).map(|(u, h)| (u.to_owned(), h)).collect(),
        };
        let key = format!("{DESIRED}auth/{}", object_hash(secret));
        out.insert(key, envelope(KIND_CREDENTIALS, &value));
    }
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
