//! Mirrors: a task per subtree that keeps a [`View`] on a `tokio::sync::watch` channel.
//!
//! The way Cilium's kvstore and APISIX read etcd: list a snapshot, publish it, watch from its
//! revision + 1 (with require-leader, set on the whole connection). On compaction, a canceled
//! watch or a broken stream: relist (keys gone are swept) after a back-off. Meanwhile the
//! last view stays published and [`Health`] says since when the mirror is disconnected.

mod list;
mod state;

use crate::client::{Backoff, Etcd};
use crate::error::EtcdError;
use crate::keys::{COMMIT, DESIRED, prefix_end};
use crate::rpc::{self, WatchCreateRequest, WatchResponse, WatchStream, event};
use crate::task::Task;
use bytes::Bytes;
use portico_store::kv::View;
use state::{Change, Copy, Spec};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// Whether a mirror follows etcd, since when, and the last error it met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub connected: bool,
    pub since: SystemTime,
    pub last_error: Option<String>,
}

/// A running mirror; dropping it stops the task.
#[derive(Debug)]
pub struct Mirror {
    views: watch::Receiver<View>,
    health: watch::Receiver<Health>,
    _task: Task,
}

impl Mirror {
    /// The published views: always a whole commit, revisions only moving forward.
    pub fn views(&self) -> watch::Receiver<View> {
        self.views.clone()
    }

    pub fn health(&self) -> watch::Receiver<Health> {
        self.health.clone()
    }
}

/// The longest pause between two relists.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl Etcd {
    /// Mirrors `desired/`, publishing at commit markers only. `initial` (e.g. the local cache)
    /// is served until etcd answers with something newer.
    pub fn mirror_desired(&self, initial: View) -> Mirror {
        self.start_mirror(desired_spec(), initial, None)
    }

    /// [`Etcd::mirror_desired`] for a reader that keeps what it read and says up to which
    /// revision on `read`: the mirror then drops the values of the entries no newer (they keep
    /// their key and mod revision, with an empty value), and publishes a view it published
    /// before again without them once it was read.
    pub fn mirror_desired_read(&self, initial: View, read: watch::Receiver<i64>) -> Mirror {
        self.start_mirror(desired_spec(), initial, Some(read))
    }

    /// Mirrors a subtree without markers (e.g. `agents/`), publishing every revision.
    pub fn mirror(&self, subtree: &str) -> Mirror {
        let spec = Spec {
            subtree: subtree.to_owned(),
            marker: None,
        };
        self.start_mirror(spec, View::default(), None)
    }

    fn start_mirror(
        &self,
        spec: Spec,
        initial: View,
        read: Option<watch::Receiver<i64>>,
    ) -> Mirror {
        let (views_tx, views) = watch::channel(initial.clone());
        let (health_tx, health) = watch::channel(Health {
            connected: false,
            since: SystemTime::now(),
            last_error: None,
        });
        let run = Run {
            etcd: self.clone(),
            copy: Copy::new(spec.clone(), initial),
            spec,
            views: views_tx,
            health: health_tx,
            read,
        };
        Mirror {
            views,
            health,
            _task: Task::spawn(run.run()),
        }
    }
}

struct Run {
    etcd: Etcd,
    spec: Spec,
    copy: Copy,
    views: watch::Sender<View>,
    health: watch::Sender<Health>,
    /// The revision the reader has read, for a mirror that drops what it read.
    read: Option<watch::Receiver<i64>>,
}

/// `desired/` and its commit marker.
fn desired_spec() -> Spec {
    Spec {
        subtree: DESIRED.to_owned(),
        marker: Some(COMMIT.to_owned()),
    }
}

impl Run {
    async fn run(mut self) {
        let mut backoff = Backoff::new(MAX_BACKOFF);
        loop {
            let error = self.session(&mut backoff).await;
            warn!(subtree = %self.spec.subtree, error = %error, "mirror disconnected; relisting");
            self.disconnected(&error);
            backoff.wait().await;
        }
    }

    /// List, watch, follow; returns what ended it.
    async fn session(&mut self, backoff: &mut Backoff) -> EtcdError {
        let listing = match self.etcd.list(&self.spec).await {
            Ok(listing) => listing,
            Err(e) => return e,
        };
        self.read_up_to();
        let publish = self.copy.relist(listing.entries, listing.whole_at);
        self.publish(publish);
        let mut stream = match self.watch(listing.watch_from).await {
            Ok(stream) => stream,
            Err(e) => return e,
        };
        self.connected();
        backoff.reset();
        loop {
            let message = tokio::select! {
                message = stream.message() => Some(message),
                () = read_changed(&mut self.read) => None,
            };
            let Some(message) = message else {
                self.read_up_to();
                continue;
            };
            let answer = match message {
                Ok(Some(answer)) => answer,
                Ok(None) => return broken("the watch stream ended".into()),
                Err(e) => return EtcdError::request("watch", &e),
            };
            if answer.canceled || answer.compact_revision != 0 {
                return broken(canceled(&answer));
            }
            let changes = self.changes(&answer);
            let publish = self.copy.apply(&changes);
            self.publish(publish);
        }
    }

    /// Opens the watch and waits for etcd to confirm it.
    async fn watch(&self, from: i64) -> Result<WatchStream, EtcdError> {
        let (key, range_end) = list::range(&self.etcd, &self.spec);
        let create = WatchCreateRequest {
            key,
            range_end,
            start_revision: from,
            ..WatchCreateRequest::default()
        };
        let mut client = self.etcd.watch_client();
        let opening = client.watch(rpc::watch_stream(create));
        let mut stream = self.etcd.bounded("watch", opening).await?;
        let first = self.etcd.within("watch", stream.message()).await?;
        match first {
            Some(answer) if answer.created && !answer.canceled => Ok(stream),
            Some(answer) => Err(broken(canceled(&answer))),
            None => Err(broken("the watch stream ended".into())),
        }
    }

    fn changes(&self, answer: &WatchResponse) -> Vec<Change> {
        let layout = &self.etcd.layout;
        let change = |event: &rpc::api::Event| {
            let kv = event.kv.as_ref()?;
            let key = layout.relative(&kv.key)?.to_owned();
            let revision = kv.mod_revision;
            Some(match event.r#type() {
                event::EventType::Put => Change::Put {
                    key,
                    value: Bytes::copy_from_slice(&kv.value),
                    revision,
                },
                event::EventType::Delete => Change::Delete { key, revision },
            })
        };
        answer.events.iter().filter_map(change).collect()
    }

    /// Takes the reader's revision: drops what it read, publishes the view again without it.
    fn read_up_to(&mut self) {
        let Some(read) = &mut self.read else { return };
        let revision = *read.borrow_and_update();
        let publish = self.copy.read(revision);
        self.publish(publish);
    }

    fn publish(&self, view: Option<View>) {
        if let Some(view) = view {
            debug!(subtree = %self.spec.subtree, revision = view.revision, "publishing");
            self.views.send_replace(view);
        }
    }

    fn connected(&self) {
        let revision = self.copy.published().revision;
        info!(subtree = %self.spec.subtree, revision, "mirror following etcd");
        self.health.send_modify(|h| {
            h.connected = true;
            h.since = SystemTime::now();
        });
    }

    fn disconnected(&self, error: &EtcdError) {
        self.health.send_modify(|h| {
            if h.connected {
                h.since = SystemTime::now();
            }
            h.connected = false;
            h.last_error = Some(error.to_string());
        });
    }
}

/// Resolves when the reader's revision changed; never without a reader or once it is gone.
async fn read_changed(read: &mut Option<watch::Receiver<i64>>) {
    if let Some(r) = read
        && r.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

fn canceled(answer: &WatchResponse) -> String {
    match answer.compact_revision {
        0 => format!("the watch was canceled: {}", answer.cancel_reason),
        at => format!("history compacted up to revision {at}"),
    }
}

fn broken(reason: String) -> EtcdError {
    EtcdError::broken("watch", reason)
}

/// The range that holds a subtree and its marker (the marker sorts just before `desired/`).
fn watched(spec: &Spec, layout: &crate::keys::Layout) -> (Vec<u8>, Vec<u8>) {
    let subtree = layout.abs(&spec.subtree);
    let end = prefix_end(&subtree);
    match &spec.marker {
        Some(marker) => {
            let marker = layout.abs(marker);
            (
                marker.clone().min(subtree),
                end.max([marker, vec![0]].concat()),
            )
        }
        None => (subtree, end),
    }
}
