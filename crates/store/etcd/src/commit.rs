//! The leader's writes. A commit is one txn when it fits (its ops, then the marker); else
//! several txns: the first marks `desired-pending`, the last clears it and writes the marker.
//! Every txn compares the leader's election key, so a deposed leader writes nothing. Readers
//! publish only at marker writes, so a commit is seen whole or not at all.

use crate::client::Etcd;
use crate::election::Leadership;
use crate::error::EtcdError;
use crate::keys::{COMMIT, DESIRED, PENDING, PLACEMENT};

use crate::rpc::{self, RequestOp};
use portico_store::kv::{Key, Op, View};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use tracing::debug;

/// Bytes counted per op beyond its key and value (protobuf framing), and kept free per txn
/// for the marker ops.
const OP_OVERHEAD: usize = 32;
const TXN_RESERVE: usize = 1024;

impl Etcd {
    /// Writes `ops` (keys under `desired/` or `placement/`; for one key the last op wins) as one commit and
    /// returns its revision, which is the `revision` of the [`View`] readers publish for it.
    /// Nothing to write returns the last commit's revision (or writes the very first marker). After an error the commit may be
    /// partly written (invisible to readers): read the stored state again with
    /// [`Etcd::read_desired`] and commit the difference.
    pub async fn commit(&self, leader: &Leadership, ops: Vec<Op>) -> Result<i64, EtcdError> {
        let ops = normalize(ops)?;
        let mut commits = leader.commits.lock().await;
        if leader.is_lost() {
            return Err(self.not_leader(leader));
        }
        // With no commit ever made (no marker), even an empty commit writes the marker, so
        // that readers get a first view (maybe empty) rather than none.
        if ops.is_empty() && commits.generation > 0 {
            return Ok(commits.revision);
        }
        let limits = (self.config.max_txn_ops - 2, self.config.max_txn_bytes);
        let chunks = chunks(&ops, limits.0, limits.1.saturating_sub(TXN_RESERVE))?;
        let generation = commits.generation + 1;
        let last = chunks.len() - 1;
        let mut revision = 0;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let mut txn_ops: Vec<RequestOp> = ops[chunk].iter().map(|op| self.txn_op(op)).collect();
            txn_ops.extend(self.marks(generation, i == 0 && last > 0, i == last));
            revision = self.fenced(leader, txn_ops).await?;
        }
        debug!(generation, revision, parts = last + 1, "committed");
        commits.generation = generation;
        commits.revision = revision;
        Ok(revision)
    }

    /// Every key under `desired/` and `placement/` as stored now (including the part of a
    /// commit that a deposed leader left half-written), for a new leader to diff against.
    pub async fn read_desired(&self) -> Result<View, EtcdError> {
        let (revision, kvs) = self.range(DESIRED, 0).await?;
        let mut entries = self.entries(kvs);
        let (_, kvs) = self.range(PLACEMENT, revision).await?;
        entries.extend(self.entries(kvs));
        Ok(View {
            revision,
            entries: Arc::new(entries),
        })
    }

    fn txn_op(&self, op: &Op) -> RequestOp {
        match op {
            Op::Put { key, value } => rpc::put(self.layout.abs(key), value.to_vec(), 0),
            Op::Delete { key } => rpc::delete(self.layout.abs(key)),
        }
    }

    /// The marker ops of one txn of a commit.
    fn marks(&self, generation: u64, opens: bool, closes: bool) -> Vec<RequestOp> {
        let (pending, commit) = (self.layout.abs(PENDING), self.layout.abs(COMMIT));
        let mut marks = Vec::new();
        if opens {
            marks.push(rpc::put(pending.clone(), generation.to_string(), 0));
        }
        if closes {
            marks.push(rpc::delete(pending));
            marks.push(rpc::put(commit, generation.to_string(), 0));
        }
        marks
    }

    /// One txn under the leader's fence; its revision.
    async fn fenced(&self, leader: &Leadership, ops: Vec<RequestOp>) -> Result<i64, EtcdError> {
        let fence = rpc::created_at(leader.key.clone(), leader.create_revision);
        let txn = rpc::txn(vec![fence], ops, Vec::new());
        let mut kv = self.kv();
        let answer = self.bounded("commit", kv.txn(txn)).await?;
        if !answer.succeeded {
            let _ = leader.lost_tx.send(true);
            return Err(self.not_leader(leader));
        }
        Ok(rpc::revision(answer.header.as_ref()))
    }

    fn not_leader(&self, leader: &Leadership) -> EtcdError {
        EtcdError::NotLeader {
            key: String::from_utf8_lossy(&leader.key).into_owned(),
        }
    }
}

/// The ops by key, the last op of a key winning (etcd refuses a txn that names a key twice);
/// every key must be under `desired/` or `placement/`.
fn normalize(ops: Vec<Op>) -> Result<Vec<Op>, EtcdError> {
    let mut by_key: BTreeMap<Key, Op> = BTreeMap::new();
    for op in ops {
        let under = |subtree: &str| op.key().len() > subtree.len() && op.key().starts_with(subtree);
        if !under(DESIRED) && !under(PLACEMENT) {
            return Err(EtcdError::OutsideDesired {
                key: op.key().to_owned(),
            });
        }
        by_key.insert(op.key().to_owned(), op);
    }
    Ok(by_key.into_values().collect())
}

fn size(op: &Op) -> usize {
    match op {
        Op::Put { key, value } => key.len() + value.len() + OP_OVERHEAD,
        Op::Delete { key } => key.len() + OP_OVERHEAD,
    }
}

/// Consecutive runs of `ops`, each at most `max_ops` ops and `max_bytes` bytes; at least one
/// (possibly empty) run.
fn chunks(ops: &[Op], max_ops: usize, max_bytes: usize) -> Result<Vec<Range<usize>>, EtcdError> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, op) in ops.iter().enumerate() {
        let op_size = size(op);
        if op_size > max_bytes {
            return Err(EtcdError::OpTooLarge {
                key: op.key().to_owned(),
                size: op_size,
                limit: max_bytes,
            });
        }
        if i - start == max_ops || bytes + op_size > max_bytes {
            runs.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += op_size;
    }
    runs.push(start..ops.len());
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn put(key: &str, len: usize) -> Op {
        Op::Put {
            key: key.into(),
            value: Bytes::from(vec![b'x'; len]),
        }
    }

    #[test]
    fn chunks_respect_the_op_count() {
        let ops: Vec<Op> = (0..10).map(|i| put(&format!("desired/{i}"), 1)).collect();
        let runs = chunks(&ops, 4, usize::MAX).expect("fits");
        assert_eq!(runs, vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(&ops[..0], 4, 100).expect("empty"), vec![0..0]);
    }

    #[test]
    fn chunks_respect_the_byte_budget_and_refuse_a_single_huge_op() {
        let ops = vec![
            put("desired/a", 60),
            put("desired/b", 60),
            put("desired/c", 10),
        ];
        let runs = chunks(&ops, 100, 160).expect("fits");
        assert_eq!(runs, vec![0..1, 1..3]);
        let huge = vec![put("desired/a", 500)];
        assert!(matches!(
            chunks(&huge, 100, 160),
            Err(EtcdError::OpTooLarge { .. })
        ));
    }

    #[test]
    fn normalize_keeps_the_last_op_per_key_and_refuses_keys_outside_desired() {
        let ops = vec![
            put("desired/b", 1),
            put("desired/a", 1),
            Op::Delete {
                key: "desired/b".into(),
            },
        ];
        let normal = normalize(ops).expect("valid");
        assert_eq!(normal.len(), 2);
        assert_eq!(normal[0].key(), "desired/a");
        assert!(matches!(normal[1], Op::Delete { .. }));
        assert!(normalize(vec![put("agents/x", 1)]).is_err());
        assert!(normalize(vec![put("desired/", 1)]).is_err());
    }
}
