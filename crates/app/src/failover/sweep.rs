//! Removes from the interface the addresses of the load balancers this agent does not hold
//! ([`portico_ha::addresses::strays`]): those an earlier run left there when it was killed.
//! It runs whenever the agent learns of addresses it did not know (its cache at start, the
//! store's state when the store answers, new load balancers), before any election of the same
//! state may add one; the agent adds addresses only through its elections, so known ones need
//! no second look.

use super::os::Os;
use portico_ha::addresses::{of, strays};
use portico_model::LoadBalancerId;
use portico_store::Desired;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use tokio::sync::watch;

pub(super) struct Sweep<O> {
    os: O,
    /// The state of the last sweep that completed: the same one needs no second look.
    swept: Option<Arc<Desired>>,
    /// The load balancers' addresses at the last sweep that listed the interface.
    known: BTreeSet<IpAddr>,
}

impl<O: Os> Sweep<O> {
    pub(super) fn new(os: O) -> Sweep<O> {
        Sweep {
            os,
            swept: None,
            known: BTreeSet::new(),
        }
    }

    /// The next run lists the interface again, whatever it saw before.
    pub(super) fn forget(&mut self) {
        self.swept = None;
        self.known.clear();
    }

    /// Removes the strays of `desired` when it names addresses not seen before; `held`: the
    /// load balancers whose addresses this agent holds now.
    pub(super) async fn run(&mut self, desired: &Arc<Desired>, held: &BTreeSet<LoadBalancerId>) {
        if self.swept.as_ref().is_some_and(|s| Arc::ptr_eq(s, desired)) {
            return;
        }
        let model = &desired.model;
        let known: BTreeSet<IpAddr> = model.load_balancers.iter().flat_map(of).collect();
        if known.is_subset(&self.known) {
            self.swept = Some(desired.clone());
            return;
        }
        let present = match self.os.hosts().await {
            Ok(present) => present,
            Err(e) => {
                tracing::error!("{e}");
                return;
            }
        };
        for address in strays(&model.load_balancers, held, &present) {
            tracing::info!(%address, "removing an address of a load balancer this agent does not hold (left by an earlier run)");
            if let Err(e) = self.os.remove(address).await {
                tracing::error!("{e}");
                return;
            }
        }
        self.known = known;
        self.swept = Some(desired.clone());
    }

    /// Sweeps every state `desired` hands, holding nothing but `held` (the claims a
    /// predecessor handed over): the agent's part until the store answers (from its cache, if
    /// any). Ends when the sender is gone.
    pub(super) async fn follow(
        &mut self,
        mut desired: watch::Receiver<Arc<Desired>>,
        held: &BTreeSet<LoadBalancerId>,
    ) {
        loop {
            let next = desired.borrow_and_update().clone();
            self.run(&next, held).await;
            if desired.changed().await.is_err() {
                return;
            }
        }
    }
}
