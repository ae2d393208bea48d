//! The agent's side of active-standby over etcd ([`EtcdClaims`], `portico-store`'s
//! [`ClaimStore`]): the link (connected again and again until etcd answers), the mirrors of the
//! claims (`ha/`) and of the agents' feedback (the peers' addresses), the claims' health, the
//! lease that names the process in its claims (granted, or taken over from a predecessor), and
//! compare-and-swap of one claim.

use crate::connect::connect;
use crate::controller::follow_agents;
use crate::swap::{HA, Swap};
use crate::task::Task;
use crate::{Etcd, EtcdConfig, EtcdError};
use bytes::Bytes;
use portico_model::LoadBalancerId;
use portico_store::kv::View;
use portico_store::{Agents, ClaimName, ClaimStore, ClaimSwap, Claims, StoreHealth, codec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The claim key of a load balancer, relative to the prefix.
pub fn claim_key(lb: LoadBalancerId) -> String {
    format!("{HA}{lb}")
}

/// The claims of a view of `ha/`, by load balancer; a key that does not end in a load
/// balancer id is skipped with a warning.
pub(crate) fn claims_of(view: &View) -> Claims {
    let mut entries = BTreeMap::new();
    for (key, entry) in view.entries.iter() {
        let Some(id) = key.strip_prefix(HA) else {
            continue;
        };
        match serde_json::from_value::<LoadBalancerId>(serde_json::Value::String(id.to_owned())) {
            Ok(id) => {
                entries.insert(id, entry.clone());
            }
            Err(e) => tracing::warn!(key, "a claim key that names no load balancer: {e}"),
        }
    }
    Claims {
        revision: view.revision,
        entries: Arc::new(entries),
    }
}

/// Decodes every view of `ha/` into `claims`.
pub(crate) async fn follow_claims(mut views: watch::Receiver<View>, claims: watch::Sender<Claims>) {
    loop {
        claims.send_replace(claims_of(&views.borrow_and_update()));
        if views.changed().await.is_err() {
            return;
        }
    }
}

/// The claims of the agents as one agent's process sees them: started once, stopped when the
/// last clone is dropped.
#[derive(Debug, Clone)]
pub struct EtcdClaims {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: EtcdConfig,
    /// The TTL of the lease that names the process.
    lease_ttl: Duration,
    /// Set once etcd answered.
    etcd: watch::Receiver<Option<Etcd>>,
    claims: watch::Receiver<Claims>,
    health: watch::Receiver<StoreHealth>,
    agents: watch::Receiver<Agents>,
    _link: Task,
}

impl EtcdClaims {
    /// Connects again and again until etcd answers or `shutdown`, then follows the claims and
    /// the agents; names (leases) are of `lease_ttl`.
    pub fn start(
        config: EtcdConfig,
        lease_ttl: Duration,
        shutdown: watch::Receiver<bool>,
    ) -> EtcdClaims {
        let (etcd_tx, etcd) = watch::channel(None);
        let (claims_tx, claims) = watch::channel(Claims::default());
        let (health_tx, health) = watch::channel(StoreHealth {
            connected: false,
            detail: "connecting to etcd".to_owned(),
        });
        let (agents_tx, agents) = watch::channel(Agents::default());
        let senders = Senders {
            etcd: etcd_tx,
            claims: claims_tx,
            health: health_tx,
            agents: agents_tx,
        };
        let link = Task::spawn(link(config.clone(), senders, shutdown));
        let inner = Inner {
            config,
            lease_ttl,
            etcd,
            claims,
            health,
            agents,
            _link: link,
        };
        EtcdClaims {
            inner: Arc::new(inner),
        }
    }

    /// The connection, once etcd answered.
    async fn connected(&self) -> Result<Etcd, EtcdError> {
        let mut etcd = self.inner.etcd.clone();
        let stopped = || EtcdError::Connect {
            endpoints: self.inner.config.endpoints.join(","),
            reason: "stopped before etcd answered".to_owned(),
        };
        match etcd.wait_for(Option::is_some).await {
            Ok(connected) => connected.clone().ok_or_else(stopped),
            Err(_) => Err(stopped()),
        }
    }
}

struct Senders {
    etcd: watch::Sender<Option<Etcd>>,
    claims: watch::Sender<Claims>,
    health: watch::Sender<StoreHealth>,
    agents: watch::Sender<Agents>,
}

/// Connects, then mirrors `ha/` and `agents/` into the senders until dropped. The claims
/// and their health are handed on by one loop, the claims first, as the mirror published
/// them: a reader never sees etcd back before the claims read since.
async fn link(config: EtcdConfig, senders: Senders, shutdown: watch::Receiver<bool>) {
    let Some(etcd) = connect(&config, &senders.health, shutdown).await else {
        return;
    };
    senders.etcd.send_replace(Some(etcd.clone()));
    let claims = etcd.mirror(HA);
    let agents = etcd.mirror(codec::AGENTS);
    let _agents = Task::spawn(follow_agents(agents.views(), senders.agents));
    let mut views = claims.views();
    let mut health = claims.health();
    let mut handed = None;
    loop {
        let view = views.borrow_and_update().clone();
        if handed != Some(view.revision) {
            handed = Some(view.revision);
            senders.claims.send_replace(claims_of(&view));
        }
        let h = health.borrow_and_update().clone();
        let next = StoreHealth {
            connected: h.connected,
            detail: h.last_error.unwrap_or_default(),
        };
        senders.health.send_if_modified(|current| {
            let changed = *current != next;
            *current = next;
            changed
        });
        tokio::select! {
            r = views.changed() => if r.is_err() { return },
            r = health.changed() => if r.is_err() { return },
        }
    }
}

impl ClaimStore for EtcdClaims {
    type Error = EtcdError;

    async fn name(&self) -> Result<ClaimName, EtcdError> {
        let etcd = self.connected().await?;
        let lease = etcd.grant_for_life(self.inner.lease_ttl).await?;
        Ok(ClaimName::new(lease.id(), Some(Box::new(lease))))
    }

    async fn adopt(&self, id: i64) -> Result<Option<ClaimName>, EtcdError> {
        let etcd = self.connected().await?;
        let adopted = etcd.adopt_for_life(id, self.inner.lease_ttl).await?;
        Ok(adopted.map(|lease| ClaimName::new(lease.id(), Some(Box::new(lease)))))
    }

    fn claims(&self) -> watch::Receiver<Claims> {
        self.inner.claims.clone()
    }

    fn health(&self) -> watch::Receiver<StoreHealth> {
        self.inner.health.clone()
    }

    fn agents(&self) -> watch::Receiver<Agents> {
        self.inner.agents.clone()
    }

    async fn swap(self, lb: LoadBalancerId, expect: i64, value: Bytes) -> ClaimSwap {
        let etcd = self.inner.etcd.borrow().clone();
        let Some(etcd) = etcd else {
            return ClaimSwap::Unreachable("etcd has not answered yet".to_owned());
        };
        match etcd.swap(&claim_key(lb), expect, value).await {
            Ok(Swap::Done(revision)) => ClaimSwap::Done(revision),
            Ok(Swap::Lost(entry)) => ClaimSwap::Lost(entry),
            Err(e) => ClaimSwap::Unreachable(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_store::kv::Entry;

    #[test]
    fn claims_are_keyed_by_load_balancer_and_other_keys_are_skipped() {
        let lb = LoadBalancerId::derive("lb");
        let entry = Entry {
            value: Bytes::from_static(b"{}"),
            mod_revision: 4,
        };
        let entries = [
            claim_key(lb),
            "ha/not-an-id".to_owned(),
            "agents/n1".to_owned(),
        ]
        .into_iter()
        .map(|k| (k, entry.clone()))
        .collect();
        let view = View {
            revision: 7,
            entries: Arc::new(entries),
        };
        let claims = claims_of(&view);
        assert_eq!(claims.revision, 7);
        assert_eq!(*claims.entries, BTreeMap::from([(lb, entry)]));
    }
}
