//! Keys kept under a lease while the process lives (agents' registration and feedback): the
//! value follows a `watch` channel; a lost lease (etcd gone longer than the TTL, or restored
//! without it) is granted again and the key put again; when the process dies the lease runs
//! out and the key disappears.

use crate::client::{Backoff, Etcd};
use crate::error::EtcdError;
use crate::rpc::PutRequest;
use crate::task::Task;
use bytes::Bytes;
use portico_store::kv::Key;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};

/// A published key; dropping it stops the keep-alive (the key goes when the lease runs out),
/// [`Publication::close`] deletes it now.
#[derive(Debug)]
pub struct Publication {
    etcd: Etcd,
    lease: watch::Receiver<Option<i64>>,
    task: Task,
}

impl Publication {
    /// The lease the key is put under, `None` while a new one is being granted.
    pub fn lease(&self) -> watch::Receiver<Option<i64>> {
        self.lease.clone()
    }

    /// Stops publishing and deletes the key by revoking its lease.
    pub async fn close(self) {
        self.task.0.abort();
        let lease = *self.lease.borrow();
        if let Some(lease) = lease {
            self.etcd.revoke(lease).await;
        }
    }
}

impl Etcd {
    /// Keeps `key` (relative to the prefix, e.g. `agents/<node>`) holding the latest value of
    /// `value` under a lease of `ttl`. When the sender is dropped the last value stays.
    pub fn publish(&self, key: Key, ttl: Duration, value: watch::Receiver<Bytes>) -> Publication {
        let (lease_tx, lease) = watch::channel(None);
        let run = Publisher {
            etcd: self.clone(),
            key,
            ttl,
            value,
            lease: lease_tx,
        };
        Publication {
            etcd: self.clone(),
            lease,
            task: Task::spawn(run.run()),
        }
    }
}

struct Publisher {
    etcd: Etcd,
    key: Key,
    ttl: Duration,
    value: watch::Receiver<Bytes>,
    lease: watch::Sender<Option<i64>>,
}

impl Publisher {
    async fn run(mut self) {
        let mut backoff = Backoff::new(self.ttl.min(Duration::from_secs(2)));
        loop {
            let error = self.session(&mut backoff).await;
            warn!(key = %self.key, error = %error, "publishing again");
            self.lease.send_replace(None);
            backoff.wait().await;
        }
    }

    /// Grants a lease, puts the key, follows the value until the lease is lost or a put
    /// fails; returns why it ended.
    async fn session(&mut self, backoff: &mut Backoff) -> EtcdError {
        let lease = match self.etcd.grant(self.ttl).await {
            Ok(lease) => lease,
            Err(e) => return e,
        };
        // Known before the put lands, so that `close` right after it revokes this lease.
        self.lease.send_replace(Some(lease));
        if let Err(e) = self.put(lease).await {
            self.etcd.revoke(lease).await;
            return e;
        }
        info!(key = %self.key, lease, "published");
        backoff.reset();
        let etcd = self.etcd.clone();
        let ttl = self.ttl;
        let mut keeper = Task::spawn(async move { etcd.keep_alive(lease, ttl).await });
        let mut open = true;
        loop {
            tokio::select! {
                ended = &mut keeper.0 => return ended.unwrap_or(EtcdError::LeaseLost),
                changed = self.value.changed(), if open => match changed {
                    Ok(()) => if let Err(e) = self.put(lease).await { return e },
                    Err(_) => open = false,
                },
            }
        }
    }

    async fn put(&mut self, lease: i64) -> Result<(), EtcdError> {
        let value = self.value.borrow_and_update().to_vec();
        let key = self.etcd.layout.abs(&self.key);
        let request = PutRequest {
            key,
            value,
            lease,
            ..PutRequest::default()
        };
        let mut kv = self.etcd.kv();
        let put = kv.put(request);
        self.etcd.bounded("publish", put).await.map(drop)
    }
}
