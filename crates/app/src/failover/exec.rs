//! Carries out an election's actions: addresses, gratuitous ARP, adverts, claim swaps.

use super::{HaSettings, Instance, claim_key, decode, peer_socket};
use bytes::Bytes;
use portico_ha::election::{Action, Outcome};
use portico_ha_os::{Garp, Heartbeat, Interface};
use portico_model::LoadBalancerId;
use portico_provider::{SocketKind, Sockets};
use portico_store_etcd::{Etcd, Swap};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// How long shutdown waits for the claim's release to reach etcd.
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

pub(super) struct Exec {
    interface: Interface,
    /// None when the packet socket cannot be opened (logged once): takeovers then rely on
    /// neighbours' ARP timeouts.
    garp: Option<Garp>,
    pub(super) heartbeat: Heartbeat,
    port: u16,
    etcd: Etcd,
    metrics: crate::metrics::AppMetrics,
    swaps: JoinSet<()>,
}

impl Exec {
    pub(super) async fn open(
        settings: &HaSettings,
        etcd: Etcd,
        metrics: crate::metrics::AppMetrics,
        sockets: &Sockets,
    ) -> Result<Exec, HaError> {
        let address = SocketAddr::new(settings.advertise_address, settings.heartbeat_port);
        let key = (SocketKind::Heartbeat, address);
        let failed = |source| HaError::Heartbeat { address, source };
        // Handed over by the process this one upgrades, or bound now.
        let heartbeat = match sockets.take(key) {
            Some(fd) => Heartbeat::from_std(std::net::UdpSocket::from(fd)).map_err(failed)?,
            None => Heartbeat::bind(address).await.map_err(failed)?,
        };
        sockets.listening(key, heartbeat.socket());
        let garp = Garp::open(&settings.interface)
            .inspect_err(|e| tracing::error!("gratuitous ARP disabled: {e}"))
            .ok();
        Ok(Exec {
            interface: Interface::new(settings.interface.clone()),
            garp,
            heartbeat,
            port: settings.heartbeat_port,
            etcd,
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
                        if let Err(e) = self.interface.add(*a).await {
                            tracing::error!("{e}");
                        }
                    }
                }
                Action::RemoveAddresses => {
                    tracing::info!(lb = %id, "standby: removing the addresses");
                    tracing::debug!(lb = %id, election = ?instance.election, "stepped down");
                    self.metrics.ha_transition(id, "standby");
                    for a in &instance.addresses {
                        if let Err(e) = self.interface.remove(*a).await {
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
                    let etcd = self.etcd.clone();
                    let outcomes = outcomes.cloned();
                    self.swaps.spawn(async move {
                        let outcome = swap(&etcd, id, expect, value).await;
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
        let Some(garp) = &self.garp else { return };
        for a in addresses {
            if let IpAddr::V4(v4) = a
                && let Err(e) = garp.send(*v4)
            {
                tracing::warn!("{e}");
            }
        }
    }

    /// A held load balancer's addresses changed: removes the old ones, adds the new.
    pub(super) async fn replace(&mut self, old: &[IpAddr], new: &[IpAddr], holding: bool) {
        for a in old.iter().filter(|a| !new.contains(a)) {
            if let Err(e) = self.interface.remove(*a).await {
                tracing::error!("{e}");
            }
        }
        if holding {
            for a in new.iter().filter(|a| !old.contains(a)) {
                if let Err(e) = self.interface.add(*a).await {
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

async fn swap(etcd: &Etcd, id: LoadBalancerId, expect: i64, value: Bytes) -> Outcome {
    match etcd.swap(&claim_key(id), expect, value).await {
        Ok(Swap::Done(revision)) => Outcome::Done(revision),
        Ok(Swap::Lost(entry)) => Outcome::Lost(entry.map(|e| decode(&e.value, e.mod_revision))),
        Err(e) => {
            tracing::warn!(lb = %id, "cannot swap the claim: {e}");
            Outcome::Failed
        }
    }
}
