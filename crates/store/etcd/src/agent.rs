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
        let (views_tx, views) = watch::channel(initial.clone());
        let (health_tx, health) = watch::channel(StoreHealth {
            connected: false,
            detail: "connecting to etcd".to_owned(),
        });
        let (feedback_tx, feedback_rx) = watch::channel(Bytes::new());
        let (placements_tx, placements) = watch::channel(Arc::new(Placements::new()));
        let link = tokio::spawn(agent_link(
            link,
            initial,
            (views_tx, placements_tx),
            health_tx,
            feedback_rx,
            shutdown,
        ));
        let (desired_tx, desired) = watch::channel(Arc::new(Desired::default()));
        let decoding = tokio::spawn(decode_views(views, placements, desired_tx, cache_path));
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

/// Each view → a desired state for the agent, with the latest placements; the newest view is
/// also cached, off this path. A change of placements alone hands the last state again with
/// the new placements and the same delta (so that a state the agent has not read yet is not
/// lost behind it).
async fn decode_views(
    mut views: watch::Receiver<View>,
    mut placements: watch::Receiver<Arc<Placements>>,
    desired: watch::Sender<Arc<Desired>>,
    cache_path: Option<PathBuf>,
) {
    let mut decoder = Decoder::default();
    let (to_cache, cached) = watch::channel(views.borrow().clone());
    let cache = tokio::spawn(async move {
        if let Some(path) = cache_path {
            cache_views(cached, path).await;
        }
    });
    let mut view_changed = true;
    loop {
        let placed = Placements::clone(&placements.borrow_and_update());
        if view_changed {
            let view = views.borrow_and_update().clone();
            if view.revision > 0 {
                let mut next = decoder.decode(&view);
                next.placements = placed;
                desired.send_replace(Arc::new(next));
                to_cache.send_if_modified(|c| {
                    let newer = c.revision != view.revision;
                    if newer {
                        *c = view;
                    }
                    newer
                });
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

/// Writes the newest view to the cache once the views were quiet for [`CACHE_QUIET`] (or a
/// new one waited [`CACHE_MAX_DELAY`]).
async fn cache_views(mut views: watch::Receiver<View>, path: PathBuf) {
    while views.changed().await.is_ok() {
        let first = Instant::now();
        let mut last = first;
        loop {
            match tokio::time::timeout_at(cache_due(first, last), views.changed()).await {
                Ok(Ok(())) => last = Instant::now(),
                Ok(Err(_)) => return,
                Err(_) => break,
            }
        }
        let view = views.borrow_and_update().clone();
        // An empty state serves nothing, as no cache does.
        if view.entries.is_empty() {
            continue;
        }
        let target = path.clone();
        let saved = tokio::task::spawn_blocking(move || cache::save(&target, &view)).await;
        if let Ok(Err(e)) = saved {
            tracing::warn!("cannot write the agent's cache: {e}");
        }
    }
}

/// Connects to etcd (again and again until it answers), then mirrors the desired state into
/// `views`, its health into `health`, and keeps the agent's feedback key.
async fn agent_link(
    settings: AgentLink,
    initial: View,
    (views, placements): (watch::Sender<View>, watch::Sender<Arc<Placements>>),
    health: watch::Sender<StoreHealth>,
    mut feedback: watch::Receiver<Bytes>,
    shutdown: watch::Receiver<bool>,
) {
    let Some(etcd) = connect(&settings.config, &health, shutdown).await else {
        return;
    };
    let mirror = etcd.mirror_desired(initial);
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
        if view.revision > views.borrow().revision {
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

    fn view(revision: i64) -> View {
        let entry = Entry {
            value: bytes::Bytes::from_static(b"v"),
            mod_revision: revision,
        };
        View {
            revision,
            entries: Arc::new(BTreeMap::from([("desired/x".to_owned(), entry)])),
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
        let (tx, rx) = watch::channel(View::default());
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
        let (tx, rx) = watch::channel(View::default());
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
