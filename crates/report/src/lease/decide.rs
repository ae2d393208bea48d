//! The pure election state machine: lease state + observation + now → action.
//!
//! client-go's algorithm. A Lease held by another replica is expired once this replica has
//! seen the same record (holder, renewTime, resourceVersion) unchanged for the record's
//! leaseDurationSeconds by its own monotonic clock; the wall-clock renewTime is only compared
//! for equality, so clock skew between replicas cannot shorten or lengthen a lease. A lease
//! without holder is free at once (a leader released it on its way out).
//!
//! This replica is leader from a successful create, renew or take-over until it fails to renew
//! for `renew_deadline` (the lease duration minus one retry period, at least half the lease
//! duration), measured from the instant before its last successful write was sent. Others wait
//! a full lease duration from when they first saw that write, so the old leader has stopped
//! before a successor starts. A conflict (someone else wrote the Lease) ends leadership at once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use std::time::Duration;
use tokio::time::Instant;

/// What this replica saw of the Lease: the fields whose change proves its holder alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `None` for a missing or empty holderIdentity.
    pub holder: Option<String>,
    /// renewTime as written; compared for equality only.
    pub renew_time: Option<MicroTime>,
    pub resource_version: Option<String>,
    /// leaseDurationSeconds, when positive.
    pub duration: Option<Duration>,
}

/// The next step of the lease loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// No Lease exists: create one held by this replica.
    Create,
    /// This replica holds the Lease: write it again with a new renewTime.
    Renew,
    /// The Lease is free or expired: write it with this replica as holder.
    TakeOver,
    /// Another replica holds a live Lease.
    Wait,
}

/// One replica's view of the election.
#[derive(Debug)]
pub struct Elector {
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    /// Another holder's record and when this replica first saw it.
    observed: Option<(Record, Instant)>,
    /// When this replica sent its last successful write as holder.
    renewed_at: Option<Instant>,
}

impl Elector {
    pub fn new(identity: String, lease_duration: Duration, retry_period: Duration) -> Self {
        let renew_deadline = lease_duration
            .saturating_sub(retry_period)
            .max(lease_duration / 2);
        Elector {
            identity,
            lease_duration,
            renew_deadline,
            observed: None,
            renewed_at: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Decides what to do about the Lease as read at `now` (`None`: it does not exist).
    pub fn decide(&mut self, lease: Option<&Record>, now: Instant) -> Action {
        let Some(record) = lease else {
            self.observed = None;
            return Action::Create;
        };
        match record.holder.as_deref() {
            Some(holder) if holder == self.identity => {
                self.observed = None;
                Action::Renew
            }
            None => {
                self.lost();
                Action::TakeOver
            }
            Some(_) => {
                self.lost();
                self.decide_other(record, now)
            }
        }
    }

    fn decide_other(&mut self, record: &Record, now: Instant) -> Action {
        let since = match &self.observed {
            Some((seen, at)) if seen == record => *at,
            _ => {
                self.observed = Some((record.clone(), now));
                now
            }
        };
        let duration = record.duration.unwrap_or(self.lease_duration);
        if now.saturating_duration_since(since) >= duration {
            Action::TakeOver
        } else {
            Action::Wait
        }
    }

    /// A create, renew or take-over sent at `sent` succeeded.
    pub fn acquired(&mut self, sent: Instant) {
        self.observed = None;
        self.renewed_at = Some(sent);
    }

    /// Another replica holds the Lease (or won a race for it): not leader.
    pub fn lost(&mut self) {
        self.renewed_at = None;
    }

    /// Whether this replica may act as leader at `now`.
    pub fn is_leader(&self, now: Instant) -> bool {
        self.leader_until().is_some_and(|until| now < until)
    }

    /// When leadership ends unless renewed; `None` when not holding the Lease.
    pub fn leader_until(&self) -> Option<Instant> {
        self.renewed_at.map(|at| at + self.renew_deadline)
    }

    /// Whether this replica believes it holds the Lease (even past its renew deadline), so it
    /// should release it when it stops.
    pub fn holds(&self) -> bool {
        self.renewed_at.is_some()
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
