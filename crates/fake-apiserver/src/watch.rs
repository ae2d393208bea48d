//! Watch streams: newline-delimited JSON events (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`,
//! `ERROR`) written into a chunked response body by one task per watch.
//!
//! A watch with a label or field selector sees a change that moves an object into the selection
//! as `ADDED` and out of it as `DELETED` (with the object's new state), as the real watch cache
//! does. Bookmarks carry the newest resourceVersion this watch has been told of, so a client that
//! resumes from a bookmark misses nothing.

use crate::meta;
use crate::query::Query;
use crate::resources::{self, TypeId};
use crate::status::ApiError;
use crate::store::{Change, ChangeKind, Subscription, WatchMsg};
use bytes::Bytes;
use hyper::body::{Body, Frame};
use serde_json::{Value, json};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

/// Without `timeoutSeconds` a watch lasts this long (the real server picks 30 to 60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The error that makes hyper drop the connection mid-body, as a dying server would.
#[derive(Debug, thiserror::Error)]
#[error("watch stream cut")]
pub struct WatchCut;

/// A response body fed by the watch task; an `Err` aborts the connection.
#[derive(Debug)]
pub struct WatchBody {
    rx: mpsc::Receiver<Result<Bytes, WatchCut>>,
}

impl Body for WatchBody {
    type Data = Bytes;
    type Error = WatchCut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WatchCut>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }
}

/// Which changes one watch passes on, and how.
#[derive(Debug)]
pub struct Filter {
    pub ty: TypeId,
    pub namespace: Option<String>,
    pub query: Query,
    /// Changes at or below this resourceVersion were already seen by the client.
    pub from: u64,
    /// Objects are sent as `PartialObjectMetadata`.
    pub meta_only: bool,
}

/// Timing and bookmark options of one watch.
#[derive(Debug)]
pub struct Options {
    pub bookmark_every: Arc<AtomicU64>,
    /// Send the `k8s.io/initial-events-end` bookmark after the initial events.
    pub initial_events_end: bool,
}

/// Starts the task that writes the watch and returns the body it writes to.
pub fn start(sub: Subscription, filter: Filter, options: Options) -> WatchBody {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(run(sub, filter, options, tx));
    WatchBody { rx }
}

/// A watch answered with one `ERROR` event (e.g. 410 Expired), then a clean end.
pub fn error(err: &ApiError) -> WatchBody {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(Ok(line("ERROR", &err.to_status())));
    WatchBody { rx }
}

type Tx = mpsc::Sender<Result<Bytes, WatchCut>>;

async fn run(mut sub: Subscription, filter: Filter, options: Options, tx: Tx) {
    for bytes in backlog(&sub, &filter, &options) {
        if tx.send(Ok(bytes)).await.is_err() {
            return;
        }
    }
    live(&mut sub, &filter, &options, &tx).await;
}

/// What a watch is sent before live changes: initial objects (with the initial-events-end
/// bookmark for a streaming list), or the changes replayed from its resourceVersion.
fn backlog(sub: &Subscription, filter: &Filter, options: &Options) -> Vec<Bytes> {
    let initial = sub.initial.iter().filter(|o| filter.admits(o));
    let mut backlog: Vec<Bytes> = initial.map(|o| filter.line("ADDED", o)).collect();
    if options.initial_events_end {
        backlog.push(bookmark(filter.ty, sub.rv, true));
    }
    backlog.extend(sub.replay.iter().filter_map(|c| filter.event(c)));
    backlog
}

/// Live changes and bookmarks until the timeout, a cut, or the client going away.
async fn live(sub: &mut Subscription, filter: &Filter, options: &Options, tx: &Tx) {
    let timeout = filter.query.timeout.filter(|t| !t.is_zero());
    let deadline = Instant::now() + timeout.unwrap_or(DEFAULT_TIMEOUT);
    let every = || Duration::from_millis(options.bookmark_every.load(Ordering::Relaxed).max(1));
    let mut next_bookmark = Instant::now() + every();
    let mut rv = sub.rv.max(filter.from);
    loop {
        let out = tokio::select! {
            msg = sub.changes.recv() => match msg {
                Some(WatchMsg::Change(change)) => {
                    rv = rv.max(change.rv);
                    match filter.event(&change) {
                        Some(bytes) => Ok(bytes),
                        None => continue,
                    }
                }
                Some(WatchMsg::Cut) | None => Err(WatchCut),
            },
            () = sleep_until(next_bookmark), if filter.query.bookmarks => {
                next_bookmark = Instant::now() + every();
                Ok(bookmark(filter.ty, rv, false))
            }
            () = sleep_until(deadline) => return,
            () = tx.closed() => return,
        };
        let cut = out.is_err();
        if tx.send(out).await.is_err() || cut {
            return;
        }
    }
}

impl Filter {
    fn admits(&self, object: &Value) -> bool {
        let in_namespace = match &self.namespace {
            Some(ns) => meta::namespace(object) == Some(ns.as_str()),
            None => true,
        };
        in_namespace && self.query.labels.matches(object) && self.query.fields.matches(object)
    }

    /// The event line this watch sends for `change`, if any.
    fn event(&self, change: &Change) -> Option<Bytes> {
        if change.key.0 != self.ty || change.rv <= self.from {
            return None;
        }
        let now = self.admits(&change.object);
        let before = change.previous.as_deref().is_some_and(|p| self.admits(p));
        let kind = match (change.kind, before, now) {
            (ChangeKind::Added, _, true) => "ADDED",
            (ChangeKind::Deleted, _, true) => "DELETED",
            (ChangeKind::Modified, true, true) => "MODIFIED",
            (ChangeKind::Modified, false, true) => "ADDED",
            (ChangeKind::Modified, true, false) => "DELETED",
            _ => return None,
        };
        Some(self.line(kind, &change.object))
    }

    fn line(&self, kind: &str, object: &Value) -> Bytes {
        if self.meta_only {
            line(kind, &meta::partial(object))
        } else {
            line(kind, object)
        }
    }
}

fn bookmark(ty: TypeId, rv: u64, initial_events_end: bool) -> Bytes {
    let def = resources::get(ty);
    let mut object = json!({
        "apiVersion": def.api_version(),
        "kind": def.kind,
        "metadata": {"resourceVersion": rv.to_string()},
    });
    if initial_events_end {
        object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line("BOOKMARK", &object)
}

#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a Value,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(&Line { kind, object }).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}
