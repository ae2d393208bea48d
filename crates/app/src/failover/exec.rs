//! Carries out an election's actions: addresses, gratuitous ARP, adverts, claim swaps (through
//! the store's [`ClaimStore`]).

use super::os::{Adverts, Os};
use super::{HaSettings, Instance, decode, peer_socket};
use bytes::Bytes;
use portico_ha::election::{Action, Outcome};
use portico_model::LoadBalancerId;
use portico_provider::Sockets;
use portico_store::{ClaimStore, ClaimSwap};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// How long shutdown waits for the claim's release to reach the store.
const RELEASE_WAIT: Duration = Duration::from_millis(500);

/// Why active-standby cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error(
        "cannot bind the heartbeat socket on {address} (--advertise-address, --heartbeat-port): {source}"
    )]
    Heartbeat {
        address: SocketAddr,
        source: std::io::Error,
    },
}

pub(super) struct Exec<S, O: Os> {
    os: O,
    pub(super) heartbeat: O::Heartbeat,
    port: u16,
    store: S,
    metrics: crate::metrics::AppMetrics,
    swaps: JoinSet<()>,
}

impl<S: ClaimStore, O: Os> Exec<S, O> {
    pub(super) async fn open(
        settings: &HaSettings,
        (store, os): (S, O),
        metrics: crate::metrics::AppMetrics,
        sockets: &Sockets,
    ) -> Result<Exec<S, O>, HaError> {
        let address = SocketAddr::new(settings.advertise_address, settings.heartbeat_port);
        let heartbeat = os.heartbeat(address, sockets).await;
        let heartbeat = heartbeat.map_err(|source| HaError::Heartbeat { address, source })?;
        Ok(Exec {
            os,
            heartbeat,
            port: settings.heartbeat_port,
            store,
            metrics,
            swaps: JoinSet::new(),
        })
    }

    pub(super) async fn run(
        &mut self,
        id: LoadBalancerId,
        instance: &Instance,
        actions: Vec<Action>,
        outcomes: Option<&mpsc::UnboundedSender<(LoadBalancerId, Outcome)>>,
        peers: &watch::Receiver<BTreeMap<String, IpAddr>>,
    ) {
        for action in actions {
            match action {
                Action::AddAddresses => {
                    tracing::info!(lb = %id, addresses = ?instance.addresses, "active: adding the addresses");
                    self.metrics.ha_transition(id, "active");
                    for a in &instance.addresses {
                        if let Err(e) = self.os.add(*a).await {
                            tracing::error!("{e}");
                        }
                    }
                }
                Action::RemoveAddresses => {
                    tracing::info!(lb = %id, "standby: removing the addresses");
                    tracing::debug!(lb = %id, election = ?instance.election, "stepped down");
                    self.metrics.ha_transition(id, "standby");
                    for a in &instance.addresses {
                        if let Err(e) = self.os.remove(*a).await {
                            tracing::error!("{e}");
                        }
                    }
                }
                Action::Garp => self.garp(&instance.addresses),
                Action::Advert(advert) => {
                    let to = instance
                        .peer
                        .as_deref()
                        .and_then(|p| peer_socket(peers, p, self.port));
                    if let Some(to) = to {
                        self.heartbeat.send(&advert, to).await;
                    }
                }
                Action::Claim { expect, claim } => {
                    let value = Bytes::from(serde_json::to_vec(&claim).unwrap_or_default());
                    let store = self.store.clone();
                    let outcomes = outcomes.cloned();
                    self.swaps.spawn(async move {
                        let outcome = swap(store, id, expect, value).await;
                        if let Some(tx) = outcomes {
                            let _ = tx.send((id, outcome));
                        }
                    });
                }
            }
        }
        // Finished swaps are reaped here; their outcomes went through the channel.
        while self.swaps.try_join_next().is_some() {}
    }

    fn garp(&self, addresses: &[IpAddr]) {
        for a in addresses {
            if let IpAddr::V4(v4) = a {
                match self.os.announce(*v4) {
                    None => return,
                    Some(Err(e)) => tracing::warn!("{e}"),
                    Some(Ok(())) => {}
                }
            }
        }
    }

    /// A held load balancer's addresses changed: removes the old ones, adds the new.
    pub(super) async fn replace(&mut self, old: &[IpAddr], new: &[IpAddr], holding: bool) {
        for a in old.iter().filter(|a| !new.contains(a)) {
            if let Err(e) = self.os.remove(*a).await {
                tracing::error!("{e}");
            }
        }
        if holding {
            for a in new.iter().filter(|a| !old.contains(a)) {
                if let Err(e) = self.os.add(*a).await {
                    tracing::error!("{e}");
                }
            }
            self.garp(new);
        }
    }

    /// Waits (bounded) for the swaps in flight, e.g. the releases of a shutdown.
    pub(super) async fn settle(&mut self) {
        let all = async { while self.swaps.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(RELEASE_WAIT, all).await;
    }
}

async fn swap<S: ClaimStore>(store: S, id: LoadBalancerId, expect: i64, value: Bytes) -> Outcome {
    match store.swap(id, expect, value).await {
        ClaimSwap::Done(revision) => Outcome::Done(revision),
        ClaimSwap::Lost(entry) => Outcome::Lost(entry.map(|e| decode(&e.value, e.mod_revision))),
        ClaimSwap::Unreachable(e) => {
            tracing::warn!(lb = %id, "cannot swap the claim: {e}");
            Outcome::Failed
        }
    }
}
