//! The rules of [`Election`]: how each input updates what it knows, then one `decide` pass.

use super::*;

impl Election {
    /// A new election of the process whose etcd lease is `lease`; it holds nothing and knows
    /// no claim yet.
    pub fn new(node: String, lease: i64, lb: LoadBalancerId, timing: Timing, now: Instant) -> Self {
        Election {
            node,
            lease,
            lb,
            timing,
            assignment: None,
            assigned_at: now,
            claim: None,
            claim_known: false,
            claim_changed_at: now,
            etcd: false,
            peer_active_at: None,
            peer_heard_at: None,
            peer_any_at: None,
            peer_released_at: None,
            holding: false,
            epoch: 0,
            confirmed_at: now,
            pending: None,
            next_advert: now,
            next_renew: now,
            garps_left: 0,
            next_garp: now,
            stopped: false,
            handing_over_at: None,
        }
    }

    /// The election of a process started by an upgrade, whose predecessor held `seen` (its
    /// claim: this node, this lease, kept alive by the new process) and handed it over: it
    /// holds the addresses from now on (they are on the interface already, so no action adds
    /// them) and advertises at once, so that the standby hears no gap. Like any holder it
    /// steps down when etcd shows the claim held by another, or when the fence passes without
    /// its peer or a confirmed claim.
    pub fn holder(
        node: String,
        lease: i64,
        lb: LoadBalancerId,
        timing: Timing,
        now: Instant,
        seen: Seen,
    ) -> Self {
        let mut election = Election::new(node, lease, lb, timing, now);
        election.holding = true;
        election.epoch = seen.claim.epoch;
        election.claim = Some(seen);
        election.claim_known = true;
        election.etcd = true;
        election
    }

    pub fn status(&self) -> Status {
        let claim = self.claim.as_ref().map(|s| &s.claim);
        Status {
            holding: self.holding,
            holder: claim.filter(|c| !c.released).map(|c| c.holder.clone()),
            epoch: claim.map_or(self.epoch, |c| c.epoch),
            revision: self.claim.as_ref().map_or(0, |s| s.revision),
        }
    }

    /// Feeds one input at `now`; returns what to do, in order.
    pub fn step(&mut self, now: Instant, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        match input {
            Input::Placement(a) => self.placement(now, a),
            Input::Advert(a) => self.advert(now, a, &mut out),
            Input::Claim(seen) => self.seen(now, seen),
            Input::Etcd(up) => {
                self.etcd = up;
                if !up {
                    self.claim_known = false;
                }
            }
            Input::Outcome(o) => self.outcome(now, o, &mut out),
            Input::Tick => {}
            Input::Shutdown => {
                self.shutdown(now, &mut out);
                return out;
            }
        }
        self.decide(now, &mut out);
        out
    }

    /// What an agent's process does, at `now`, between handing its elections over to a
    /// successor (an upgrade: the successor now reads the adverts and renews the claims) and
    /// the successor's first adverts: it keeps advertising as it did (holder or standby), every
    /// `interval`, and does nothing else (no claim, no fence, no addresses: they are the
    /// successor's). So the peer hears no gap however long the successor takes to start its
    /// elections (on a loaded node, longer than `dead`): a standby does not take over, and an
    /// active whose standby is upgraded keeps hearing it instead of leaning on renewals in
    /// etcd alone. The adverts say the peer is heard when it was at the first call: the node's
    /// heartbeat socket stays, only its reader changes (the adverts queue for the successor).
    /// Nothing for an election without a peer, or shut down.
    pub fn handing_over(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        if self.stopped || self.peer().is_none() {
            return out;
        }
        let since = *self.handing_over_at.get_or_insert(now);
        if now < self.next_advert {
            return out;
        }
        out.push(Action::Advert(self.advert_now(since, false)));
        self.next_advert = now + self.timing.interval;
        out
    }

    fn placement(&mut self, now: Instant, next: Option<Assignment>) {
        let peer_changed =
            next.as_ref().map(|a| &a.peer) != self.assignment.as_ref().map(|a| &a.peer);
        if peer_changed {
            self.assigned_at = now;
            self.peer_active_at = None;
            self.peer_heard_at = None;
            self.peer_any_at = None;
            self.peer_released_at = None;
        }
        self.assignment = next;
    }

    fn peer(&self) -> Option<&str> {
        self.assignment.as_ref().and_then(|a| a.peer.as_deref())
    }

    fn advert(&mut self, now: Instant, advert: Advert, out: &mut Vec<Action>) {
        if advert.lb != self.lb || Some(advert.node.as_str()) != self.peer() {
            return;
        }
        self.peer_any_at = Some(now);
        // Only an advert that says it hears this agent shows the link works both ways.
        if advert.hearing {
            self.peer_heard_at = Some(now);
        }
        if advert.release {
            self.peer_released_at = Some(now);
            self.peer_active_at = None;
        } else if advert.role == AdvertRole::Active {
            self.peer_active_at = Some(now);
            if self.holding && advert.epoch > self.epoch {
                self.step_down(out);
            }
        }
    }

    fn seen(&mut self, now: Instant, seen: Option<Seen>) {
        let revision = |s: &Option<Seen>| s.as_ref().map_or(0, |s| s.revision);
        let (old, new) = (revision(&self.claim), revision(&seen));
        self.claim_known = true;
        // A watch may be behind a swap this agent already saw succeed.
        if seen.is_some() && new < old {
            return;
        }
        if new != old {
            self.claim_changed_at = now;
        }
        self.claim = seen;
    }

    fn outcome(&mut self, now: Instant, outcome: Outcome, out: &mut Vec<Action>) {
        let Some((kind, sent, claim)) = self.pending.take() else {
            return;
        };
        match outcome {
            Outcome::Done(revision) => {
                self.claim = Some(Seen { claim, revision });
                self.claim_known = true;
                self.claim_changed_at = now;
                // The write committed after it was sent: nobody may claim before the standby
                // saw it unchanged for `dead`, counted from no earlier than `sent`.
                self.confirmed_at = sent;
                if kind == Pending::Takeover {
                    self.take_over(now, out);
                }
            }
            Outcome::Lost(current) => {
                // Renewed meanwhile by this agent's other process (an upgrade in progress: both
                // hold the claim under the same lease): renew again at once from the new
                // revision, so that neither goes unconfirmed past the fence.
                let ours = current.as_ref().is_some_and(|s| self.mine(&s.claim));
                self.seen(now, current);
                if ours && kind == Pending::Renew {
                    self.next_renew = now;
                }
            }
            Outcome::Failed => {}
        }
    }

    fn take_over(&mut self, now: Instant, out: &mut Vec<Action>) {
        let epoch = self.claim.as_ref().map_or(0, |s| s.claim.epoch);
        self.epoch = epoch;
        if !self.holding {
            self.holding = true;
            out.push(Action::AddAddresses);
        }
        self.garps_left = self.timing.garp_count;
        self.next_garp = now;
        self.next_advert = now;
    }

    fn step_down(&mut self, out: &mut Vec<Action>) {
        if self.holding {
            self.holding = false;
            self.garps_left = 0;
            out.push(Action::RemoveAddresses);
        }
    }

    fn shutdown(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.stopped = true;
        if !self.holding {
            return;
        }
        self.step_down(out);
        if self.peer().is_some() {
            let release = self.advert_now(now, true);
            for _ in 0..3 {
                out.push(Action::Advert(release.clone()));
            }
        }
        // A peer that hears this agent gets the release adverts and claims at once; a write
        // to etcd now would only race its swap. Else the released claim tells it.
        let hearing = self
            .peer_heard_at
            .is_some_and(|at| now.duration_since(at) <= self.timing.renew_after());
        if let Some(seen) = self.claim.as_ref().filter(|s| self.mine(&s.claim))
            && self.etcd
            && !hearing
        {
            let claim = Claim {
                released: true,
                ..seen.claim.clone()
            };
            out.push(Action::Claim {
                expect: seen.revision,
                claim,
            });
        }
    }

    fn advert_now(&self, now: Instant, release: bool) -> Advert {
        let hearing = self
            .peer_any_at
            .is_some_and(|at| now.duration_since(at) <= self.timing.renew_after());
        let role = if self.holding {
            AdvertRole::Active
        } else {
            AdvertRole::Standby
        };
        Advert {
            v: VERSION,
            node: self.node.clone(),
            lb: self.lb,
            epoch: self.status().epoch,
            role,
            hearing,
            release,
        }
    }

    fn decide(&mut self, now: Instant, out: &mut Vec<Action>) {
        if let Some((_, since, _)) = &self.pending
            && now.duration_since(*since) > self.timing.dead()
        {
            self.pending = None;
        }
        if self.assignment.is_none() {
            self.step_down(out);
            return;
        }
        if self.holding && self.lost(now) {
            self.step_down(out);
        }
        if self.holding {
            self.renew(now, out);
        } else if self.may_claim(now) {
            let (expect, epoch) = self
                .claim
                .as_ref()
                .map_or((0, 0), |s| (s.revision, s.claim.epoch));
            self.request(now, Pending::Takeover, expect, epoch + 1, out);
        }
        self.timers(now, out);
    }

    /// Whether `claim` is this process's: its node and its lease.
    fn mine(&self, claim: &Claim) -> bool {
        claim.holder == self.node && claim.lease == self.lease
    }

    /// The claim is someone else's, or the fence bound passed without peer or confirmation.
    fn lost(&self, now: Instant) -> bool {
        if self.claim_known && self.claim.as_ref().is_none_or(|s| !self.mine(&s.claim)) {
            return true;
        }
        let heard = self.peer_heard_at.unwrap_or(self.assigned_at);
        let unheard = now.duration_since(heard) > self.timing.fence();
        let unconfirmed = now.duration_since(self.confirmed_at) > self.timing.confirmed_fence();
        unheard && unconfirmed
    }

    fn renew(&mut self, now: Instant, out: &mut Vec<Action>) {
        let heard = self.peer_heard_at.unwrap_or(self.assigned_at);
        let silent = now.duration_since(heard) > self.timing.renew_after();
        if !silent || now < self.next_renew || self.pending.is_some() || !self.etcd {
            return;
        }
        let Some(seen) = &self.claim else { return };
        let (expect, epoch) = (seen.revision, seen.claim.epoch);
        self.request(now, Pending::Renew, expect, epoch, out);
        self.next_renew = now + self.timing.interval;
    }

    fn request(
        &mut self,
        now: Instant,
        kind: Pending,
        expect: i64,
        epoch: u64,
        out: &mut Vec<Action>,
    ) {
        let claim = Claim {
            holder: self.node.clone(),
            epoch,
            lease: self.lease,
            released: false,
        };
        self.pending = Some((kind, now, claim.clone()));
        out.push(Action::Claim { expect, claim });
    }

    /// Whether a standby (or a returning agent) may try to take the claim now.
    fn may_claim(&self, now: Instant) -> bool {
        let Some(assignment) = &self.assignment else {
            return false;
        };
        if !self.etcd || !self.claim_known || self.pending.is_some() {
            return false;
        }
        let dead = self.timing.dead();
        let silent = now.duration_since(self.peer_active_at.unwrap_or(self.assigned_at)) > dead;
        let unchanged = now.duration_since(self.claim_changed_at) > dead;
        let gone = silent && unchanged;
        // Nobody of the pair holds the claim: the placed active takes it at once; the standby
        // gives it longer (the active may just be starting), then takes it.
        let slow = now.duration_since(self.claim_changed_at.max(self.assigned_at)) > dead * 5;
        let unheld = assignment.role == Role::Active || (gone && slow);
        let Some(seen) = &self.claim else {
            return unheld;
        };
        let claim = &seen.claim;
        if claim.released || self.mine(claim) {
            return true;
        }
        // An earlier run of this agent: it renews nothing and advertises nothing, so it is
        // gone once the claim stayed unchanged for `dead` (the peer may take it as well).
        let earlier_run = claim.holder == self.node;
        if !earlier_run && Some(claim.holder.as_str()) != self.peer() {
            return unheld;
        }
        let released = self
            .peer_released_at
            .is_some_and(|at| now.duration_since(at) <= dead);
        released || gone
    }

    fn timers(&mut self, now: Instant, out: &mut Vec<Action>) {
        if self.peer().is_some() && now >= self.next_advert {
            out.push(Action::Advert(self.advert_now(now, false)));
            self.next_advert = now + self.timing.interval;
        }
        if self.holding && self.garps_left > 0 && now >= self.next_garp {
            out.push(Action::Garp);
            self.garps_left -= 1;
            self.next_garp = now + self.timing.garp_spacing;
        }
    }
}
