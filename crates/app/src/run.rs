use crate::agent::Agent;
use crate::controller::Controller;
use crate::controller_loop::ControllerLoop;
use crate::error::AppError;
use crate::lifecycle::Lifecycle;
use crate::node::Node;
use crate::providers::HaproxySettings;
use crate::snapshot::status_addresses;
use crate::source::{Source, SourceSettings};
use crate::types::{Bound, ListenSettings, NodeSettings};
use portico_store::MemoryStore;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Everything `portico run` needs, already validated by the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub source: SourceSettings,
    /// Where the node listens, as `portico agent`'s.
    pub listen: ListenSettings,
    /// Address written to Ingress status; `None` means the IP of `http_listen`.
    pub publish_address: Option<String>,
    pub translate: portico_translate::Config,
    /// The node's state directory (`--state-dir`).
    pub state: NodeSettings,
    /// The haproxy provider's executable.
    pub haproxy: HaproxySettings,
    /// How to start a successor on SIGUSR2 (none: SIGUSR2 is not handled).
    pub upgrade: Option<crate::handover::Command>,
}

/// Runs the all-in-one pipeline until `shutdown` turns true, or until a successor started by
/// SIGUSR2 serves its sockets ([`crate::handover`]). `on_bound` is called once the listeners
/// are bound, before the first configuration is served. Started as a successor, it takes
/// what its predecessor hands over and answers it.
pub async fn run(
    settings: Settings,
    shutdown: watch::Receiver<bool>,
    on_bound: impl FnOnce(Bound),
) -> Result<(), AppError> {
    let upgrade = settings.upgrade.as_ref();
    let (mut life, inherited) = Lifecycle::begin(upgrade, &settings.state.state_dir, shutdown)?;
    let started = start(&settings, inherited, &life.stopped).await;
    let (node, source) = match started {
        Ok(started) => started,
        Err(e) => return Err(life.failed(e)),
    };
    on_bound(node.bound);
    life.handle_upgrades(settings.upgrade.clone(), &node, None);
    let (successor, stopped) = (life.successor, life.stopped);
    serve(settings, node, source, successor, stopped).await;
    Ok(())
}

/// The node and the source, or why they cannot start.
async fn start(
    settings: &Settings,
    inherited: crate::node::Inherited,
    shutdown: &watch::Receiver<bool>,
) -> Result<(Node, Source), AppError> {
    let node = Node::start(
        &settings.listen,
        &settings.state,
        &settings.haproxy,
        shutdown,
        inherited,
    )
    .await?;
    let source = Source::start(&settings.source, &settings.translate, shutdown).await?;
    Ok((node, source))
}

/// Serves until `shutdown`, then drains.
async fn serve(
    settings: Settings,
    mut node: Node,
    mut source: Source,
    successor: Option<crate::handover::Successor>,
    shutdown: watch::Receiver<bool>,
) {
    let providers = std::mem::take(&mut node.registry);

    // The agent of this process, over the memory store.
    let store = MemoryStore::default();
    let agent = Agent::new(LOCAL_NODE.to_owned(), Arc::new(providers));
    tokio::spawn(first_state(
        store.feedback(),
        node.first_state_applied(),
        successor,
    ));
    let agent_store = store.clone();
    let agent_shutdown = shutdown.clone();
    let agent_task = tokio::spawn(async move {
        crate::agent::serve(agent, &agent_store, |_, feedback| feedback, agent_shutdown).await;
    });

    let fixed_publish = publish_address(&settings, node.bound.http);
    let controller = ControllerLoop {
        controller: Controller::new(settings.translate.clone()),
        store,
        admin: &node.admin,
        metrics: &node.metrics,
        fixed_publish,
    };
    controller.run(&mut source, shutdown.clone()).await;
    node.unready();
    let mut shutdown_rx = shutdown.clone();
    let _ = shutdown_rx.wait_for(|s| *s).await;
    source.stop().await;
    let _ = agent_task.await;
    node.stop().await;
}

/// Once the agent serves its first state: `applied`, and a predecessor is told.
async fn first_state(
    mut feedback: watch::Receiver<portico_store::Agents>,
    applied: impl FnOnce(),
    successor: Option<crate::handover::Successor>,
) {
    let served =
        |all: &portico_store::Agents| all.feedback.get(LOCAL_NODE).is_some_and(|f| f.revision > 0);
    if feedback.wait_for(served).await.is_err() {
        return;
    }
    applied();
    if let Some(s) = successor {
        s.answer(&crate::handover::Answer::Ready(std::process::id()));
    }
}

/// The node name of the all-in-one process's agent.
const LOCAL_NODE: &str = "local";

fn publish_address(
    settings: &Settings,
    http: SocketAddr,
) -> Vec<portico_admin::LoadBalancerAddress> {
    match &settings.publish_address {
        Some(a) => status_addresses(Some(a)),
        None if http.ip().is_unspecified() => {
            tracing::warn!(
                "--http-listen is a wildcard address: set --publish-address to fill Ingress status"
            );
            vec![]
        }
        None => status_addresses(Some(&http.ip().to_string())),
    }
}
