//! The failover loop over the memory store on a paused clock: two agents of one load
//! balancer, their claims through the store's compare-and-swap, their addresses recorded and
//! their adverts handed from one to the other in the process (the one adapter, at the OS edge:
//! real sockets would take real time the paused clock does not wait for).

use super::*;
use portico_ha::election::Advert;
use portico_model::{LoadBalancer, Model, ObjectRef};
use portico_store::kv::Entry;
use portico_store::{Feedback, MemoryStore};
use std::sync::atomic::AtomicBool;
use tokio::task::JoinHandle;
use tokio::time::Instant as Clock;

fn claims(entries: &[(LoadBalancerId, &str)]) -> Claims {
    let entries = (entries.iter())
        .map(|(id, value)| {
            let entry = Entry {
                value: bytes::Bytes::copy_from_slice(value.as_bytes()),
                mod_revision: 3,
            };
            (*id, entry)
        })
        .collect();
    Claims {
        revision: 3,
        entries: Arc::new(entries),
    }
}

fn placement(active: &str, standby: &str) -> portico_model::Placement {
    portico_model::Placement {
        active: active.into(),
        standby: Some(standby.into()),
        epoch: 2,
    }
}

#[test]
fn the_claims_holder_is_shown_active_where_it_is_the_placed_standby() {
    let [taken, kept, released, foreign, unreadable] =
        ["a", "b", "c", "d", "e"].map(LoadBalancerId::derive);
    let view = claims(&[
        (taken, r#"{"holder":"n2","epoch":5}"#),
        (kept, r#"{"holder":"n1","epoch":5}"#),
        (released, r#"{"holder":"n2","epoch":5,"released":true}"#),
        (foreign, r#"{"holder":"n9","epoch":5}"#),
        (unreadable, "{"),
    ]);
    let all = [taken, kept, released, foreign, unreadable];
    let held = holders(&view, all.into_iter());
    assert_eq!(
        held,
        BTreeMap::from([
            (taken, "n2".to_owned()),
            (kept, "n1".to_owned()),
            (foreign, "n9".to_owned())
        ]),
        "released and unreadable claims have no holder"
    );
    let placed: BTreeMap<_, _> = all.iter().map(|id| (*id, placement("n1", "n2"))).collect();
    let shown = as_held(placed.clone(), |id| held.get(id).cloned());
    assert_eq!(
        shown[&taken],
        placement("n2", "n1"),
        "the standby took over"
    );
    for id in [kept, released, foreign, unreadable] {
        assert_eq!(shown[&id], placed[&id], "as placed");
    }
}

/// One address added (true) or removed by a node, at a time of the paused clock.
#[derive(Debug, Clone)]
struct Event {
    at: Clock,
    node: String,
    address: IpAddr,
    added: bool,
}

/// The adverts' way between the agents: each heartbeat address's queue.
type Hub = Arc<Mutex<BTreeMap<SocketAddr, mpsc::UnboundedSender<(Advert, SocketAddr)>>>>;

/// Every agent's interface: what each holds, and every change in order; and the adverts' hub.
#[derive(Debug, Clone, Default)]
struct Interfaces {
    held: Arc<Mutex<BTreeMap<String, BTreeSet<IpAddr>>>>,
    events: Arc<Mutex<Vec<Event>>>,
    hub: Hub,
}

impl Interfaces {
    fn of(&self, node: &str) -> Recording {
        Recording {
            node: node.to_owned(),
            all: self.clone(),
        }
    }

    fn holds(&self, node: &str, address: IpAddr) -> bool {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(node).is_some_and(|h| h.contains(&address))
    }

    fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Panics when two nodes held `address` at once, leaving out `gone` from the time it was
    /// gone (a killed agent's node).
    fn assert_one_holder(&self, address: IpAddr, gone: Option<(&str, Clock)>) {
        let mut holders = BTreeSet::new();
        for event in self.events().iter().filter(|e| e.address == address) {
            if let Some((node, _)) = gone.filter(|(_, at)| event.at >= *at) {
                holders.remove(node);
            }
            if event.added {
                holders.insert(event.node.clone());
            } else {
                holders.remove(&event.node);
            }
            assert!(holders.len() <= 1, "held by {holders:?} at once: {event:?}");
        }
    }
}

/// One node's interface.
#[derive(Debug, Clone)]
struct Recording {
    node: String,
    all: Interfaces,
}

impl Recording {
    fn change(&self, address: IpAddr, added: bool) {
        let mut held = self.all.held.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = held.entry(self.node.clone()).or_default();
        let changed = if added {
            mine.insert(address)
        } else {
            mine.remove(&address)
        };
        if changed {
            let event = Event {
                at: Clock::now(),
                node: self.node.clone(),
                address,
                added,
            };
            (self
                .all
                .events
                .lock()
                .unwrap_or_else(PoisonError::into_inner))
            .push(event);
        }
    }
}

/// One agent's heartbeat: its address and queue in the hub.
struct Endpoint {
    at: SocketAddr,
    hub: Hub,
    queue: mpsc::UnboundedReceiver<(Advert, SocketAddr)>,
}

impl Adverts for Endpoint {
    async fn send(&self, advert: &Advert, to: SocketAddr) {
        let hub = self.hub.lock().unwrap_or_else(PoisonError::into_inner);
        // Nobody there (or gone): lost, as a datagram is.
        if let Some(queue) = hub.get(&to) {
            let _ = queue.send((advert.clone(), self.at));
        }
    }

    async fn recv(&mut self) -> std::io::Result<(Advert, SocketAddr)> {
        match self.queue.recv().await {
            Some(received) => Ok(received),
            None => std::future::pending().await,
        }
    }
}

impl Os for Recording {
    type Heartbeat = Endpoint;

    async fn heartbeat(
        &self,
        address: SocketAddr,
        _: &portico_provider::Sockets,
    ) -> std::io::Result<Endpoint> {
        let (tx, queue) = mpsc::unbounded_channel();
        let mut hub = self.all.hub.lock().unwrap_or_else(PoisonError::into_inner);
        if hub.contains_key(&address) {
            return Err(std::io::ErrorKind::AddrInUse.into());
        }
        hub.insert(address, tx);
        Ok(Endpoint {
            at: address,
            hub: self.all.hub.clone(),
            queue,
        })
    }

    async fn add(&self, address: IpAddr) -> Result<(), String> {
        self.change(address, true);
        Ok(())
    }

    async fn remove(&self, address: IpAddr) -> Result<(), String> {
        self.change(address, false);
        Ok(())
    }

    async fn hosts(&self) -> Result<Vec<IpAddr>, String> {
        let held = self.all.held.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(held
            .get(&self.node)
            .into_iter()
            .flatten()
            .copied()
            .collect())
    }

    fn announce(&self, _: std::net::Ipv4Addr) -> Option<Result<(), String>> {
        Some(Ok(()))
    }
}

const VIP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 99, 0, 1));

fn lb() -> LoadBalancerId {
    LoadBalancerId::derive("failover-test")
}

/// One load balancer with a VIP, placed active on n1 and standby on n2.
fn desired() -> Desired {
    desired_on("n1", "n2")
}

/// One load balancer with a VIP, placed active on `active` and standby on `standby`.
fn desired_on(active: &str, standby: &str) -> Desired {
    let balancer = LoadBalancer {
        id: lb(),
        name: "failover-test".into(),
        origin: ObjectRef::new("IngressClass", "", "portico"),
        provider: "proxy".into(),
        vip: Some(VIP),
        floating_ip: None,
        listeners: Default::default(),
        pools: vec![],
    };
    let mut desired = Desired {
        model: Arc::new(Model {
            load_balancers: vec![balancer],
        }),
        ..Desired::default()
    };
    desired.placements.insert(lb(), placement(active, standby));
    desired
}

/// Tells the store `node`'s heartbeat address.
fn advertise(store: &MemoryStore, node: &str, address: [u8; 4]) {
    store.report(Feedback {
        node: node.to_owned(),
        advertise_address: Some(IpAddr::from(address)),
        ..Feedback::default()
    });
}

/// One agent's failover loop, and what must live as long as it runs.
struct Agent {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
    _hand_over: crate::handover::HaHandOver,
}

fn start(store: MemoryStore, node: &str, address: [u8; 4], port: u16, all: &Interfaces) -> Agent {
    let desired = portico_store::AgentStore::desired(&store);
    start_with(store, desired, node, (address, port), all)
}

/// An agent that reads its desired state from `desired` rather than from `store`.
fn start_with(
    store: MemoryStore,
    desired: watch::Receiver<Arc<Desired>>,
    node: &str,
    (address, port): ([u8; 4], u16),
    all: &Interfaces,
) -> Agent {
    let settings = HaSettings {
        interface: "test0".to_owned(),
        advertise_address: IpAddr::from(address),
        heartbeat_port: port,
        timing: Timing::default(),
    };
    let (hand_over, quieting) = crate::handover::ha_hand_over();
    let (stop, shutdown) = watch::channel(false);
    let registry = prometheus_client::registry::Registry::default();
    let admin = portico_admin::Admin::new(Arc::new(registry));
    let upgrades = Upgrades {
        handed: None,
        sockets: Arc::new(portico_provider::Sockets::default()),
        handed_over: Arc::new(AtomicBool::new(false)),
        running: watch::channel(false).0,
        quieting,
        quiet: watch::channel(true).1,
        advertising: watch::channel(false).0,
    };
    let agent = HaAgent {
        node: node.to_owned(),
        store: store.clone(),
        os: all.of(node),
        settings,
    };
    let metrics = crate::metrics::AppMetrics::new(&mut Default::default());
    let view = Arc::new(AdminView::new(admin));
    let task = tokio::spawn(link(agent, desired, view, metrics, upgrades, shutdown));
    Agent {
        task,
        stop,
        _hand_over: hand_over,
    }
}

/// Waits (on the paused clock) until `done`, at most `limit`; the time it took.
async fn until(limit: Duration, done: impl Fn() -> bool) -> Option<Duration> {
    let start = Clock::now();
    while !done() {
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Some(start.elapsed())
}

/// The claim's holder and epoch in the store.
fn claim_of(store: &MemoryStore) -> Option<(String, u64)> {
    let claims = ClaimStore::claims(store).borrow().clone();
    let seen = seen(&claims, lb())?;
    Some((seen.claim.holder, seen.claim.epoch))
}

/// The heartbeat port of both agents.
const PORT: u16 = 7000;

/// Two agents over one store: the placed active claims and adds the VIP, the standby holds
/// nothing.
async fn pair(n1: MemoryStore, n2: MemoryStore, all: &Interfaces) -> (Agent, Agent) {
    let store = n1.clone();
    store.write(desired());
    advertise(&store, "n1", [10, 0, 0, 1]);
    advertise(&store, "n2", [10, 0, 0, 2]);
    let active = start(n1, "n1", [10, 0, 0, 1], PORT, all);
    let standby = start(n2, "n2", [10, 0, 0, 2], PORT, all);
    let took = until(Duration::from_secs(2), || all.holds("n1", VIP)).await;
    assert!(took.is_some(), "the placed active never added the VIP");
    // Long enough for the standby to have claimed, were it going to.
    tokio::time::sleep(Timing::default().dead() * 5).await;
    assert!(all.holds("n1", VIP) && !all.holds("n2", VIP));
    assert_eq!(claim_of(&store).map(|c| c.0), Some("n1".to_owned()));
    (active, standby)
}

#[tokio::test(start_paused = true)]
async fn the_standby_takes_over_after_the_dead_interval_once_the_active_is_gone() {
    let store = MemoryStore::default();
    let all = Interfaces::default();
    let (active, _standby) = pair(store.clone(), store.clone(), &all).await;
    let (_, epoch) = claim_of(&store).unwrap_or_default();
    // Killed: no release, no more adverts (its heartbeat socket is closed).
    active.task.abort();
    let killed = Clock::now();
    let timing = Timing::default();
    let took = until(Duration::from_secs(2), || all.holds("n2", VIP)).await;
    let took = took.expect("the standby never took over");
    assert!(
        took >= timing.dead() - timing.interval,
        "taken over after {took:?}, before the dead interval {:?}",
        timing.dead()
    );
    assert!(
        took <= timing.dead() + timing.interval * 2,
        "taken over only after {took:?}"
    );
    let (holder, now) = claim_of(&store).unwrap_or_default();
    assert_eq!(holder, "n2");
    assert!(now > epoch, "the takeover's epoch {now} after {epoch}");
    all.assert_one_holder(VIP, Some(("n1", killed)));
}

#[tokio::test(start_paused = true)]
async fn an_active_cut_off_from_store_and_peer_drops_the_vip_before_the_standby_claims_it() {
    let store = MemoryStore::default();
    let cut = store.with_own_link();
    let all = Interfaces::default();
    let (_active, _standby) = pair(cut.clone(), store.clone(), &all).await;
    // The active reaches neither the store nor its peer; its adverts go where nobody listens,
    // and so do the standby's.
    cut.set_reachable(false);
    advertise(&store, "n1", [10, 0, 0, 3]);
    advertise(&store, "n2", [10, 0, 0, 4]);
    let took = until(Duration::from_secs(2), || all.holds("n2", VIP)).await;
    assert!(took.is_some(), "the standby never took over");
    assert!(
        !all.holds("n1", VIP),
        "the cut-off active still holds the VIP"
    );
    all.assert_one_holder(VIP, None);
    assert_eq!(claim_of(&store).map(|c| c.0), Some("n2".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn an_active_that_stops_releases_and_the_standby_takes_over_at_once() {
    let store = MemoryStore::default();
    let all = Interfaces::default();
    let (active, _standby) = pair(store.clone(), store.clone(), &all).await;
    active.stop.send_replace(true);
    let took = until(Duration::from_secs(2), || all.holds("n2", VIP)).await;
    let took = took.expect("the standby never took over");
    assert!(
        took < Timing::default().dead(),
        "a released claim is taken at once, not after {took:?}"
    );
    all.assert_one_holder(VIP, None);
}

#[tokio::test(start_paused = true)]
async fn two_agents_that_both_see_themselves_placed_active_hold_the_vip_one_at_a_time() {
    // A placement change seen by one agent before the other: each is the placed active in
    // what it reads, and both claim the absent claim at once; the swap lets one win.
    let store = MemoryStore::default();
    let all = Interfaces::default();
    advertise(&store, "n1", [10, 0, 0, 1]);
    advertise(&store, "n2", [10, 0, 0, 2]);
    let seen_by = |active: &str, standby: &str| {
        let desired = Desired {
            revision: 1,
            ..desired_on(active, standby)
        };
        let (tx, mut rx) = watch::channel(Arc::new(desired));
        rx.mark_changed();
        (tx, rx)
    };
    let (_one, by_n1) = seen_by("n1", "n2");
    let (_two, by_n2) = seen_by("n2", "n1");
    let _n1 = start_with(store.clone(), by_n1, "n1", ([10, 0, 0, 1], PORT), &all);
    let _n2 = start_with(store.clone(), by_n2, "n2", ([10, 0, 0, 2], PORT), &all);
    let held = || all.holds("n1", VIP) || all.holds("n2", VIP);
    assert!(
        until(Duration::from_secs(2), held).await.is_some(),
        "nobody took the VIP"
    );
    tokio::time::sleep(Timing::default().dead() * 5).await;
    all.assert_one_holder(VIP, None);
    let (holder, _) = claim_of(&store).unwrap_or_default();
    assert!(
        all.holds(&holder, VIP),
        "the claim's holder {holder} holds the VIP"
    );
}
