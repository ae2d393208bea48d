//! The store contract over etcd: `EtcdController` leads, writes what changed and reports the
//! revision; `EtcdAgent` serves that revision and its feedback reaches the controller's view.

use crate::support::{config, wait};
use portico_model::{LoadBalancerId, Placement};
use portico_store::{AgentStore, ControllerStore, Desired, Feedback};
use portico_store_etcd::{AgentLink, Etcd, EtcdAgent, EtcdController};
use portico_testkit::EtcdCluster;
use std::time::Duration;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_writes_what_changed_and_an_agent_serves_it_and_reports_back() {
    let cluster = EtcdCluster::start(1);
    let etcd = Etcd::connect(config(cluster.endpoints()))
        .await
        .expect("connect");
    let mut controller = EtcdController::start(etcd, "a".to_owned());
    assert!(controller.agents_apart());
    let mut leading = controller.leadership();
    wait(&mut leading, "leadership", |l| *l).await;
    let stored = controller.stored().await.expect("read the stored state");
    assert!(stored.placements.is_empty(), "an empty store: {stored:?}");

    // A new leader commits even an empty state, so that agents see a first revision.
    let first = controller.write(&Desired::default()).await.expect("write");
    let first = first.expect("a new leader's first write is committed");
    // Nothing changed since: nothing is written.
    let again = controller.write(&Desired::default()).await.expect("write");
    assert_eq!(again, None, "an unchanged state is not written again");

    // A placement changed: a new revision, after the first.
    let id = LoadBalancerId::derive("lb");
    let mut desired = Desired::default();
    desired.placements.insert(
        id,
        Placement {
            active: "n1".to_owned(),
            standby: None,
            epoch: 1,
        },
    );
    let second = controller
        .write(&desired)
        .await
        .expect("write")
        .expect("a change");
    assert!(second > first, "{second} after {first}");

    let link = AgentLink {
        config: config(cluster.endpoints()),
        node: "n1".to_owned(),
        lease_ttl: Duration::from_secs(5),
    };
    let (_stop, shutdown) = watch::channel(false);
    let agent = EtcdAgent::start(link, None, shutdown);
    let mut served = agent.desired();
    let got = wait(&mut served, "the agent's desired state", |d| {
        d.revision >= second
    })
    .await;
    assert_eq!(
        got.placements.get(&id).map(|p| p.active.as_str()),
        Some("n1")
    );
    let mut health = agent.health();
    wait(&mut health, "the agent's health", |h| h.connected).await;

    agent.report(&Feedback {
        node: "n1".to_owned(),
        revision: got.revision,
        ready: true,
        ..Feedback::default()
    });
    let mut agents = controller.agents();
    let seen = wait(&mut agents, "the agent's feedback", |a| {
        a.feedback.get("n1").is_some_and(|f| f.ready)
    })
    .await;
    assert!(seen.listed);
    assert_eq!(seen.feedback["n1"].revision, got.revision);

    controller.resign().await;
}
