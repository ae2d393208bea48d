//! A commit too big for one txn is never seen in part.

use crate::support::{State, campaign, connect, ops, record, state, values, wait_view};
use portico_store::kv::View;
use portico_testkit::EtcdCluster;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_a_thousand_keys_is_seen_all_or_nothing() {
    let cluster = EtcdCluster::start(1);
    let writer = connect(cluster.endpoints()).await;
    let reader = connect(cluster.endpoints()).await;
    let leader = campaign(&writer, "controller").await;
    let mirror = reader.mirror_desired(View::default());
    let (recorder, seen) = record(mirror.views());

    // Each state rewrites 1000 keys (values and a shifting key set): 8 txns or more each.
    let states: Vec<State> = (1..=6)
        .map(|i| state(&format!("s{i}"), (i * 100)..(i * 100 + 1000)))
        .collect();
    let mut stored = State::new();
    let mut revisions = Vec::new();
    let before = cluster.revision();
    for next in &states {
        let revision = writer
            .commit(&leader, ops(&stored, next))
            .await
            .expect("commit");
        revisions.push(revision);
        stored = next.clone();
    }
    let txns = cluster.revision() - before;
    assert!(
        txns >= 6 * 8,
        "each commit took several txns ({txns} revisions in all)"
    );

    let mut views = mirror.views();
    let last = *revisions.last().expect("six commits");
    wait_view(&mut views, Duration::from_secs(10), |v| v.revision == last).await;
    recorder.abort();
    let seen = seen.take();
    for view in seen.iter().filter(|v| v.revision > 0) {
        let at = revisions.iter().position(|r| *r == view.revision);
        let at = at.unwrap_or_else(|| panic!("view at {} is no commit", view.revision));
        assert_eq!(
            values(view),
            states[at],
            "the view at {} is whole",
            view.revision
        );
    }
    let published: Vec<i64> = seen.iter().map(|v| v.revision).collect();
    assert!(published.windows(2).all(|w| w[0] < w[1]), "{published:?}");
    eprintln!("reader saw revisions {published:?} of commits {revisions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_commit_left_by_a_dead_leader_is_not_published_even_after_compaction() {
    let cluster = EtcdCluster::start(1);
    let etcd = connect(cluster.endpoints()).await;
    let leader = campaign(&etcd, "controller").await;
    let first = state("first", 0..10);
    let committed = etcd
        .commit(&leader, ops(&State::new(), &first))
        .await
        .expect("commit");
    // What a leader dying between two txns of a big commit leaves: the pending mark and part
    // of the new state, with no marker; then the history goes.
    cluster.etcdctl(&["put", "/portico/desired-pending", "2"]);
    cluster.etcdctl(&["put", "/portico/desired/lb/00000", "half"]);
    cluster.etcdctl(&["del", "/portico/desired/lb/00001"]);
    cluster.compact();

    let mirror = etcd.mirror_desired(View::default());
    let mut views = mirror.views();
    let mut health = mirror.health();
    tokio::time::timeout(Duration::from_secs(5), health.wait_for(|h| h.connected))
        .await
        .expect("connected in time")
        .expect("mirror running");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let view = views.borrow().clone();
    // The last whole commit is compacted away and the newest state is half-written:
    // nothing can be published until the next marker.
    assert_eq!(
        view.revision, 0,
        "published something not whole (commit was {committed})"
    );
    assert!(view.entries.is_empty());

    // The next leader reads what is stored (half-written part included) and completes it.
    let stored = values(&etcd.read_desired().await.expect("read"));
    let second = state("second", 0..10);
    let revision = etcd
        .commit(&leader, ops(&stored, &second))
        .await
        .expect("commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision
    })
    .await;
    assert_eq!(values(&view), second);
}
