//! The two processes of the distributed shape over etcd: `portico agent` (store → providers on
//! this node, feedback back to the store) and `portico controller` (a source → compile → the
//! store, written by the elected leader only; the agents' feedback → admin API and status).

use crate::agent::{Agent, StoreHealth};
use crate::controller::Controller;
use crate::node::{ListenSettings, Node};
use crate::providers::HaproxySettings;
use crate::run::{AppError, Bound};
use crate::snapshot::status_addresses;
use crate::source::{Source, SourceSettings};
use bytes::Bytes;
use portico_model::{LoadBalancerId, Placement};
use portico_store::codec::{self, Decoder};
use portico_store::kv::View;
use portico_store::{Desired, Feedback};
use portico_store_etcd::{Etcd, EtcdConfig, Leadership, cache};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The controllers' leader lease.
const LEADER_TTL: Duration = Duration::from_secs(5);
/// Pause between attempts to reach etcd.
pub(crate) const RETRY: Duration = Duration::from_millis(250);
/// The longest pause between attempts to connect.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// `portico agent`.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub store: EtcdConfig,
    pub node: String,
    /// Published with the agent's registration, for placement.
    pub zone: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// How long the agent's key outlives the agent.
    pub lease_ttl: Duration,
    pub listen: ListenSettings,
    pub haproxy: HaproxySettings,
    /// Active-standby (`--interface`): off without it.
    pub ha: Option<crate::failover::HaSettings>,
    /// How to start a successor on SIGUSR2 (none: SIGUSR2 is not handled).
    pub upgrade: Option<crate::handover::Command>,
}

/// Serves the store's desired state on this node until `shutdown`; SIGUSR2 hands its
/// sockets, and the claims it holds, to a successor ([`crate::handover`]). Started as a
/// successor, it takes what its predecessor hands over and answers it once it serves its first
/// state and its elections run.
pub async fn agent(
    settings: AgentSettings,
    shutdown: watch::Receiver<bool>,
    on_bound: impl FnOnce(Bound),
) -> Result<(), AppError> {
    let upgrade = settings.upgrade.as_ref();
    let dir = &settings.haproxy.state_dir;
    let (mut life, inherited) = crate::run::Lifecycle::begin(upgrade, dir, shutdown)?;
    let shutdown = life.stopped.clone();
    let started = Node::start(&settings.listen, &settings.haproxy, &shutdown, inherited).await;
    let mut node = match started {
        Ok(node) => node,
        Err(e) => return Err(life.failed(e)),
    };
    let handed = life.successor.as_mut().and_then(|s| s.ha.take());
    let (ha_hand_over, quieting) = crate::handover::ha_hand_over();
    let ha_hand_over = settings.ha.is_some().then_some(ha_hand_over);
    life.handle_upgrades(settings.upgrade.clone(), &node, ha_hand_over);
    on_bound(node.bound);
    let cache_path = settings
        .haproxy
        .state_dir
        .join("agent")
        .join(format!("{}.cache", settings.node));
    // A cache in a directory others could write to would let them choose what is served.
    let cache_dir = cache_path
        .parent()
        .map(portico_statedir::ensure_private_dir);
    if let Some(Err(e)) = &cache_dir {
        tracing::error!("the agent's cache is not used: {e}");
    }
    let cache_path = matches!(cache_dir, Some(Ok(()))).then_some(cache_path);
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
        settings.clone(),
        initial,
        (views_tx, placements_tx),
        health_tx,
        feedback_rx,
        shutdown.clone(),
    ));
    let (desired_tx, desired) = watch::channel(Arc::new(Desired::default()));
    let decoding = tokio::spawn(decode_views(views, placements, desired_tx, cache_path));
    let agent = Agent::new(
        settings.node.clone(),
        Arc::new(std::mem::take(&mut node.registry)),
    );
    let admin = node.admin.clone();
    let metrics = node.metrics.clone();
    let view = Arc::new(crate::failover::AdminView::new(admin.clone()));
    let (running, ha_running) = watch::channel(settings.ha.is_none());
    let (served_tx, served) = watch::channel(0);
    let (quiet_tx, quiet) = watch::channel(false);
    let failover = settings.ha.clone().map(|ha| {
        let upgrades = crate::failover::Upgrades {
            handed,
            sockets: node.sockets.clone(),
            handed_over: node.handed_over(),
            running,
            quieting,
            quiet,
        };
        let agent = crate::failover::HaAgent {
            node: settings.node.clone(),
            store: settings.store.clone(),
            lease_ttl: settings.lease_ttl,
            settings: ha,
        };
        let link = crate::failover::link(
            agent,
            desired.clone(),
            view.clone(),
            metrics.clone(),
            upgrades,
            shutdown.clone(),
        );
        tokio::spawn(link)
    });
    tokio::spawn(first_state(
        served,
        (ha_running, quiet_tx),
        node.first_state_applied(),
        life.successor,
    ));
    let advertise = settings.ha.as_ref().map(|ha| ha.advertise_address);
    let report = move |agent: &Agent, mut feedback: Feedback| {
        feedback.advertise_address = advertise;
        metrics.observe_store(feedback.store_connected, feedback.revision);
        let feedback = Feedback {
            zone: settings.zone.clone(),
            labels: settings.labels.clone(),
            ..feedback
        };
        view.publish(agent_snapshot(agent, &feedback));
        served_tx.send_replace(feedback.revision);
        let bytes = serde_json::to_vec(&feedback).unwrap_or_default();
        feedback_tx.send_replace(Bytes::from(bytes));
    };
    crate::agent::serve(agent, desired, health, report, shutdown.clone()).await;
    // The failover releases what this agent holds before the listeners drain.
    if let Some(failover) = failover {
        let _ = failover.await;
    }
    link.abort();
    decoding.abort();
    node.stop().await;
    Ok(())
}

/// Once the agent serves its first state and its elections run: `applied`, and a predecessor
/// is told. A predecessor that hands over active-standby claims is told first, and the
/// elections start once it says its own stopped (`quiet`).
async fn first_state(
    mut served: watch::Receiver<u64>,
    (mut ha_running, quiet): (watch::Receiver<bool>, watch::Sender<bool>),
    applied: impl FnOnce(),
    successor: Option<crate::handover::Successor>,
) {
    if served.wait_for(|revision| *revision > 0).await.is_err() {
        return;
    }
    match successor {
        Some(s) if s.waits_for_quiet() => {
            // Once the lease is taken over and the heartbeat socket taken (before `applied`
            // closes the sockets nobody took).
            let _ = ha_running.wait_for(|running| *running).await;
            applied();
            let said = tokio::task::spawn_blocking(move || s.ready()).await;
            if !said.unwrap_or(false) {
                tracing::warn!(
                    "the predecessor did not say its elections stopped: starting them anyway"
                );
            }
            quiet.send_replace(true);
        }
        successor => {
            quiet.send_replace(true);
            // A closed channel: the elections ended (or never started).
            let _ = ha_running.wait_for(|running| *running).await;
            applied();
            if let Some(s) = successor {
                s.answer(&crate::handover::Answer::Ready(std::process::id()));
            }
        }
    }
}

/// Placements by load balancer, as the store holds them.
type Placements = BTreeMap<LoadBalancerId, Placement>;

/// The agent's admin view: the model it serves, ready once it serves the store's state, its
/// problems, whether it reaches the store, and where the controller placed each load balancer.
fn agent_snapshot(agent: &Agent, feedback: &Feedback) -> portico_admin::Snapshot {
    let model = agent.desired().map(|d| d.model.clone()).unwrap_or_default();
    let placements = agent
        .desired()
        .map(|d| d.placements.clone())
        .unwrap_or_default();
    let mut detail = vec![format!(
        "node {}: store revision {}",
        feedback.node, feedback.revision
    )];
    if !feedback.store_connected {
        detail.push("etcd is unreachable: serving the last state".to_owned());
    }
    portico_admin::Snapshot {
        generation: feedback.revision,
        ready: feedback.ready && feedback.revision > 0,
        model,
        placements: Arc::new(placements),
        ingresses: Default::default(),
        services: vec![],
        diagnostics: feedback.diagnostics.clone(),
        detail,
        gateway_api: Default::default(),
        applied_at: None,
    }
}

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
    settings: AgentSettings,
    initial: View,
    (views, placements): (watch::Sender<View>, watch::Sender<Arc<Placements>>),
    health: watch::Sender<StoreHealth>,
    mut feedback: watch::Receiver<Bytes>,
    shutdown: watch::Receiver<bool>,
) {
    let Some(etcd) = connect(&settings.store, &health, shutdown).await else {
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

/// Connects, retrying until it works or `shutdown`.
pub(crate) async fn connect(
    config: &EtcdConfig,
    health: &watch::Sender<StoreHealth>,
    mut shutdown: watch::Receiver<bool>,
) -> Option<Etcd> {
    let mut pause = RETRY;
    loop {
        match Etcd::connect(config.clone()).await {
            Ok(etcd) => return Some(etcd),
            Err(e) => {
                tracing::warn!("cannot reach etcd: {e}");
                let detail = e.to_string();
                health.send_replace(StoreHealth {
                    connected: false,
                    detail,
                });
            }
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = shutdown.wait_for(|s| *s) => return None,
        }
        pause = (pause * 2).min(MAX_RETRY);
    }
}

/// `portico controller`.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub source: SourceSettings,
    pub store: EtcdConfig,
    pub admin_listen: SocketAddr,
    /// `--admin-host`: names the admin API answers besides IP addresses and localhost.
    pub admin_hosts: Vec<String>,
    pub identity: String,
    pub translate: portico_translate::Config,
    /// Address written to Ingress status.
    pub publish_address: Option<String>,
}

/// Compiles the source into etcd (while leader) until `shutdown`.
pub async fn controller(
    settings: ControllerSettings,
    shutdown: watch::Receiver<bool>,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), AppError> {
    let admin_listener =
        crate::node::bind("the admin API (--admin-listen)", settings.admin_listen).await?;
    let admin_addr = admin_listener.local_addr().unwrap_or(settings.admin_listen);
    let mut prometheus = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::AppMetrics::new(&mut prometheus);
    let admin =
        portico_admin::Admin::with_hosts(Arc::new(prometheus), settings.admin_hosts.clone());
    let admin_task = tokio::spawn(portico_admin::serve(
        admin_listener,
        admin.clone(),
        shutdown.clone(),
    ));
    let mut source = Source::start(&settings.source, &settings.translate, &shutdown).await?;
    on_bound(admin_addr);
    let (health_tx, _) = watch::channel(StoreHealth::default());
    if let Some(etcd) = connect(&settings.store, &health_tx, shutdown.clone()).await {
        let publish = status_addresses(settings.publish_address.as_deref());
        let mut work = ControllerWork {
            etcd,
            controller: Controller::new(settings.translate.clone()),
            identity: settings.identity.clone(),
            leadership: None,
            synced: false,
            seeded: false,
            encoder: codec::Encoder::default(),
            admin: &admin,
            metrics: &metrics,
            publish,
        };
        work.run(&mut source, shutdown.clone()).await;
        if let Some(l) = work.leadership.take() {
            let _ = l.resign().await;
        }
    }
    let mut shutdown_rx = shutdown.clone();
    let _ = shutdown_rx.wait_for(|s| *s).await;
    source.stop().await;
    let _ = admin_task.await;
    Ok(())
}

struct ControllerWork<'a> {
    etcd: Etcd,
    controller: Controller,
    identity: String,
    leadership: Option<Leadership>,
    /// Whether `encoder` knows what the store holds under `desired/` (this leader wrote or
    /// read it).
    synced: bool,
    /// Whether this leader took over the stored addresses and placements.
    seeded: bool,
    /// Encodes only what changed since the last write, as the changes to commit.
    encoder: codec::Encoder,
    admin: &'a portico_admin::Admin,
    metrics: &'a crate::metrics::AppMetrics,
    publish: Vec<portico_admin::LoadBalancerAddress>,
}

impl ControllerWork<'_> {
    async fn run(&mut self, source: &mut Source, mut shutdown: watch::Receiver<bool>) {
        let mut updates = source.subscribe();
        let agents = self.etcd.mirror(codec::AGENTS);
        let mut agent_views = agents.views();
        let claims = self.etcd.mirror(portico_store_etcd::HA);
        let mut claim_views = claims.views();
        let mut first = matches!(source, Source::Kube { .. });
        let mut compile = !first;
        let mut dirty = false;
        let mut revision = 0;
        let (campaign_tx, mut campaign) = tokio::sync::mpsc::unbounded_channel::<Leadership>();
        self.campaign(campaign_tx.clone());
        // Addresses and placements as the last leader left them, so that this controller's
        // view agrees with the store's until it leads (then it reads them again).
        match self.etcd.read_desired().await {
            Ok(view) => self.seed(&view),
            Err(e) => tracing::warn!("cannot read the stored state: {e}"),
        }
        loop {
            let agents = agent_views.borrow_and_update().clone();
            let feedback = feedback_of(&agents);
            // Placement waits for the first listing of the agents: before it, none is known.
            if agents.revision > 0 && self.controller.set_agents(&feedback, self.metrics) {
                dirty = true;
            }
            if compile {
                compile = false;
                dirty = true;
                let loaded = updates.borrow_and_update().clone();
                if let Some(retired) = self.controller.compile(loaded, self.metrics) {
                    source.retire(retired);
                }
            }
            if dirty && self.leadership.is_some() {
                match self.write().await {
                    Ok(r) => {
                        dirty = false;
                        revision = r;
                    }
                    Err(e) => tracing::warn!("cannot write the desired state to etcd: {e}"),
                }
            }
            if !first {
                let claims = claim_views.borrow_and_update();
                let holders = crate::failover::holders(&claims, self.controller.placed());
                drop(claims);
                self.controller.set_holders(holders);
                let revision =
                    revision.max(feedback.values().map(|f| f.revision).max().unwrap_or(0));
                (self.controller).publish(source, self.admin, revision, &feedback, &self.publish);
            }
            let lost = async {
                match &self.leadership {
                    Some(l) => {
                        let mut rx = l.lost();
                        let _ = rx.wait_for(|lost| *lost).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = updates.changed() => {
                    if changed.is_err() { break }
                    first = false;
                    compile = true;
                }
                changed = agent_views.changed() => if changed.is_err() { break },
                changed = claim_views.changed() => if changed.is_err() { break },
                Some(l) = campaign.recv() => {
                    tracing::info!(identity = %self.identity, "leading: this controller writes the desired state");
                    self.leadership = Some(l);
                    self.synced = false;
                    self.seeded = false;
                    dirty = true;
                }
                () = lost => {
                    tracing::warn!("leadership lost: this controller stops writing");
                    self.leadership = None;
                    self.campaign(campaign_tx.clone());
                }
                () = tokio::time::sleep(RETRY), if dirty => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    }

    /// Campaigns in the background; the leadership arrives on `tx`.
    fn campaign(&self, tx: tokio::sync::mpsc::UnboundedSender<Leadership>) {
        let etcd = self.etcd.clone();
        let identity = self.identity.clone();
        tokio::spawn(async move {
            loop {
                match etcd.campaign(&identity, LEADER_TTL).await {
                    Ok(l) => {
                        let _ = tx.send(l);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!("campaign for leadership failed: {e}");
                        tokio::time::sleep(RETRY).await;
                    }
                }
            }
        });
    }

    /// Takes the addresses and placements of a stored state as the previous ones.
    fn seed(&mut self, view: &View) {
        let allocations = codec::addresses(view)
            .into_iter()
            .map(|(id, (vip, floating_ip))| {
                let addresses = portico_translate::address::Addresses { vip, floating_ip };
                (id, addresses)
            });
        let (placements, problems) = codec::decode_placements(view);
        for d in problems {
            tracing::warn!(diagnostic = %d, "unreadable placement");
        }
        (self.controller).seed(allocations.collect(), placements, self.metrics);
    }

    /// Writes what changed since the last write (read from etcd after becoming leader, when
    /// the stored addresses and placements are taken over).
    async fn write(&mut self) -> Result<u64, portico_store_etcd::EtcdError> {
        if self.leadership.is_none() || self.controller.compiled().is_none() {
            return Ok(0);
        }
        let first = !self.synced;
        if first {
            let view = self.etcd.read_desired().await?;
            // The addresses and placements are taken over once per leadership, not again
            // after a failed commit.
            if !self.seeded {
                self.seed(&view);
                self.seeded = true;
            }
            let stored = view.entries.iter();
            (self.encoder).assume(stored.map(|(k, e)| (k.clone(), e.value.clone())).collect());
        }
        let (Some(leadership), Some(compiled)) = (&self.leadership, self.controller.compiled())
        else {
            return Ok(0);
        };
        let desired = &compiled.desired;
        let placements = codec::encode_placements(&desired.placements);
        let ops = self.encoder.desired_changes(desired, placements);
        // From here on the encoder takes its encoding as what the store holds; if the commit
        // fails, the next write reads the store again.
        self.synced = false;
        // A new leader commits even nothing, so that agents see a first state (maybe empty).
        if ops.is_empty() && !first {
            self.synced = true;
            return Ok(0);
        }
        let bytes: usize = ops
            .iter()
            .map(|op| match op {
                portico_store::kv::Op::Put { key, value } => key.len() + value.len(),
                portico_store::kv::Op::Delete { key } => key.len(),
            })
            .sum();
        let count = ops.len();
        let hashed = self.encoder.hashed();
        let revision = self.etcd.commit(leadership, ops).await?;
        tracing::info!(
            revision,
            keys = count,
            bytes,
            hashed,
            "desired state written to etcd"
        );
        self.synced = true;
        Ok(u64::try_from(revision).unwrap_or(0))
    }
}

/// The agents' feedback by node; an unreadable value is skipped with a warning.
fn feedback_of(view: &View) -> BTreeMap<String, Feedback> {
    let mut out = BTreeMap::new();
    for (key, entry) in view.entries.iter() {
        let Some(node) = key.strip_prefix(codec::AGENTS) else {
            continue;
        };
        match serde_json::from_slice::<Feedback>(&entry.value) {
            Ok(f) => {
                out.insert(node.to_owned(), f);
            }
            Err(e) => tracing::warn!(key, "unreadable agent feedback: {e}"),
        }
    }
    out
}
