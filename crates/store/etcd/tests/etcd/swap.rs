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
