//! The Lease objects the loop writes: pure functions of the Lease read, the action and now.

use super::decide::{Action, Record};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// What the election compares of a Lease.
pub fn record(lease: &Lease) -> Record {
    let spec = lease.spec.as_ref();
    let holder = spec
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty());
    let seconds = spec.and_then(|s| s.lease_duration_seconds);
    Record {
        holder,
        renew_time: spec.and_then(|s| s.renew_time.clone()),
        resource_version: lease.metadata.resource_version.clone(),
        duration: seconds
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0)
            .map(Duration::from_secs),
    }
}

/// Who claims the Lease, for how long, and when.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub identity: &'a str,
    pub duration: Duration,
    pub now: Timestamp,
}

/// The Lease to write for `action` (never [`Action::Wait`]); `current` is the Lease as read,
/// whose resourceVersion makes the write fail if anyone wrote it since.
pub fn claimed(current: Option<&Lease>, action: Action, claim: Claim<'_>) -> Lease {
    let now = MicroTime(claim.now);
    let mut lease = current.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(claim.name.to_owned()),
            namespace: Some(claim.namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    let mut spec = lease.spec.take().unwrap_or_default();
    let transitions = spec.lease_transitions.unwrap_or(0);
    match action {
        Action::Renew => {}
        Action::TakeOver => {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(transitions.saturating_add(1));
        }
        Action::Create | Action::Wait => {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(transitions);
        }
    }
    spec.holder_identity = Some(claim.identity.to_owned());
    spec.lease_duration_seconds = Some(seconds(claim.duration));
    spec.renew_time = Some(now);
    lease.spec = Some(spec);
    lease
}

/// The Lease a leader writes on its way out: no holder, so a successor takes it at once.
/// leaseDurationSeconds 1 too, for electors that only look at expiry.
pub fn released(current: &Lease, now: Timestamp) -> Lease {
    let mut lease = current.clone();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(now));
    lease
}

/// Whole seconds, rounded up, at least 1.
fn seconds(d: Duration) -> i32 {
    let whole = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(whole.max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
