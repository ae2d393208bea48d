//! kube-rs watchers and reflectors against the fake: events, bookmarks, cuts, 410 and relists.

mod common;

use common::{ingress, start, within};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PartialObjectMeta, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector};
use portico_fake_apiserver::FakeApiServer;
use serde_json::json;
use std::time::Duration;

type Events = std::pin::Pin<Box<dyn Stream<Item = watcher::Result<Event<Ingress>>> + Send>>;

fn watch_ingresses(client: kube::Client, config: watcher::Config) -> Events {
    watcher(Api::<Ingress>::all(client), config).boxed()
}

use kube::runtime::watcher::watcher;

/// The next event, as a short text: `Init`, `InitApply(a)`, `InitDone`, `Apply(a)`,
/// `Delete(a)`, or `Error(410)` / `Error(stream)`.
async fn next(events: &mut Events) -> String {
    match within("a watcher event", events.next()).await {
        Some(Ok(event)) => event.to_string(),
        Some(Err(watcher::Error::WatchError(status))) => format!("Error({})", status.code),
        Some(Err(_)) => "Error(stream)".to_string(),
        None => "End".to_string(),
    }
}

/// The next events that are not stream errors (a cut may or may not surface as one).
async fn next_ignoring_cuts(events: &mut Events, count: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < count {
        let event = next(events).await;
        if event != "Error(stream)" {
            out.push(event);
        }
    }
    out
}

/// Polls the watcher until it has a watch open at the server (it opens one lazily).
async fn open_watch(server: &FakeApiServer, events: &mut Events, count: usize) {
    tokio::select! {
        event = events.next() => panic!("unexpected event while opening the watch: {:?}", event.map(|e| e.map(|e| e.to_string()))),
        () = within("the watch to open", server.wait_for_watches(count)) => {}
    }
}

fn watch_versions(server: &FakeApiServer) -> Vec<String> {
    let watches = server
        .requests()
        .into_iter()
        .filter(|r| r.query.contains("watch=true"));
    watches
        .map(|r| {
            let rv = r
                .query
                .split('&')
                .find_map(|p| p.strip_prefix("resourceVersion="));
            rv.unwrap_or_default().to_string()
        })
        .collect()
}

#[tokio::test]
async fn watcher_sees_adds_updates_and_deletes() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({})));
    let mut events = watch_ingresses(client, watcher::Config::default());
    assert_eq!(
        next_ignoring_cuts(&mut events, 3).await,
        ["Init", "InitApply(a)", "InitDone"]
    );
    server.apply(ingress("web", "b", json!({})));
    assert_eq!(next(&mut events).await, "Apply(b)");
    server.apply(ingress("web", "a", json!({"changed": "yes"})));
    assert_eq!(next(&mut events).await, "Apply(a)");
    assert!(server.delete("networking.k8s.io/v1", "Ingress", Some("web"), "a"));
    assert_eq!(next(&mut events).await, "Delete(a)");
}

#[tokio::test]
async fn bookmarks_arrive_only_when_asked_for() {
    let (server, client) = start().await;
    server.set_bookmark_interval(Duration::from_millis(20));
    server.apply(ingress("web", "a", json!({})));
    let api: Api<Ingress> = Api::all(client);
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let added = within("ADDED", stream.next()).await;
    assert!(matches!(added, Some(Ok(WatchEvent::Added(_)))));
    match within("a bookmark", stream.next()).await {
        Some(Ok(WatchEvent::Bookmark(b))) => assert_eq!(b.metadata.resource_version, "2"),
        other => panic!("expected a bookmark, got {other:?}"),
    }

    let quiet = WatchParams::default().disable_bookmarks();
    let mut stream = api.watch(&quiet, "2").await.expect("watch").boxed();
    let nothing = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(nothing.is_err(), "no event without bookmarks: {nothing:?}");
}

#[tokio::test]
async fn bookmarks_move_the_watchers_resume_point() {
    let (server, client) = start().await;
    server.set_bookmark_interval(Duration::from_millis(20));
    let mut events = watch_ingresses(client, watcher::Config::default());
    assert_eq!(
        next_ignoring_cuts(&mut events, 2).await,
        ["Init", "InitDone"]
    );
    open_watch(&server, &mut events, 1).await;
    // A write to another type moves the global version; a bookmark carries it to the watcher.
    server.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
    let moved = server.resource_version().to_string();
    let _ = tokio::time::timeout(Duration::from_millis(400), events.next()).await;
    server.cut_watches();
    open_watch(&server, &mut events, 2).await;
    assert_eq!(watch_versions(&server), ["1", moved.as_str()]);
}

#[tokio::test]
async fn cut_watch_resumes_without_missing_a_change() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({})));
    let mut events = watch_ingresses(client, watcher::Config::default());
    assert_eq!(
        next_ignoring_cuts(&mut events, 3).await,
        ["Init", "InitApply(a)", "InitDone"]
    );
    open_watch(&server, &mut events, 1).await;

    server.cut_watches();
    server.apply(ingress("web", "b", json!({})));
    server.apply(ingress("web", "a", json!({"changed": "yes"})));
    server.delete("networking.k8s.io/v1", "Ingress", Some("web"), "b");

    let seen = next_ignoring_cuts(&mut events, 3).await;
    assert_eq!(seen, ["Apply(b)", "Apply(a)", "Delete(b)"]);
    assert_eq!(server.watch_count(), 2);
    assert_eq!(
        watch_versions(&server),
        ["2", "2"],
        "resumed from the last version seen"
    );
}

#[tokio::test]
async fn compacted_history_makes_the_reflector_relist_to_the_right_state() {
    let (server, client) = start().await;
    server.set_bookmark_interval(Duration::from_secs(3600));
    server.apply(ingress("web", "a", json!({})));
    let (reader, writer) = reflector::store();
    let inner = watcher(Api::<Ingress>::all(client), watcher::Config::default());
    let mut events: Events = reflector(writer, inner).boxed();
    assert_eq!(
        next_ignoring_cuts(&mut events, 3).await,
        ["Init", "InitApply(a)", "InitDone"]
    );
    open_watch(&server, &mut events, 1).await;

    server.cut_watches();
    server.delete("networking.k8s.io/v1", "Ingress", Some("web"), "a");
    server.apply(ingress("web", "b", json!({})));
    server.compact();

    let seen = next_ignoring_cuts(&mut events, 4).await;
    assert_eq!(seen, ["Error(410)", "Init", "InitApply(b)", "InitDone"]);
    let names: Vec<String> = reader
        .state()
        .iter()
        .filter_map(|i| i.metadata.name.clone())
        .collect();
    assert_eq!(names, ["b"]);
    server.apply(ingress("web", "c", json!({})));
    assert_eq!(next(&mut events).await, "Apply(c)");
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_one_410_error_event() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({})));
    server.apply(ingress("web", "b", json!({})));
    server.compact();
    let api: Api<Ingress> = Api::all(client);
    let mut stream = api
        .watch(&WatchParams::default(), "2")
        .await
        .expect("watch")
        .boxed();
    match within("the error event", stream.next()).await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    assert!(within("the end", stream.next()).await.is_none());
    // The current version is still inside the window.
    let mut stream = api
        .watch(&WatchParams::default(), "3")
        .await
        .expect("watch")
        .boxed();
    server.apply(ingress("web", "c", json!({})));
    assert!(matches!(
        within("ADDED", stream.next()).await,
        Some(Ok(WatchEvent::Added(_)))
    ));
}

#[tokio::test]
async fn selector_watch_sees_objects_move_in_and_out() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({"app": "x"})));
    server.apply(ingress("web", "b", json!({"app": "y"})));
    let api: Api<Ingress> = Api::namespaced(client, "web");
    let params = WatchParams::default().labels("app=x").disable_bookmarks();
    let mut stream = api.watch(&params, "0").await.expect("watch").boxed();
    server.apply(ingress("other", "c", json!({"app": "x"})));
    server.apply(ingress("web", "b", json!({"app": "x"})));
    server.apply(ingress("web", "a", json!({"app": "y"})));
    server.apply(ingress("web", "a", json!({"app": "z"})));
    server.apply(ingress("web", "b", json!({"app": "x", "more": "1"})));
    let mut seen = Vec::new();
    for _ in 0..4 {
        let text = match within("a watch event", stream.next()).await {
            Some(Ok(WatchEvent::Added(i))) => {
                format!("ADDED {}", i.metadata.name.unwrap_or_default())
            }
            Some(Ok(WatchEvent::Modified(i))) => {
                format!("MODIFIED {}", i.metadata.name.unwrap_or_default())
            }
            Some(Ok(WatchEvent::Deleted(i))) => {
                format!("DELETED {}", i.metadata.name.unwrap_or_default())
            }
            other => format!("{other:?}"),
        };
        seen.push(text);
    }
    assert_eq!(seen, ["ADDED a", "ADDED b", "DELETED a", "MODIFIED b"]);
}

#[tokio::test]
async fn streaming_list_initialises_the_watcher() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({})));
    let mut events = watch_ingresses(client, watcher::Config::default().streaming_lists());
    assert_eq!(
        next_ignoring_cuts(&mut events, 3).await,
        ["Init", "InitApply(a)", "InitDone"]
    );
    server.apply(ingress("web", "b", json!({})));
    assert_eq!(next(&mut events).await, "Apply(b)");
    let first = &server.requests()[0];
    assert!(
        first.query.contains("sendInitialEvents=true"),
        "{}",
        first.query
    );
}

#[tokio::test]
async fn timeout_seconds_ends_the_watch_cleanly() {
    let (_server, client) = start().await;
    let api: Api<ConfigMap> = Api::all(client);
    let params = WatchParams::default().timeout(1).disable_bookmarks();
    let mut stream = api.watch(&params, "0").await.expect("watch").boxed();
    let end = within("the watch to end", stream.next()).await;
    assert!(end.is_none(), "a clean end, not {end:?}");
}

#[tokio::test]
async fn metadata_watchers_get_partial_objects() {
    let (server, client) = start().await;
    server.apply(ingress("web", "a", json!({"app": "x"})));
    let api: Api<PartialObjectMeta<Ingress>> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .touched_objects()
        .boxed();
    let first = within("a metadata object", events.next()).await;
    let labels = first.and_then(Result::ok).and_then(|m| m.metadata.labels);
    let accepts = server.requests().into_iter().filter_map(|r| r.accept);
    assert!(
        accepts.clone().count() >= 1
            && accepts
                .into_iter()
                .all(|a| a.contains("as=PartialObjectMetadata"))
    );
    assert_eq!(
        labels.and_then(|l| l.get("app").cloned()).as_deref(),
        Some("x")
    );
}
