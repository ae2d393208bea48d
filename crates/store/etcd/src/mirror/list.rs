//! A mirror's listing: the subtree as of the last whole commit, and where to watch from.

use super::state::Spec;
use crate::client::Etcd;
use crate::error::EtcdError;
use crate::keys::PENDING;
use crate::rpc::KeyValue;
use portico_store::kv::{Entry, Key};
use std::collections::BTreeMap;

#[derive(Debug)]
pub(super) struct Listing {
    pub(super) entries: BTreeMap<Key, Entry>,
    /// The revision of the whole commit the entries are; `None`: a commit is half-written in
    /// them and the next marker completes it.
    pub(super) whole_at: Option<i64>,
    pub(super) watch_from: i64,
}

/// The watched range of a mirror (start, end).
pub(super) fn range(etcd: &Etcd, spec: &Spec) -> (Vec<u8>, Vec<u8>) {
    super::watched(spec, &etcd.layout)
}

impl Etcd {
    pub(super) async fn list(&self, spec: &Spec) -> Result<Listing, EtcdError> {
        match &spec.marker {
            None => {
                let (revision, kvs) = self.range(&spec.subtree, 0).await?;
                Ok(Listing {
                    entries: self.entries(kvs),
                    whole_at: Some(revision),
                    watch_from: revision + 1,
                })
            }
            Some(marker) => self.list_marked(&spec.subtree, marker).await,
        }
    }

    /// Reads the marker and the pending mark, then the subtree at the same revision. With no
    /// commit half-written, that is the last commit. Else the subtree as of the marker, when
    /// history still has it; else the half-written state, published at the next marker.
    async fn list_marked(&self, subtree: &str, marker: &str) -> Result<Listing, EtcdError> {
        let (now, marker_kv) = self.range(marker, 0).await?;
        let (_, pending) = self.range_exact(PENDING, now).await?;
        let at = marker_kv
            .iter()
            .find(|kv| self.layout.relative(&kv.key) == Some(marker))
            .map_or(0, |kv| kv.mod_revision);
        if !pending {
            let (_, kvs) = self.range(subtree, now).await?;
            return Ok(self.listing(kvs, Some(at), now));
        }
        // Compacted history (or any failure) falls back to the half-written state.
        if at > 0
            && let Ok((_, kvs)) = self.range(subtree, at).await
        {
            return Ok(self.listing(kvs, Some(at), at));
        }
        let (_, kvs) = self.range(subtree, now).await?;
        Ok(self.listing(kvs, None, now))
    }

    /// Whether exactly `key` exists at `revision`.
    async fn range_exact(&self, key: &str, revision: i64) -> Result<(i64, bool), EtcdError> {
        let (revision, kvs) = self.range(key, revision).await?;
        let exists = kvs
            .iter()
            .any(|kv| self.layout.relative(&kv.key) == Some(key));
        Ok((revision, exists))
    }

    fn listing(&self, kvs: Vec<KeyValue>, whole_at: Option<i64>, read_at: i64) -> Listing {
        Listing {
            entries: self.entries(kvs),
            whole_at,
            watch_from: read_at + 1,
        }
    }
}
