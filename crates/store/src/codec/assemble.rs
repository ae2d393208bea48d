//! Pure: a load balancer's listeners from its header and its fragments, and again after a
//! few fragments changed, in place.
//!
//! The full assembly concatenates the fragments' policies in key order and sorts them stably
//! into evaluation order ([`order::sort`]); SNI entries likewise by host. So among policies
//! whose order keys tie, the one of the fragment with the lower key goes first, and within a
//! fragment they keep its order. A fragment's key ends in the hash of its source
//! (`…/src/<hash>`, checked when read), so that tie-break is the source's hash: a change applied
//! in place removes the old fragment's policies (by source) and inserts the new ones where the
//! full assembly would have put them, without cloning and sorting the others again.

use super::{Fragment, object_hash};
use crate::kv::Key;
use portico_model::{
    Diagnostic, L7Policy, Listener, LoadBalancer, ObjectRef, RebuiltListeners, SniCertificate,
    order,
};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// At most this share of a load balancer's fragments (1/n) changed at once is applied in place;
/// more is assembled again from every fragment.
const IN_PLACE_SHARE: usize = 4;

/// A load balancer's listeners as last assembled, and what from.
#[derive(Debug)]
pub(super) struct Assembled {
    /// The mod revision of the load balancer's header.
    header: i64,
    /// Its fragments by key, with their mod revisions.
    fragments: BTreeMap<Key, (i64, Arc<Fragment>)>,
    pub(super) listeners: Arc<Vec<Listener>>,
    /// Problems found assembling them (a fragment naming a listener the load balancer lacks).
    pub(super) diagnostics: Vec<Diagnostic>,
    /// When these listeners were made from the previous ones in place: those and the sources
    /// whose fragments changed.
    pub(super) rebuilt: Option<RebuiltListeners>,
}

/// One fragment as the decoder's cache holds it: key, mod revision, content.
pub(super) type Part<'c> = (&'c Key, i64, &'c Arc<Fragment>);

/// One fragment's change: what it was, what it is (`None`: absent).
type Change = (Key, Option<Arc<Fragment>>, Option<Arc<Fragment>>);

impl Assembled {
    /// The listeners of `header` with `fragments` (in key order): `previous` as it was when
    /// nothing changed, `previous` with the changed fragments applied in place when few did,
    /// else assembled from every fragment.
    pub(super) fn of(
        previous: Option<Assembled>,
        header: (i64, &LoadBalancer),
        fragments: &[Part<'_>],
    ) -> Assembled {
        let Some(mut previous) = previous.filter(|p| p.header == header.0) else {
            return Self::full(header, fragments);
        };
        previous.rebuilt = None;
        let changes = changes(&previous.fragments, fragments);
        if changes.is_empty() {
            return previous;
        }
        let few = changes.len() <= fragments.len() / IN_PLACE_SHARE + 1;
        if !few || !previous.diagnostics.is_empty() || !in_place_fits(header.1, &changes) {
            return Self::full(header, fragments);
        }
        let mut listeners = Vec::clone(&previous.listeners);
        apply(&mut listeners, &changes);
        let before = std::mem::replace(&mut previous.listeners, Arc::new(listeners));
        let mut rebuilt = RebuiltListeners::new(&before, &previous.listeners);
        let changed = changes
            .iter()
            .flat_map(|(_, old, new)| old.iter().chain(new));
        rebuilt.sources.extend(changed.map(|f| f.source.clone()));
        previous.rebuilt = Some(rebuilt);
        for (key, _, new) in changes {
            match new {
                Some(new) => {
                    let revision = fragments
                        .binary_search_by(|(k, _, _)| k.as_str().cmp(&key))
                        .map_or(0, |i| fragments[i].1);
                    previous.fragments.insert(key, (revision, new));
                }
                None => {
                    previous.fragments.remove(&key);
                }
            }
        }
        previous
    }

    /// From every fragment: the header's listeners with every fragment's policies (in
    /// evaluation order) and SNI entries (by host).
    fn full((revision, header): (i64, &LoadBalancer), fragments: &[Part<'_>]) -> Assembled {
        let mut diagnostics = Vec::new();
        let mut listeners: Vec<Listener> = header.listeners.as_ref().clone();
        for (key, _, fragment) in fragments {
            for part in &fragment.listeners {
                let Some(listener) = listeners.iter_mut().find(|l| l.id == part.listener) else {
                    let object = ObjectRef::new("StoreKey", "", key);
                    let message = format!("listener {} is not in the load balancer", part.listener);
                    diagnostics.push(Diagnostic::error(object, "data.listeners", message));
                    continue;
                };
                listener.policies.extend(part.policies.iter().cloned());
                if let Some(tls) = &mut listener.tls {
                    tls.sni.extend(part.sni.iter().cloned());
                }
            }
        }
        for listener in &mut listeners {
            order::sort(&mut listener.policies);
            if let Some(tls) = &mut listener.tls {
                tls.sni.sort_by(|a, b| a.host.cmp(&b.host));
            }
        }
        let fragments = fragments
            .iter()
            .map(|(k, r, f)| ((*k).clone(), (*r, Arc::clone(f))))
            .collect();
        Assembled {
            header: revision,
            fragments,
            listeners: Arc::new(listeners),
            diagnostics,
            rebuilt: None,
        }
    }
}

/// The fragments that differ between `old` and `new` (both in key order), by mod revision.
fn changes(old: &BTreeMap<Key, (i64, Arc<Fragment>)>, new: &[Part<'_>]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut old = old.iter().peekable();
    let mut new = new.iter().peekable();
    loop {
        let order = match (old.peek(), new.peek()) {
            (None, None) => return out,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((ok, _)), Some((nk, _, _))) => ok.as_str().cmp(nk.as_str()),
        };
        match order {
            Ordering::Less => {
                if let Some((key, (_, fragment))) = old.next() {
                    out.push((key.clone(), Some(fragment.clone()), None));
                }
            }
            Ordering::Greater => {
                if let Some((key, _, fragment)) = new.next() {
                    out.push(((*key).clone(), None, Some(Arc::clone(fragment))));
                }
            }
            Ordering::Equal => {
                if let (Some((key, (was, before))), Some((_, is, after))) = (old.next(), new.next())
                    && was != is
                {
                    out.push((key.clone(), Some(before.clone()), Some(Arc::clone(after))));
                }
            }
        }
    }
}

/// Whether `changes` can be applied in place: the header's listeners carry no policies or SNI
/// entries of their own (as the encoder writes them), and every new fragment names only
/// listeners the header has.
fn in_place_fits(header: &LoadBalancer, changes: &[Change]) -> bool {
    let bare = header
        .listeners
        .iter()
        .all(|l| l.policies.is_empty() && l.tls.as_ref().is_none_or(|t| t.sni.is_empty()));
    let known = |fragment: &Fragment| {
        (fragment.listeners.iter())
            .all(|part| header.listeners.iter().any(|l| l.id == part.listener))
    };
    bare && changes
        .iter()
        .filter_map(|(_, _, new)| new.as_deref())
        .all(known)
}

/// Applies `changes` to `listeners`: each old fragment's policies and SNI entries out, each new
/// one's in where a full assembly puts them.
fn apply(listeners: &mut [Listener], changes: &[Change]) {
    for listener in listeners.iter_mut() {
        let gone: Vec<&ObjectRef> = (changes.iter())
            .filter_map(|(_, old, _)| old.as_deref())
            .filter(|f| f.listeners.iter().any(|p| p.listener == listener.id))
            .map(|f| &f.source)
            .collect();
        if !gone.is_empty() {
            (listener.policies).retain(|p| !gone.contains(&p.source.as_ref()));
            if let Some(tls) = &mut listener.tls {
                tls.sni.retain(|s| !gone.contains(&&s.source));
            }
        }
        let parts = (changes.iter())
            .filter_map(|(_, _, new)| new.as_deref())
            .flat_map(|f| f.listeners.iter().filter(|p| p.listener == listener.id));
        for part in parts {
            for policy in &part.policies {
                insert_policy(&mut listener.policies, policy.clone());
            }
            if let Some(tls) = &mut listener.tls {
                for sni in &part.sni {
                    insert_sni(&mut tls.sni, sni.clone());
                }
            }
        }
    }
}

/// `policy` after every policy that goes before it or ties with it and comes from a fragment
/// with a key no greater (the source's hash, computed on a tie only).
fn insert_policy(policies: &mut Vec<Arc<L7Policy>>, policy: Arc<L7Policy>) {
    let key = order::key(&policy);
    let mut hash = None;
    let at = policies.partition_point(|p| match order::key(p).cmp(&key) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => {
            let own = hash.get_or_insert_with(|| object_hash(&policy.source));
            object_hash(&p.source) <= *own
        }
    });
    policies.insert(at, policy);
}

/// `sni` after every entry of a lower host, or of its host from a fragment with a key no
/// greater.
fn insert_sni(entries: &mut Vec<SniCertificate>, sni: SniCertificate) {
    let mut hash = None;
    let at = entries.partition_point(|s| match s.host.cmp(&sni.host) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => {
            let own = hash.get_or_insert_with(|| object_hash(&sni.source));
            object_hash(&s.source) <= *own
        }
    });
    entries.insert(at, sni);
}
