//! Status and Events against the fake API server, one reporter.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;
use support::{Cluster, PUBLISH, eventually, fast, feed, feed_lagging, ingress, leads};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_is_written_once_and_not_again_while_unchanged() {
    let cluster = Cluster::start().await;
    cluster.server.apply(ingress("web", "portico", &[], None));
    cluster
        .server
        .apply(ingress("other", "nginx", &["10.9.9.9"], None));
    let (reports, _feed) = feed(&cluster).await;
    let (reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(leads(&mut reporter.leader(), true, WAIT).await);

    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);
    // More reports come (the write, an unrelated change) over many passes.
    cluster
        .server
        .apply(ingress("other", "nginx", &["10.9.9.9"], Some("x")));
    tokio::time::sleep(Duration::from_millis(1500)).await;

    assert_eq!(cluster.status_patches("web").len(), 1);
    let patch = &cluster.status_patches("web")[0];
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(cluster.status_patches("other").len(), 0);
    assert_eq!(cluster.status("other"), ["10.9.9.9"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_watch_does_not_cause_a_second_write() {
    let cluster = Cluster::start().await;
    cluster.server.apply(ingress("web", "portico", &[], None));
    let (reports, _feed) = feed_lagging(&cluster, Duration::from_secs(1)).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    // Other Ingresses keep changing: reports (still without the write) keep coming.
    for i in 0..40 {
        let noise = ingress("noise", "nginx", &[], Some(&i.to_string()));
        cluster.server.apply(noise);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cluster.status("web"), [PUBLISH]);
    assert_eq!(cluster.status_patches("web").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_is_cleared_when_the_ingress_is_no_longer_owned() {
    let cluster = Cluster::start().await;
    cluster.server.apply(ingress("web", "portico", &[], None));
    let (reports, _feed) = feed(&cluster).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);

    cluster
        .server
        .apply(ingress("web", "nginx", &[PUBLISH], None));
    assert!(eventually(WAIT, || cluster.status("web").is_empty()).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(cluster.status_patches("web").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_controllers_status_is_left_alone() {
    let cluster = Cluster::start().await;
    cluster
        .server
        .apply(ingress("other", "nginx", &["10.9.9.9"], None));
    cluster.server.apply(ingress("web", "portico", &[], None));
    let (reports, _feed) = feed(&cluster).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(cluster.status_patches("other").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_overwritten_by_someone_else_is_written_again() {
    let cluster = Cluster::start().await;
    cluster.server.apply(ingress("web", "portico", &[], None));
    let (reports, _feed) = feed(&cluster).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);

    cluster
        .server
        .apply(ingress("web", "portico", &["10.7.7.7"], None));
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);
    assert_eq!(cluster.status_patches("web").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_status_write_is_retried() {
    let cluster = Cluster::start().await;
    cluster
        .server
        .fail_next("PATCH", "ingresses/web/status", 500);
    cluster.server.apply(ingress("web", "portico", &[], None));
    let (reports, _feed) = feed(&cluster).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);
    let codes: Vec<u16> = cluster
        .status_patches("web")
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(codes, [500, 200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_diagnostic_becomes_one_event_while_it_persists() {
    let cluster = Cluster::start().await;
    cluster
        .server
        .apply(ingress("web", "portico", &[], Some("bad path")));
    let (reports, _feed) = feed(&cluster).await;
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    assert!(eventually(WAIT, || cluster.server.events().len() == 1).await);
    // The status write changes the Ingress and brings new reports; no second Event.
    assert!(eventually(WAIT, || cluster.status("web") == [PUBLISH]).await);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let events = cluster.server.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["metadata"]["namespace"], "shop");
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["reason"], "InvalidConfiguration");
    assert_eq!(e["action"], "Translate");
    assert_eq!(e["note"], "spec: bad path");
    assert_eq!(e["regarding"]["kind"], "Ingress");
    assert_eq!(e["regarding"]["name"], "web");
    assert!(
        e["regarding"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert_eq!(e["reportingController"], "portico.dev/ingress-controller");
    assert_eq!(e["reportingInstance"], "a");

    // Gone, then back: published again.
    cluster
        .server
        .apply(ingress("web", "portico", &[PUBLISH], None));
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster
        .server
        .apply(ingress("web", "portico", &[PUBLISH], Some("bad path")));
    assert!(eventually(WAIT, || cluster.server.events().len() == 2).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_planned_for_a_deleted_ingress_never_lands_on_its_successor() {
    let cluster = Cluster::start().await;
    cluster.server.apply(ingress("web", "portico", &[], None));
    // The source lags 2 s: it will report the first `web` after it is gone.
    let (reports, _feed) = feed_lagging(&cluster, Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        cluster
            .server
            .delete("networking.k8s.io/v1", "Ingress", Some("shop"), "web")
    );
    cluster.server.apply(ingress("web", "nginx", &[], None));
    let (_reporter, _stop) = cluster.reporter(fast("a"), reports).await;
    // The patch planned from the stale report carries the old uid and is refused.
    assert!(eventually(WAIT, || !cluster.status_patches("web").is_empty()).await);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let landed: Vec<_> = (cluster.status_patches("web").into_iter())
        .filter(|r| r.status < 300)
        .map(|r| r.body)
        .collect();
    assert!(
        landed.is_empty(),
        "patches that landed on the new web: {landed:?}"
    );
    assert!(
        cluster.status("web").is_empty(),
        "{:?}",
        cluster.status("web")
    );
}
