//! The two processes of the distributed shape over etcd: `portico agent` (store → providers on
//! this node, feedback back to the store) and `portico controller` (a source → compile → the
//! store, written by the elected leader only; the agents' feedback → admin API and status).

use crate::agent::{Agent, StoreHealth};
use crate::controller::Controller;
use crate::controller_loop::ControllerLoop;
use crate::error::AppError;
use crate::node::Node;
use crate::providers::HaproxySettings;
use crate::snapshot::status_addresses;
use crate::source::{Source, SourceSettings};
use crate::types::{Bound, ListenSettings, NodeSettings};
use portico_store::{AgentStore, Feedback};
use portico_store_etcd::{AgentLink, EtcdAgent, EtcdClaims, EtcdConfig, EtcdController, connect};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

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
    /// The node's state directory (`--state-dir`): the agent's cache lives there too.
    pub state: NodeSettings,
    /// The haproxy provider's executable.
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
    let dir = &settings.state.state_dir;
    let (mut life, inherited) = crate::lifecycle::Lifecycle::begin(upgrade, dir, shutdown)?;
    let shutdown = life.stopped.clone();
    let started = Node::start(
        &settings.listen,
        &settings.state,
        &settings.haproxy,
        &shutdown,
        inherited,
    )
    .await;
    let mut node = match started {
        Ok(node) => node,
        Err(e) => return Err(life.failed(e)),
    };
    let handed = life.successor.as_mut().and_then(|s| s.ha.take());
    let (ha_hand_over, quieting) = crate::handover::ha_hand_over();
    let ha_hand_over = settings.ha.is_some().then_some(ha_hand_over);
    life.handle_upgrades(settings.upgrade.clone(), &node, ha_hand_over);
    on_bound(node.bound);
    let cache_path = settings.state.agent_cache(&settings.node);
    // A cache in a directory others could write to would let them choose what is served.
    let cache_dir = cache_path
        .parent()
        .map(portico_statedir::ensure_private_dir);
    if let Some(Err(e)) = &cache_dir {
        tracing::error!("the agent's cache is not used: {e}");
    }
    let cache_path = matches!(cache_dir, Some(Ok(()))).then_some(cache_path);
    let link = AgentLink {
        config: settings.store.clone(),
        node: settings.node.clone(),
        lease_ttl: settings.lease_ttl,
    };
    let store = EtcdAgent::start(link, cache_path, shutdown.clone());
    let desired = store.desired();
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
    let (advertising, advertised) = watch::channel(false);
    // How long both processes advertise after an upgrade: the successor's first adverts say
    // it does not hear the peer yet (an active counts only those that do), until it has read
    // the peer's that queued meanwhile.
    let overlap = (settings.ha.as_ref()).map_or(Duration::ZERO, |h| h.timing.interval * 3);
    let failover = settings.ha.clone().map(|ha| {
        let upgrades = crate::failover::Upgrades {
            handed,
            sockets: node.sockets.clone(),
            handed_over: node.handed_over(),
            running,
            quieting,
            quiet,
            advertising,
        };
        // The claims carry a lease of this process's life (taken over in an upgrade).
        let claims =
            EtcdClaims::start(settings.store.clone(), settings.lease_ttl, shutdown.clone());
        let agent = crate::failover::HaAgent {
            node: settings.node.clone(),
            store: claims,
            os: crate::failover::LinuxOs::open(&ha.interface),
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
        (ha_running, quiet_tx, advertised),
        overlap,
        node.first_state_applied(),
        life.successor,
    ));
    let advertise = settings.ha.as_ref().map(|ha| ha.advertise_address);
    let register = move |agent: &Agent, mut feedback: Feedback| {
        feedback.advertise_address = advertise;
        metrics.observe_store(feedback.store_connected, feedback.revision);
        let feedback = Feedback {
            zone: settings.zone.clone(),
            labels: settings.labels.clone(),
            ..feedback
        };
        view.publish(agent_snapshot(agent, &feedback));
        served_tx.send_replace(feedback.revision);
        feedback
    };
    crate::agent::serve(agent, &store, register, shutdown.clone()).await;
    // The failover releases what this agent holds before the listeners drain.
    if let Some(failover) = failover {
        let _ = failover.await;
    }
    drop(store);
    node.stop().await;
    Ok(())
}

/// Once the agent serves its first state and its elections run: `applied`, and a predecessor
/// is told. A predecessor that hands over active-standby claims is told first, and the
/// elections start once it says its own stopped (`quiet`); once they ran their first pass
/// (`advertised`) and `overlap` later, the predecessor, which advertised meanwhile, is told to
/// stop.
async fn first_state(
    mut served: watch::Receiver<u64>,
    (mut ha_running, quiet, mut advertised): (
        watch::Receiver<bool>,
        watch::Sender<bool>,
        watch::Receiver<bool>,
    ),
    overlap: Duration,
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
            let said = tokio::task::spawn_blocking(move || {
                let said = s.ready();
                (s, said)
            })
            .await;
            let Ok((s, said)) = said else {
                quiet.send_replace(true);
                return;
            };
            if !said {
                tracing::warn!(
                    "the predecessor did not say its elections stopped: starting them anyway"
                );
            }
            quiet.send_replace(true);
            // A closed channel: the elections ended (or never started).
            let ran = advertised.wait_for(|a| *a);
            if tokio::time::timeout(crate::handover::KEEP_WAIT, ran)
                .await
                .is_ok()
            {
                tokio::time::sleep(overlap).await;
            }
            s.electing();
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
        let controller = ControllerLoop {
            controller: Controller::new(settings.translate.clone()),
            store: EtcdController::start(etcd, settings.identity.clone()),
            admin: &admin,
            metrics: &metrics,
            fixed_publish: status_addresses(settings.publish_address.as_deref()),
        };
        controller.run(&mut source, shutdown.clone()).await;
    }
    let mut shutdown_rx = shutdown.clone();
    let _ = shutdown_rx.wait_for(|s| *s).await;
    source.stop().await;
    let _ = admin_task.await;
    Ok(())
}
