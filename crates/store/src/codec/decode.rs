//! Key-value entries → desired state, reusing what unchanged entries gave last time.

use super::assemble::{Assembled, Part};
use super::{
    CaBundleValue, CertificateValue, CredentialsValue, DESIRED, Envelope, Fragment, KIND_CA_BUNDLE,
    KIND_CERTIFICATE, KIND_CREDENTIALS, KIND_FRAGMENT, KIND_LOAD_BALANCER, KIND_POOL, object_hash,
};
use crate::kv::{Key, View};
use crate::{CaBundles, Certificates, Delta, Desired, SCHEMA};
use portico_model::{
    Diagnostic, LoadBalancer, LoadBalancerId, Model, ObjectRef, Pool, PoolId, Rebuilt,
};
use portico_tls::{CaBundle, Material};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// One decoded value: a pointer and a tag (the rare kinds boxed), so that the cache of 16,000
/// of them at 10,000 Ingresses is small.
#[derive(Debug, Clone)]
enum Item {
    LoadBalancer(Arc<LoadBalancer>),
    Fragment(Arc<Fragment>),
    /// Shared with the load balancers handed out: a pool that did not change is not copied.
    Pool(Arc<Pool>),
    Certificate(Box<(ObjectRef, Arc<Material>)>),
    CaBundle(Box<(ObjectRef, Arc<CaBundle>)>),
    Credentials(Box<(ObjectRef, Arc<portico_model::Htpasswd>)>),
    Bad(Box<Diagnostic>),
}

// A pointer and a tag: the rare kinds stay boxed.
const _: () = assert!(std::mem::size_of::<Item>() <= 16);

#[derive(Debug, Clone)]
struct Cached {
    mod_revision: i64,
    item: Item,
}

/// Turns views of the `desired/` subtree into [`Desired`] states. Keeps what it decoded, so a
/// view that changed a few keys costs a few decodes, and a load balancer whose header and
/// fragments did not change keeps its listeners (the same `Arc`).
#[derive(Debug, Default)]
pub struct Decoder {
    cache: BTreeMap<Key, Cached>,
    listeners: BTreeMap<LoadBalancerId, Assembled>,
    decoded_once: bool,
}

impl Decoder {
    /// The desired state of `view`, with its delta from the previous call.
    pub fn decode(&mut self, view: &View) -> Desired {
        let mut changed = Vec::new();
        let before = self.cache.len();
        let mut kept = 0;
        self.cache.retain(|key, _| {
            let keep = view.entries.contains_key(key);
            kept += usize::from(keep);
            keep
        });
        let removed = before - kept;
        for (key, entry) in view.entries.iter() {
            if !key.starts_with(DESIRED) {
                continue;
            }
            if self.cache.get(key).map(|c| c.mod_revision) == Some(entry.mod_revision) {
                continue;
            }
            let existed = self.cache.contains_key(key);
            let item = decode_item(key, &entry.value);
            changed.push((key.clone(), existed, matches!(item, Item::Pool(_))));
            let mod_revision = entry.mod_revision;
            self.cache
                .insert(key.clone(), Cached { mod_revision, item });
        }
        let delta = self.delta(&changed, removed);
        self.decoded_once = true;
        let mut desired = self.assemble();
        desired.revision = u64::try_from(view.revision).unwrap_or(0);
        desired.delta = delta;
        desired
    }

    /// Members only when every changed key is a pool that existed and nothing was removed.
    fn delta(&self, changed: &[(Key, bool, bool)], removed: usize) -> Delta {
        let pools_only = changed.iter().all(|(_, existed, pool)| *existed && *pool);
        if !self.decoded_once || removed > 0 || !pools_only {
            return Delta::Full;
        }
        let pools = changed
            .iter()
            .filter_map(|(key, _, _)| match self.cache.get(key) {
                Some(Cached {
                    item: Item::Pool(p),
                    ..
                }) => Some(p.id),
                _ => None,
            });
        Delta::Members(pools.collect::<HashSet<PoolId>>())
    }

    fn assemble(&mut self) -> Desired {
        let mut diagnostics = Vec::new();
        let mut certificates = Certificates::new();
        let mut ca_bundles = CaBundles::new();
        let mut credentials = portico_model::Credentials::new();
        let mut parts: BTreeMap<&str, LbParts<'_>> = BTreeMap::new();
        for (key, cached) in &self.cache {
            let lb_key = lb_of(key);
            match &cached.item {
                Item::Bad(d) => diagnostics.push(Diagnostic::clone(d)),
                Item::Certificate(c) => {
                    certificates.insert(c.0.clone(), c.1.clone());
                }
                Item::CaBundle(c) => {
                    ca_bundles.insert(c.0.clone(), c.1.clone());
                }
                Item::Credentials(c) => {
                    credentials.insert(c.0.clone(), c.1.clone());
                }
                Item::LoadBalancer(lb) => {
                    let p = parts.entry(lb_key.unwrap_or(key)).or_default();
                    p.header = Some((key, cached.mod_revision, lb));
                }
                Item::Fragment(f) => {
                    let p = parts.entry(lb_key.unwrap_or(key)).or_default();
                    p.fragments.push((key, cached.mod_revision, f));
                }
                Item::Pool(pool) => {
                    let p = parts.entry(lb_key.unwrap_or(key)).or_default();
                    p.pools.push(pool);
                }
            }
        }
        let mut load_balancers = Vec::with_capacity(parts.len());
        let mut listeners = BTreeMap::new();
        let mut rebuilt = Rebuilt::default();
        for (lb_key, p) in parts {
            let Some((_, revision, header)) = p.header else {
                let object = ObjectRef::new("StoreKey", "", lb_key);
                let message = "pools or policies of a load balancer that is not in the store";
                diagnostics.push(Diagnostic::error(object, "key", message));
                continue;
            };
            let previous = self.listeners.remove(&header.id);
            let assembled = Assembled::of(previous, (revision, header), &p.fragments);
            diagnostics.extend(assembled.diagnostics.iter().cloned());
            if let Some(r) = &assembled.rebuilt {
                rebuilt.load_balancers.insert(header.id, r.clone());
            }
            load_balancers.push(LoadBalancer {
                listeners: assembled.listeners.clone(),
                pools: p.pools.into_iter().map(Arc::clone).collect(),
                ..LoadBalancer::clone(header)
            });
            listeners.insert(header.id, assembled);
        }
        self.listeners = listeners;
        diagnostics.sort();
        diagnostics.dedup();
        Desired {
            revision: 0,
            model: Arc::new(Model { load_balancers }),
            certificates,
            ca_bundles,
            credentials,
            delta: Delta::Full,
            diagnostics,
            rebuilt,
            ..Desired::default()
        }
    }
}

/// What the cache holds for one load balancer, in key order.
#[derive(Default)]
struct LbParts<'c> {
    header: Option<(&'c Key, i64, &'c Arc<LoadBalancer>)>,
    fragments: Vec<Part<'c>>,
    pools: Vec<&'c Arc<Pool>>,
}

/// `desired/lb/<uuid>` for any key below a load balancer.
fn lb_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(DESIRED)?.strip_prefix("lb/")?;
    let end = rest.find('/').unwrap_or(rest.len());
    Some(&key[..DESIRED.len() + "lb/".len() + end])
}

/// What kind of value a key holds.
fn kind_of(key: &str) -> Option<&'static str> {
    let rest = key.strip_prefix(DESIRED)?;
    if rest.starts_with("cert/") {
        return Some(KIND_CERTIFICATE);
    }
    if rest.starts_with("ca/") {
        return Some(KIND_CA_BUNDLE);
    }
    if rest.starts_with("auth/") {
        return Some(KIND_CREDENTIALS);
    }
    let lb = rest.strip_prefix("lb/")?;
    match lb.split('/').collect::<Vec<_>>().as_slice() {
        [_] => Some(KIND_LOAD_BALANCER),
        [_, "src", _] => Some(KIND_FRAGMENT),
        [_, "pool", _] => Some(KIND_POOL),
        _ => None,
    }
}

fn decode_item(key: &str, value: &[u8]) -> Item {
    let bad = |message: String| {
        let object = ObjectRef::new("StoreKey", "", key);
        Item::Bad(Box::new(Diagnostic::error(object, "value", message)))
    };
    let Some(kind) = kind_of(key) else {
        return bad("not a key of the desired state's layout".to_owned());
    };
    let result =
        match kind {
            KIND_LOAD_BALANCER => parse::<LoadBalancer>(value, kind).and_then(|lb| {
                let expected = key.rsplit('/').next().unwrap_or_default();
                if lb.id.to_string() == expected {
                    Ok(Item::LoadBalancer(Arc::new(lb)))
                } else {
                    Err(format!("holds load balancer {}, not {expected}", lb.id))
                }
            }),
            KIND_FRAGMENT => parse::<Fragment>(value, kind)
                .and_then(|f| fragment_of(key, f))
                .map(|f| Item::Fragment(Arc::new(f))),
            KIND_POOL => parse::<Pool>(value, kind).map(|p| Item::Pool(Arc::new(p))),
            KIND_CA_BUNDLE => parse::<CaBundleValue>(value, kind).and_then(|c| {
                match CaBundle::from_pem(c.ca_pem.as_bytes()) {
                    Ok(b) => Ok(Item::CaBundle(Box::new((c.secret, Arc::new(b))))),
                    Err(e) => Err(format!("CA bundle of {}: {e}", c.secret)),
                }
            }),
            KIND_CREDENTIALS => parse::<CredentialsValue>(value, kind).and_then(|c| {
                let entries = c.users.iter().map(|(u, h)| (u.as_str(), h.as_str()));
                match portico_model::Htpasswd::from_map(entries) {
                    Ok(users) => Ok(Item::Credentials(Box::new((c.secret, Arc::new(users))))),
                    Err(e) => Err(format!("basic-auth entries of {}: {e}", c.secret)),
                }
            }),
            _ => parse::<CertificateValue>(value, kind).and_then(|c| {
                match Material::from_pem(c.chain_pem.as_bytes(), c.key_pem.as_bytes()) {
                    Ok(m) => Ok(Item::Certificate(Box::new((c.secret, Arc::new(m))))),
                    Err(e) => Err(format!("certificate of {}: {e}", c.secret)),
                }
            }),
        };
    result.unwrap_or_else(bad)
}

/// `fragment` when it is the one its key names: the key ends in its source's hash and every
/// policy and SNI entry in it comes from that source (the in-place assembly relies on both).
/// Its policies then share one copy of their source, as the translation's do (each was read
/// with its own: 40,000 copies at 10,000 Ingresses).
fn fragment_of(key: &str, mut fragment: Fragment) -> Result<Fragment, String> {
    let expected = key.rsplit('/').next().unwrap_or_default();
    if object_hash(&fragment.source) != expected {
        return Err(format!(
            "holds the fragment of {}, not of {expected}",
            fragment.source
        ));
    }
    let source = &fragment.source;
    let parts = fragment.listeners.iter();
    let foreign = parts
        .flat_map(|part| {
            let policies = part.policies.iter().map(|p| p.source.as_ref());
            policies.chain(part.sni.iter().map(|s| &s.source))
        })
        .find(|s| *s != source);
    if let Some(other) = foreign {
        return Err(format!("an entry of {other} in the fragment of {source}"));
    }
    // The first policy's copy, kept: no new allocation.
    let first = fragment
        .listeners
        .iter()
        .flat_map(|part| &part.policies)
        .next();
    let Some(shared) = first.map(|p| Arc::clone(&p.source)) else {
        return Ok(fragment);
    };
    let policies = (fragment.listeners.iter_mut()).flat_map(|part| part.policies.iter_mut());
    for policy in policies {
        if let Some(policy) = Arc::get_mut(policy) {
            policy.source = Arc::clone(&shared);
        }
    }
    Ok(fragment)
}

/// An envelope read without its data, to check schema and kind before the data's type.
#[derive(serde::Deserialize)]
struct Head {
    schema: u32,
    kind: String,
}

pub(super) fn parse<T: DeserializeOwned>(value: &[u8], kind: &str) -> Result<T, String> {
    let envelope: Head =
        serde_json::from_slice(value).map_err(|e| format!("not a value envelope: {e}"))?;
    if envelope.schema != SCHEMA {
        return Err(format!(
            "schema {} is not the one this version reads ({SCHEMA})",
            envelope.schema
        ));
    }
    if envelope.kind != kind {
        return Err(format!("kind {:?} where {kind:?} belongs", envelope.kind));
    }
    let full: Envelope<T> = serde_json::from_slice(value).map_err(|e| format!("{kind}: {e}"))?;
    Ok(full.data)
}
