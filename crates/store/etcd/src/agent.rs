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

/// How often at most the agent writes its cache: a burst of changes costs one write.
const CACHE_INTERVAL: Duration = Duration::from_millis(500);

/// Writes the newest view to the cache whenever it changed, at most every [`CACHE_INTERVAL`].
async fn cache_views(mut views: watch::Receiver<View>, path: PathBuf) {
    while views.changed().await.is_ok() {
        let view = views.borrow_and_update().clone();
        // An empty state serves nothing, as no cache does; caching it would only delay the
        // first real state's write by the interval below.
        if view.entries.is_empty() {
            continue;
        }
        let target = path.clone();
        let saved = tokio::task::spawn_blocking(move || cache::save(&target, &view)).await;
        if let Ok(Err(e)) = saved {
            tracing::warn!("cannot write the agent's cache: {e}");
        }
        tokio::time::sleep(CACHE_INTERVAL).await;
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
