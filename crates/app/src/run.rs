use crate::agent::{Agent, StoreHealth};
use crate::controller::Controller;
use crate::metrics::AppMetrics;
use crate::node::{ListenSettings, Node};
use crate::providers::HaproxySettings;
use crate::snapshot::status_addresses;
use crate::source::{Source, SourceSettings};
use portico_admin::Admin;
use portico_provider::{Registry, Sockets};
use portico_store::MemoryStore;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Everything `portico run` needs, already validated by the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub source: SourceSettings,
    pub http_listen: SocketAddr,
    /// The TLS listener of the TERMINATED_HTTPS listeners.
    pub https_listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// `--admin-host`: names the admin API answers besides IP addresses and localhost.
    pub admin_hosts: Vec<String>,
    /// Address written to Ingress status; `None` means the IP of `http_listen`.
    pub publish_address: Option<String>,
    pub translate: portico_translate::Config,
    /// Where the haproxy provider keeps its load balancers, and its executable.
    pub haproxy: HaproxySettings,
    /// Deadlines, sizes and connection caps of both data planes.
    pub limits: portico_model::Limits,
    /// Deadlines of provider `l4`.
    pub l4_limits: portico_provider_l4::L4Limits,
    /// Where both providers' access log lines go.
    pub access_log: crate::AccessLogDestination,
    /// How to start a successor on SIGUSR2 (none: SIGUSR2 is not handled).
    pub upgrade: Option<crate::handover::Command>,
}

/// The addresses actually bound (ports may have been 0).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub admin: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr} for {what}: {source}{}", bind_hint(source))]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Source(#[from] portico_source_file::SourceError),
    #[error("{what} {addr}: {reason}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        reason: String,
    },
    #[error(transparent)]
    Haproxy(#[from] portico_provider_haproxy::StartError),
    #[error("cannot open the access log ({what}): {source}")]
    AccessLog {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Kubernetes(#[from] portico_source_kube::ClientError),
    #[error("{0} (--state-dir)")]
    StateDir(#[from] portico_statedir::StateDirError),
    #[error("upgrade: {0}")]
    Upgrade(String),
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
    let (mut life, inherited) = Lifecycle::begin(upgrade, &settings.haproxy.state_dir, shutdown)?;
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
    let listen = ListenSettings {
        http_listen: settings.http_listen,
        https_listen: settings.https_listen,
        admin_listen: settings.admin_listen,
        admin_hosts: settings.admin_hosts.clone(),
        haproxy_listens: settings.translate.default_provider == portico_provider_haproxy::PROVIDER,
        class: settings.translate.ingress_class.clone(),
        limits: settings.limits,
        l4_limits: settings.l4_limits,
        access_log: settings.access_log.clone(),
    };
    let node = Node::start(&listen, &settings.haproxy, shutdown, inherited).await?;
    let source = Source::start(&settings.source, &settings.translate, shutdown).await?;
    Ok((node, source))
}

/// What a process that may be upgraded (`portico run`, `portico agent`) starts with: what a
/// predecessor handed it, its own shutdown (from outside, or once a successor serves), and
/// SIGUSR2 when upgrades are on.
pub(crate) struct Lifecycle {
    pub(crate) successor: Option<crate::handover::Successor>,
    pub(crate) stop: Arc<watch::Sender<bool>>,
    pub(crate) stopped: watch::Receiver<bool>,
    usr2: Option<tokio::signal::unix::Signal>,
}

impl Lifecycle {
    /// Receives what a predecessor hands over, if started by one or told to take over
    /// (`--take-over`) the state directory `dir` from the Portico that holds it; installs
    /// SIGUSR2's handler when `upgrade` is given (before anything is served: its default
    /// action ends the process).
    pub(crate) fn begin(
        upgrade: Option<&crate::handover::Command>,
        dir: &std::path::Path,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Lifecycle, crate::node::Inherited), AppError> {
        use crate::handover::Successor;
        let mut successor = match Successor::from_env().map_err(AppError::Upgrade)? {
            Some(s) => Some(s),
            None if upgrade.is_some_and(|c| c.take_over) => {
                Successor::take_over(dir).map_err(AppError::Upgrade)?
            }
            None => None,
        };
        let inherited = match &mut successor {
            Some(s) => crate::node::Inherited {
                lock: s.lock.take(),
                sockets: Arc::new(Sockets::inherit(std::mem::take(&mut s.sockets))),
            },
            None => crate::node::Inherited::default(),
        };
        let (stop, stopped) = watch::channel(false);
        let stop = Arc::new(stop);
        let (outside, mut signalled) = (stop.clone(), shutdown);
        tokio::spawn(async move {
            let _ = signalled.wait_for(|s| *s).await;
            outside.send_replace(true);
        });
        let usr2 = if upgrade.is_some() {
            use tokio::signal::unix::{SignalKind, signal};
            let usr2 = signal(SignalKind::user_defined2());
            Some(usr2.map_err(|e| AppError::Upgrade(format!("cannot handle SIGUSR2: {e}")))?)
        } else {
            None
        };
        let life = Lifecycle {
            successor,
            stop,
            stopped,
            usr2,
        };
        Ok((life, inherited))
    }

    /// The process cannot start: its predecessor is told why, and serves on.
    pub(crate) fn failed(self, e: AppError) -> AppError {
        if let Some(s) = self.successor {
            s.answer(&crate::handover::Answer::Failed(e.to_string()));
        }
        e
    }

    /// Once this process serves its first state: hands over on SIGUSR2 (when on) or when a
    /// `--take-over` process asks on the hand-over socket, until a hand-over succeeds,
    /// handing an agent's active-standby (`ha`) over with the sockets; then this process
    /// drains and stops.
    pub(crate) fn handle_upgrades(
        &mut self,
        command: Option<crate::handover::Command>,
        node: &Node,
        ha: Option<crate::handover::HaHandOver>,
    ) {
        let (Some(command), Some(usr2)) = (command, self.usr2.take()) else {
            return;
        };
        let (lock, sockets) = (node.lock.clone(), node.sockets.clone());
        let (hand_over, mut serving) = (node.hand_over_switch(), node.serving());
        let stop = self.stop.clone();
        tokio::spawn(async move {
            // Its hand-over socket replaces a predecessor's only once this one serves.
            if serving.wait_for(|s| *s).await.is_err() {
                return;
            }
            upgrades(usr2, command, (&lock, &sockets), ha.as_ref(), || {
                hand_over();
                stop.send_replace(true);
            })
            .await;
        });
    }
}

/// Hands over on SIGUSR2 or a `--take-over` request until one succeeds, then calls
/// `handed_over`.
async fn upgrades(
    mut usr2: tokio::signal::unix::Signal,
    command: crate::handover::Command,
    (lock, sockets): (&portico_statedir::Lock, &Sockets),
    ha: Option<&crate::handover::HaHandOver>,
    handed_over: impl FnOnce(),
) {
    let listener = match crate::handover::listen(lock.dir()) {
        Ok(listener) => listener,
        Err(why) => return tracing::warn!(%why, "no upgrade or take-over possible"),
    };
    loop {
        let outcome = tokio::select! {
            signal = usr2.recv() => {
                if signal.is_none() {
                    return;
                }
                tracing::info!(program = %command.program.display(), "SIGUSR2: starting the new process");
                crate::handover::upgrade(&command, &listener, (lock, sockets), ha).await
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tracing::info!("a new process asks to take over: handing over");
                    crate::handover::hand_over(stream, (lock, sockets), ha).await
                }
                Err(e) => Err(format!("the hand-over socket: {e}")),
            },
        };
        crate::handover::record(lock.dir(), &outcome);
        match outcome {
            Ok(pid) => {
                tracing::info!(pid, "the new process serves: draining, then exiting");
                return handed_over();
            }
            Err(why) => tracing::warn!(%why, "upgrade failed: serving on"),
        }
    }
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
    let (_health_tx, health) = watch::channel(StoreHealth::default());
    let reporter = store.clone();
    tokio::spawn(first_state(
        store.feedback(),
        node.first_state_applied(),
        successor,
    ));
    let agent_task = tokio::spawn(crate::agent::serve(
        agent,
        store.subscribe(),
        health,
        move |_, feedback| reporter.report(feedback),
        shutdown.clone(),
    ));

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
    mut feedback: watch::Receiver<std::collections::BTreeMap<String, portico_store::Feedback>>,
    applied: impl FnOnce(),
    successor: Option<crate::handover::Successor>,
) {
    let served = |all: &std::collections::BTreeMap<String, portico_store::Feedback>| {
        all.get(LOCAL_NODE).is_some_and(|f| f.revision > 0)
    };
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

/// The all-in-one controller: compiles each load into the memory store and publishes what the
/// agent reports.
struct ControllerLoop<'a> {
    controller: Controller,
    store: MemoryStore,
    admin: &'a Admin,
    metrics: &'a AppMetrics,
    fixed_publish: Vec<portico_admin::LoadBalancerAddress>,
}

impl ControllerLoop<'_> {
    async fn run(mut self, source: &mut Source, mut shutdown: watch::Receiver<bool>) {
        let mut updates = source.subscribe();
        let mut feedback = self.store.feedback();
        // The Kubernetes source publishes its first snapshot once every kind is listed.
        let mut first = matches!(source, Source::Kube { .. });
        let mut revision = 0;
        let mut compile = !first;
        loop {
            // A new revision is published once the agent reports it (its feedback names the
            // revision it serves, so every write is followed by a feedback change): building
            // the snapshot right after the compile too would cost the CPU twice, beside the
            // agent's apply.
            let mut written = false;
            if compile {
                compile = false;
                let loaded = updates.borrow_and_update().clone();
                if let Some(retired) = self.controller.compile(loaded, self.metrics) {
                    source.retire(retired);
                }
                if let Some(compiled) = self.controller.compiled() {
                    revision = self.store.write(compiled.desired.clone());
                    written = true;
                }
            }
            if !first && !written {
                let reports = feedback.borrow_and_update().clone();
                // The one agent of this process: placements show in the admin API only.
                self.controller.set_agents(&reports, self.metrics);
                self.publish(source, revision, &reports);
            }
            let published = async {
                match source.published() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = updates.changed() => {
                    if changed.is_err() { break }
                    first = false;
                    compile = true;
                }
                // An agent's feedback changed (serving, a rejected configuration): publish it.
                changed = feedback.changed() => {
                    if changed.is_err() { break }
                }
                // `--publish-service` has new addresses: status changes.
                true = published => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    }

    /// The admin snapshot and, with Kubernetes, the report.
    fn publish(
        &self,
        source: &mut Source,
        revision: u64,
        feedback: &std::collections::BTreeMap<String, portico_store::Feedback>,
    ) {
        let publish = match source.published() {
            Some(rx) => status_addresses_of(&rx.borrow_and_update()),
            None => self.fixed_publish.clone(),
        };
        (self.controller).publish(source, self.admin, revision, feedback, &publish);
    }
}

/// Wakes when any provider's status may have changed.
pub(crate) fn status_changes(providers: &Registry) -> Arc<tokio::sync::Notify> {
    let notify = Arc::new(tokio::sync::Notify::new());
    for mut rx in providers.subscribe() {
        let notify = notify.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                notify.notify_one();
            }
        });
    }
    notify
}

/// Status entries for `--publish-service`'s addresses.
fn status_addresses_of(addresses: &[String]) -> Vec<portico_admin::LoadBalancerAddress> {
    addresses
        .iter()
        .flat_map(|a| status_addresses(Some(a)))
        .collect()
}

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

/// What to do about a failed bind.
fn bind_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::AddrInUse => {
            "; another process listens there: stop it, or give another address to the flag"
        }
        std::io::ErrorKind::PermissionDenied => {
            "; ports below 1024 need root or CAP_NET_BIND_SERVICE: use a higher port or grant it"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "; the address is not on this machine: give one of its addresses (or 0.0.0.0)"
        }
        _ => "",
    }
}
