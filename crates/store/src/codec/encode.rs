//! Desired state → key-value entries.

use super::{
    CaBundleValue, CertificateValue, CredentialsValue, DESIRED, Envelope, Fragment, KIND_CA_BUNDLE,
    KIND_CERTIFICATE, KIND_CREDENTIALS, KIND_FRAGMENT, KIND_LOAD_BALANCER, KIND_POOL, ListenerPart,
    object_hash,
};
use crate::kv::{self, Key, Op};
use crate::{CaBundles, Certificates, Desired, SCHEMA};
use bytes::Bytes;
use portico_model::Credentials;
use portico_model::{
    L7Policy, Listener, ListenerId, ListenerTls, LoadBalancer, LoadBalancerId, Model, ObjectRef,
    Pool, PoolId, Rebuilt, SniCertificate,
};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
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

/// [`encode`] one key and value at a time, none kept: for a writer that streams them (the
/// agent's cache), so that the state is not held encoded, whole, beside itself. The same keys
/// and values as [`encode`], certificates, CA bundles and credentials first, then each load
/// balancer's header, fragments and pools.
pub fn encode_each(
    model: &Model,
    certificates: &Certificates,
    ca_bundles: &CaBundles,
    credentials: &Credentials,
    mut out: impl FnMut(&str, &[u8]),
) {
    for (secret, material) in certificates {
        let mut one = BTreeMap::new();
        encode_certificates(
            &Certificates::from([(secret.clone(), material.clone())]),
            &mut one,
        );
        one.iter().for_each(|(key, value)| out(key, value));
    }
    let mut others = BTreeMap::new();
    encode_ca_bundles(ca_bundles, &mut others);
    encode_credentials(credentials, &mut others);
    others.iter().for_each(|(key, value)| out(key, value));
    for lb in &model.load_balancers {
        let base = format!("{DESIRED}lb/{}", lb.id);
        let header = LoadBalancer {
            listeners: Arc::new(lb.listeners.iter().map(skeleton).collect()),
            pools: vec![],
            ..lb.clone()
        };
        out(&base, &envelope(KIND_LOAD_BALANCER, &header));
        let entries = by_source(lb);
        for group in entries.chunk_by(|a, b| a.source == b.source) {
            let mut parts: BTreeMap<ListenerId, (Vec<&Arc<L7Policy>>, Vec<&SniCertificate>)> =
                BTreeMap::new();
            for entry in group {
                let part = parts.entry(entry.listener).or_default();
                match entry.item {
                    Ok(policy) => part.0.push(policy),
                    Err(sni) => part.1.push(sni),
                }
            }
            let source = group[0].source;
            let value = envelope(KIND_FRAGMENT, &fragment(source, &parts));
            out(&key_of(&base, source), &value);
        }
        for pool in &lb.pools {
            out(
                &format!("{base}/pool/{}", pool.id),
                &envelope(KIND_POOL, pool),
            );
        }
    }
}

/// How many keys [`encode_each`] gives, without encoding anything.
pub fn count(
    model: &Model,
    certificates: &Certificates,
    ca_bundles: &CaBundles,
    credentials: &Credentials,
) -> usize {
    let lbs = model.load_balancers.iter().map(|lb| {
        let sources = by_source(lb).chunk_by(|a, b| a.source == b.source).count();
        1 + sources + lb.pools.len()
    });
    certificates.len() + ca_bundles.len() + credentials.len() + lbs.sum::<usize>()
}

/// A policy or an SNI entry of a load balancer's listener, by the source it comes from.
struct BySource<'lb> {
    source: &'lb ObjectRef,
    listener: ListenerId,
    item: Result<&'lb Arc<L7Policy>, &'lb SniCertificate>,
}

/// A load balancer's policies and SNI entries ordered by source, then listener, each
/// listener's in its order: one small entry each, not a map per source.
fn by_source(lb: &LoadBalancer) -> Vec<BySource<'_>> {
    let mut entries = Vec::new();
    for listener in lb.listeners.iter() {
        let policies = listener.policies.iter().map(|p| BySource {
            source: &p.source,
            listener: listener.id,
            item: Ok(p),
        });
        let sni = listener.tls.iter().flat_map(|t| &t.sni).map(|s| BySource {
            source: &s.source,
            listener: listener.id,
            item: Err(s),
        });
        entries.extend(policies.chain(sni));
    }
    // Stable: each listener's entries keep their order.
    entries.sort_by(|a, b| (a.source, a.listener).cmp(&(b.source, b.listener)));
    entries
}

/// [`encode`] for one state after another, as the changes to what the store holds: the
/// encoder remembers what it wrote. A load balancer whose listeners are the ones it encoded
/// last (the same `Arc`: an endpoint change) is not walked; a pool that is the one it encoded
/// last (the same `Arc`: the translation reuses unchanged pools) is not hashed; a fragment or
/// a pool whose content hash did not change keeps its bytes without being serialized again.
/// So a one-Ingress change costs a walk of the changed load balancer's policies, and an
/// endpoint change a look at each pool, not a serialization or a diff of all of it.
#[derive(Debug, Default)]
pub struct Encoder {
    /// What each load balancer's keys hold as last written.
    lbs: HashMap<LoadBalancerId, Written>,
    /// Certificates, CA bundles, credentials and the caller's other keys as last written.
    others: BTreeMap<Key, Bytes>,
    /// What the store holds, when it was read rather than written by this encoder: the next
    /// [`Encoder::changes`] is a diff against it.
    stored: Option<BTreeMap<Key, Bytes>>,
    /// Fragments and pools whose content the last call hashed.
    hashed: usize,
}

/// One source's fragment as last written: its key, content hash (positions left out) and bytes.
#[derive(Debug)]
struct Stored {
    key: Key,
    hash: u64,
    bytes: Bytes,
}

/// A state to encode: the model and the material it names.
type State<'d> = (&'d Model, &'d Certificates, &'d CaBundles, &'d Credentials);

/// A source's fragment as last written, if it was, with the source's identity.
type Last = Option<(ObjectRef, Stored)>;

/// One load balancer's keys as last written.
#[derive(Debug)]
struct Written {
    header: (Key, Bytes),
    /// The listeners the fragments were taken from (kept, so that the same pointer is the
    /// same content).
    listeners: Arc<Vec<Listener>>,
    /// By source.
    fragments: HashMap<ObjectRef, Stored>,
    /// By id: the pools' keys, the pools as encoded (kept for the same reason), their hashes
    /// and bytes.
    pools: HashMap<PoolId, (Key, Arc<Pool>, u64, Bytes)>,
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
        self.changes(
            model,
            certificates,
            ca_bundles,
            credentials,
            BTreeMap::new(),
        );
        self.written()
    }

    /// Takes `stored` as what the store holds now (read from it): the next
    /// [`Encoder::changes`] encodes everything again and is the diff against it.
    pub fn assume(&mut self, stored: BTreeMap<Key, Bytes>) {
        *self = Encoder {
            stored: Some(stored),
            ..Encoder::default()
        };
    }

    /// The ops that turn what the store holds (as this encoder last wrote, or was told with
    /// [`Encoder::assume`]) into the encoding of `model`, `certificates`, `ca_bundles`,
    /// `credentials` and `others` (more keys, e.g. placements), ordered by key. This encoder
    /// then takes them as written: when they are not, [`Encoder::assume`] what is.
    pub fn changes(
        &mut self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
        credentials: &Credentials,
        others: BTreeMap<Key, Bytes>,
    ) -> Vec<Op> {
        let state = (model, certificates, ca_bundles, credentials);
        self.changes_after(state, &Rebuilt::default(), others)
    }

    /// [`Encoder::changes`] of `desired`: where its `rebuilt` names the sources a load
    /// balancer's new listeners changed since the ones this encoder last wrote, only those
    /// sources' fragments are looked at (the others are not even hashed).
    pub fn desired_changes(&mut self, desired: &Desired, others: BTreeMap<Key, Bytes>) -> Vec<Op> {
        let state = (
            &*desired.model,
            &desired.certificates,
            &desired.ca_bundles,
            &desired.credentials,
        );
        self.changes_after(state, &desired.rebuilt, others)
    }

    fn changes_after(
        &mut self,
        (model, certificates, ca_bundles, credentials): State<'_>,
        rebuilt: &Rebuilt,
        mut others: BTreeMap<Key, Bytes>,
    ) -> Vec<Op> {
        encode_certificates(certificates, &mut others);
        encode_ca_bundles(ca_bundles, &mut others);
        encode_credentials(credentials, &mut others);
        self.hashed = 0;
        let mut ops = kv::changes(&self.others, &others);
        self.others = others;
        let mut lbs = HashMap::with_capacity(model.load_balancers.len());
        for lb in &model.load_balancers {
            let last = self.lbs.remove(&lb.id);
            lbs.insert(
                lb.id,
                self.encode_load_balancer(lb, last, rebuilt, &mut ops),
            );
        }
        for (_, gone) in std::mem::replace(&mut self.lbs, lbs) {
            ops.push(Op::Delete { key: gone.header.0 });
            let fragments = gone.fragments.into_values().map(|s| s.key);
            let keys = fragments.chain(gone.pools.into_values().map(|(key, ..)| key));
            ops.extend(keys.map(|key| Op::Delete { key }));
        }
        if let Some(stored) = self.stored.take() {
            ops = kv::changes(&stored, &self.written());
        }
        ops.sort_by(|a, b| a.key().cmp(b.key()));
        ops
    }

    /// How many fragments and pools the last call hashed (the rest it did not look into).
    pub fn hashed(&self) -> usize {
        self.hashed
    }

    /// Every key as last written.
    fn written(&self) -> BTreeMap<Key, Bytes> {
        let mut out = self.others.clone();
        for w in self.lbs.values() {
            out.insert(w.header.0.clone(), w.header.1.clone());
            let fragments = w
                .fragments
                .values()
                .map(|s| (s.key.clone(), s.bytes.clone()));
            out.extend(fragments);
            out.extend(w.pools.values().map(|(k, _, _, b)| (k.clone(), b.clone())));
        }
        out
    }

    fn encode_load_balancer(
        &mut self,
        lb: &LoadBalancer,
        last: Option<Written>,
        rebuilt: &Rebuilt,
        ops: &mut Vec<Op>,
    ) -> Written {
        let base = format!("{DESIRED}lb/{}", lb.id);
        let header = LoadBalancer {
            listeners: Arc::new(lb.listeners.iter().map(skeleton).collect()),
            pools: vec![],
            ..lb.clone()
        };
        let header = (base.clone(), envelope(KIND_LOAD_BALANCER, &header));
        let (mut fragments, mut pools, last_listeners) = match last {
            Some(w) => {
                if w.header.1 != header.1 {
                    put(ops, &header);
                }
                (w.fragments, w.pools, Some(w.listeners))
            }
            None => {
                put(ops, &header);
                (HashMap::new(), HashMap::new(), None)
            }
        };
        let last_listeners = last_listeners.as_ref();
        let same = last_listeners.is_some_and(|l| Arc::ptr_eq(l, &lb.listeners));
        if !same {
            let only = last_listeners.and_then(|l| rebuilt.sources(&lb.id, l, &lb.listeners));
            fragments = self.encode_fragments(lb, &base, fragments, only, ops);
        }
        let mut next_pools = HashMap::with_capacity(lb.pools.len());
        for pool in &lb.pools {
            let value = match pools.remove(&pool.id) {
                Some(last) if Arc::ptr_eq(&last.1, pool) => last,
                last => {
                    self.hashed += 1;
                    let hash = hash_of(pool);
                    let (key, bytes) = match last {
                        Some((key, _, h, bytes)) if h == hash => (key, bytes),
                        last => {
                            let key =
                                last.map_or_else(|| format!("{base}/pool/{}", pool.id), |l| l.0);
                            let bytes = envelope(KIND_POOL, pool);
                            put(ops, &(key.clone(), bytes.clone()));
                            (key, bytes)
                        }
                    };
                    (key, pool.clone(), hash, bytes)
                }
            };
            next_pools.insert(pool.id, value);
        }
        ops.extend(pools.into_values().map(|(key, ..)| Op::Delete { key }));
        Written {
            header,
            listeners: lb.listeners.clone(),
            fragments,
            pools: next_pools,
        }
    }

    /// The fragments of `lb`'s listeners: those whose content hash is the last one's keep
    /// their bytes; the others are put, and the last ones that are gone deleted.
    ///
    /// One pass groups the policies and SNI entries by source and hashes them as it goes:
    /// by the source's pointer first (the translation shares one per Ingress), by its
    /// identity once per pointer; no policy is copied or collected. Only the sources whose
    /// hash changed are walked again to be serialized. With `only` (the sources the listeners
    /// changed, see [`Rebuilt`]), the other sources keep what was last written unhashed.
    fn encode_fragments(
        &mut self,
        lb: &LoadBalancer,
        base: &str,
        mut last: HashMap<ObjectRef, Stored>,
        only: Option<&HashSet<ObjectRef>>,
        ops: &mut Vec<Op>,
    ) -> HashMap<ObjectRef, Stored> {
        let mut wanted = Wanted::new(only);
        let (mut last, mut next) = match only {
            Some(only) => {
                let touched = only.iter().filter_map(|s| last.remove_entry(s)).collect();
                (touched, last)
            }
            None => (last, HashMap::new()),
        };
        let mut groups = Groups::default();
        for listener in lb.listeners.iter() {
            for policy in &listener.policies {
                if !wanted.policy(&policy.source) {
                    continue;
                }
                let h = groups.hasher(&policy.source);
                (listener.id, 0u8).hash(h);
                let L7Policy {
                    id,
                    action,
                    rules,
                    source: _,
                    options,
                    precedence,
                } = &**policy;
                (id, action, rules, options, precedence).hash(h);
            }
            for sni in listener.tls.iter().flat_map(|t| &t.sni) {
                if !wanted.sni(&sni.source) {
                    continue;
                }
                let h = groups.hasher(&sni.source);
                (listener.id, 1u8).hash(h);
                sni.hash(h);
            }
        }
        let sources = groups.sources;
        next.reserve(sources.len());
        // The sources to serialize again: their new hash and what was last written of them.
        let mut changed: HashMap<&ObjectRef, (u64, Last)> = HashMap::new();
        for (source, h) in sources {
            self.hashed += 1;
            let hash = h.finish();
            match last.remove_entry(source) {
                Some((source, stored)) if stored.hash == hash => {
                    next.insert(source, stored);
                }
                stored => {
                    changed.insert(source, (hash, stored));
                }
            }
        }
        ops.extend(last.into_values().map(|s| Op::Delete { key: s.key }));
        if changed.is_empty() {
            return next;
        }
        let mut parts: Refs<'_> = BTreeMap::new();
        let mut wanted = Wanted::new(None);
        let changed_sources: HashSet<ObjectRef> = changed.keys().map(|s| (*s).clone()).collect();
        wanted.only = Some(&changed_sources);
        for listener in lb.listeners.iter() {
            for policy in &listener.policies {
                if wanted.policy(&policy.source) {
                    let part = parts.entry(&policy.source).or_default();
                    part.entry(listener.id).or_default().0.push(policy);
                }
            }
            for sni in listener.tls.iter().flat_map(|t| &t.sni) {
                if changed.contains_key(&sni.source) {
                    let part = parts.entry(&sni.source).or_default();
                    part.entry(listener.id).or_default().1.push(sni);
                }
            }
        }
        for (source, parts) in parts {
            let Some((hash, last)) = changed.remove(source) else {
                continue;
            };
            let bytes = envelope(KIND_FRAGMENT, &fragment(source, &parts));
            let (source, stored) = match last {
                // Hashed differently (e.g. listeners reordered), the same bytes.
                Some((source, s)) if s.bytes == bytes => (source, Stored { hash, ..s }),
                last => {
                    let (source, key) = match last {
                        Some((source, s)) => (source, s.key),
                        None => (source.clone(), key_of(base, source)),
                    };
                    put(ops, &(key.clone(), bytes.clone()));
                    (source, Stored { key, hash, bytes })
                }
            };
            next.insert(source, stored);
        }
        next
    }
}

fn put(ops: &mut Vec<Op>, (key, value): &(Key, Bytes)) {
    ops.push(Op::Put {
        key: key.clone(),
        value: value.clone(),
    });
}

fn hash_of(pool: &Pool) -> u64 {
    let mut h = DefaultHasher::new();
    pool.hash(&mut h);
    h.finish()
}

/// One source's fragment as stored.
fn fragment(
    source: &ObjectRef,
    parts: &BTreeMap<ListenerId, (Vec<&Arc<L7Policy>>, Vec<&SniCertificate>)>,
) -> Fragment {
    Fragment {
        source: source.clone(),
        listeners: parts
            .iter()
            .map(|(id, (policies, sni))| ListenerPart {
                listener: *id,
                policies: policies.iter().map(|p| Arc::clone(p)).collect(),
                sni: sni.iter().map(|s| (*s).clone()).collect(),
            })
            .collect(),
    }
}

/// One source's policies and SNI entries by listener, borrowed from the model.
type Refs<'lb> = BTreeMap<
    &'lb ObjectRef,
    BTreeMap<ListenerId, (Vec<&'lb Arc<L7Policy>>, Vec<&'lb SniCertificate>)>,
>;

/// The key of `source`'s fragment in the load balancer under `base`.
fn key_of(base: &str, source: &ObjectRef) -> Key {
    format!("{base}/src/{}", object_hash(source))
}

/// Which sources' policies and SNI entries to look at: all, or those of a set, found by the
/// policy source's pointer first (one look-up by identity per distinct pointer).
struct Wanted<'s> {
    only: Option<&'s HashSet<ObjectRef>>,
    by_pointer: HashMap<*const ObjectRef, bool>,
    /// The last policy's source and answer: a source's policies are mostly next to each other.
    last: (*const ObjectRef, bool),
}

impl<'s> Wanted<'s> {
    fn new(only: Option<&'s HashSet<ObjectRef>>) -> Self {
        Wanted {
            only,
            by_pointer: HashMap::new(),
            last: (std::ptr::null(), false),
        }
    }

    fn policy(&mut self, source: &Arc<ObjectRef>) -> bool {
        let Some(only) = self.only else {
            return true;
        };
        let pointer = Arc::as_ptr(source);
        if self.last.0 == pointer {
            return self.last.1;
        }
        let wanted = *(self.by_pointer)
            .entry(pointer)
            .or_insert_with(|| only.contains(&**source));
        self.last = (pointer, wanted);
        wanted
    }

    fn sni(&self, source: &ObjectRef) -> bool {
        self.only.is_none_or(|only| only.contains(source))
    }
}

/// A load balancer's sources as its listeners name them, each with the hash of what it gives
/// them so far.
#[derive(Default)]
struct Groups<'lb> {
    /// By the source's pointer: one look-up by identity per distinct pointer.
    by_pointer: HashMap<*const ObjectRef, usize>,
    by_identity: HashMap<&'lb ObjectRef, usize>,
    sources: Vec<(&'lb ObjectRef, DefaultHasher)>,
}

impl<'lb> Groups<'lb> {
    fn hasher(&mut self, source: &'lb ObjectRef) -> &mut DefaultHasher {
        let Groups {
            by_pointer,
            by_identity,
            sources,
        } = self;
        let pointer: *const ObjectRef = source;
        let i = *by_pointer.entry(pointer).or_insert_with(|| {
            *by_identity.entry(source).or_insert_with(|| {
                sources.push((source, DefaultHasher::new()));
                sources.len() - 1
            })
        });
        &mut sources[i].1
    }
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

/// A listener without its policies and SNI entries (they live in the fragments); neither is
/// copied on the way.
fn skeleton(listener: &Listener) -> Listener {
    let Listener {
        id,
        name,
        protocol,
        port,
        policies: _,
        default_pool,
        default_source,
        tls,
    } = listener;
    let tls = tls.as_ref().map(|tls| {
        let ListenerTls {
            default_certificate,
            sni: _,
            passthrough,
            refused,
            http3_off,
        } = tls;
        ListenerTls {
            default_certificate: default_certificate.clone(),
            sni: vec![],
            passthrough: passthrough.clone(),
            refused: refused.clone(),
            http3_off: *http3_off,
        }
    });
    Listener {
        id: *id,
        name: name.clone(),
        protocol: *protocol,
        port: *port,
        policies: vec![],
        default_pool: *default_pool,
        default_source: default_source.clone(),
        tls,
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
