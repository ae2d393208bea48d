//! Compare-and-swap of a claim: one winner among racers; the loser reads the winner's value.

use crate::support::connect;
use bytes::Bytes;
use portico_store_etcd::Swap;
use portico_testkit::EtcdCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_wins_only_from_the_revision_it_saw() {
    let cluster = EtcdCluster::start(1);
    let etcd = connect(cluster.endpoints()).await;
    let key = "ha/lb";
    let first = etcd.swap(key, 0, Bytes::from("a1")).await.expect("swap");
    let Swap::Done(revision) = first else {
        panic!("creating an absent key from revision 0 wins: {first:?}")
    };
    // A second create from 0 loses and reads the first.
    match etcd.swap(key, 0, Bytes::from("b1")).await.expect("swap") {
        Swap::Lost(Some(entry)) => {
            assert_eq!(entry.value, Bytes::from("a1"));
            assert_eq!(entry.mod_revision, revision);
        }
        other => panic!("lost expected: {other:?}"),
    }
    // Racers from the same revision: exactly one wins.
    let racers = (0..8).map(|i| {
        let etcd = etcd.clone();
        tokio::spawn(async move { etcd.swap(key, revision, Bytes::from(format!("r{i}"))).await })
    });
    let mut won = 0;
    for racer in racers {
        if let Ok(Ok(Swap::Done(_))) = racer.await {
            won += 1;
        }
    }
    assert_eq!(won, 1);
}

/// An upgraded agent takes over its predecessor's lease (the name its claims carry): adopted
/// while alive, it is kept alive by the new process; one that ran out cannot be adopted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_lease_is_adopted_and_kept_alive_and_an_expired_one_is_not() {
    let cluster = EtcdCluster::start(1);
    let old = connect(cluster.endpoints()).await;
    let ttl = std::time::Duration::from_secs(1);
    let lease = old.grant_for_life(ttl).await.expect("grant");
    let id = lease.id();
    // The predecessor exits: its keep-alive stops, the lease is not revoked.
    drop(lease);
    let new = connect(cluster.endpoints()).await;
    let adopted = new.adopt_for_life(id, ttl).await.expect("adopt");
    let adopted = adopted.expect("a live lease is adopted");
    assert_eq!(adopted.id(), id);
    // Kept alive by the new process well past its TTL.
    tokio::time::sleep(ttl * 3).await;
    let again = new.adopt_for_life(id, ttl).await.expect("adopt");
    assert!(again.is_some(), "the adopted lease is kept alive");
    drop((adopted, again));
    // Nobody keeps it alive any more: it runs out and cannot be adopted.
    tokio::time::sleep(ttl * 3).await;
    let late = new.adopt_for_life(id, ttl).await.expect("adopt");
    assert!(late.is_none(), "an expired lease is not adopted");
}
