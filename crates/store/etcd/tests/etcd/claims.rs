//! The agents' side of active-standby over etcd (`EtcdClaims`, the `ClaimStore` contract):
//! names are leases (adopted while alive), a claim changes only from the revision it was seen
//! at, every swap shows in the claims' view by load balancer, and the controller sees the same.

use crate::support::{config, wait};
use bytes::Bytes;
use portico_model::LoadBalancerId;
use portico_store::{ClaimStore, ClaimSwap, ControllerStore, Feedback};
use portico_store_etcd::{AgentLink, Etcd, EtcdAgent, EtcdClaims, EtcdController};
use portico_testkit::EtcdCluster;
use std::time::Duration;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_swaps_from_the_revision_it_was_seen_at_and_shows_in_both_views() {
    let cluster = EtcdCluster::start(1);
    let (_stop, shutdown) = watch::channel(false);
    let ttl = Duration::from_secs(2);
    let claims = EtcdClaims::start(config(cluster.endpoints()), ttl, shutdown.clone());
    let mut health = claims.health();
    wait(&mut health, "the claims' health", |h| h.connected).await;
    let name = claims.name().await.expect("a name");
    assert!(name.id() != 0);

    let lb = LoadBalancerId::derive("lb");
    let won = claims.clone().swap(lb, 0, Bytes::from("a")).await;
    let ClaimSwap::Done(revision) = won else {
        panic!("creating an absent claim from 0 wins: {won:?}")
    };
    let lost = claims.clone().swap(lb, 0, Bytes::from("b")).await;
    let ClaimSwap::Lost(Some(there)) = lost else {
        panic!("a second create from 0 loses and reads the first: {lost:?}")
    };
    assert_eq!(
        (there.value, there.mod_revision),
        (Bytes::from("a"), revision)
    );
    let mut view = claims.claims();
    let seen = wait(&mut view, "the claim in the view", |c| {
        c.entries.contains_key(&lb)
    })
    .await;
    assert_eq!(seen.entries[&lb].mod_revision, revision);
    assert!(seen.revision >= revision);

    // The controller reads the same claims, by load balancer.
    let etcd = Etcd::connect(config(cluster.endpoints()))
        .await
        .expect("connect");
    let controller = EtcdController::start(etcd, "c".to_owned());
    let mut theirs = controller.claims();
    let seen = wait(&mut theirs, "the controller's claims", |c| {
        c.entries.contains_key(&lb)
    })
    .await;
    assert_eq!(seen.entries[&lb].value, Bytes::from("a"));

    // The agents' feedback reaches the claims' side (the peers' addresses).
    let link = AgentLink {
        config: config(cluster.endpoints()),
        node: "n1".to_owned(),
        lease_ttl: ttl,
    };
    let agent = EtcdAgent::start(link, None, shutdown.clone());
    portico_store::AgentStore::report(
        &agent,
        &Feedback {
            node: "n1".to_owned(),
            advertise_address: Some([10, 0, 0, 1].into()),
            ..Feedback::default()
        },
    );
    let mut agents = claims.agents();
    let seen = wait(&mut agents, "the agents", |a| a.feedback.contains_key("n1")).await;
    assert_eq!(
        seen.feedback["n1"].advertise_address,
        Some([10, 0, 0, 1].into())
    );

    // A successor adopts the name while it lives; once nobody keeps it, it runs out.
    let id = name.id();
    drop(name);
    let successor = EtcdClaims::start(config(cluster.endpoints()), ttl, shutdown);
    let adopted = successor.adopt(id).await.expect("adopt");
    assert_eq!(adopted.as_ref().map(|n| n.id()), Some(id));
    drop(adopted);
    tokio::time::sleep(ttl * 3).await;
    assert!(
        successor.adopt(id).await.expect("adopt").is_none(),
        "ran out"
    );
}
