//! The objects, the one global resourceVersion counter, the change history that watches replay,
//! and the open watches. One writer lock; nothing awaits while holding it.
//!
//! Differs from the real server: the history is kept whole until [`Store::compact`] (the real
//! one keeps a window); finalizers are ignored (a delete removes at once); a write that changes
//! nothing is skipped without a new resourceVersion, like the real server.

use crate::meta;
use crate::resources::{self, TypeId};
use crate::status::ApiError;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Type, namespace (`""` for cluster-scoped types), name; ordered as the real server lists.
pub type Key = (TypeId, String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One write, as the history keeps it and watches receive it.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub key: Key,
    pub kind: ChangeKind,
    /// The object after the change; for a delete, the last state at the delete's resourceVersion.
    pub object: Arc<Value>,
    /// The object before the change (`None` for an add).
    pub previous: Option<Arc<Value>>,
}

/// What an open watch receives from the store.
#[derive(Debug)]
pub enum WatchMsg {
    Change(Arc<Change>),
    /// End the stream abruptly (fault injection).
    Cut,
}

/// Where a new watch starts and what it was sent to catch up.
#[derive(Debug)]
pub struct Subscription {
    /// Current objects of the type (for a watch without a resourceVersion).
    pub initial: Vec<Arc<Value>>,
    /// Changes of the type after the requested resourceVersion.
    pub replay: Vec<Arc<Change>>,
    /// The resourceVersion at subscription; every later change arrives on `changes`.
    pub rv: u64,
    pub changes: UnboundedReceiver<WatchMsg>,
}

/// Delete preconditions (`DeleteOptions.preconditions`).
#[derive(Debug, Default)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

#[derive(Debug, Default)]
pub struct Store {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    /// Every change with a resourceVersion above this is in `history`.
    compacted: u64,
    watchers: Vec<UnboundedSender<WatchMsg>>,
}

impl Store {
    pub fn new() -> Self {
        let store = Self::default();
        store.lock().rv = 1;
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The resourceVersion of the last write.
    pub fn current(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, key: &Key) -> Option<Arc<Value>> {
        self.lock().objects.get(key).cloned()
    }

    /// Creates `object` (its namespace already settled by the caller); 409 if it exists.
    pub fn create(&self, ty: TypeId, mut object: Value, dry_run: bool) -> Result<Value, ApiError> {
        let def = resources::get(ty);
        let mut state = self.lock();
        settle_namespace(def, &mut object);
        let namespace = meta::namespace(&object).unwrap_or_default().to_string();
        let name = match (meta::name(&object), meta::field(&object, "generateName")) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => state.generate_name(ty, &namespace, prefix),
            (None, None) => {
                return Err(ApiError::invalid(
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        let key = (ty, namespace, name.clone());
        if state.objects.contains_key(&key) {
            return Err(ApiError::already_exists(def, &name));
        }
        meta::set(&mut object, "name", name);
        meta::remove(&mut object, "resourceVersion");
        meta::stamp_created(&mut object, def, state.rv + 1);
        if !dry_run {
            state.record(key, ChangeKind::Added, object.clone());
        }
        Ok(object)
    }

    /// Read-modify-write of an existing object: `change` proposes the new object from the stored
    /// one; a proposed `metadata.resourceVersion` other than the stored one is a 409 Conflict.
    pub fn update(
        &self,
        key: &Key,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let def = resources::get(key.0);
        let mut state = self.lock();
        let old = state.existing(key)?;
        let mut new = change(&old)?;
        check_identity(&mut new, key)?;
        let stored_rv = meta::field(&old, "resourceVersion")
            .unwrap_or_default()
            .to_string();
        if meta::field(&new, "resourceVersion").is_some_and(|rv| rv != stored_rv) {
            return Err(ApiError::conflict(def, &key.2));
        }
        meta::stamp_updated(&mut new, &old, def, 0);
        meta::set(&mut new, "resourceVersion", stored_rv);
        if new == *old {
            return Ok(new);
        }
        meta::set(&mut new, "resourceVersion", (state.rv + 1).to_string());
        if !dry_run {
            state.record(key.clone(), ChangeKind::Modified, new.clone());
        }
        Ok(new)
    }

    /// Create or unconditional replace (status included), as a test harness wants.
    pub fn apply(&self, ty: TypeId, mut object: Value) -> Result<Value, ApiError> {
        settle_namespace(resources::get(ty), &mut object);
        let key =
            key_of(ty, &object).ok_or_else(|| ApiError::invalid("metadata.name is required"))?;
        match self.update(&key, false, |_| Ok(without_version(object.clone()))) {
            Err(e) if e.code == 404 => self.create(ty, object, false),
            other => other,
        }
    }

    /// Deletes at once (finalizers are not honoured); returns the object at the delete's
    /// resourceVersion.
    pub fn delete(&self, key: &Key, pre: &Preconditions, dry_run: bool) -> Result<Value, ApiError> {
        let def = resources::get(key.0);
        let mut state = self.lock();
        let old = state.existing(key)?;
        let differs = |want: &Option<String>, field| {
            want.as_deref()
                .is_some_and(|w| meta::field(&old, field) != Some(w))
        };
        if differs(&pre.uid, "uid") || differs(&pre.resource_version, "resourceVersion") {
            return Err(ApiError::conflict(def, &key.2));
        }
        let mut gone = (*old).clone();
        meta::set(&mut gone, "resourceVersion", (state.rv + 1).to_string());
        if !dry_run {
            state.record(key.clone(), ChangeKind::Deleted, gone.clone());
        }
        Ok(gone)
    }

    /// The objects of `ty` (in `namespace`, or all) at resourceVersion `at` (now when `None`),
    /// with the resourceVersion served. 410 before the history kept, 504 after now.
    pub fn list(
        &self,
        ty: TypeId,
        namespace: Option<&str>,
        at: Option<u64>,
    ) -> Result<(u64, Vec<Arc<Value>>), ApiError> {
        let state = self.lock();
        let at = at.unwrap_or(state.rv);
        if at > state.rv {
            let message = format!("Too large resource version: {at}, current: {}", state.rv);
            return Err(ApiError::new(504, message));
        }
        if at < state.compacted {
            return Err(ApiError::expired(at, state.compacted));
        }
        let mut objects: BTreeMap<Key, Arc<Value>> = state.of_type(ty).collect();
        for change in state.history.iter().rev().take_while(|c| c.rv > at) {
            if change.key.0 != ty {
                continue;
            }
            match (&change.previous, change.kind) {
                (_, ChangeKind::Added) | (None, _) => objects.remove(&change.key),
                (Some(previous), _) => objects.insert(change.key.clone(), previous.clone()),
            };
        }
        let items = objects
            .into_iter()
            .filter(|((_, ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, object)| object)
            .collect();
        Ok((at, items))
    }

    /// Opens a watch of `ty` from resourceVersion `from` (`None`: the current objects, then
    /// changes). 410 when `from` is older than the history kept.
    pub fn subscribe(&self, ty: TypeId, from: Option<u64>) -> Result<Subscription, ApiError> {
        let mut state = self.lock();
        let (initial, replay) = match from {
            None => (state.of_type(ty).map(|(_, o)| o).collect(), Vec::new()),
            Some(from) if from < state.compacted => {
                return Err(ApiError::expired(from, state.compacted));
            }
            Some(from) => {
                let replay = state
                    .history
                    .iter()
                    .filter(|c| c.rv > from && c.key.0 == ty);
                (Vec::new(), replay.cloned().collect())
            }
        };
        let (tx, changes) = unbounded_channel();
        state.watchers.push(tx);
        Ok(Subscription {
            initial,
            replay,
            rv: state.rv,
            changes,
        })
    }

    /// Ends every open watch abruptly.
    pub fn cut_watches(&self) {
        for watcher in self.lock().watchers.drain(..) {
            let _ = watcher.send(WatchMsg::Cut);
        }
    }

    /// Forgets the history up to now.
    pub fn compact(&self) {
        let mut state = self.lock();
        state.history.clear();
        state.compacted = state.rv;
    }
}

impl State {
    /// The stored object, or the 404 NotFound Status its verb answers.
    fn existing(&self, key: &Key) -> Result<Arc<Value>, ApiError> {
        let def = resources::get(key.0);
        (self.objects.get(key).cloned()).ok_or_else(|| ApiError::not_found(def, &key.2))
    }

    fn of_type(&self, ty: TypeId) -> impl Iterator<Item = (Key, Arc<Value>)> + '_ {
        let start = (ty, String::new(), String::new());
        self.objects
            .range(start..)
            .take_while(move |(k, _)| k.0 == ty)
            .map(|(k, v)| (k.clone(), v.clone()))
    }

    /// Applies a write: bumps the resourceVersion, keeps the history, tells the watches.
    fn record(&mut self, key: Key, kind: ChangeKind, object: Value) {
        self.rv += 1;
        let object = Arc::new(object);
        let previous = match kind {
            ChangeKind::Deleted => self.objects.remove(&key),
            _ => self.objects.insert(key.clone(), object.clone()),
        };
        let change = Arc::new(Change {
            rv: self.rv,
            key,
            kind,
            object,
            previous,
        });
        self.history.push_back(change.clone());
        self.watchers
            .retain(|w| w.send(WatchMsg::Change(change.clone())).is_ok());
    }

    fn generate_name(&self, ty: TypeId, namespace: &str, prefix: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0x1_0000);
        loop {
            let name = format!(
                "{prefix}{}",
                base36(NEXT.fetch_add(7919, Ordering::Relaxed))
            );
            if !self
                .objects
                .contains_key(&(ty, namespace.to_string(), name.clone()))
            {
                return name;
            }
        }
    }
}

/// Five lower-case base-36 characters, like the real server's generated suffixes.
fn base36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..5)
        .map(|_| {
            let c = digits[(n % 36) as usize] as char;
            n /= 36;
            c
        })
        .collect()
}

/// The store key of `object` as type `ty`.
pub fn key_of(ty: TypeId, object: &Value) -> Option<Key> {
    let namespace = meta::namespace(object).unwrap_or_default().to_string();
    Some((ty, namespace, meta::name(object)?.to_string()))
}

/// Namespaced objects without a namespace go to `default`; cluster-scoped ones have none.
fn settle_namespace(def: &resources::ResourceType, object: &mut Value) {
    if !def.namespaced {
        meta::remove(object, "namespace");
    } else if meta::namespace(object).is_none() {
        meta::set(object, "namespace", "default");
    }
}

/// A proposed object keeps the name and namespace it is stored under (filled in when missing).
fn check_identity(object: &mut Value, key: &Key) -> Result<(), ApiError> {
    let (_, namespace, name) = key;
    for (field, want) in [("name", name), ("namespace", namespace)] {
        match meta::field(object, field) {
            None if !want.is_empty() => meta::set(object, field, want.clone()),
            Some(got) if got != want => {
                let message = format!(
                    "the {field} of the object ({got}) does not match the {field} on the URL ({want})"
                );
                return Err(ApiError::bad_request(message));
            }
            _ => {}
        }
    }
    Ok(())
}

fn without_version(mut object: Value) -> Value {
    meta::remove(&mut object, "resourceVersion");
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease() -> TypeId {
        resources::by_kind("coordination.k8s.io/v1", "Lease").unwrap_or(0)
    }

    fn obj(name: &str, holder: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"holderIdentity": holder}})
    }

    #[test]
    fn every_write_bumps_the_global_version() {
        let store = Store::new();
        let a = store
            .create(lease(), obj("a", "x"), false)
            .expect("created");
        assert_eq!(a["metadata"]["resourceVersion"], "2");
        let b = store.apply(lease(), obj("a", "y")).expect("replaced");
        assert_eq!(b["metadata"]["resourceVersion"], "3");
        assert_eq!(b["metadata"]["uid"], a["metadata"]["uid"]);
        let key = key_of(lease(), &a).expect("key");
        let gone = store
            .delete(&key, &Preconditions::default(), false)
            .expect("deleted");
        assert_eq!(gone["metadata"]["resourceVersion"], "4");
        assert_eq!(store.current(), 4);
    }

    #[test]
    fn a_write_that_changes_nothing_keeps_the_version() {
        let store = Store::new();
        store
            .create(lease(), obj("a", "x"), false)
            .expect("created");
        let same = store.apply(lease(), obj("a", "x")).expect("applied");
        assert_eq!(same["metadata"]["resourceVersion"], "2");
        assert_eq!(store.current(), 2);
    }

    #[test]
    fn stale_version_is_a_conflict() {
        let store = Store::new();
        let a = store
            .create(lease(), obj("a", "x"), false)
            .expect("created");
        let key = key_of(lease(), &a).expect("key");
        store.apply(lease(), obj("a", "y")).expect("replaced");
        let stale = store.update(&key, false, |_| Ok(a.clone()));
        assert_eq!(stale.err().map(|e| e.code), Some(409));
    }

    #[test]
    fn lists_at_an_older_version_undo_later_changes() {
        let store = Store::new();
        store
            .create(lease(), obj("a", "x"), false)
            .expect("created");
        store.apply(lease(), obj("a", "y")).expect("replaced");
        store
            .create(lease(), obj("b", "x"), false)
            .expect("created");
        let (_, at2) = store.list(lease(), None, Some(2)).expect("listed");
        assert_eq!(at2.len(), 1);
        assert_eq!(at2[0]["spec"]["holderIdentity"], "x");
        store.compact();
        assert_eq!(
            store.list(lease(), None, Some(2)).err().map(|e| e.code),
            Some(410)
        );
        assert_eq!(
            store
                .list(lease(), Some("ns"), None)
                .map(|(_, v)| v.len())
                .ok(),
            Some(2)
        );
    }

    #[test]
    fn generated_names_use_the_prefix() {
        let store = Store::new();
        let object = json!({"metadata": {"generateName": "ev-", "namespace": "ns"}});
        let made = store.create(lease(), object, false).expect("created");
        let name = made["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.starts_with("ev-") && name.len() == 8, "{name}");
    }
}
