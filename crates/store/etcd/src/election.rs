//! Leader election among controllers, and the fence every write of the leader carries.
//!
//! Each candidate puts `election/<lease>` under its own lease; the candidate whose key is the
//! oldest (lowest create revision) leads. A candidate waits for the deletion of the next older
//! key (no thundering herd). A leader's writes compare its key's create revision, so once the
//! lease is gone (expired, revoked) no write of the deposed leader can land.

use crate::client::{Backoff, Etcd};
use crate::error::EtcdError;
use crate::keys::{COMMIT, ELECTION, prefix_end};
use crate::rpc::{
    self, LeaseRevokeRequest, RangeRequest, WatchCreateRequest, event, range_request,
    watch_create_request,
};
use crate::task::Task;
use std::time::Duration;
use tokio::sync::{Mutex, watch};
use tracing::{info, warn};

/// This process leads until [`Leadership::lost`] says otherwise. Dropping it without
/// [`Leadership::resign`] stops the keep-alive: the lease runs out within its TTL, as when
/// the process dies.
pub struct Leadership {
    etcd: Etcd,
    identity: String,
    lease: i64,
    pub(crate) key: Vec<u8>,
    pub(crate) create_revision: i64,
    pub(crate) lost_tx: watch::Sender<bool>,
    lost: watch::Receiver<bool>,
    pub(crate) commits: Mutex<Commits>,
    _keeper: Task,
}

/// What the leader knows of the last commit (read when it won, then its own).
#[derive(Debug, Default)]
pub(crate) struct Commits {
    pub(crate) generation: u64,
    pub(crate) revision: i64,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("identity", &self.identity)
            .field("lease", &self.lease)
            .field("create_revision", &self.create_revision)
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// Becomes `true` once leadership is lost (lease gone, or a commit found the fence
    /// broken); it never goes back. Campaign again to lead again.
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The lease that holds the election key.
    pub fn lease_id(&self) -> i64 {
        self.lease
    }

    /// Steps down now: revokes the lease, so the next candidate leads without waiting for it
    /// to run out.
    pub async fn resign(self) -> Result<(), EtcdError> {
        let _ = self.lost_tx.send(true);
        let mut lease = self.etcd.lease();
        let revoke = lease.lease_revoke(LeaseRevokeRequest { id: self.lease });
        let revoked = self.etcd.bounded("resign", revoke).await;
        info!(identity = %self.identity, "resigned");
        revoked.map(drop)
    }
}

impl Etcd {
    /// Waits until this process leads (retrying through etcd outages), holding a lease of
    /// `ttl` (etcd's minimum is about 2 s) kept alive in the background. Fails only when
    /// retrying cannot help (credentials, permissions).
    pub async fn campaign(&self, identity: &str, ttl: Duration) -> Result<Leadership, EtcdError> {
        let mut backoff = Backoff::new(Duration::from_secs(2));
        loop {
            match self.try_campaign(identity, ttl).await {
                Ok(leadership) => return Ok(leadership),
                Err(e) if e.is_permanent() => return Err(e),
                Err(e) => warn!(identity, error = %e, "campaign failed; campaigning again"),
            }
            backoff.wait().await;
        }
    }

    async fn try_campaign(&self, identity: &str, ttl: Duration) -> Result<Leadership, EtcdError> {
        let lease = self.grant(ttl).await?;
        let (lost_tx, lost) = watch::channel(false);
        let keeper = self.keeper(lease, ttl, lost_tx.clone());
        let key = self.layout.candidate(lease);
        let won = self
            .stand_and_wait(&key, identity, lease, lost.clone())
            .await;
        let (create_revision, commits) = match won {
            Ok(won) => won,
            Err(e) => {
                drop(keeper);
                self.revoke(lease).await;
                return Err(e);
            }
        };
        info!(identity, lease, create_revision, "leading");
        Ok(Leadership {
            etcd: self.clone(),
            identity: identity.to_owned(),
            lease,
            key,
            create_revision,
            lost_tx,
            lost,
            commits: Mutex::new(commits),
            _keeper: keeper,
        })
    }

    fn keeper(&self, lease: i64, ttl: Duration, lost: watch::Sender<bool>) -> Task {
        let etcd = self.clone();
        Task::spawn(async move {
            let error = etcd.keep_alive(lease, ttl).await;
            warn!(lease, error = %error, "election lease lost");
            let _ = lost.send(true);
            etcd.revoke(lease).await;
        })
    }

    async fn stand_and_wait(
        &self,
        key: &[u8],
        identity: &str,
        lease: i64,
        lost: watch::Receiver<bool>,
    ) -> Result<(i64, Commits), EtcdError> {
        let create_revision = self.stand(key, identity, lease).await?;
        self.wait_for_turn(create_revision, lost).await?;
        Ok((create_revision, self.last_commit().await?))
    }

    /// Puts the candidate's key; its create revision is the place in line.
    async fn stand(&self, key: &[u8], identity: &str, lease: i64) -> Result<i64, EtcdError> {
        let txn = rpc::txn(
            vec![rpc::created_at(key.to_vec(), 0)],
            vec![rpc::put(key.to_vec(), identity, lease)],
            Vec::new(),
        );
        let mut kv = self.kv();
        let answer = self.bounded("campaign", kv.txn(txn)).await?;
        match (answer.succeeded, answer.header) {
            (true, Some(header)) => Ok(header.revision),
            _ => Err(EtcdError::NotLeader {
                key: String::from_utf8_lossy(key).into_owned(),
            }),
        }
    }

    /// Returns when no older candidate is left; fails when our own lease is lost meanwhile.
    async fn wait_for_turn(
        &self,
        create_revision: i64,
        mut lost: watch::Receiver<bool>,
    ) -> Result<(), EtcdError> {
        let mut backoff = Backoff::new(Duration::from_secs(1));
        loop {
            if *lost.borrow() {
                return Err(EtcdError::LeaseLost);
            }
            let waited = tokio::select! {
                waited = self.wait_for_older(create_revision) => waited,
                _ = lost.changed() => return Err(EtcdError::LeaseLost),
            };
            match waited {
                Ok(true) => return Ok(()),
                Ok(false) => backoff.reset(),
                Err(e) => {
                    warn!(error = %e, "waiting for the leader failed; looking again");
                    backoff.wait().await;
                }
            }
        }
    }

    /// `true` when no candidate is older; else waits until the next older one is deleted
    /// and returns `false`.
    async fn wait_for_older(&self, create_revision: i64) -> Result<bool, EtcdError> {
        let prefix = self.layout.abs(ELECTION);
        let request = RangeRequest {
            range_end: prefix_end(&prefix),
            key: prefix,
            limit: 1,
            sort_order: range_request::SortOrder::Descend.into(),
            sort_target: range_request::SortTarget::Create.into(),
            max_create_revision: create_revision - 1,
            ..RangeRequest::default()
        };
        let mut kv = self.kv();
        let older = self.bounded("campaign", kv.range(request)).await?;
        let Some(previous) = older.kvs.first() else {
            return Ok(true);
        };
        let from = rpc::revision(older.header.as_ref()) + 1;
        self.wait_for_delete(&previous.key, from).await?;
        Ok(false)
    }

    async fn wait_for_delete(&self, key: &[u8], from: i64) -> Result<(), EtcdError> {
        let create = WatchCreateRequest {
            key: key.to_vec(),
            start_revision: from,
            filters: vec![watch_create_request::FilterType::Noput.into()],
            ..WatchCreateRequest::default()
        };
        let mut client = self.watch_client();
        let opening = client.watch(rpc::watch_stream(create));
        let mut stream = self.bounded("campaign watch", opening).await?;
        loop {
            let answer = stream.message().await;
            let answer = answer.map_err(|e| EtcdError::request("campaign watch", &e))?;
            let Some(answer) = answer else {
                return Err(EtcdError::broken(
                    "campaign watch",
                    "the stream ended".into(),
                ));
            };
            let deleted = answer
                .events
                .iter()
                .any(|e| e.r#type() == event::EventType::Delete);
            if deleted || answer.canceled {
                // A canceled watch (compacted): look again.
                return Ok(());
            }
        }
    }

    /// The generation and revision of the last commit marker (zero when there is none).
    async fn last_commit(&self) -> Result<Commits, EtcdError> {
        let mut kv = self.kv();
        let key = self.layout.abs(COMMIT);
        let request = RangeRequest {
            key,
            ..RangeRequest::default()
        };
        let answer = self
            .bounded("read the commit marker", kv.range(request))
            .await?;
        let Some(marker) = answer.kvs.first() else {
            return Ok(Commits::default());
        };
        let value = String::from_utf8_lossy(&marker.value);
        let generation = value.parse().map_err(|_| EtcdError::BadMarker {
            value: value.chars().take(40).collect(),
        })?;
        Ok(Commits {
            generation,
            revision: marker.mod_revision,
        })
    }
}
