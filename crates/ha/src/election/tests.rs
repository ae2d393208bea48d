//! The election on an injected clock: two agents, an etcd register with compare-and-swap and
//! a lossy advert link, stepped every [`TICK`]. etcd answers and watch events reach an agent
//! at once when it reaches etcd; adverts arrive one tick after they are sent.
#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

const A: usize = 0;
const B: usize = 1;
const NAMES: [&str; 2] = ["a", "b"];

struct Node {
    election: Election,
    /// Its process's etcd lease: a new one at each (re)start.
    lease: i64,
    /// The addresses are on its interface.
    holding: bool,
    alive: bool,
    etcd: bool,
    garps: u32,
}

struct Sim {
    now: Instant,
    start: Instant,
    lb: LoadBalancerId,
    nodes: [Node; 2],
    /// The claim in etcd.
    claim: Option<Seen>,
    revision: i64,
    /// `link[from]`: adverts from `from` reach the other.
    link: [bool; 2],
    in_flight: Vec<(usize, Advert)>,
    /// Ticks at which both held the addresses.
    overlaps: u32,
    /// How long a swap takes to commit (and be answered).
    etcd_delay: Duration,
    /// Swaps not yet committed: (due, node, expect, claim).
    swaps: Vec<(Instant, usize, i64, Claim)>,
    /// A process that handed its claim over and keeps advertising until its successor's
    /// elections start ([`Election::handing_over`]): the node and its old election.
    keeper: Option<(usize, Election)>,
}

fn assignment(i: usize) -> Assignment {
    Assignment {
        role: if i == A { Role::Active } else { Role::Standby },
        peer: Some(NAMES[1 - i].to_owned()),
        epoch: 1,
    }
}

impl Sim {
    fn new() -> Sim {
        let now = Instant::now();
        let lb = LoadBalancerId::derive("lb");
        let node = |i: usize| Node {
            election: Election::new(NAMES[i].into(), i as i64 + 1, lb, Timing::default(), now),
            lease: i as i64 + 1,
            holding: false,
            alive: true,
            etcd: true,
            garps: 0,
        };
        let mut sim = Sim {
            now,
            start: now,
            lb,
            nodes: [node(A), node(B)],
            claim: None,
            revision: 0,
            link: [true, true],
            in_flight: vec![],
            overlaps: 0,
            etcd_delay: Duration::ZERO,
            swaps: vec![],
            keeper: None,
        };
        for i in [A, B] {
            sim.boot(i);
        }
        sim
    }

    fn boot(&mut self, i: usize) {
        let claim = self.claim.clone();
        self.input(i, Input::Placement(Some(assignment(i))));
        self.input(i, Input::Etcd(true));
        self.input(i, Input::Claim(claim));
    }

    /// The node restarts: a new election under a new lease, its addresses cleared first.
    fn restart(&mut self, i: usize) {
        let lease = self.nodes[A].lease.max(self.nodes[B].lease) + 1;
        self.nodes[i].lease = lease;
        self.nodes[i].election =
            Election::new(NAMES[i].into(), lease, self.lb, Timing::default(), self.now);
        self.nodes[i].holding = false;
        self.nodes[i].alive = true;
        self.boot(i);
    }

    /// The node's process is upgraded: the old one stops (no shutdown: it hands over), and
    /// `gap` later the new one starts as the holder of the claim the old one held, under the
    /// same lease; the addresses stay on the interface meanwhile.
    fn upgrade(&mut self, i: usize, gap: Duration) {
        let held = self.nodes[i].election.status().holding;
        let seen = self.claim.clone().unwrap();
        self.nodes[i].alive = false;
        self.run(gap);
        let lease = self.nodes[i].lease;
        let (name, timing) = (NAMES[i].into(), Timing::default());
        self.nodes[i].election = if held {
            Election::holder(name, lease, self.lb, timing, self.now, seen)
        } else {
            Election::new(name, lease, self.lb, timing, self.now)
        };
        self.nodes[i].alive = true;
        self.boot(i);
    }

    /// [`Sim::upgrade`] as the agent does it: the old process, once its elections stopped,
    /// keeps advertising ([`Election::handing_over`]) until the new one's elections start,
    /// `gap` later.
    fn upgrade_kept(&mut self, i: usize, gap: Duration) {
        let held = self.nodes[i].election.status().holding;
        let seen = self.claim.clone().unwrap();
        let (name, timing, lease) = (NAMES[i].into(), Timing::default(), self.nodes[i].lease);
        let fresh = Election::new(NAMES[i].into(), lease, self.lb, timing, self.now);
        let old = std::mem::replace(&mut self.nodes[i].election, fresh);
        self.keeper = Some((i, old));
        self.nodes[i].alive = false;
        self.run(gap);
        self.nodes[i].election = if held {
            Election::holder(name, lease, self.lb, timing, self.now, seen)
        } else {
            Election::new(name, lease, self.lb, timing, self.now)
        };
        self.nodes[i].alive = true;
        self.boot(i);
        // The successor's first adverts went out at its start: the old process stops.
        self.keeper = None;
    }

    fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    fn input(&mut self, i: usize, input: Input) {
        if !self.nodes[i].alive {
            return;
        }
        let actions = self.nodes[i].election.step(self.now, input);
        for action in actions {
            self.act(i, action);
        }
    }

    fn act(&mut self, i: usize, action: Action) {
        match action {
            Action::AddAddresses => self.nodes[i].holding = true,
            Action::RemoveAddresses => self.nodes[i].holding = false,
            Action::Garp => self.nodes[i].garps += 1,
            Action::Advert(a) => {
                if self.link[i] {
                    self.in_flight.push((1 - i, a));
                }
            }
            Action::Claim { expect, claim } if self.etcd_delay.is_zero() => {
                self.cas(i, expect, claim)
            }
            Action::Claim { expect, claim } => {
                let due = self.now + self.etcd_delay;
                self.swaps.push((due, i, expect, claim));
            }
        }
    }

    fn cas(&mut self, i: usize, expect: i64, claim: Claim) {
        if !self.nodes[i].etcd {
            self.input(i, Input::Outcome(Outcome::Failed));
            return;
        }
        let current = self.claim.as_ref().map_or(0, |s| s.revision);
        if current != expect {
            let now = self.claim.clone();
            self.input(i, Input::Outcome(Outcome::Lost(now)));
            return;
        }
        self.revision += 1;
        self.claim = Some(Seen {
            claim,
            revision: self.revision,
        });
        self.input(i, Input::Outcome(Outcome::Done(self.revision)));
        let seen = self.claim.clone();
        for j in [A, B] {
            if self.nodes[j].etcd {
                self.input(j, Input::Claim(seen.clone()));
            }
        }
    }

    fn set_etcd(&mut self, i: usize, up: bool) {
        self.nodes[i].etcd = up;
        self.input(i, Input::Etcd(up));
        if up {
            let claim = self.claim.clone();
            self.input(i, Input::Claim(claim));
        }
    }

    fn tick(&mut self) {
        self.now += TICK;
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.swaps)
            .into_iter()
            .partition(|(at, ..)| *at <= now);
        self.swaps = later;
        for (_, i, expect, claim) in due {
            if self.nodes[i].alive {
                self.cas(i, expect, claim);
            }
        }
        for (to, advert) in std::mem::take(&mut self.in_flight) {
            self.input(to, Input::Advert(advert));
        }
        for i in [A, B] {
            self.input(i, Input::Tick);
        }
        if let Some((i, old)) = &mut self.keeper {
            let i = *i;
            for action in old.handing_over(now) {
                match action {
                    Action::Advert(a) if self.link[i] => self.in_flight.push((1 - i, a)),
                    Action::Advert(_) => {}
                    other => panic!("a process handing over did {other:?}"),
                }
            }
        }
        if self.nodes[A].holding && self.nodes[B].holding {
            self.overlaps += 1;
        }
    }

    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick();
        }
    }

    /// Runs until `f` holds; how long that took.
    fn until(&mut self, limit: Duration, f: impl Fn(&Sim) -> bool) -> Option<Duration> {
        let from = self.now;
        while self.now - from < limit {
            if f(self) {
                return Some(self.now - from);
            }
            self.tick();
        }
        None
    }

    fn holders(&self) -> Vec<usize> {
        [A, B]
            .into_iter()
            .filter(|&i| self.nodes[i].holding)
            .collect()
    }

    fn epoch(&self) -> u64 {
        self.claim.as_ref().map_or(0, |s| s.claim.epoch)
    }

    /// SIGKILL of the node (the whole node: its addresses go with it).
    fn kill(&mut self, i: usize) {
        self.nodes[i].alive = false;
        self.nodes[i].holding = false;
    }
}

fn started() -> Sim {
    let mut sim = Sim::new();
    sim.run(Duration::from_millis(500));
    assert_eq!(sim.holders(), vec![A]);
    sim
}

#[test]
fn the_placed_active_claims_at_once_and_the_standby_waits() {
    let mut sim = Sim::new();
    let took = sim.until(Duration::from_secs(1), |s| s.holders() == vec![A]);
    assert_eq!(took, Some(Duration::ZERO));
    sim.run(Duration::from_secs(3));
    assert_eq!(sim.holders(), vec![A]);
    assert_eq!(sim.epoch(), 1);
    assert_eq!(sim.nodes[A].garps, Timing::default().garp_count);
    assert_eq!(sim.overlaps, 0);
    // With the link up, nobody writes to etcd after the first claim.
    assert_eq!(sim.revision, 1);
}

#[test]
fn the_standby_takes_over_a_killed_active_after_dead_interval() {
    let mut sim = started();
    sim.kill(A);
    let took = sim
        .until(Duration::from_secs(2), |s| s.holders() == vec![B])
        .unwrap();
    let dead = Timing::default().dead();
    assert!(took > dead, "took {took:?}");
    assert!(
        took <= dead + Timing::default().interval + TICK * 2,
        "took {took:?}"
    );
    assert_eq!(sim.epoch(), 2);
    assert_eq!(sim.nodes[B].garps, 1);
    sim.run(Duration::from_secs(2));
    assert_eq!(sim.nodes[B].garps, Timing::default().garp_count);
}

#[test]
fn shutdown_hands_over_within_two_ticks() {
    let mut sim = started();
    sim.input(A, Input::Shutdown);
    assert!(!sim.nodes[A].holding);
    let took = sim
        .until(Duration::from_secs(2), |s| s.holders() == vec![B])
        .unwrap();
    assert!(took <= TICK * 2, "took {took:?}");
    assert_eq!(sim.overlaps, 0);
}

#[test]
fn shutdown_hands_over_through_etcd_when_the_release_advert_is_lost() {
    let mut sim = started();
    sim.link[A] = false;
    // b stops hearing a, and says so.
    sim.run(Duration::from_millis(150));
    sim.input(A, Input::Shutdown);
    let took = sim
        .until(Duration::from_secs(2), |s| s.holders() == vec![B])
        .unwrap();
    assert!(took <= TICK * 2, "took {took:?}");
}

#[test]
fn a_standby_without_etcd_never_claims() {
    let mut sim = started();
    sim.set_etcd(B, false);
    sim.kill(A);
    sim.run(Duration::from_secs(5));
    assert!(sim.holders().is_empty());
    // etcd back: it takes over.
    sim.set_etcd(B, true);
    sim.run(Duration::from_millis(400));
    assert_eq!(sim.holders(), vec![B]);
}

#[test]
fn a_cut_link_with_etcd_up_keeps_the_active_which_renews_its_claim() {
    let mut sim = started();
    sim.link = [false, false];
    sim.run(Duration::from_secs(3));
    assert_eq!(sim.holders(), vec![A]);
    assert_eq!(sim.epoch(), 1);
    assert!(sim.revision > 20, "renewals: {}", sim.revision);
    assert_eq!(sim.overlaps, 0);
    // Link back: renewals stop.
    sim.link = [true, true];
    sim.run(Duration::from_millis(200));
    let revision = sim.revision;
    sim.run(Duration::from_secs(1));
    assert_eq!(sim.revision, revision);
}

#[test]
fn a_one_way_cut_keeps_the_active_too() {
    for from in [A, B] {
        let mut sim = started();
        sim.link[from] = false;
        sim.run(Duration::from_secs(3));
        assert_eq!(sim.holders(), vec![A], "adverts from {from} dropped");
        assert_eq!(sim.overlaps, 0);
    }
}

#[test]
fn an_active_cut_off_from_etcd_and_peer_drops_before_the_standby_claims() {
    let mut sim = started();
    sim.set_etcd(A, false);
    sim.link = [false, false];
    let dropped = sim
        .until(Duration::from_secs(2), |s| !s.nodes[A].holding)
        .unwrap();
    assert!(
        dropped <= Timing::default().fence() + TICK * 2,
        "{dropped:?}"
    );
    sim.until(Duration::from_secs(2), |s| s.holders() == vec![B])
        .unwrap();
    assert_eq!(sim.overlaps, 0);
    assert_eq!(sim.epoch(), 2);
}

#[test]
fn an_active_without_etcd_that_hears_its_peer_keeps_the_addresses() {
    let mut sim = started();
    sim.set_etcd(A, false);
    sim.set_etcd(B, false);
    sim.run(Duration::from_secs(3));
    assert_eq!(sim.holders(), vec![A]);
}

#[test]
fn an_active_without_etcd_whose_adverts_are_lost_drops_before_the_standby_claims() {
    // The active hears the standby but the standby does not hear it: the standby's adverts
    // say so, so the active counts its peer as silent, cannot renew without etcd, and drops
    // its addresses before the standby may claim.
    let mut sim = started();
    sim.set_etcd(A, false);
    sim.link[A] = false;
    sim.run(Duration::from_secs(2));
    assert_eq!(sim.holders(), vec![B]);
    assert_eq!(sim.overlaps, 0);
    // The active's etcd comes back: it sees epoch 2 held by b and stays standby.
    sim.set_etcd(A, true);
    sim.link[A] = true;
    sim.run(Duration::from_secs(2));
    assert_eq!(sim.holders(), vec![B]);
}

#[test]
fn an_advert_of_a_higher_epoch_steps_the_active_down_at_once() {
    let mut sim = started();
    let advert = Advert {
        v: VERSION,
        node: "b".into(),
        lb: sim.lb,
        epoch: 9,
        role: AdvertRole::Active,
        hearing: true,
        release: false,
    };
    let now = sim.now;
    let actions = sim.nodes[A].election.step(now, Input::Advert(advert));
    assert_eq!(actions.first(), Some(&Action::RemoveAddresses));
    // Its own try to take the claim back fails in a real etcd, as b's swap moved it.
    assert!(matches!(actions.get(1), Some(Action::Claim { claim, .. }) if claim.epoch == 2));
}

#[test]
fn the_active_steps_down_when_etcd_shows_the_claim_held_by_another() {
    let mut sim = started();
    let seen = Seen {
        claim: Claim {
            holder: "b".into(),
            epoch: 2,
            lease: 2,
            released: false,
        },
        revision: 99,
    };
    let now = sim.now;
    let actions = sim.nodes[A].election.step(now, Input::Claim(Some(seen)));
    assert_eq!(actions.first(), Some(&Action::RemoveAddresses));
    assert!(!actions.iter().any(|a| matches!(a, Action::Claim { .. })));
}

#[test]
fn adverts_of_strangers_or_other_load_balancers_are_ignored() {
    let mut sim = started();
    let mut advert = Advert {
        v: VERSION,
        node: "c".into(),
        lb: sim.lb,
        epoch: 9,
        role: AdvertRole::Active,
        hearing: true,
        release: true,
    };
    sim.input(A, Input::Advert(advert.clone()));
    advert.node = "b".into();
    advert.lb = LoadBalancerId::derive("other");
    sim.input(A, Input::Advert(advert));
    assert!(sim.nodes[A].holding);
}

#[test]
fn a_returning_agent_becomes_standby_and_does_not_take_back() {
    let mut sim = started();
    sim.kill(A);
    sim.until(Duration::from_secs(2), |s| s.holders() == vec![B])
        .unwrap();
    sim.restart(A);
    sim.run(Duration::from_secs(3));
    assert_eq!(sim.holders(), vec![B]);
    assert_eq!(sim.epoch(), 2);
    assert_eq!(sim.overlaps, 0);
}

#[test]
fn a_holder_restarted_before_its_standby_noticed_contends_for_its_old_claim() {
    let mut sim = started();
    // A crashes and comes back before the standby noticed: the claim still names it, under
    // its earlier lease, so it is not its own.
    sim.kill(A);
    sim.run(Duration::from_millis(50));
    sim.restart(A);
    let took = sim
        .until(Duration::from_secs(1), |s| !s.holders().is_empty())
        .unwrap();
    assert!(took > Timing::default().dead() / 2, "took {took:?}");
    sim.run(Duration::from_secs(2));
    assert_eq!(sim.holders().len(), 1);
    assert_eq!(sim.epoch(), 2);
    assert_eq!(sim.overlaps, 0);
}

/// An election of `a` (lease 2), placed active with peer `b`, that sees `claim` in etcd; what
/// it does then.
fn seeing(claim: Claim) -> (Election, Instant, Vec<Action>) {
    let start = Instant::now();
    let lb = LoadBalancerId::derive("lb");
    let mut a = Election::new("a".into(), 2, lb, Timing::default(), start);
    a.step(start, Input::Placement(Some(assignment(A))));
    a.step(start, Input::Etcd(true));
    let actions = a.step(start, Input::Claim(Some(Seen { claim, revision: 5 })));
    (a, start, actions)
}

fn claim_of(lease: i64) -> Claim {
    Claim {
        holder: "a".into(),
        epoch: 3,
        lease,
        released: false,
    }
}

#[test]
fn a_claim_naming_this_node_under_another_lease_is_taken_only_when_unchanged_for_dead() {
    let claims = |a: &Action| matches!(a, Action::Claim { expect: 5, claim } if *claim == Claim { epoch: 4, ..claim_of(2) });
    // Its own lease: taken back at once (it fenced itself and etcd is back).
    let (_, _, actions) = seeing(claim_of(2));
    assert!(actions.iter().any(claims), "{actions:?}");
    // An earlier run's (0: written by a Portico without leases): only once the claim stayed
    // unchanged for `dead` and no peer advertised active meanwhile.
    for earlier in [1, 0] {
        let (mut a, start, actions) = seeing(claim_of(earlier));
        assert!(!actions.iter().any(claims), "{actions:?}");
        let at = (1..1000)
            .map(|i| start + TICK * i)
            .find(|t| a.step(*t, Input::Tick).iter().any(claims))
            .unwrap();
        let dead = Timing::default().dead();
        assert!(
            at - start > dead && at - start <= dead + TICK,
            "{:?}",
            at - start
        );
    }
}

#[test]
fn an_active_steps_down_when_the_claim_names_its_node_under_another_lease() {
    let mut sim = started();
    let seen = Seen {
        claim: Claim {
            epoch: 2,
            ..claim_of(99)
        },
        revision: 99,
    };
    let now = sim.now;
    let actions = sim.nodes[A].election.step(now, Input::Claim(Some(seen)));
    assert_eq!(actions.first(), Some(&Action::RemoveAddresses));
}

#[test]
fn the_claim_carries_the_lease_and_reads_without_it() {
    let claim = Claim {
        holder: "a".into(),
        epoch: 3,
        lease: 7,
        released: false,
    };
    let json = serde_json::to_string(&claim).unwrap();
    assert_eq!(json, r#"{"holder":"a","epoch":3,"lease":7}"#);
    let old: Claim = serde_json::from_str(r#"{"holder":"a","epoch":3}"#).unwrap();
    assert_eq!(old, Claim { lease: 0, ..claim });
}

#[test]
fn removal_from_the_placement_drops_the_addresses() {
    let mut sim = started();
    sim.input(A, Input::Placement(None));
    assert!(!sim.nodes[A].holding);
}

#[test]
fn a_slow_etcd_does_not_make_an_active_with_a_dead_peer_flap() {
    // The first renewal goes out when the peer has been silent for `renew_after` and must be
    // committed before `fence`: 65 ms with the defaults.
    let mut sim = started();
    sim.etcd_delay = Duration::from_millis(50);
    sim.kill(B);
    sim.run(Duration::from_secs(3));
    assert_eq!(sim.holders(), vec![A]);
    assert_eq!(
        sim.epoch(),
        1,
        "it kept its epoch: no step-down and take-back"
    );
}

#[test]
fn the_fence_is_shorter_than_the_dead_interval() {
    let t = Timing::default();
    assert!(t.fence() + t.interval <= t.dead());
    assert!(t.renew_after() < t.fence());
    assert!(t.confirmed_fence() < t.dead());
}

#[derive(Debug, Clone)]
enum Fault {
    Link(usize, bool),
    Etcd(usize, bool),
    Kill(usize),
    Restart(usize),
    Shutdown(usize),
    Wait(u64),
    /// etcd commits swaps this many milliseconds after they are sent.
    Slow(u64),
}

fn fault() -> impl Strategy<Value = Fault> {
    let node = 0usize..2;
    prop_oneof![
        (node.clone(), any::<bool>()).prop_map(|(i, up)| Fault::Link(i, up)),
        (node.clone(), any::<bool>()).prop_map(|(i, up)| Fault::Etcd(i, up)),
        node.clone().prop_map(Fault::Kill),
        node.clone().prop_map(Fault::Restart),
        node.prop_map(Fault::Shutdown),
        (0u64..600).prop_map(Fault::Wait),
        (0u64..150).prop_map(Fault::Slow),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever links fail, agents die, restart or leave, however slowly etcd commits: never
    /// two holders at once (a commit's watch events arrive at once; an advert arrives one tick
    /// after it is sent), and once all heals, exactly one holder.
    #[test]
    fn no_split_brain_and_recovery_under_random_faults(faults in proptest::collection::vec(fault(), 1..25)) {
        let mut sim = started();
        for f in faults {
            match f {
                Fault::Link(i, up) => sim.link[i] = up,
                Fault::Etcd(i, up) => sim.set_etcd(i, up),
                Fault::Kill(i) => sim.kill(i),
                Fault::Restart(i) => { sim.set_etcd(i, true); sim.restart(i) }
                Fault::Shutdown(i) => sim.input(i, Input::Shutdown),
                Fault::Wait(ms) => sim.run(Duration::from_millis(ms)),
                Fault::Slow(ms) => sim.etcd_delay = Duration::from_millis(ms),
            }
            sim.tick();
        }
        prop_assert_eq!(sim.overlaps, 0, "two holders after {:?}", sim.elapsed());
        sim.link = [true, true];
        sim.etcd_delay = Duration::ZERO;
        for i in [A, B] {
            if !sim.nodes[i].alive || sim.nodes[i].election.stopped {
                sim.set_etcd(i, true);
                sim.restart(i);
            } else {
                sim.set_etcd(i, true);
            }
        }
        sim.run(Duration::from_secs(2));
        prop_assert_eq!(sim.holders().len(), 1);
        prop_assert_eq!(sim.overlaps, 0);
    }
}

#[test]
fn a_standby_takes_an_unclaimed_load_balancer_only_after_five_dead_intervals() {
    let start = Instant::now();
    let lb = LoadBalancerId::derive("lb");
    let mut b = Election::new("b".into(), 2, lb, Timing::default(), start);
    b.step(start, Input::Placement(Some(assignment(B))));
    b.step(start, Input::Etcd(true));
    b.step(start, Input::Claim(None));
    let claims = |a: &Action| matches!(a, Action::Claim { claim, .. } if claim.epoch == 1);
    let at = (1..1000)
        .map(|i| start + TICK * i)
        .find(|t| b.step(*t, Input::Tick).iter().any(claims))
        .unwrap();
    let dead = Timing::default().dead();
    assert!(
        at - start > dead * 5 && at - start <= dead * 5 + TICK,
        "{:?}",
        at - start
    );
}

#[test]
fn an_upgraded_holder_keeps_the_claim_without_an_election() {
    let mut sim = started();
    let revision = sim.revision;
    // Ten upgrades, the new process starting up to 150 ms (less than `dead`) after the old
    // one went quiet.
    for gap in [0, 5, 20, 50, 100, 150, 0, 10, 30, 150] {
        sim.upgrade(A, Duration::from_millis(gap));
        assert_eq!(sim.holders(), vec![A], "after a gap of {gap} ms");
        sim.run(Duration::from_millis(500));
        assert_eq!(sim.holders(), vec![A]);
    }
    assert_eq!(sim.epoch(), 1, "no takeover");
    assert_eq!(sim.revision, revision, "the claim was not written again");
    assert_eq!(sim.overlaps, 0);
    assert!(!sim.nodes[B].election.status().holding);
}

#[test]
fn a_successor_starting_later_than_dead_without_adverts_meanwhile_loses_the_claim() {
    // What the hand-over must prevent: on a loaded node the new process's elections start
    // more than `dead` after the old one's stopped; with nobody advertising meanwhile the
    // standby takes over.
    let mut sim = started();
    sim.upgrade(A, Duration::from_millis(400));
    sim.run(Duration::from_millis(500));
    assert_eq!(sim.epoch(), 2, "the standby took over");
}

#[test]
fn an_upgraded_holder_kept_advertised_keeps_the_claim_however_late_its_successor_starts() {
    let mut sim = started();
    let revision = sim.revision;
    for gap in [0, 150, 250, 400, 1000, 3000, 50, 5000] {
        sim.upgrade_kept(A, Duration::from_millis(gap));
        assert_eq!(sim.holders(), vec![A], "after a gap of {gap} ms");
        sim.run(Duration::from_millis(500));
        assert_eq!(sim.holders(), vec![A], "500 ms after a gap of {gap} ms");
    }
    assert_eq!(sim.epoch(), 1, "no takeover");
    assert_eq!(sim.revision, revision, "the claim was not written again");
    assert_eq!(sim.overlaps, 0);
    assert!(!sim.nodes[B].election.status().holding);
}

#[test]
fn an_upgraded_standby_kept_advertised_leaves_an_active_that_cannot_renew_in_place() {
    // The active's renewals do not commit (etcd slow on a loaded node): only the standby's
    // adverts keep it. The standby's successor starts its elections 1 s after its
    // predecessor's stopped; the predecessor's adverts fill the gap.
    let mut sim = started();
    sim.etcd_delay = Duration::from_secs(10);
    sim.run(Duration::from_millis(500));
    assert_eq!(sim.holders(), vec![A]);
    for gap in [300, 1000, 150] {
        sim.upgrade_kept(B, Duration::from_millis(gap));
        sim.run(Duration::from_millis(500));
        assert_eq!(sim.holders(), vec![A], "after a gap of {gap} ms");
    }
    assert_eq!(sim.epoch(), 1);
    assert_eq!(sim.overlaps, 0);
}

#[test]
fn handing_over_advertises_the_holder_every_interval_and_nothing_else() {
    let lb = LoadBalancerId::derive("lb");
    let timing = Timing::default();
    let t0 = Instant::now();
    let seen = Seen {
        claim: claim_of(2),
        revision: 5,
    };
    let mut a = Election::holder("a".into(), 2, lb, timing, t0, seen);
    a.step(t0, Input::Placement(Some(assignment(A))));
    // Long past the fence and the renewal: a running holder would renew or step down.
    let mut adverts = vec![];
    let mut t = t0 + TICK;
    while t < t0 + Duration::from_secs(2) {
        for action in a.handing_over(t) {
            match action {
                Action::Advert(advert) => adverts.push((t, advert)),
                other => panic!("{other:?}"),
            }
        }
        t += TICK;
    }
    assert!(
        adverts
            .iter()
            .all(|(_, a)| a.role == AdvertRole::Active && a.epoch == 3 && !a.release)
    );
    let gaps: Vec<Duration> = adverts.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().all(|g| *g == timing.interval), "{gaps:?}");
    assert!(adverts.len() >= 39, "{}", adverts.len());
    // A standby that heard its peer goes on saying so, as a standby.
    let mut b = Election::new("b".into(), 3, lb, timing, t0);
    b.step(t0, Input::Placement(Some(assignment(B))));
    let heard = Advert {
        v: VERSION,
        node: "a".into(),
        lb,
        epoch: 3,
        role: AdvertRole::Active,
        hearing: true,
        release: false,
    };
    b.step(t0, Input::Advert(heard));
    let later = t0 + Duration::from_secs(1);
    let said = b.handing_over(t0 + timing.interval);
    assert!(
        matches!(said.as_slice(), [Action::Advert(a)] if a.role == AdvertRole::Standby && a.hearing),
        "{said:?}"
    );
    let said = b.handing_over(later);
    assert!(
        matches!(said.as_slice(), [Action::Advert(a)] if a.role == AdvertRole::Standby && a.hearing),
        "{said:?}"
    );
    // One that was shut down, or has no peer, says nothing.
    a.step(t, Input::Shutdown);
    assert!(a.handing_over(t + Duration::from_secs(1)).is_empty());
    let mut alone = Election::new("c".into(), 4, lb, timing, t0);
    let solo = Assignment {
        peer: None,
        ..assignment(A)
    };
    alone.step(t0, Input::Placement(Some(solo)));
    assert!(alone.handing_over(later).is_empty());
}

#[test]
fn an_upgraded_holder_advertises_at_once_and_adds_nothing() {
    let lb = LoadBalancerId::derive("lb");
    let now = Instant::now();
    let seen = Seen {
        claim: claim_of(2),
        revision: 5,
    };
    let mut a = Election::holder("a".into(), 2, lb, Timing::default(), now, seen.clone());
    assert!(a.status().holding);
    assert_eq!(a.status().epoch, 3);
    let actions = a.step(now, Input::Placement(Some(assignment(A))));
    assert!(
        matches!(actions.as_slice(), [Action::Advert(advert)] if advert.role == AdvertRole::Active && advert.epoch == 3),
        "{actions:?}"
    );
    assert!(a.step(now, Input::Claim(Some(seen))).is_empty());
}

#[test]
fn an_upgraded_holder_whose_claim_was_taken_meanwhile_steps_down() {
    let lb = LoadBalancerId::derive("lb");
    let now = Instant::now();
    let handed = Seen {
        claim: claim_of(2),
        revision: 5,
    };
    let mut a = Election::holder("a".into(), 2, lb, Timing::default(), now, handed);
    a.step(now, Input::Placement(Some(assignment(A))));
    let taken = Seen {
        claim: Claim {
            holder: "b".into(),
            epoch: 4,
            lease: 7,
            released: false,
        },
        revision: 6,
    };
    let actions = a.step(now, Input::Claim(Some(taken)));
    assert_eq!(actions.first(), Some(&Action::RemoveAddresses));
    assert!(!a.status().holding);
}

/// While an upgrade is under way both processes of the agent hold the claim under one lease;
/// without a peer to hear, both renew it, and their swaps collide: neither steps down and the
/// epoch stays.
#[test]
fn two_processes_of_one_agent_renewing_the_same_claim_keep_it() {
    let lb = LoadBalancerId::derive("lb");
    let mut now = Instant::now();
    let alone = Assignment {
        role: Role::Active,
        peer: None,
        epoch: 1,
    };
    let mut register = Seen {
        claim: claim_of(2),
        revision: 5,
    };
    let mut processes: Vec<Election> = (0..2)
        .map(|_| Election::holder("a".into(), 2, lb, Timing::default(), now, register.clone()))
        .collect();
    for p in &mut processes {
        p.step(now, Input::Placement(Some(alone.clone())));
    }
    let mut removed = 0;
    // Carries out `actions` of process `i`: swaps answered at once, their outcomes fed back.
    let mut drive = |p: &mut Election, register: &mut Seen, mut actions: Vec<Action>, now| {
        while !actions.is_empty() {
            let mut next = vec![];
            for action in actions {
                match action {
                    Action::Claim { expect, claim } => {
                        let outcome = if expect == register.revision {
                            *register = Seen {
                                claim,
                                revision: register.revision + 1,
                            };
                            Outcome::Done(register.revision)
                        } else {
                            Outcome::Lost(Some(register.clone()))
                        };
                        next.extend(p.step(now, Input::Outcome(outcome)));
                    }
                    Action::RemoveAddresses => removed += 1,
                    _ => {}
                }
            }
            actions = next;
        }
    };
    // What each process's watch delivers, 20 ms late: its renewals go out from a stale
    // revision and collide with the other's.
    let mut watched: [Vec<(Instant, Seen)>; 2] = [vec![], vec![]];
    for _ in 0..(2000 / TICK.as_millis() as usize) {
        now += TICK;
        for i in 0..2 {
            let before = register.revision;
            let actions = processes[i].step(now, Input::Tick);
            drive(&mut processes[i], &mut register, actions, now);
            if register.revision != before {
                watched[1 - i].push((now + TICK * 4, register.clone()));
            }
            let (due, later) = std::mem::take(&mut watched[i])
                .into_iter()
                .partition::<Vec<_>, _>(|(at, _)| *at <= now);
            watched[i] = later;
            for (_, seen) in due {
                let actions = processes[i].step(now, Input::Claim(Some(seen)));
                drive(&mut processes[i], &mut register, actions, now);
            }
        }
    }
    assert_eq!(removed, 0, "a process stepped down");
    assert!(processes.iter().all(|p| p.status().holding));
    assert_eq!(register.claim.epoch, 3, "no election");
}
