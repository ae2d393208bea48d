//! Compare-and-swap of one key on its mod revision: the agents' claims `ha/<lb-uuid>` (who is
//! active for a load balancer) change only this way, so that two agents never both win.

use crate::client::Etcd;
use crate::error::EtcdError;
use crate::rpc::{self, response_op};
use bytes::Bytes;
use portico_store::kv::Entry;

/// The agents' claims subtree, relative to the prefix.
pub const HA: &str = "ha/";

/// How a swap ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// Written at this revision.
    Done(i64),
    /// The key had moved on: its value now (`None`: absent).
    Lost(Option<Entry>),
}

impl Etcd {
    /// Puts `value` at `key` (relative to the prefix) if the key's mod revision is `expect`
    /// (0: the key is absent); else reads what is there, in the same txn.
    pub async fn swap(&self, key: &str, expect: i64, value: Bytes) -> Result<Swap, EtcdError> {
        let abs = self.layout.abs(key);
        let txn = rpc::txn(
            vec![rpc::modified_at(abs.clone(), expect)],
            vec![rpc::put(abs.clone(), value.to_vec(), 0)],
            vec![rpc::get(abs)],
        );
        let mut kv = self.kv();
        let answer = self.bounded("swap", kv.txn(txn)).await?;
        if answer.succeeded {
            return Ok(Swap::Done(rpc::revision(answer.header.as_ref())));
        }
        let current = answer.responses.iter().find_map(|op| match &op.response {
            Some(response_op::Response::ResponseRange(got)) => got.kvs.first().map(|kv| Entry {
                value: Bytes::copy_from_slice(&kv.value),
                mod_revision: kv.mod_revision,
            }),
            _ => None,
        });
        Ok(Swap::Lost(current))
    }
}
