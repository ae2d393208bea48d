//! The key-value contract between the store's codec and a backend (etcd). Keys are relative to
//! the backend's prefix; values are opaque bytes (the codec's envelopes).
//!
//! A backend guarantees two things to readers:
//! - a [`View`] is always one committed write as a whole: a change that spans keys is never seen
//!   in part, however the backend splits it into requests;
//! - views only move forward: `revision` never goes back and never advances without the
//!   entries that changed at it.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A key relative to the store's prefix, e.g. `desired/lb/<uuid>`.
pub type Key = String;

/// One change of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put { key: Key, value: Bytes },
    Delete { key: Key },
}

impl Op {
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// One stored value and the backend revision that last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub value: Bytes,
    pub mod_revision: i64,
}

/// Every entry under a subtree as of one committed write.
///
/// A backend may hand a reader that keeps what it decoded (the agent's decoder) views where the
/// entries that reader has read already keep their key and mod revision but not their value
/// (empty): the reader looks values up only for mod revisions it has not seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The backend revision this view is at (0: nothing read yet).
    pub revision: i64,
    pub entries: Arc<BTreeMap<Key, Entry>>,
}

/// The ops that turn `old` into `new` (both: key → value): puts for new or changed values,
/// deletes for keys that are gone; ordered by key.
pub fn changes(old: &BTreeMap<Key, Bytes>, new: &BTreeMap<Key, Bytes>) -> Vec<Op> {
    let mut ops = Vec::new();
    for (key, value) in new {
        if old.get(key) != Some(value) {
            ops.push(Op::Put {
                key: key.clone(),
                value: value.clone(),
            });
        }
    }
    for key in old.keys() {
        if !new.contains_key(key) {
            ops.push(Op::Delete { key: key.clone() });
        }
    }
    ops.sort_by(|a, b| a.key().cmp(b.key()));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<Key, Bytes> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Bytes::from(v.to_string())))
            .collect()
    }

    #[test]
    fn changes_put_what_differs_and_delete_what_is_gone() {
        let old = map(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let new = map(&[("a", "1"), ("b", "20"), ("d", "4")]);
        let ops = changes(&old, &new);
        let put = |k: &str, v: &str| Op::Put {
            key: k.into(),
            value: Bytes::from(v.to_owned()),
        };
        assert_eq!(
            ops,
            vec![
                put("b", "20"),
                Op::Delete { key: "c".into() },
                put("d", "4")
            ]
        );
        assert!(changes(&new, &new).is_empty());
    }
}
