//! Leases: grant, keep alive until lost, revoke. The election, agents' keys and the name of
//! an agent's process in its claims ([`Lease`]) use them.

use crate::client::{Backoff, Etcd};
use crate::error::EtcdError;
use crate::rpc::{LeaseGrantRequest, LeaseKeepAliveRequest, LeaseRevokeRequest};
use crate::task::Task;
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, warn};

/// Whole seconds for etcd, at least one.
fn seconds(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_secs_f64().ceil() as u64)
        .unwrap_or(i64::MAX)
        .max(1)
}

/// A lease granted for the life of the process, kept alive until dropped: its id names the
/// process in what it writes (an agent's claims), so that a later run of the same agent can
/// tell its own claims from those of an earlier one. Lost (etcd unreachable longer than its
/// TTL), it is not granted again: the id keeps naming this process.
#[derive(Debug)]
pub struct Lease {
    id: i64,
    _keeper: Task,
}

impl Lease {
    pub fn id(&self) -> i64 {
        self.id
    }
}

impl Etcd {
    /// Grants a [`Lease`] of `ttl` for this process's life.
    pub async fn grant_for_life(&self, ttl: Duration) -> Result<Lease, EtcdError> {
        let id = self.grant(ttl).await?;
        let etcd = self.clone();
        let keeper = Task::spawn(async move {
            let error = etcd.keep_alive(id, ttl).await;
            warn!(lease = id, %error, "this process's lease is lost; it keeps its id");
        });
        Ok(Lease {
            id,
            _keeper: keeper,
        })
    }

    /// Takes over lease `id` (granted by the process this one upgrades) for this process's
    /// life: renews it once and keeps it alive from then on. `None`: etcd no longer has it
    /// (it ran out), so it names nobody any more.
    pub async fn adopt_for_life(&self, id: i64, ttl: Duration) -> Result<Option<Lease>, EtcdError> {
        if !self.renew_once(id, ttl).await? {
            return Ok(None);
        }
        let etcd = self.clone();
        let keeper = Task::spawn(async move {
            let error = etcd.keep_alive(id, ttl).await;
            warn!(lease = id, %error, "this process's lease is lost; it keeps its id");
        });
        Ok(Some(Lease {
            id,
            _keeper: keeper,
        }))
    }

    /// One renewal of lease `id`: whether etcd still has it.
    async fn renew_once(&self, id: i64, ttl: Duration) -> Result<bool, EtcdError> {
        let period = ttl / 3;
        let (requests, queue) = futures::channel::mpsc::unbounded();
        if requests
            .unbounded_send(LeaseKeepAliveRequest { id })
            .is_err()
        {
            return Err(ended());
        }
        let mut lease = self.lease();
        let opened = tokio::time::timeout(period, lease.lease_keep_alive(queue)).await;
        let mut stream = match opened {
            Err(_) => return Err(timeout("keep-alive open", period)),
            Ok(Err(e)) if e.code() == tonic::Code::NotFound => return Ok(false),
            Ok(Err(e)) => return Err(EtcdError::request("keep-alive open", &e)),
            Ok(Ok(answer)) => answer.into_inner(),
        };
        match tokio::time::timeout(period, stream.message()).await {
            Err(_) => Err(timeout("keep-alive", period)),
            Ok(Err(e)) if e.code() == tonic::Code::NotFound => Ok(false),
            Ok(Err(e)) => Err(EtcdError::request("keep-alive", &e)),
            Ok(Ok(None)) => Err(ended()),
            Ok(Ok(Some(answer))) => Ok(answer.ttl > 0),
        }
    }

    pub(crate) async fn grant(&self, ttl: Duration) -> Result<i64, EtcdError> {
        let mut lease = self.lease();
        let request = LeaseGrantRequest {
            ttl: seconds(ttl),
            id: 0,
        };
        let granted = self
            .bounded("lease grant", lease.lease_grant(request))
            .await?;
        Ok(granted.id)
    }

    /// Best effort: a lease that is not revoked runs out by itself.
    pub(crate) async fn revoke(&self, id: i64) {
        let mut lease = self.lease();
        let revoke = lease.lease_revoke(LeaseRevokeRequest { id });
        if let Err(e) = self.bounded("lease revoke", revoke).await {
            debug!(lease = id, error = %e, "revoking the lease failed; it will run out");
        }
    }

    /// Keeps lease `id` alive until it is gone: refused by etcd, or not renewed for `ttl`
    /// (measured from the last renewal request that was answered, so we give up no later than
    /// etcd does). A broken stream is reopened in the meantime.
    pub(crate) async fn keep_alive(&self, id: i64, ttl: Duration) -> EtcdError {
        let mut renewed = Instant::now();
        let mut backoff = Backoff::new(ttl / 4);
        loop {
            let error = match self.renew_until_broken(id, ttl, &mut renewed).await {
                Renewal::Gone => return EtcdError::LeaseLost,
                Renewal::Broken(error) => error,
            };
            if renewed.elapsed() >= ttl {
                warn!(lease = id, error = %error, "lease not renewed in time; taken as lost");
                return EtcdError::LeaseLost;
            }
            debug!(lease = id, error = %error, "keep-alive stream broken; reopening");
            tokio::time::timeout_at(renewed + ttl, backoff.wait())
                .await
                .ok();
        }
    }

    /// One keep-alive stream: a renewal request every third of the TTL, each answered within
    /// that long.
    async fn renew_until_broken(&self, id: i64, ttl: Duration, renewed: &mut Instant) -> Renewal {
        let period = ttl / 3;
        let mut sent = Instant::now();
        let (requests, queue) = futures::channel::mpsc::unbounded();
        let mut lease = self.lease();
        if requests
            .unbounded_send(LeaseKeepAliveRequest { id })
            .is_err()
        {
            return Renewal::Broken(ended());
        }
        let opened = tokio::time::timeout(period, lease.lease_keep_alive(queue)).await;
        let mut stream = match opened {
            Err(_) => return Renewal::Broken(timeout("keep-alive open", period)),
            Ok(Err(e)) if e.code() == tonic::Code::NotFound => return Renewal::Gone,
            Ok(Err(e)) => return Renewal::Broken(EtcdError::request("keep-alive open", &e)),
            Ok(Ok(answer)) => answer.into_inner(),
        };
        loop {
            match tokio::time::timeout(period, stream.message()).await {
                Err(_) => return Renewal::Broken(timeout("keep-alive", period)),
                Ok(Err(e)) if e.code() == tonic::Code::NotFound => return Renewal::Gone,
                Ok(Err(e)) => return Renewal::Broken(EtcdError::request("keep-alive", &e)),
                Ok(Ok(None)) => return Renewal::Broken(ended()),
                // etcd answers a lease it no longer has with a TTL of 0.
                Ok(Ok(Some(answer))) if answer.ttl <= 0 => return Renewal::Gone,
                Ok(Ok(Some(_))) => *renewed = sent,
            }
            tokio::time::sleep(period).await;
            sent = Instant::now();
            if requests
                .unbounded_send(LeaseKeepAliveRequest { id })
                .is_err()
            {
                return Renewal::Broken(ended());
            }
        }
    }
}

enum Renewal {
    Gone,
    Broken(EtcdError),
}

fn timeout(what: &'static str, timeout: Duration) -> EtcdError {
    EtcdError::Timeout { what, timeout }
}

fn ended() -> EtcdError {
    EtcdError::broken("keep-alive", "the stream ended".into())
}
