//! The mirror without etcd: it keeps its last view, says since when it is disconnected, and
//! converges when etcd is back, whatever happened meanwhile (compaction, a restart).

use crate::proxy::Proxy;
use crate::support::{State, campaign, commit_until_done, connect, ops, state, values, wait_view};
use portico_store::kv::View;
use portico_store_etcd::Health;
use portico_testkit::EtcdCluster;
use std::time::Duration;
use tokio::sync::watch;

async fn wait_health(health: &mut watch::Receiver<Health>, connected: bool) -> Health {
    let waited = health.wait_for(|h| h.connected == connected);
    let waited = tokio::time::timeout(Duration::from_secs(15), waited).await;
    let health = waited.expect("health in time").expect("mirror running");
    health.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_compacted_while_the_mirror_is_cut_off_is_relisted_and_swept() {
    let cluster = EtcdCluster::start(1);
    let proxy = Proxy::start(cluster.endpoints()[0].clone()).await;
    let writer = connect(cluster.endpoints()).await;
    let reader = connect(vec![proxy.endpoint()]).await;
    let leader = campaign(&writer, "controller").await;
    let mirror = reader.mirror_desired(View::default());
    let (mut views, mut health) = (mirror.views(), mirror.health());

    let first = state("first", 0..300);
    let r1 = writer
        .commit(&leader, ops(&State::new(), &first))
        .await
        .expect("commit");
    wait_view(&mut views, Duration::from_secs(5), |v| v.revision == r1).await;
    wait_health(&mut health, true).await;

    proxy.cut();
    let down = wait_health(&mut health, false).await;
    assert!(down.last_error.is_some(), "says why: {down:?}");
    let second = state("second", 100..200);
    let r2 = writer
        .commit(&leader, ops(&first, &second))
        .await
        .expect("commit");
    let third = state("third", 150..250);
    let r3 = writer
        .commit(&leader, ops(&second, &third))
        .await
        .expect("commit");
    let compacted = cluster.compact();
    assert!(compacted >= r3 && r2 < r3);
    assert_eq!(
        views.borrow().revision,
        r1,
        "the last view is kept while cut off"
    );
    assert_eq!(values(&views.borrow()), first);

    proxy.restore();
    let view = wait_view(&mut views, Duration::from_secs(10), |v| v.revision == r3).await;
    assert_eq!(values(&view), third, "deleted keys swept, new ones listed");
    let up = wait_health(&mut health, true).await;
    assert!(up.since >= down.since);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_stopped_and_started_again_the_mirror_keeps_its_view_then_converges() {
    let mut cluster = EtcdCluster::start(1);
    let writer = connect(cluster.endpoints()).await;
    let reader = connect(cluster.endpoints()).await;
    let mut leader = campaign(&writer, "controller").await;
    let mirror = reader.mirror_desired(View::default());
    let (mut views, mut health) = (mirror.views(), mirror.health());

    let mut stored = State::new();
    let first = state("first", 0..50);
    let r1 = commit_until_done(&writer, &mut leader, &mut stored, &first).await;
    let r1 = r1.expect("first commit");
    wait_view(&mut views, Duration::from_secs(5), |v| v.revision == r1).await;
    wait_health(&mut health, true).await;

    cluster.stop(0);
    let down = wait_health(&mut health, false).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(views.borrow().revision, r1, "the last view is kept");
    assert!(!health.borrow().connected);
    assert_eq!(
        health.borrow().since,
        down.since,
        "disconnected since the stop"
    );
    eprintln!("while etcd is down: {:?}", health.borrow().last_error);

    cluster.restart(0);
    let second = state("second", 25..75);
    commit_until_done(&writer, &mut leader, &mut stored, &second).await;
    let view = wait_view(&mut views, Duration::from_secs(15), |v| values(v) == second).await;
    assert!(view.revision > r1);
    wait_health(&mut health, true).await;
}
