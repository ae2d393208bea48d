//! The pure part of a mirror: the working copy of a subtree, fed by changes in revision order,
//! and the rule of when it becomes a published [`View`].
//!
//! With a marker, changes are buffered and a view is published only at a revision that writes
//! the marker, after every change of that revision. Without one, every revision is published.
//! A view is published only when it moves forward and something changed since the last one
//! (the first one always). Whether something changed is tracked as changes arrive, not found by comparing the
//! whole subtree (16,000 values at 10,000 Ingresses) per revision.
//!
//! A mirror whose reader says which revision it has read (the agent's decoder, which keeps what
//! it decoded) drops the values of entries no newer than that: the reader has them, so they
//! need not be held twice (24 MiB at 10,000 Ingresses). Such entries keep their key and mod
//! revision, with an empty value; a view published before the reader read it keeps its values.

use bytes::Bytes;
use portico_store::kv::{Entry, Key, View};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One change of the watched range, its key relative to the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Put {
        key: Key,
        value: Bytes,
        revision: i64,
    },
    Delete {
        key: Key,
        revision: i64,
    },
}

impl Change {
    fn key(&self) -> &str {
        match self {
            Change::Put { key, .. } | Change::Delete { key, .. } => key,
        }
    }

    fn revision(&self) -> i64 {
        match self {
            Change::Put { revision, .. } | Change::Delete { revision, .. } => *revision,
        }
    }
}

/// What a mirror copies: a subtree, and the marker key that says when it is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub(crate) subtree: String,
    pub(crate) marker: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Copy {
    spec: Spec,
    /// What the working copy starts from when it is not the published view's entries: a
    /// listing not published yet.
    base: Option<BTreeMap<Key, Entry>>,
    /// The working copy's changes since its start (`None`: deleted). The working copy is not
    /// held beside the published view: at 10,000 Ingresses a copy of the map is 16,000 keys.
    pending: BTreeMap<Key, Option<Entry>>,
    published: View,
    /// Whether the working copy differs from the published view.
    changed: bool,
    /// The revision the reader has read: it holds every value no newer (0: none).
    read: i64,
    /// How many values the published view holds.
    published_values: usize,
}

/// A published view holding at most this many values the reader has read is not published
/// again without them: a change's few values stay until the next one.
const FEW_VALUES: usize = 64;

impl Copy {
    pub(crate) fn new(spec: Spec, published: View) -> Self {
        let published_values = values(&published.entries);
        Copy {
            spec,
            base: None,
            pending: BTreeMap::new(),
            published,
            changed: false,
            read: 0,
            published_values,
        }
    }

    pub(crate) fn published(&self) -> &View {
        &self.published
    }

    /// Replaces the working copy by a listing (keys gone from it are swept) and returns the
    /// view to publish, if `whole_at` says the listing is a whole commit at that revision.
    pub(crate) fn relist(
        &mut self,
        entries: BTreeMap<Key, Entry>,
        whole_at: Option<i64>,
    ) -> Option<View> {
        // A relist is rare (start, reconnect): comparing it whole is fine there. By mod
        // revision: the published view's values may have been dropped.
        self.changed = !same_revisions(&self.published.entries, &entries);
        self.pending.clear();
        self.base = Some(entries);
        self.drop_read();
        self.publish(whole_at?)
    }

    /// The reader has read `revision` (every value no newer): drops those values, and when the
    /// published view holds more than a few of them, returns it again without them (the same
    /// revision and entries, empty values).
    pub(crate) fn read(&mut self, revision: i64) -> Option<View> {
        if revision <= self.read {
            return None;
        }
        self.read = revision;
        self.drop_read();
        let all_read = self.published.revision <= revision;
        if !all_read || self.published_values <= FEW_VALUES {
            return None;
        }
        let mut entries = (*self.published.entries).clone();
        for entry in entries.values_mut() {
            entry.value = Bytes::new();
        }
        self.published_values = 0;
        self.published = View {
            revision: self.published.revision,
            entries: Arc::new(entries),
        };
        Some(self.published.clone())
    }

    /// Empties the working copy's values the reader has read.
    fn drop_read(&mut self) {
        let read = self.read;
        if read == 0 {
            return;
        }
        let base = self.base.iter_mut().flat_map(|b| b.values_mut());
        let pending = self.pending.values_mut().flatten();
        for entry in base.chain(pending) {
            if entry.mod_revision <= read && !entry.value.is_empty() {
                entry.value = Bytes::new();
            }
        }
    }

    /// The working copy's entry for `key`.
    fn working(&self, key: &str) -> Option<&Entry> {
        match self.pending.get(key) {
            Some(entry) => entry.as_ref(),
            None => self
                .base
                .as_ref()
                .unwrap_or(&self.published.entries)
                .get(key),
        }
    }

    /// Applies one watch response's changes; the view to publish, if any.
    pub(crate) fn apply(&mut self, changes: &[Change]) -> Option<View> {
        let mut out = None;
        let mut boundary: Option<i64> = None;
        for change in changes {
            if let Some(at) = boundary.filter(|at| *at != change.revision()) {
                out = self.publish(at).or(out);
                boundary = None;
            }
            if self.spec.marker.as_deref() == Some(change.key()) {
                if let Change::Put { revision, .. } = change {
                    boundary = Some(*revision);
                }
            } else if change.key().starts_with(&self.spec.subtree) {
                self.change(change);
                if self.spec.marker.is_none() {
                    boundary = Some(change.revision());
                }
            }
        }
        match boundary {
            Some(at) => self.publish(at).or(out),
            None => out,
        }
    }

    fn change(&mut self, change: &Change) {
        match change {
            Change::Put {
                key,
                value,
                revision,
            } => {
                let entry = Entry {
                    value: value.clone(),
                    mod_revision: *revision,
                };
                let old = self.working(key).map(|o| o.mod_revision);
                self.changed |= old != Some(*revision);
                self.pending.insert(key.clone(), Some(entry));
            }
            Change::Delete { key, .. } => {
                if self.working(key).is_some() {
                    self.changed = true;
                    self.pending.insert(key.clone(), None);
                }
            }
        }
    }

    fn publish(&mut self, revision: i64) -> Option<View> {
        let stale = revision <= self.published.revision;
        // The first whole state is published even when empty: "nothing desired" is news.
        let same = self.published.revision > 0 && !self.changed;
        if stale || same {
            return None;
        }
        self.changed = false;
        self.drop_read();
        let mut entries = match self.base.take() {
            Some(base) => base,
            None => (*self.published.entries).clone(),
        };
        for (key, entry) in std::mem::take(&mut self.pending) {
            match entry {
                Some(entry) => entries.insert(key, entry),
                None => entries.remove(&key),
            };
        }
        // The published view's values the reader read since are dropped on the way.
        let read = self.read;
        let mut held = 0;
        for entry in entries.values_mut() {
            if entry.mod_revision <= read {
                entry.value = Bytes::new();
            } else if !entry.value.is_empty() {
                held += 1;
            }
        }
        self.published_values = held;
        self.published = View {
            revision,
            entries: Arc::new(entries),
        };
        Some(self.published.clone())
    }

    /// The working copy, whole.
    #[cfg(test)]
    fn entries(&self) -> BTreeMap<Key, Entry> {
        let mut entries = (self.base.clone()).unwrap_or_else(|| (*self.published.entries).clone());
        for (key, entry) in &self.pending {
            match entry {
                Some(entry) => entries.insert(key.clone(), entry.clone()),
                None => entries.remove(key),
            };
        }
        entries
    }
}

/// How many of `entries` hold a value.
fn values(entries: &BTreeMap<Key, Entry>) -> usize {
    entries.values().filter(|e| !e.value.is_empty()).count()
}

/// Whether `a` and `b` hold the same keys at the same mod revisions (a key's value at a mod
/// revision is that revision's).
fn same_revisions(a: &BTreeMap<Key, Entry>, b: &BTreeMap<Key, Entry>) -> bool {
    a.len() == b.len()
        && (a.iter())
            .zip(b)
            .all(|((ka, ea), (kb, eb))| ka == kb && ea.mod_revision == eb.mod_revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, revision: i64) -> Change {
        Change::Put {
            key: key.into(),
            value: Bytes::from(value.to_owned()),
            revision,
        }
    }

    fn marked() -> Copy {
        let spec = Spec {
            subtree: "desired/".into(),
            marker: Some("desired-commit".into()),
        };
        Copy::new(spec, View::default())
    }

    fn keys(view: &View) -> Vec<&str> {
        view.entries.keys().map(String::as_str).collect()
    }

    #[test]
    fn changes_wait_for_the_marker() {
        let mut copy = marked();
        assert_eq!(copy.apply(&[put("desired/a", "1", 5)]), None);
        assert_eq!(copy.apply(&[put("desired/b", "1", 6)]), None);
        let view = copy.apply(&[put("desired/c", "1", 7), put("desired-commit", "1", 7)]);
        let view = view.expect("published at the marker");
        assert_eq!(
            (view.revision, keys(&view)),
            (7, vec!["desired/a", "desired/b", "desired/c"])
        );
    }

    #[test]
    fn a_marker_publishes_its_revision_only_not_the_next_commit_in_the_same_response() {
        let mut copy = marked();
        let view = copy.apply(&[
            put("desired-commit", "1", 4),
            put("desired/a", "1", 4),
            put("desired/b", "1", 5),
        ]);
        let view = view.expect("published at 4");
        assert_eq!((view.revision, keys(&view)), (4, vec!["desired/a"]));
        let deleted = Change::Delete {
            key: "desired/a".into(),
            revision: 6,
        };
        let view = copy
            .apply(&[deleted, put("desired-commit", "2", 6)])
            .expect("at 6");
        assert_eq!((view.revision, keys(&view)), (6, vec!["desired/b"]));
    }

    #[test]
    fn keys_outside_the_subtree_and_marker_deletes_are_ignored() {
        let mut copy = marked();
        let other = Change::Delete {
            key: "desired-commit".into(),
            revision: 3,
        };
        assert_eq!(copy.apply(&[put("desired-pending", "1", 2), other]), None);
        assert!(copy.entries().is_empty());
    }

    #[test]
    fn the_first_commit_is_published_even_when_empty() {
        let mut copy = marked();
        let view = copy.apply(&[put("desired-commit", "1", 3)]).expect("first");
        assert_eq!((view.revision, view.entries.len()), (3, 0));
        assert_eq!(
            copy.apply(&[put("desired-commit", "2", 4)]),
            None,
            "nothing new"
        );
    }

    #[test]
    fn a_commit_that_changes_nothing_publishes_nothing() {
        let mut copy = marked();
        copy.apply(&[put("desired/a", "1", 5), put("desired-commit", "1", 5)]);
        let gone = Change::Delete {
            key: "desired/missing".into(),
            revision: 6,
        };
        assert_eq!(copy.apply(&[gone, put("desired-commit", "2", 6)]), None);
        let view = copy.apply(&[put("desired/a", "1", 7), put("desired-commit", "3", 7)]);
        let view = view.expect("a value written again is a change (its revision)");
        assert_eq!(view.entries["desired/a"].mod_revision, 7);
        let listed = (*view.entries).clone();
        assert_eq!(copy.relist(listed, Some(8)), None, "relisted as published");
    }

    fn count_values(entries: &BTreeMap<Key, Entry>) -> usize {
        super::values(entries)
    }

    fn values(view: &View) -> usize {
        count_values(&view.entries)
    }

    #[test]
    fn values_the_reader_read_are_dropped_and_the_view_published_again_without_them() {
        let mut copy = marked();
        let mut first: Vec<Change> = (0..100)
            .map(|i| put(&format!("desired/{i:03}"), "v", 5))
            .collect();
        first.push(put("desired-commit", "1", 5));
        let view = copy.apply(&first).expect("published");
        assert_eq!(values(&view), 100);
        assert_eq!(copy.read(4), None, "not read yet: kept");
        let again = copy.read(5).expect("published again once read");
        assert_eq!(again.revision, 5);
        assert_eq!(values(&again), 0, "without the values read");
        let revisions = |v: &View| {
            v.entries
                .iter()
                .map(|(k, e)| (k.clone(), e.mod_revision))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            revisions(&again),
            revisions(&view),
            "the same keys and revisions"
        );
        assert_eq!(copy.read(5), None, "once");
        assert_eq!(count_values(&copy.entries()), 0);

        // A change: its value is published, the others stay dropped.
        let view = copy
            .apply(&[put("desired/001", "w", 7), put("desired-commit", "2", 7)])
            .expect("a change");
        assert_eq!(values(&view), 1);
        assert_eq!(view.entries["desired/001"].value, Bytes::from_static(b"w"));
        assert_eq!(
            copy.read(7),
            None,
            "a few values are not worth publishing again"
        );
        assert_eq!(
            count_values(&copy.entries()),
            1,
            "it stays until the next change"
        );
        let view = copy
            .apply(&[put("desired/003", "x", 8), put("desired-commit", "3", 8)])
            .expect("another change");
        assert_eq!(
            values(&view),
            1,
            "the value read is dropped at the next publication"
        );
        assert_eq!(view.entries["desired/003"].value, Bytes::from_static(b"x"));
        assert_eq!(copy.read(8), None);

        // A relist at the same revisions publishes nothing and keeps no value read.
        let listed = (0..100)
            .map(|i| {
                let entry = Entry {
                    value: Bytes::from_static(b"v"),
                    mod_revision: match i {
                        1 => 7,
                        3 => 8,
                        _ => 5,
                    },
                };
                (format!("desired/{i:03}"), entry)
            })
            .collect::<BTreeMap<_, _>>();
        assert_eq!(
            copy.relist(listed.clone(), Some(8)),
            None,
            "the same revisions"
        );
        assert_eq!(count_values(&copy.entries()), 0);
        // A key written again after the reader's revision keeps its value.
        let mut newer = listed;
        newer.get_mut("desired/002").expect("listed").mod_revision = 9;
        let view = copy.relist(newer, Some(9)).expect("a newer revision");
        assert_eq!(values(&view), 1);
        assert_eq!(view.entries["desired/002"].value, Bytes::from_static(b"v"));
    }

    #[test]
    fn without_a_marker_every_revision_is_published() {
        let spec = Spec {
            subtree: "agents/".into(),
            marker: None,
        };
        let mut copy = Copy::new(spec, View::default());
        let view = copy.apply(&[put("agents/n1", "up", 3)]).expect("published");
        assert_eq!(view.revision, 3);
    }

    #[test]
    fn a_relist_sweeps_gone_keys_and_never_goes_back() {
        let mut copy = marked();
        copy.apply(&[put("desired/a", "1", 5), put("desired-commit", "1", 5)]);
        let entry = Entry {
            value: Bytes::from_static(b"2"),
            mod_revision: 9,
        };
        let listed = BTreeMap::from([("desired/b".to_owned(), entry)]);
        assert_eq!(
            copy.relist(listed.clone(), Some(4)),
            None,
            "older than published"
        );
        assert_eq!(copy.relist(listed.clone(), None), None, "not whole");
        let view = copy.relist(listed, Some(9)).expect("newer");
        assert_eq!(keys(&view), vec!["desired/b"]);
        assert_eq!(copy.relist(BTreeMap::new(), Some(9)), None, "same revision");
    }
}
