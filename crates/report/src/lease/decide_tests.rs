use super::*;

const LEASE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

fn elector() -> Elector {
    Elector::new("me".to_owned(), LEASE, RETRY)
}

fn record(holder: Option<&str>, rv: &str) -> Record {
    Record {
        holder: holder.map(str::to_owned),
        renew_time: None,
        resource_version: Some(rv.to_owned()),
        duration: Some(LEASE),
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn a_missing_lease_is_created() {
    let t = Instant::now();
    assert_eq!(elector().decide(None, t), Action::Create);
}

#[test]
fn a_lease_held_by_me_is_renewed() {
    let t = Instant::now();
    assert_eq!(
        elector().decide(Some(&record(Some("me"), "1")), t),
        Action::Renew
    );
}

#[test]
fn a_lease_without_holder_is_taken_at_once() {
    let t = Instant::now();
    assert_eq!(
        elector().decide(Some(&record(None, "1")), t),
        Action::TakeOver
    );
}

#[test]
fn a_live_lease_of_another_is_left_alone() {
    let mut e = elector();
    let t = Instant::now();
    let other = record(Some("other"), "1");
    assert_eq!(e.decide(Some(&other), t), Action::Wait);
    assert_eq!(e.decide(Some(&other), t + secs(9)), Action::Wait);
}

#[test]
fn a_lease_unchanged_for_its_duration_by_my_clock_is_taken_over() {
    let mut e = elector();
    let t = Instant::now();
    let other = record(Some("other"), "1");
    e.decide(Some(&other), t);
    assert_eq!(e.decide(Some(&other), t + secs(10)), Action::TakeOver);
}

#[test]
fn a_renewal_restarts_the_expiry_countdown() {
    let mut e = elector();
    let t = Instant::now();
    e.decide(Some(&record(Some("other"), "1")), t);
    let renewed = record(Some("other"), "2");
    assert_eq!(e.decide(Some(&renewed), t + secs(8)), Action::Wait);
    assert_eq!(e.decide(Some(&renewed), t + secs(12)), Action::Wait);
    assert_eq!(e.decide(Some(&renewed), t + secs(18)), Action::TakeOver);
}

#[test]
fn expiry_ignores_the_wall_clock_renew_time() {
    // A renewTime far in the past (a skewed clock) does not make a fresh lease expired.
    let mut e = elector();
    let t = Instant::now();
    let mut other = record(Some("other"), "1");
    other.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(e.decide(Some(&other), t), Action::Wait);
}

#[test]
fn expiry_uses_the_duration_the_holder_wrote() {
    let mut e = elector();
    let t = Instant::now();
    let mut other = record(Some("other"), "1");
    other.duration = Some(secs(30));
    e.decide(Some(&other), t);
    assert_eq!(e.decide(Some(&other), t + secs(20)), Action::Wait);
    assert_eq!(e.decide(Some(&other), t + secs(30)), Action::TakeOver);
    other.duration = None;
    let mut e = elector();
    e.decide(Some(&other), t);
    assert_eq!(e.decide(Some(&other), t + LEASE), Action::TakeOver);
}

#[test]
fn leadership_starts_with_a_successful_write() {
    let mut e = elector();
    let t = Instant::now();
    assert!(!e.is_leader(t));
    e.decide(None, t);
    e.acquired(t);
    assert!(e.is_leader(t + secs(1)));
    assert!(e.holds());
}

#[test]
fn a_leader_that_cannot_renew_steps_down_before_others_may_take_over() {
    let mut e = elector();
    let t = Instant::now();
    e.acquired(t);
    assert!(e.is_leader(t + secs(7)));
    assert!(!e.is_leader(t + secs(8)));
    assert!(e.holds(), "still releases what it may hold");
    assert_eq!(e.leader_until(), Some(t + secs(8)));
}

#[test]
fn renewing_extends_leadership() {
    let mut e = elector();
    let t = Instant::now();
    e.acquired(t);
    e.acquired(t + secs(6));
    assert!(e.is_leader(t + secs(13)));
}

#[test]
fn a_conflict_ends_leadership_at_once() {
    let mut e = elector();
    let t = Instant::now();
    e.acquired(t);
    e.lost();
    assert!(!e.is_leader(t));
    assert!(!e.holds());
}

#[test]
fn seeing_another_holder_ends_leadership() {
    let mut e = elector();
    let t = Instant::now();
    e.acquired(t);
    e.decide(Some(&record(Some("other"), "5")), t + secs(1));
    assert!(!e.is_leader(t + secs(1)));
}

#[test]
fn a_released_lease_is_taken_even_right_after_a_renewal_was_seen() {
    let mut e = elector();
    let t = Instant::now();
    e.decide(Some(&record(Some("other"), "1")), t);
    let released = record(None, "2");
    assert_eq!(e.decide(Some(&released), t + secs(1)), Action::TakeOver);
}

#[test]
fn the_renew_deadline_is_at_least_half_the_lease() {
    let mut e = Elector::new("me".to_owned(), secs(4), secs(3));
    let t = Instant::now();
    e.acquired(t);
    assert_eq!(e.leader_until(), Some(t + secs(2)));
}
