use super::*;

fn claim(now: Timestamp) -> Claim<'static> {
    Claim {
        namespace: "portico",
        name: "portico-leader",
        identity: "me",
        duration: Duration::from_millis(10_500),
        now,
    }
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn held_by(holder: &str, transitions: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("portico-leader".to_owned()),
            namespace: Some("portico".to_owned()),
            resource_version: Some("41".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(10),
            acquire_time: Some(MicroTime(at(100))),
            renew_time: Some(MicroTime(at(150))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

#[test]
fn a_created_lease_names_me_and_its_times() {
    let lease = claimed(None, Action::Create, claim(at(200)));
    assert_eq!(lease.metadata.name.as_deref(), Some("portico-leader"));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("portico"));
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_duration_seconds, Some(11), "rounded up");
    assert_eq!(spec.acquire_time, Some(MicroTime(at(200))));
    assert_eq!(spec.renew_time, Some(MicroTime(at(200))));
    assert_eq!(spec.lease_transitions, Some(0));
}

#[test]
fn a_renewal_keeps_acquire_time_transitions_and_resource_version() {
    let lease = claimed(Some(&held_by("me", 3)), Action::Renew, claim(at(200)));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("41"));
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.acquire_time, Some(MicroTime(at(100))));
    assert_eq!(spec.renew_time, Some(MicroTime(at(200))));
    assert_eq!(spec.lease_transitions, Some(3));
}

#[test]
fn a_take_over_counts_a_transition() {
    let lease = claimed(Some(&held_by("other", 3)), Action::TakeOver, claim(at(200)));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("41"));
    let spec = lease.spec.unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.acquire_time, Some(MicroTime(at(200))));
    assert_eq!(spec.lease_transitions, Some(4));
}

#[test]
fn a_released_lease_has_no_holder() {
    let lease = released(&held_by("me", 3), at(300));
    let r = record(&lease);
    assert_eq!(r.holder, None);
    assert_eq!(r.duration, Some(Duration::from_secs(1)));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("41"));
}

#[test]
fn record_reads_an_empty_holder_and_a_bad_duration_as_none() {
    let mut lease = held_by("", 0);
    if let Some(spec) = lease.spec.as_mut() {
        spec.lease_duration_seconds = Some(-5);
    }
    let r = record(&lease);
    assert_eq!(r.holder, None);
    assert_eq!(r.duration, None);
    assert_eq!(r.resource_version.as_deref(), Some("41"));
    assert_eq!(r.renew_time, Some(MicroTime(at(150))));
}

#[test]
fn record_of_a_lease_without_spec_is_free() {
    let lease = Lease::default();
    assert_eq!(record(&lease).holder, None);
}
