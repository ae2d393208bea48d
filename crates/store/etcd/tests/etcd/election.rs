//! Two controllers campaign: one leads, the deposed one cannot write, the other takes over.

use crate::support::{State, connect, ops, state};
use portico_store_etcd::{EtcdError, Leadership};
use portico_testkit::EtcdCluster;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(2);

async fn lead(etcd: &portico_store_etcd::Etcd, identity: &str) -> Leadership {
    etcd.campaign(identity, TTL).await.expect("campaign")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_and_a_deposed_leader_is_fenced_off() {
    let cluster = EtcdCluster::start(1);
    let a = connect(cluster.endpoints()).await;
    let b = connect(cluster.endpoints()).await;
    let leader_a = lead(&a, "a").await;
    let waiting_b = tokio::spawn({
        let b = b.clone();
        async move { lead(&b, "b").await }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!waiting_b.is_finished(), "b waits while a leads");
    let first = state("a", 0..3);
    a.commit(&leader_a, ops(&State::new(), &first))
        .await
        .expect("a writes");

    // a's election key vanishes behind its back (its lease is alive, so only the fence can
    // tell): b leads and a's next commit is refused by etcd.
    let key = format!("/portico/election/{:016x}", leader_a.lease_id());
    cluster.etcdctl(&["del", &key]);
    let leader_b = tokio::time::timeout(Duration::from_secs(5), waiting_b)
        .await
        .expect("b leads in time")
        .expect("b's campaign");
    assert!(!leader_a.is_lost(), "a has not noticed yet");
    let refused = a.commit(&leader_a, ops(&first, &state("a", 0..9))).await;
    assert!(
        matches!(refused, Err(EtcdError::NotLeader { .. })),
        "{refused:?}"
    );
    assert!(leader_a.is_lost(), "the refusal marks leadership lost");
    let stored = b.read_desired().await.expect("read");
    assert_eq!(
        stored.entries.len(),
        3,
        "nothing of a's refused commit landed"
    );
    b.commit(&leader_b, ops(&first, &state("b", 0..2)))
        .await
        .expect("b writes");

    // A revoked lease (as when it expires) is noticed by the keep-alive.
    cluster.etcdctl(&["lease", "revoke", &format!("{:x}", leader_b.lease_id())]);
    let mut lost = leader_b.lost();
    tokio::time::timeout(TTL, lost.wait_for(|lost| *lost))
        .await
        .expect("noticed within the TTL")
        .expect("keeper running");
    let refused = b
        .commit(&leader_b, ops(&State::new(), &state("b", 0..1)))
        .await;
    assert!(
        matches!(refused, Err(EtcdError::NotLeader { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_takes_over_within_the_ttl_when_the_leader_dies_and_at_once_when_it_resigns() {
    let cluster = EtcdCluster::start(1);
    let a = connect(cluster.endpoints()).await;
    let b = connect(cluster.endpoints()).await;
    let leader_a = lead(&a, "a").await;
    let waiting_b = tokio::spawn({
        let b = b.clone();
        async move { lead(&b, "b").await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting_b.is_finished());

    // a dies: no resign, its keep-alive stops with it.
    let died = Instant::now();
    drop(leader_a);
    drop(a);
    let leader_b = tokio::time::timeout(TTL * 3, waiting_b)
        .await
        .expect("b takes over")
        .expect("b's campaign");
    let takeover = died.elapsed();
    eprintln!("takeover after the leader died: {takeover:?} (lease TTL {TTL:?})");
    assert!(
        takeover <= TTL + Duration::from_millis(1500),
        "{takeover:?}"
    );
    b.commit(&leader_b, ops(&State::new(), &state("b", 0..1)))
        .await
        .expect("the new leader writes");

    let c = connect(cluster.endpoints()).await;
    let waiting_c = tokio::spawn({
        let c = c.clone();
        async move { lead(&c, "c").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resigned = Instant::now();
    leader_b.resign().await.expect("resign");
    tokio::time::timeout(TTL, waiting_c)
        .await
        .expect("c takes over")
        .expect("c's campaign");
    let handover = resigned.elapsed();
    eprintln!("takeover after a resign: {handover:?}");
    assert!(handover < Duration::from_millis(1000), "{handover:?}");
}
