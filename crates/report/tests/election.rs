//! Leader election against the fake API server: two replicas, death, release, conflict.
#![allow(clippy::unwrap_used)]

mod support;

use portico_report::ReportSettings;
use std::time::Duration;
use support::{Cluster, LEASE_NAMESPACE, PUBLISH, eventually, fast, feed, ingress, leads};
use tokio::time::Instant;

const WAIT: Duration = Duration::from_secs(10);

fn defaults(identity: &str) -> ReportSettings {
    let mut s = ReportSettings::new(identity.to_owned(), LEASE_NAMESPACE.to_owned());
    s.status_interval = Duration::from_millis(100);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_exactly_one_leads_and_only_it_writes() {
    let cluster = Cluster::start().await;
    cluster
        .server
        .apply(ingress("web", "portico", &[], Some("bad path")));
    let (reports, _feed) = feed(&cluster).await;
    let (a, _stop_a) = cluster.reporter(fast("a"), reports.clone()).await;
    let (b, _stop_b) = cluster.reporter(fast("b"), reports).await;
    let (la, lb) = (a.leader(), b.leader());
    assert!(eventually(WAIT, || *la.borrow() || *lb.borrow()).await);

    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        assert!(*la.borrow() != *lb.borrow(), "exactly one leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let leader = if *la.borrow() { "a" } else { "b" };
    assert_eq!(cluster.lease()["spec"]["holderIdentity"], leader);
    assert_eq!(cluster.lease()["spec"]["leaseDurationSeconds"], 2);

    assert_eq!(cluster.status("web"), [PUBLISH]);
    let writers: Vec<_> = cluster
        .status_patches("web")
        .iter()
        .map(|r| r.user_agent.clone().unwrap_or_default())
        .collect();
    assert_eq!(writers, [leader]);
    let events = cluster.server.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["reportingInstance"], leader);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_within_15_seconds() {
    let cluster = Cluster::start().await;
    let (reports, _feed) = feed(&cluster).await;
    let (a, _stop_a) = cluster.reporter(defaults("a"), reports.clone()).await;
    assert!(leads(&mut a.leader(), true, WAIT).await);
    let (b, _stop_b) = cluster.reporter(defaults("b"), reports).await;
    let mut lb = b.leader();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!*lb.borrow());

    a.abort();
    let died = Instant::now();
    assert!(
        leads(&mut lb, true, Duration::from_secs(15)).await,
        "no takeover within 15 s"
    );
    let took = died.elapsed();
    eprintln!("takeover after the leader died: {took:?}");
    // It waited for the Lease to expire (10 s from its last renewal, at most 2 s before death).
    assert!(took >= Duration::from_secs(7), "took over after {took:?}");
    let lease = cluster.lease();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_gracefully_hands_over_at_once() {
    let cluster = Cluster::start().await;
    let (reports, _feed) = feed(&cluster).await;
    let (a, stop_a) = cluster.reporter(defaults("a"), reports.clone()).await;
    assert!(leads(&mut a.leader(), true, WAIT).await);
    let (b, _stop_b) = cluster.reporter(defaults("b"), reports).await;
    let mut lb = b.leader();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut la = a.leader();
    stop_a.send_replace(true);
    let stopping = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), a.stopped())
        .await
        .unwrap();
    assert!(!*la.borrow_and_update());
    assert!(leads(&mut lb, true, Duration::from_secs(5)).await);
    let took = stopping.elapsed();
    eprintln!("takeover after a graceful stop: {took:?}");
    // Within one retry period (2 s) and some slack; expiry would take 10 s.
    assert!(took < Duration::from_secs(4), "took over after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_on_renew_ends_leadership() {
    let cluster = Cluster::start().await;
    let (reports, _feed) = feed(&cluster).await;
    let (a, _stop) = cluster.reporter(fast("a"), reports).await;
    let mut la = a.leader();
    assert!(leads(&mut la, true, WAIT).await);

    cluster
        .server
        .fail_next("PUT", "leases/portico-leader", 409);
    assert!(leads(&mut la, false, Duration::from_secs(2)).await);
    // The Lease still names it: it renews and leads again.
    assert!(leads(&mut la, true, WAIT).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_steps_down() {
    let cluster = Cluster::start().await;
    let (reports, _feed) = feed(&cluster).await;
    let (a, _stop) = cluster.reporter(fast("a"), reports).await;
    let mut la = a.leader();
    assert!(leads(&mut la, true, WAIT).await);

    for _ in 0..40 {
        cluster
            .server
            .fail_next("PUT", "leases/portico-leader", 500);
    }
    let failing = Instant::now();
    assert!(leads(&mut la, false, Duration::from_secs(3)).await);
    // The renew deadline is 2 s − 200 ms after the last renewal.
    assert!(failing.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_conflicts_reads_the_lease_again() {
    let cluster = Cluster::start().await;
    let (reports, _feed) = feed(&cluster).await;
    let (a, stop_a) = cluster.reporter(defaults("a"), reports).await;
    assert!(leads(&mut a.leader(), true, WAIT).await);
    // Created just now: the next renewal is a retry period (2 s) away, so the release is the
    // next PUT.
    cluster
        .server
        .fail_next("PUT", "leases/portico-leader", 409);
    stop_a.send_replace(true);
    tokio::time::timeout(Duration::from_secs(5), a.stopped())
        .await
        .unwrap();
    let puts: Vec<u16> = cluster
        .server
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.path.ends_with("leases/portico-leader"))
        .map(|r| r.status)
        .collect();
    assert_eq!(puts, [409, 200]);
    assert!(cluster.lease()["spec"]["holderIdentity"].is_null());
}
