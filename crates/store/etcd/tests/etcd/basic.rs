//! One member: commits reach a mirror; agents' keys live under a lease.

use crate::support::{campaign, connect, ops, state, values, wait_view};
use bytes::Bytes;
use portico_store::kv::View;
use portico_testkit::EtcdCluster;
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_reaches_the_mirror_whole_and_read_desired_sees_it() {
    let cluster = EtcdCluster::start(1);
    let etcd = connect(cluster.endpoints()).await;
    let leader = campaign(&etcd, "controller-a").await;
    let mirror = etcd.mirror_desired(View::default());
    let mut views = mirror.views();

    // Nothing committed yet: an empty first commit still gives readers a (empty) view.
    let empty = etcd
        .commit(&leader, Vec::new())
        .await
        .expect("empty first commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| v.revision == empty).await;
    assert!(view.entries.is_empty());

    let first = state("one", 0..10);
    let revision = etcd
        .commit(&leader, ops(&Default::default(), &first))
        .await
        .expect("commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision
    })
    .await;
    assert_eq!(values(&view), first);

    let second = state("two", 5..12);
    let revision = etcd
        .commit(&leader, ops(&first, &second))
        .await
        .expect("second commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision
    })
    .await;
    assert_eq!(values(&view), second, "changed, added and deleted keys");
    assert!(view.entries.values().all(|e| e.mod_revision <= revision));

    let stored = etcd.read_desired().await.expect("read_desired");
    assert_eq!(values(&stored), second);
    assert!(stored.revision >= revision);
    assert!(mirror.health().borrow().connected);

    let same = etcd
        .commit(&leader, Vec::new())
        .await
        .expect("empty commit");
    assert_eq!(same, revision, "nothing to write is the last commit");
    let outside = vec![portico_store::kv::Op::Delete {
        key: "agents/x".into(),
    }];
    assert!(etcd.commit(&leader, outside).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_started_later_lists_the_last_commit() {
    let cluster = EtcdCluster::start(1);
    let etcd = connect(cluster.endpoints()).await;
    let leader = campaign(&etcd, "controller-a").await;
    let desired = state("x", 0..1200);
    let revision = etcd
        .commit(&leader, ops(&Default::default(), &desired))
        .await
        .expect("commit");
    let mirror = etcd.mirror_desired(View::default());
    let mut views = mirror.views();
    let view = wait_view(&mut views, Duration::from_secs(5), |v| v.revision > 0).await;
    assert_eq!(view.revision, revision, "the marker's revision");
    assert_eq!(values(&view), desired, "listed over several pages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_key_follows_its_value_and_goes_with_its_lease() {
    let cluster = EtcdCluster::start(1);
    let agent = connect(cluster.endpoints()).await;
    let controller = connect(cluster.endpoints()).await;
    let agents = controller.mirror("agents/");
    let mut views = agents.views();

    let (value, rx) = watch::channel(Bytes::from_static(b"ready"));
    let ttl = Duration::from_secs(2);
    let publication = agent.publish("agents/node-1".into(), ttl, rx);
    let has =
        |v: &View, want: &[u8]| v.entries.get("agents/node-1").map(|e| &e.value[..]) == Some(want);
    wait_view(&mut views, Duration::from_secs(5), |v| has(v, b"ready")).await;
    value.send_replace(Bytes::from_static(b"serving 3"));
    wait_view(&mut views, Duration::from_secs(5), |v| has(v, b"serving 3")).await;

    // A revoked lease (as after etcd lost it) is granted again and the key put again.
    let lease = publication.lease().borrow().expect("published");
    cluster.etcdctl(&["lease", "revoke", &format!("{lease:x}")]);
    wait_view(&mut views, Duration::from_secs(5), |v| v.entries.is_empty()).await;
    wait_view(&mut views, Duration::from_secs(5), |v| has(v, b"serving 3")).await;

    // The process "dies": nothing renews the lease; the key goes within about the TTL.
    drop(publication);
    let start = Instant::now();
    wait_view(&mut views, Duration::from_secs(6), |v| v.entries.is_empty()).await;
    let gone = start.elapsed();
    eprintln!("agent key gone {gone:?} after the publisher stopped (ttl {ttl:?})");
    assert!(
        gone >= Duration::from_millis(500),
        "not before the lease ran out"
    );

    let publication = agent.publish("agents/node-2".into(), ttl, watch::channel(Bytes::new()).1);
    wait_view(&mut views, Duration::from_secs(5), |v| v.entries.len() == 1).await;
    publication.close().await;
    wait_view(&mut views, Duration::from_secs(1), |v| v.entries.is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_whose_reader_read_a_view_drops_its_values() {
    let cluster = EtcdCluster::start(1);
    let etcd = connect(cluster.endpoints()).await;
    let leader = campaign(&etcd, "controller-a").await;
    let (read, reader) = watch::channel(0);
    let mirror = etcd.mirror_desired_read(View::default(), reader);
    let mut views = mirror.views();
    let first = state("one", 0..200);
    let revision = etcd
        .commit(&leader, ops(&Default::default(), &first))
        .await
        .expect("commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision
    })
    .await;
    assert_eq!(values(&view), first, "published with its values");

    read.send_replace(revision);
    let again = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision && v.entries.values().all(|e| e.value.is_empty())
    })
    .await;
    let revisions = |v: &View| {
        (v.entries.iter())
            .map(|(k, e)| (k.clone(), e.mod_revision))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        revisions(&again),
        revisions(&view),
        "the same keys and revisions"
    );

    let second = state("two", 150..210);
    let revision = etcd
        .commit(&leader, ops(&first, &second))
        .await
        .expect("second commit");
    let view = wait_view(&mut views, Duration::from_secs(5), |v| {
        v.revision == revision
    })
    .await;
    let changed = second
        .iter()
        .filter(|(k, v)| first.get(*k) != Some(*v))
        .count();
    let kept = view
        .entries
        .values()
        .filter(|e| !e.value.is_empty())
        .count();
    assert_eq!(
        kept, changed,
        "only the values written since the revision read"
    );
    for (key, value) in &second {
        let entry = &view.entries[key];
        assert!(entry.value.is_empty() || entry.value == *value, "{key}");
    }
}
