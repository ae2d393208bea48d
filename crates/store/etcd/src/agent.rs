//! The agent's side of the etcd store: the link (connect, mirror `desired/` and `placement/`,
//! keep the agent's leased feedback key), the decoding of each view into a desired state, and
//! the agent's local cache of the last view (served until etcd answers).

use crate::connect::connect;
use crate::{EtcdConfig, cache};
use bytes::Bytes;
use portico_model::{LoadBalancerId, Placement};
use portico_store::codec::{self, Decoder};
use portico_store::kv::View;
use portico_store::{AgentStore, Desired, Feedback, StoreHealth};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where and as whom an agent reaches etcd.
#[derive(Debug, Clone)]
pub struct AgentLink {
    pub config: EtcdConfig,
    /// The agent's node name: its feedback key is `agents/<node>`.
    pub node: String,
    /// How long the agent's key outlives the agent.
    pub lease_ttl: Duration,
}

/// The etcd store as an agent sees it: started once, stopped when dropped.
#[derive(Debug)]
pub struct EtcdAgent {
    desired: watch::Receiver<Arc<Desired>>,
    health: watch::Receiver<StoreHealth>,
    feedback: watch::Sender<Bytes>,
    tasks: Vec<JoinHandle<()>>,
}

impl EtcdAgent {
    /// Serves the view cached at `cache_path` (if any and readable) until etcd answers, then
    /// etcd's; connects again and again until etcd answers or `shutdown`.
    pub fn start(
        link: AgentLink,
        cache_path: Option<PathBuf>,
        shutdown: watch::Receiver<bool>,
    ) -> EtcdAgent {
        let loaded = cache_path.as_deref().map(cache::load);
        let initial = match loaded.unwrap_or_else(|| Ok(View::default())) {
            Ok(view) => {
                tracing::info!(
                    revision = view.revision,
                    "serving the cached state until etcd answers"
                );
                view
            }
            Err(e) => {
                tracing::info!("no usable cache: {e}");
                View::default()
            }
        };
        // The decoder reads the cached view first, whole; the mirror and the channel keep its
        // keys and revisions only: the decoder holds what the values gave.
        let kept = without_values(&initial);
        let (views_tx, views) = watch::channel(kept.clone());
        let (read_tx, read) = watch::channel(0);
        let (health_tx, health) = watch::channel(StoreHealth {
            connected: false,
            detail: "connecting to etcd".to_owned(),
        });
        let (feedback_tx, feedback_rx) = watch::channel(Bytes::new());
        let (placements_tx, placements) = watch::channel(Arc::new(Placements::new()));
        let link = tokio::spawn(agent_link(
            link,
            (kept, read),
            (views_tx, placements_tx),
            health_tx,
            feedback_rx,
            shutdown,
        ));
        let (desired_tx, desired) = watch::channel(Arc::new(Desired::default()));
        let decoding = tokio::spawn(decode_views(
            (initial, views, read_tx),
            placements,
            desired_tx,
            cache_path,
        ));
        EtcdAgent {
            desired,
            health,
            feedback: feedback_tx,
            tasks: vec![link, decoding],
        }
    }
}

impl Drop for EtcdAgent {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl AgentStore for EtcdAgent {
    fn desired(&self) -> watch::Receiver<Arc<Desired>> {
        self.desired.clone()
    }

    fn health(&self) -> watch::Receiver<StoreHealth> {
        self.health.clone()
    }

    fn report(&self, feedback: &Feedback) {
        let bytes = serde_json::to_vec(feedback).unwrap_or_default();
        self.feedback.send_replace(Bytes::from(bytes));
    }
}

/// Placements by load balancer, as the store holds them.
type Placements = BTreeMap<LoadBalancerId, Placement>;

/// Each view → a desired state for the agent, with the latest placements; the newest state is
/// also cached, off this path. A change of placements alone hands the last state again with
/// the new placements and the same delta (so that a state the agent has not read yet is not
/// lost behind it).
///
/// `first` (the cached view, whole) is decoded before any of `views`; after each decode the
/// decoder's revision goes to `read`: the mirror then drops the values it holds of entries no
/// newer (the decoder keeps what they gave) and publishes the same view again without them,
/// which is not decoded again.
async fn decode_views(
    (first, mut views, read): (View, watch::Receiver<View>, watch::Sender<i64>),
    mut placements: watch::Receiver<Arc<Placements>>,
    desired: watch::Sender<Arc<Desired>>,
    cache_path: Option<PathBuf>,
) {
    let mut decoder = Decoder::default();
    let (to_cache, cached) = watch::channel(Snapshot {
        view: View::default(),
        desired: Arc::default(),
    });
    let cache = tokio::spawn(async move {
        if let Some(path) = cache_path {
            cache_views(cached, path).await;
        }
    });
    // The cached view is in the cache already.
    let mut decoded = first.revision;
    if first.revision > 0 {
        let mut next = decoder.decode(&first);
        next.placements = Placements::clone(&placements.borrow());
        desired.send_replace(Arc::new(next));
        read.send_replace(first.revision);
    }
    drop(first);
    let mut view_changed = true;
    loop {
        let placed = Placements::clone(&placements.borrow_and_update());
        if view_changed {
            let view = views.borrow_and_update().clone();
            if view.revision > 0 && view.revision != decoded {
                let mut next = decoder.decode(&view);
                next.placements = placed;
                let next = Arc::new(next);
                desired.send_replace(next.clone());
                decoded = view.revision;
                read.send_replace(decoded);
                to_cache.send_replace(Snapshot {
                    view,
                    desired: next,
                });
            } else if view.revision == decoded && view.revision > 0 {
                // The same view without the values read: the cache's copy need not hold them.
                to_cache.send_if_modified(|c| {
                    if c.view.revision == view.revision {
                        c.view = view;
                    }
                    false
                });
                // The values are gone (24 MiB at 10,000 Ingresses): the threads whose pages
                // held them give them back when next idle.
                portico_model::trim::trim_after_change();
            }
        } else {
            let last = desired.borrow().clone();
            if last.revision > 0 && last.placements != placed {
                let mut next = Desired::clone(&last);
                next.placements = placed;
                desired.send_replace(Arc::new(next));
            }
        }
        tokio::select! {
            r = views.changed() => {
                if r.is_err() { break }
                view_changed = true;
            }
            r = placements.changed() => {
                if r.is_err() { break }
                view_changed = false;
            }
        }
    }
    cache.abort();
}

/// What the cache is written from: a view's keys and mod revisions (its values may be gone)
/// and the state decoded from it, encoded again.
#[derive(Debug, Clone)]
struct Snapshot {
    view: View,
    desired: Arc<Desired>,
}

/// `view`'s keys and mod revisions, without values.
fn without_values(view: &View) -> View {
    let entries = view.entries.iter().map(|(key, entry)| {
        let entry = portico_store::kv::Entry {
            value: Bytes::new(),
            mod_revision: entry.mod_revision,
        };
        (key.clone(), entry)
    });
    View {
        revision: view.revision,
        entries: Arc::new(entries.collect()),
    }
}

/// How long the views stay unchanged before the agent writes its cache: a burst of changes
/// costs one write, and the write (24 MiB encoded, checksummed and synced at 10,000 Ingresses)
/// does not run beside the apply of the state it saves, on the same cores.
const CACHE_QUIET: Duration = Duration::from_millis(1000);
/// The longest a new view waits for a quiet moment: under a steady stream of changes the cache
/// is still written this often.
const CACHE_MAX_DELAY: Duration = Duration::from_secs(10);

/// When to write a view first seen unwritten at `first` and last changed at `last`.
fn cache_due(first: Instant, last: Instant) -> Instant {
    (last + CACHE_QUIET).min(first + CACHE_MAX_DELAY)
}

/// Writes the newest state to the cache once the states were quiet for [`CACHE_QUIET`] (or a
/// new one waited [`CACHE_MAX_DELAY`]).
async fn cache_views(mut snapshots: watch::Receiver<Snapshot>, path: PathBuf) {
    while snapshots.changed().await.is_ok() {
        let first = Instant::now();
        let mut last = first;
        loop {
            match tokio::time::timeout_at(cache_due(first, last), snapshots.changed()).await {
                Ok(Ok(())) => last = Instant::now(),
                Ok(Err(_)) => return,
                Err(_) => break,
            }
        }
        let snapshot = snapshots.borrow_and_update().clone();
        // An empty state serves nothing, as no cache does.
        if snapshot.view.entries.is_empty() {
            continue;
        }
        let target = path.clone();
        let saved = tokio::task::spawn_blocking(move || {
            let saved = cache::save_state(&target, &snapshot.view, &snapshot.desired);
            drop(snapshot);
            // The encoding is gone: give its pages back now, not when this thread next runs.
            portico_model::trim::trim_this_thread();
            saved
        })
        .await;
        if let Ok(Err(e)) = saved {
            tracing::warn!("cannot write the agent's cache: {e}");
        }
    }
}

/// Connects to etcd (again and again until it answers), then mirrors the desired state into
/// `views`, its health into `health`, and keeps the agent's feedback key.
async fn agent_link(
    settings: AgentLink,
    (initial, read): (View, watch::Receiver<i64>),
    (views, placements): (watch::Sender<View>, watch::Sender<Arc<Placements>>),
    health: watch::Sender<StoreHealth>,
    mut feedback: watch::Receiver<Bytes>,
    shutdown: watch::Receiver<bool>,
) {
    let Some(etcd) = connect(&settings.config, &health, shutdown).await else {
        return;
    };
    let mirror = etcd.mirror_desired_read(initial, read);
    let placement_mirror = etcd.mirror(codec::PLACEMENT);
    let _placements = tokio::spawn(follow_placements(placement_mirror.views(), placements));
    let key = codec::agent_key(&settings.node);
    // Published once there is feedback: an empty value would read as an unreadable agent
    // (and, from a process started by an upgrade, replace its predecessor's feedback).
    let mut publication = None;
    let mut mirrored = mirror.views();
    let mut mirror_health = mirror.health();
    loop {
        if publication.is_none() && !feedback.borrow_and_update().is_empty() {
            let ttl = settings.lease_ttl;
            publication = Some(etcd.publish(key.clone(), ttl, feedback.clone()));
        }
        let view = mirrored.borrow_and_update().clone();
        let h = mirror_health.borrow_and_update().clone();
        let (newer, again) = {
            let current = views.borrow();
            let again =
                view.revision == current.revision && !Arc::ptr_eq(&view.entries, &current.entries);
            (view.revision > current.revision, again)
        };
        // `again`: the same view without the values the decoder read.
        if newer || again {
            views.send_replace(view);
        } else if h.connected && views.borrow().revision == 0 {
            // etcd answered and holds no committed state: serve the empty state of etcd's
            // first revision rather than nothing.
            views.send_replace(View {
                revision: 1,
                ..View::default()
            });
        }
        health.send_replace(StoreHealth {
            connected: h.connected,
            detail: h.last_error.unwrap_or_default(),
        });
        tokio::select! {
            r = mirrored.changed() => if r.is_err() { return },
            r = mirror_health.changed() => if r.is_err() { return },
            r = feedback.changed(), if publication.is_none() => if r.is_err() { return },
        }
    }
}

/// Decodes every view of `placement/` into `placements`.
async fn follow_placements(
    mut views: watch::Receiver<View>,
    placements: watch::Sender<Arc<Placements>>,
) {
    loop {
        let view = views.borrow_and_update().clone();
        let (decoded, problems) = codec::decode_placements(&view);
        for d in problems {
            tracing::warn!(diagnostic = %d, "unreadable placement");
        }
        placements.send_if_modified(|p| {
            let changed = **p != decoded;
            if changed {
                *p = Arc::new(decoded);
            }
            changed
        });
        if views.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_store::kv::Entry;

    fn view(revision: i64) -> Snapshot {
        let entry = Entry {
            value: bytes::Bytes::from_static(b"v"),
            mod_revision: revision,
        };
        let view = View {
            revision,
            entries: Arc::new(BTreeMap::from([("desired/x".to_owned(), entry)])),
        };
        Snapshot {
            view,
            desired: Arc::default(),
        }
    }

    fn cached(path: &std::path::Path) -> Option<i64> {
        cache::load(path).ok().map(|v| v.revision)
    }

    /// Lets the writer run (its write is on a blocking thread) without moving the clock.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_is_written_once_the_views_are_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.cache");
        let (tx, rx) = watch::channel(view(0));
        let writer = tokio::spawn(cache_views(rx, path.clone()));
        for revision in 1..=5 {
            tx.send_replace(view(revision));
            tokio::time::sleep(CACHE_QUIET / 2).await;
            settle().await;
            assert_eq!(cached(&path), None, "written during a burst, at {revision}");
        }
        tokio::time::sleep(CACHE_QUIET).await;
        settle().await;
        assert_eq!(cached(&path), Some(5), "the newest, once quiet");
        writer.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_of_views_is_still_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.cache");
        let (tx, rx) = watch::channel(view(0));
        let writer = tokio::spawn(cache_views(rx, path.clone()));
        let mut revision = 0;
        let started = Instant::now();
        while cached(&path).is_none() {
            revision += 1;
            tx.send_replace(view(revision));
            tokio::time::sleep(CACHE_QUIET / 2).await;
            settle().await;
            assert!(
                started.elapsed() <= CACHE_MAX_DELAY + CACHE_QUIET,
                "never written"
            );
        }
        assert!(
            started.elapsed() >= CACHE_MAX_DELAY,
            "written before its time"
        );
        writer.abort();
    }
}
