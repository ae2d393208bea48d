//! The agent's side of active-standby: one [`Election`] per load balancer placed on this node
//! (as active or standby), fed with the placement, the pair's adverts (UDP), the claims
//! (`ha/<lb>`) and the store's health, ticked every [`TICK`]; their actions carried out here:
//! addresses on `--interface`, gratuitous ARP, adverts to the peer's advertise address (the OS
//! side behind [`os::Os`]), compare-and-swap of the claim. The claims, the store's health, the peers'
//! addresses and the name the claims carry come through `portico-store`'s [`ClaimStore`]
//! (etcd's lease in `portico agent`; the memory store in the tests). docs/active-standby.md
//! gives the design.
//!
//! At start, until the store answers and names this process (etcd: grants its lease, which its
//! claims carry), no election runs and the agent holds nothing: the addresses of every load balancer it knows
//! (from its cache, then from the store) are removed from the interface ([`sweep`]), whether
//! the load balancer is placed on it or not. Serving from the cache is about routes; an
//! address needs a live claim.
//!
//! A process started by an upgrade ([`crate::handover`]) is the exception: its predecessor
//! handed over its lease and the claims it holds ([`HaState`]). It takes the lease over (keeps
//! it alive under the same id), leaves those load balancers' addresses on the interface and
//! starts their elections as the holder ([`Election::holder`]): no election happens, and its
//! adverts follow the predecessor's without a gap. When the lease ran out meanwhile it starts
//! as any agent does. A predecessor that handed over exits without releasing anything.

mod admin;
mod exec;
mod os;
mod sweep;
#[cfg(test)]
mod tests;

pub(crate) use admin::AdminView;
pub(crate) use os::LinuxOs;

use os::{Adverts, Os};

use crate::handover::{HaState, Quieting};
use portico_ha::Placement;
use portico_ha::election::{Assignment, Claim, Election, Input, Outcome, Role, Seen, TICK, Timing};
use portico_model::LoadBalancerId;
use portico_provider::Sockets;
use portico_store::{Agents, ClaimName, ClaimStore, Claims, Desired, StoreHealth};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// Pause between attempts to name this process.
const RETRY: Duration = Duration::from_millis(250);

/// Now, on tokio's clock (which a test may pause): the elections' time.
fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// `--interface`, `--advertise-address`, `--heartbeat-port`.
#[derive(Debug, Clone)]
pub struct HaSettings {
    pub interface: String,
    pub advertise_address: IpAddr,
    pub heartbeat_port: u16,
    pub timing: Timing,
}

/// What the agent shows about each election: who holds the claim, at which epoch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HaView {
    pub(crate) holding: bool,
    pub(crate) holder: Option<String>,
    pub(crate) epoch: u64,
}

/// Shared with the admin snapshot.
pub(crate) type HaViews = Arc<Mutex<BTreeMap<LoadBalancerId, HaView>>>;

/// What the failover task reads.
pub(crate) struct HaInputs {
    /// The model (for the addresses) and the placements.
    pub(crate) desired: watch::Receiver<Arc<Desired>>,
    /// Every agent's advertise address, by node.
    pub(crate) peers: watch::Receiver<BTreeMap<String, IpAddr>>,
    pub(crate) claims: watch::Receiver<Claims>,
    pub(crate) health: watch::Receiver<StoreHealth>,
}

/// What active-standby shares with upgrades: what a predecessor handed over, and what this
/// process hands to its successor.
pub(crate) struct Upgrades {
    /// The predecessor's lease and held claims (a process started by an upgrade).
    pub(crate) handed: Option<HaState>,
    /// The process's sockets: the heartbeat socket is taken from them and registered there.
    pub(crate) sockets: Arc<Sockets>,
    /// Set once a successor serves: shutdown then releases nothing.
    pub(crate) handed_over: Arc<AtomicBool>,
    /// Set once the elections run (or never will): a successor whose predecessor does not say
    /// [`crate::handover::QUIET`] answers only then, so that the adverts go on without a gap.
    /// A successor whose predecessor says `quiet`, holding handed-over claims, answers once
    /// it took the lease over and the heartbeat socket, before its elections start.
    pub(crate) running: watch::Sender<bool>,
    /// What this process hands a successor, and the switch that stops the elections once the
    /// successor is ready.
    pub(crate) quieting: Quieting,
    /// Turns true once this process serves its first state and its predecessor's elections
    /// stopped (a successor whose predecessor says `quiet`) or once it serves (any other
    /// process). A successor holding handed-over claims starts its elections only then: the
    /// two processes share the heartbeat socket, and a successor reading the adverts beside its
    /// predecessor (each advert reaches one of them) heard too few, unconfirmed behind the
    /// predecessor's renewals, and stepped down at its fence.
    pub(crate) quiet: watch::Receiver<bool>,
    /// Turns true once the elections ran their first pass with every handed-over claim (the
    /// first adverts are out): a successor then tells its predecessor, which advertised them
    /// meanwhile, [`crate::handover::ELECTING`].
    pub(crate) advertising: watch::Sender<bool>,
}

/// Removes the addresses of the load balancers it knows (except those a predecessor handed
/// over) until `store` answers and names this process, or the predecessor's name is taken
/// over; then runs the elections over what `store` and `desired` tell until `shutdown`.
pub(crate) async fn link<S: ClaimStore, O: Os>(
    agent: HaAgent<S, O>,
    desired: watch::Receiver<Arc<Desired>>,
    view: Arc<AdminView>,
    metrics: crate::metrics::AppMetrics,
    upgrades: Upgrades,
    mut shutdown: watch::Receiver<bool>,
) {
    let HaAgent {
        node,
        store,
        os,
        settings,
    } = agent;
    let mut sweep = sweep::Sweep::new(os.clone());
    let handed_held: BTreeSet<LoadBalancerId> = (upgrades.handed.iter())
        .flat_map(|h| h.held.keys().copied())
        .collect();
    let handed_lease = upgrades.handed.as_ref().map(|h| h.lease);
    let quiets = upgrades.handed.as_ref().is_some_and(|h| h.quiets);
    let started = tokio::select! {
        started = start(&store, handed_lease, shutdown.clone()) => started,
        () = sweep.follow(desired.clone(), &handed_held) => None,
    };
    let Some((lease, adopted)) = started else {
        upgrades.running.send_replace(true);
        return;
    };
    let handed = match upgrades.handed {
        Some(h) if adopted => h.held,
        Some(_) => {
            // The predecessor's lease ran out: its claims name nobody now; start afresh,
            // sweeping again what was kept for them.
            sweep = sweep::Sweep::new(os.clone());
            BTreeMap::new()
        }
        None => BTreeMap::new(),
    };
    tracing::info!(
        lease = lease.id(),
        "active-standby: this agent's claims carry its lease"
    );
    let inputs = HaInputs {
        desired,
        peers: derive(store.agents(), peers_of),
        claims: store.claims(),
        health: store.health(),
    };
    let me = Me {
        node,
        lease: lease.id(),
        settings,
        handed,
    };
    let running = upgrades.running.clone();
    let exec = exec::Exec::open(&me.settings, (store, os), metrics, &upgrades.sockets);
    let exec = exec.await;
    let exec = match exec {
        Ok(exec) => exec,
        Err(e) => {
            tracing::error!("active-standby is off: {e}");
            running.send_replace(true);
            return;
        }
    };
    let mut quiet = upgrades.quiet;
    if !me.handed.is_empty() {
        if quiets {
            // The lease is taken over and the heartbeat socket is this process's: it may
            // answer its predecessor, whose elections stop at that answer.
            running.send_replace(true);
        }
        tokio::select! {
            said = quiet.wait_for(|quiet| *quiet) => if said.is_err() {
                running.send_replace(true);
                return;
            },
            _ = shutdown.wait_for(|s| *s) => {
                running.send_replace(true);
                return;
            }
        }
    }
    let Quieting {
        state,
        quiesce,
        electing,
        kept,
    } = upgrades.quieting;
    let shared = Shared {
        view,
        running: upgrades.running,
        state,
        handed_over: upgrades.handed_over,
        quiesce,
        electing,
        kept,
        advertising: upgrades.advertising,
    };
    let handed_over = shared.handed_over.clone();
    // Set before `quiesce` is looked at: a hand-over then either stops the elections or finds
    // them not started.
    shared.electing.send_replace(true);
    if let Err(e) = run(me, exec, inputs, sweep, &shared, shutdown).await {
        tracing::error!("active-standby is off: {e}");
    }
    shared.electing.send_replace(false);
    shared.advertising.send_replace(true);
    running.send_replace(true);
    if handed_over.load(Ordering::SeqCst) || shared.quiesced() {
        // The successor keeps the lease alive: dropping it here only stops this process's
        // keep-alive (a lease is never revoked).
        tracing::info!(
            lease = lease.id(),
            "handed over: the claims and addresses stay with the new process"
        );
    }
    drop(lease);
}

/// Takes over the predecessor's name `handed` (when the store still has it) or has the store
/// name this process, retrying until it worked or `shutdown`; whether the name was taken over.
async fn start<S: ClaimStore>(
    store: &S,
    mut handed: Option<i64>,
    mut shutdown: watch::Receiver<bool>,
) -> Option<(ClaimName, bool)> {
    loop {
        let named = if let Some(id) = handed {
            store.adopt(id).await.map(|lease| lease.map(|l| (l, true)))
        } else {
            store.name().await.map(|lease| Some((lease, false)))
        };
        match named {
            Ok(Some(named)) => return Some(named),
            Ok(None) => {
                tracing::warn!(
                    lease = ?handed,
                    "the predecessor's lease ran out: starting as a new agent"
                );
                handed = None;
                continue;
            }
            Err(e) => tracing::warn!(lease = ?handed, "cannot name this agent's claims: {e}"),
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            _ = shutdown.wait_for(|s| *s) => return None,
        }
    }
}

/// The agent's active-standby: its node, its store's claims, its OS side.
pub(crate) struct HaAgent<S, O> {
    pub(crate) node: String,
    pub(crate) store: S,
    pub(crate) os: O,
    pub(crate) settings: HaSettings,
}

/// This agent's process: its node, its lease, its settings, the claims its predecessor
/// handed over (epoch and revision by load balancer).
struct Me {
    node: String,
    lease: i64,
    settings: HaSettings,
    handed: BTreeMap<LoadBalancerId, (u64, i64)>,
}

/// What the elections share with the rest of the process.
struct Shared {
    view: Arc<AdminView>,
    running: watch::Sender<bool>,
    state: Arc<Mutex<Option<HaState>>>,
    handed_over: Arc<AtomicBool>,
    /// True once a successor is ready: the elections stop, releasing nothing.
    quiesce: watch::Receiver<bool>,
    /// True while the elections run (read by the hand-over).
    electing: watch::Sender<bool>,
    /// True once the successor's elections run: the stopped ones stop advertising.
    kept: watch::Receiver<bool>,
    /// Set once the first pass with every handed-over claim is done.
    advertising: watch::Sender<bool>,
}

impl Shared {
    fn quiesced(&self) -> bool {
        *self.quiesce.borrow()
    }
}

/// A receiver of `f` of every view of `views`.
fn derive<V: Send + Sync + 'static, T: Send + Sync + 'static>(
    mut views: watch::Receiver<V>,
    f: fn(&V) -> T,
) -> watch::Receiver<T> {
    let (tx, rx) = watch::channel(f(&views.borrow_and_update()));
    tokio::spawn(async move {
        while views.changed().await.is_ok() {
            let next = f(&views.borrow_and_update());
            if tx.send(next).is_err() {
                return;
            }
        }
    });
    rx
}

/// One load balancer's election and what it needs to act.
struct Instance {
    election: Election,
    addresses: Vec<IpAddr>,
    peer: Option<String>,
    /// The claim revision last fed (so that an unchanged view is not fed again).
    fed: Option<i64>,
}

/// Runs the elections until `shutdown`; then releases what this agent holds.
async fn run<S: ClaimStore, O: Os>(
    me: Me,
    mut exec: exec::Exec<S, O>,
    mut inputs: HaInputs,
    mut sweep: sweep::Sweep<O>,
    shared: &Shared,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), exec::HaError> {
    if !me.handed.is_empty() {
        // The first reconcile sweeps again, keeping only what is still placed here.
        sweep.forget();
    }
    let (outcomes_tx, mut outcomes) = mpsc::unbounded_channel::<(LoadBalancerId, Outcome)>();
    let mut state = State {
        node: me.node,
        lease: me.lease,
        timing: me.settings.timing,
        instances: BTreeMap::new(),
        sweep,
        handed: me.handed,
        store_seen: false,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The store's inputs are read at the first pass and whenever one of them changed.
    let mut changed = true;
    let mut quiesce = shared.quiesce.clone();
    loop {
        if shared.quiesced() {
            break;
        }
        let mut steps: Vec<(LoadBalancerId, Input)> = Vec::new();
        if !changed {
            // In this order: after a stall (a loaded node does not run this process for a
            // while) the adverts and claim outcomes that queued meanwhile are taken before the
            // next tick decides, which would otherwise find the peer unheard and the claim
            // unconfirmed past the fence and drop the addresses.
            tokio::select! {
                biased;
                _ = quiesce.wait_for(|q| *q) => break,
                _ = shutdown.wait_for(|s| *s) => break,
                received = exec.heartbeat.recv() => {
                    if let Ok((advert, _)) = received {
                        steps.push((advert.lb, Input::Advert(advert)));
                    }
                }
                Some((id, outcome)) = outcomes.recv() => steps.push((id, Input::Outcome(outcome))),
                r = inputs.desired.changed() => if r.is_err() { break } else { changed = true },
                r = inputs.peers.changed() => if r.is_err() { break } else { changed = true },
                r = inputs.claims.changed() => if r.is_err() { break } else { changed = true },
                r = inputs.health.changed() => if r.is_err() { break } else { changed = true },
                _ = tick.tick() => {
                    steps.extend(state.instances.keys().map(|id| (*id, Input::Tick)));
                }
            }
        }
        // After the wait: the time an input is given is the time it arrived.
        let now = clock();
        if std::mem::take(&mut changed) {
            // Elections started by the reconcile start at its end, after its sweep (an `ip`
            // command each time, which takes long on a loaded node): started at `now`, a
            // handed-over holder found its fence passed at its first tick, unheard and
            // unconfirmed for as long as the sweep took, and stepped down.
            let (at, reconciled) = state.reconcile(&mut inputs, &mut exec).await;
            for (id, input) in reconciled {
                state
                    .step(at, id, input, &mut exec, &inputs, &outcomes_tx)
                    .await;
            }
        }
        for (id, input) in steps {
            state
                .step(now, id, input, &mut exec, &inputs, &outcomes_tx)
                .await;
        }
        if state.publish(&shared.view.ha, &shared.state) {
            shared.view.refresh();
        }
        if state.handed.is_empty() {
            // Every handed-over claim has its election (or lost its load balancer), and its
            // first adverts went out with this pass's steps.
            shared
                .running
                .send_if_modified(|r| !std::mem::replace(r, true));
            shared
                .advertising
                .send_if_modified(|r| !std::mem::replace(r, true));
        }
    }
    if shared.quiesced() {
        // The successor reads the adverts and renews the claims from now on; this process
        // advertises what it held until the successor's elections run.
        shared.electing.send_replace(false);
        state.keep(&mut exec, &inputs, shared.kept.clone()).await;
    }
    if shared.handed_over.load(Ordering::SeqCst) || shared.quiesced() {
        // The successor holds what this process held: nothing is removed or released.
        return Ok(());
    }
    let now = clock();
    let ids: Vec<LoadBalancerId> = state.instances.keys().copied().collect();
    for id in ids {
        state
            .step(now, id, Input::Shutdown, &mut exec, &inputs, &outcomes_tx)
            .await;
    }
    exec.settle().await;
    Ok(())
}

struct State<O> {
    node: String,
    lease: i64,
    timing: Timing,
    instances: BTreeMap<LoadBalancerId, Instance>,
    sweep: sweep::Sweep<O>,
    /// The claims a predecessor handed over, until their elections start.
    handed: BTreeMap<LoadBalancerId, (u64, i64)>,
    /// The store's mirror has connected once. Before that, its "not connected" is no news
    /// about the store: it is fed to no election, so that a successor holding handed-over claims
    /// renews them (through its own client) from the start instead of waiting, unconfirmed,
    /// until its fence makes it drop what it holds. A renewal that fails confirms nothing, so
    /// an agent that really does not reach the store still steps down at its fence.
    store_seen: bool,
}

impl<O: Os> State<O> {
    /// Starts elections for load balancers newly placed here, ends those placed elsewhere,
    /// removes the addresses of load balancers it does not hold, and feeds placement, claim and
    /// store health changes.
    async fn reconcile<S: ClaimStore>(
        &mut self,
        inputs: &mut HaInputs,
        exec: &mut exec::Exec<S, O>,
    ) -> (Instant, Vec<(LoadBalancerId, Input)>) {
        let now = clock();
        let desired = inputs.desired.borrow_and_update().clone();
        let model = &desired.model;
        let claims = inputs.claims.borrow_and_update().clone();
        let connected = inputs.health.borrow_and_update().connected;
        self.store_seen |= connected;
        inputs.peers.borrow_and_update();
        let mut steps = Vec::new();
        let mut wanted = BTreeMap::new();
        for lb in &model.load_balancers {
            let Some(placement) = desired.placements.get(&lb.id) else {
                continue;
            };
            let addresses = portico_ha::addresses::of(lb);
            if let Some(assignment) = assignment(&self.node, placement)
                && !addresses.is_empty()
            {
                wanted.insert(lb.id, (assignment, addresses));
            }
        }
        let gone: Vec<LoadBalancerId> = self
            .instances
            .keys()
            .filter(|id| !wanted.contains_key(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(mut instance) = self.instances.remove(&id) {
                let actions = instance.election.step(now, Input::Placement(None));
                exec.run(id, &instance, actions, None, &inputs.peers).await;
            }
        }
        let mut held: BTreeSet<LoadBalancerId> = (self.instances.iter())
            .filter(|(_, instance)| instance.election.status().holding)
            .map(|(id, _)| *id)
            .collect();
        // Handed-over claims keep their addresses until their elections start: a load balancer
        // gone from the model, or placed without this node, loses them. No state yet, or a
        // state without its placements yet (the cache holds none), decides nothing.
        self.handed.retain(|id, _| {
            let placed = desired.placements.get(id);
            let known = model.load_balancers.iter().any(|lb| lb.id == *id);
            desired.revision == 0 || wanted.contains_key(id) || (known && placed.is_none())
        });
        held.extend(self.handed.keys());
        self.sweep.run(&desired, &held).await;
        let now = clock();
        for (id, (assignment, addresses)) in wanted {
            if !self.instances.contains_key(&id) {
                let election = match self.handed.remove(&id) {
                    Some((epoch, revision)) => {
                        let claim = Claim {
                            holder: self.node.clone(),
                            epoch,
                            lease: self.lease,
                            released: false,
                        };
                        let seen = Seen { claim, revision };
                        tracing::info!(lb = %id, epoch, "holding the claim handed over by the predecessor");
                        Election::holder(self.node.clone(), self.lease, id, self.timing, now, seen)
                    }
                    None => Election::new(self.node.clone(), self.lease, id, self.timing, now),
                };
                let instance = Instance {
                    election,
                    addresses: addresses.clone(),
                    peer: None,
                    fed: None,
                };
                self.instances.insert(id, instance);
            }
            let Some(instance) = self.instances.get_mut(&id) else {
                continue;
            };
            if instance.addresses != addresses {
                // The addresses changed under an active: the new ones are added by the next
                // takeover; the old ones removed now.
                exec.replace(
                    &instance.addresses,
                    &addresses,
                    instance.election.status().holding,
                )
                .await;
                instance.addresses = addresses;
            }
            if instance.peer != assignment.peer || instance.fed.is_none() {
                instance.peer = assignment.peer.clone();
                steps.push((id, Input::Placement(Some(assignment))));
            }
            if self.store_seen {
                steps.push((id, Input::Etcd(connected)));
            }
            if connected && claims.revision > 0 {
                let seen = seen(&claims, id);
                let revision = seen.as_ref().map_or(0, |s| s.revision);
                if instance.fed != Some(revision) {
                    instance.fed = Some(revision);
                    steps.push((id, Input::Claim(seen)));
                }
            } else {
                // Fed again once the store is back.
                instance.fed = Some(-1);
            }
        }
        (now, steps)
    }

    /// After a hand-over: advertises the claims this process held, every interval
    /// ([`Election::handing_over`]), reading nothing and writing no claim, until `kept` (the
    /// successor's elections run) or [`crate::handover::KEEP_WAIT`].
    async fn keep<S: ClaimStore>(
        &mut self,
        exec: &mut exec::Exec<S, O>,
        inputs: &HaInputs,
        mut kept: watch::Receiver<bool>,
    ) {
        let until = tokio::time::Instant::now() + crate::handover::KEEP_WAIT;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tracing::info!("handed over: advertising the claims until the new process's elections run");
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = kept.wait_for(|k| *k) => break,
                () = tokio::time::sleep_until(until) => break,
            }
            let now = clock();
            for (id, instance) in &mut self.instances {
                let actions = instance.election.handing_over(now);
                if !actions.is_empty() {
                    exec.run(*id, instance, actions, None, &inputs.peers).await;
                }
            }
        }
    }

    async fn step<S: ClaimStore>(
        &mut self,
        now: Instant,
        id: LoadBalancerId,
        input: Input,
        exec: &mut exec::Exec<S, O>,
        inputs: &HaInputs,
        outcomes: &mpsc::UnboundedSender<(LoadBalancerId, Outcome)>,
    ) {
        let Some(instance) = self.instances.get_mut(&id) else {
            return;
        };
        let actions = instance.election.step(now, input);
        if !actions.is_empty() {
            exec.run(id, instance, actions, Some(outcomes), &inputs.peers)
                .await;
        }
    }

    /// Shares the elections' status, and what a successor would be handed; whether the
    /// status changed.
    fn publish(&self, views: &HaViews, handed: &Mutex<Option<HaState>>) -> bool {
        let held = (self.instances.iter())
            .map(|(id, instance)| (*id, instance.election.status()))
            .filter(|(_, s)| s.holding && s.revision > 0)
            .map(|(id, s)| (id, (s.epoch, s.revision)))
            .collect();
        let state = HaState {
            lease: self.lease,
            held,
            quiets: false,
        };
        *handed.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
        let now: BTreeMap<LoadBalancerId, HaView> = self
            .instances
            .iter()
            .map(|(id, instance)| {
                let s = instance.election.status();
                let view = HaView {
                    holding: s.holding,
                    holder: s.holder,
                    epoch: s.epoch,
                };
                (*id, view)
            })
            .collect();
        let mut views = views.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = *views != now;
        *views = now;
        changed
    }
}

/// This node's part in `placement`, if any.
fn assignment(node: &str, placement: &Placement) -> Option<Assignment> {
    let (role, peer) = if placement.active == node {
        (Role::Active, placement.standby.clone())
    } else if placement.standby.as_deref() == Some(node) {
        (Role::Standby, Some(placement.active.clone()))
    } else {
        return None;
    };
    Some(Assignment {
        role,
        peer,
        epoch: placement.epoch,
    })
}

/// Placements as the claims have them: where `holder` names a load balancer's placed standby
/// (it took over), that agent is shown active and the placed active standby.
pub(crate) fn as_held(
    mut placements: BTreeMap<LoadBalancerId, portico_model::Placement>,
    holder: impl Fn(&LoadBalancerId) -> Option<String>,
) -> BTreeMap<LoadBalancerId, portico_model::Placement> {
    for (id, placement) in placements.iter_mut() {
        let Some(holder) = holder(id) else {
            continue;
        };
        if placement.standby.as_ref() == Some(&holder) {
            let placed = std::mem::replace(&mut placement.active, holder);
            placement.standby = Some(placed);
        }
    }
    placements
}

/// The holder of each of `ids`'s claims; a released, unreadable or absent claim has none.
pub(crate) fn holders(
    claims: &Claims,
    ids: impl Iterator<Item = LoadBalancerId>,
) -> BTreeMap<LoadBalancerId, String> {
    ids.filter_map(|id| {
        let seen = seen(claims, id)?;
        let held = !seen.claim.released && !seen.claim.holder.is_empty();
        held.then_some((id, seen.claim.holder))
    })
    .collect()
}

/// The claim of `id`; an unreadable value counts as held by nobody of the pair (the placed
/// active may overwrite it).
fn seen(claims: &Claims, id: LoadBalancerId) -> Option<Seen> {
    let entry = claims.entries.get(&id)?;
    Some(decode(&entry.value, entry.mod_revision))
}

pub(crate) fn decode(value: &[u8], revision: i64) -> Seen {
    let claim = serde_json::from_slice::<Claim>(value).unwrap_or_else(|e| {
        tracing::warn!(revision, "unreadable claim: {e}");
        Claim {
            holder: String::new(),
            epoch: 0,
            lease: 0,
            released: false,
        }
    });
    Seen { claim, revision }
}

/// The heartbeat address of every agent, from the agents' feedback.
pub(crate) fn peers_of(agents: &Agents) -> BTreeMap<String, IpAddr> {
    (agents.feedback.iter())
        .filter_map(|(node, f)| Some((node.clone(), f.advertise_address?)))
        .collect()
}

/// The peer's heartbeat socket.
fn peer_socket(
    peers: &watch::Receiver<BTreeMap<String, IpAddr>>,
    peer: &str,
    port: u16,
) -> Option<SocketAddr> {
    peers
        .borrow()
        .get(peer)
        .map(|ip| SocketAddr::new(*ip, port))
}
