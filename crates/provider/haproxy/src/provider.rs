//! The `haproxy` provider: plans every haproxy load balancer of each model and hands each one
//! to its instance; instances of load balancers that are gone are stopped.

use crate::PROVIDER;
use crate::instance::{Binary, Instance, MASTER_SOCKET};
use crate::plan::{PlanSettings, plan};
use crate::status::Statuses;
use portico_model::{Diagnostic, LoadBalancerId, Model, PoolId};
use portico_provider::{CaBundles, Certificates, Credentials, Provider, Status};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// After an endpoints-only change, how long no other change must come before the files are
/// rewritten (a render of the whole configuration, off the hot path)…
const REWRITE_QUIET: Duration = Duration::from_millis(500);
/// …and how long they may be late at most under a stream of changes.
const REWRITE_LATEST: Duration = Duration::from_secs(5);

/// Everything the provider is told at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub plan: PlanSettings,
    pub binary: Binary,
    /// Where the provider counts what it does (shared with the metrics).
    pub counters: Arc<Counters>,
    /// This process's lock of the state directory that holds `plan.root`: kept while the
    /// provider lives; without it no other process's directory could be told from a stale one.
    pub lock: Arc<portico_statedir::Lock>,
}

/// What every haproxy of the provider did, counted since start.
#[derive(Debug, Default)]
pub struct Counters {
    /// Reloads through the master CLI (every attempt, failed ones too).
    pub reloads: AtomicU64,
    /// Changes applied through the runtime API alone (route map entries, servers).
    pub runtime_updates: AtomicU64,
}

/// Why the provider cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot make the fallback certificate: {0}")]
    Certificate(String),
}

type Instances = Arc<Mutex<BTreeMap<LoadBalancerId, Instance>>>;

pub struct HaproxyProvider {
    settings: Settings,
    binary: Arc<Binary>,
    fallback: Arc<Vec<u8>>,
    instances: Instances,
    statuses: Arc<Statuses>,
    certificates: Arc<Mutex<(Certificates, CaBundles)>>,
    /// The users of basic-auth Secrets, as last handed ([`Provider::set_credentials`]).
    credentials: Arc<Mutex<Credentials>>,
    /// The files of endpoints-only changes, written later (see [`Rewrite`]).
    rewrite: Arc<Rewrite>,
    /// Stops haproxy when no Portico holds the state directory any more.
    guard: Arc<Guard>,
}

/// Endpoints-only changes go through the runtime API at once; the files that say the same
/// (haproxy.conf's server lines: a render of the whole configuration) are written by a task
/// once the changes pause ([`REWRITE_QUIET`], [`REWRITE_LATEST`] at most), or at once when
/// an instance needs a reload. Any other change renders everything and supersedes it.
#[derive(Default)]
struct Rewrite {
    /// Counts the changes handed to the instances: a late render of an older model is dropped.
    changes: AtomicU64,
    /// The model to write and its change number; whether the task runs.
    state: Mutex<(Option<(u64, Model)>, bool)>,
    /// An instance needs the whole configuration now (a reload).
    now: Arc<Notify>,
}

impl std::fmt::Debug for HaproxyProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaproxyProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl HaproxyProvider {
    /// Makes the self-signed certificate that TLS handshakes get when nothing else fits, and
    /// removes what a killed Portico left in the state directory ([`remove_stale`]). The state
    /// directory is created (0700) with the first load balancer.
    pub fn new(settings: Settings) -> Result<Self, StartError> {
        let fallback = fallback(&settings.plan.root)?;
        remove_stale(&settings.plan.root, &settings.lock);
        let guard = Arc::new(Guard::new(&settings.lock));
        Ok(HaproxyProvider {
            binary: Arc::new(settings.binary.clone()),
            settings,
            fallback: Arc::new(fallback),
            instances: Arc::default(),
            statuses: Statuses::new(),
            certificates: Arc::default(),
            credentials: Arc::default(),
            rewrite: Arc::default(),
            guard,
        })
    }

    /// Stops every haproxy and removes their directories; after a hand-over (`handed_over`),
    /// leaves them running and their directories as they are, for the successor that adopts
    /// them.
    pub async fn shutdown(&self, handed_over: bool) {
        let instances = std::mem::take(&mut *self.lock_instances());
        // All at once: each may wait for its requests in flight up to the shutdown timeout.
        let stopping: Vec<_> = (instances.into_values())
            .map(|instance| match handed_over {
                true => tokio::spawn(instance.release()),
                false => tokio::spawn(instance.stop()),
            })
            .collect();
        for stopped in stopping {
            let _ = stopped.await;
        }
    }

    /// Every server of every haproxy this provider runs, as its runtime API shows it now
    /// (blocking: a local socket per load balancer, 500 ms at most each).
    pub fn server_states(&self) -> Vec<crate::servers::ServerState> {
        let ids: Vec<LoadBalancerId> = self.lock_instances().keys().copied().collect();
        let root = &self.settings.plan.root;
        ids.iter()
            .flat_map(|id| crate::servers::query(&root.join(id.to_string())))
            .collect()
    }

    fn lock_instances(&self) -> std::sync::MutexGuard<'_, BTreeMap<LoadBalancerId, Instance>> {
        self.instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Rewrite {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<(u64, Model)>, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task that writes the files of endpoints-only changes (see [`Rewrite`]).
struct Rewriter {
    rewrite: Arc<Rewrite>,
    instances: Instances,
    certificates: Arc<Mutex<(Certificates, CaBundles)>>,
    credentials: Arc<Mutex<Credentials>>,
    settings: PlanSettings,
    fallback: Arc<Vec<u8>>,
}

impl Rewriter {
    async fn run(self) {
        loop {
            let started = tokio::time::Instant::now();
            loop {
                let before = self.rewrite.changes.load(Ordering::Relaxed);
                tokio::select! {
                    () = tokio::time::sleep(REWRITE_QUIET) => {}
                    () = self.rewrite.now.notified() => break,
                }
                let quiet = self.rewrite.changes.load(Ordering::Relaxed) == before;
                if quiet || started.elapsed() >= REWRITE_LATEST {
                    break;
                }
            }
            let pending = {
                let mut state = self.rewrite.lock();
                let pending = state.0.take();
                if pending.is_none() {
                    state.1 = false;
                    return;
                }
                pending
            };
            let Some((change, model)) = pending else {
                continue;
            };
            let (certificates, ca_bundles) = self
                .certificates
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let credentials = (self.credentials.lock())
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let (settings, fallback) = (self.settings.clone(), self.fallback.clone());
            let planned = tokio::task::spawn_blocking(move || {
                let (c, ca, users) = (&certificates, &ca_bundles, &credentials);
                plan(&model, c, ca, users, &settings, &fallback).0
            })
            .await;
            let Ok(planned) = planned else { continue };
            let instances = self
                .instances
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // A change since the model was taken: the newer one writes the files.
            if self.rewrite.changes.load(Ordering::Relaxed) != change {
                continue;
            }
            for p in planned {
                if let Some(instance) = instances.get(&p.id) {
                    instance.set(Arc::new(p.desired));
                }
            }
        }
    }
}

/// The PEM of the self-signed certificate served when nothing else fits: the one in the file
/// beside `root` (`haproxy-fallback.pem`), made and written there when there is none, so that
/// the next Portico on the state directory serves the same one (an adopted haproxy is not
/// reloaded for a new one).
fn fallback(root: &std::path::Path) -> Result<Vec<u8>, StartError> {
    let path = root.with_file_name("haproxy-fallback.pem");
    if let Ok(pem) = std::fs::read(&path) {
        if portico_tls::Material::from_pem(&pem, &pem).is_ok() {
            return Ok(pem);
        }
        tracing::warn!(path = %path.display(), "not a certificate and its key: making a new fallback certificate");
    }
    let pem = portico_tls::self_signed(&["portico.invalid"])
        .map_err(|e| StartError::Certificate(e.to_string()))?
        .pem();
    let parent = path.parent().unwrap_or(root);
    let written =
        crate::files::create_dir(parent).and_then(|()| crate::files::write(&path, &pem, 0o600));
    if let Err(error) = written {
        tracing::warn!(path = %path.display(), %error, "cannot keep the fallback certificate");
    }
    Ok(pem)
}

/// What the guard runs once it holds the state directory's lock: SIGKILL to the master `$1` if
/// it is still the haproxy of the configuration `$2` (its workers follow their master).
const GUARD_SCRIPT: &str = r#"tr '\0' ' ' < /proc/"$1"/cmdline 2>/dev/null | grep -qF -- "$2" && kill -KILL "$1"
exit 0"#;

/// haproxy outlives a Portico that hands over to its successor (which adopts it), so nothing
/// ties its life to one process; what stops a master when Portico dies without stopping it
/// (SIGKILL, a crash) is its guard: `flock(1)` waiting for the state directory's lock, which
/// the kernel releases only when no Portico holds it (a successor holds the same lock). It
/// then kills the master if the PID is still that haproxy, and exits. One per master this
/// process starts, stopped with it; left running with it after a hand-over. The default
/// guards nothing.
#[derive(Debug, Default)]
pub(crate) struct Guard {
    /// The state directory's lock file.
    lock_file: Option<std::path::PathBuf>,
}

impl Guard {
    fn new(lock: &portico_statedir::Lock) -> Guard {
        Guard {
            lock_file: Some(lock.dir().join(portico_statedir::LOCK_FILE)),
        }
    }

    /// Starts the guard of the master `pid` of `config`.
    pub(crate) fn start(&self, pid: u32, config: &std::path::Path) -> Option<std::process::Child> {
        let file = self.lock_file.as_ref()?;
        let started = std::process::Command::new("flock")
            .arg(file)
            .args(["sh", "-c", GUARD_SCRIPT, "portico-haproxy-guard"])
            .arg(pid.to_string())
            .arg(config)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match started {
            Ok(child) => Some(child),
            Err(error) => {
                tracing::warn!(%error, "cannot start flock(1) (util-linux): a Portico killed with SIGKILL leaves its haproxy running");
                None
            }
        }
    }
}

/// Whether a load-balancer directory under `root` has a live haproxy master (its master socket
/// accepts a connection): one left running by a predecessor that handed over, or by a Portico
/// that died. Its instance adopts it; it holds the listeners' ports meanwhile.
pub fn running_under(root: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else {
        return false;
    };
    entries.flatten().any(|entry| live(&entry.path()))
}

fn live(dir: &std::path::Path) -> bool {
    let master = crate::files::socket(dir, MASTER_SOCKET);
    std::os::unix::net::UnixStream::connect(master).is_ok()
}

/// Removes the load-balancer directories under `root` that no running haproxy serves: those
/// a Portico killed with SIGKILL could not clean up (its haproxy gone too). Only under the
/// state directory this process locked (`lock`): no other Portico uses it. A directory whose
/// master socket still accepts a connection belongs to a live haproxy (one that outlived its
/// Portico) and is left alone: its instance adopts it. Returns the directories removed.
pub fn remove_stale(
    root: &std::path::Path,
    lock: &portico_statedir::Lock,
) -> Vec<std::path::PathBuf> {
    if !lock.covers(root) {
        tracing::warn!(root = %root.display(), locked = %lock.dir().display(), "stale haproxy directories are removed only in the locked state directory");
        return vec![];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return vec![];
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || live(&dir) {
            continue;
        }
        portico_statedir::remove_socket_alias(&dir);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "removed a stale haproxy directory");
                removed.push(dir);
            }
            Err(error) => {
                tracing::warn!(dir = %dir.display(), %error, "cannot remove a stale haproxy directory");
            }
        }
    }
    removed
}

impl Provider for HaproxyProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn apply(
        &self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
    ) -> Vec<Diagnostic> {
        *self
            .certificates
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = (certificates.clone(), ca_bundles.clone());
        self.rewrite.changes.fetch_add(1, Ordering::Relaxed);
        self.rewrite.lock().0 = None;
        let settings = &self.settings.plan;
        let credentials = (self.credentials.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (planned, diagnostics) = plan(
            model,
            certificates,
            ca_bundles,
            &credentials,
            settings,
            &self.fallback,
        );
        let mut instances = self.lock_instances();
        let keep: HashSet<LoadBalancerId> = planned.iter().map(|p| p.id).collect();
        let gone: Vec<LoadBalancerId> = instances
            .keys()
            .filter(|id| !keep.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(instance) = instances.remove(&id) {
                tracing::info!(load_balancer = %id, "stopping haproxy: the load balancer is gone");
                tokio::spawn(instance.stop());
            }
        }
        for p in planned {
            let instance = instances.entry(p.id).or_insert_with(|| {
                let reporter = self.statuses.reporter(p.id, p.object.clone());
                let timeout = self.settings.plan.limits.shutdown_timeout;
                Instance::start(
                    p.dir.clone(),
                    self.binary.clone(),
                    reporter,
                    timeout,
                    self.settings.counters.clone(),
                    self.rewrite.now.clone(),
                    self.guard.clone(),
                )
            });
            instance.set(Arc::new(p.desired));
        }
        diagnostics
    }

    /// Only the members of `pools` changed: their server slots change through the runtime
    /// API at once (no render of the whole configuration); the files follow off the hot path
    /// ([`Rewrite`]). Pools with cookie affinity (a server line per member) render again.
    fn update_members(&self, model: &Model, pools: &HashSet<PoolId>) {
        let Some(servers) = crate::render::pool_servers(model, pools) else {
            let (certificates, ca_bundles) = self
                .certificates
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let _ = self.apply(model, &certificates, &ca_bundles);
            return;
        };
        if servers.is_empty() {
            return; // Pools of other providers.
        }
        let change = self.rewrite.changes.fetch_add(1, Ordering::Relaxed) + 1;
        let members = Arc::new(crate::instance::Members { servers });
        for instance in self.lock_instances().values() {
            instance.members(members.clone());
        }
        let mut state = self.rewrite.lock();
        state.0 = Some((change, model.clone()));
        if !state.1 {
            state.1 = true;
            let task = Rewriter {
                rewrite: self.rewrite.clone(),
                instances: self.instances.clone(),
                certificates: self.certificates.clone(),
                credentials: self.credentials.clone(),
                settings: self.settings.plan.clone(),
                fallback: self.fallback.clone(),
            };
            tokio::spawn(task.run());
        }
    }

    /// Kept for the renders that follow (the registry hands them before each model).
    fn set_credentials(&self, credentials: &Credentials) {
        let mut own = (self.credentials.lock()).unwrap_or_else(PoisonError::into_inner);
        own.clone_from(credentials);
    }

    fn status(&self) -> Status {
        self.statuses.status()
    }

    fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        Some(self.statuses.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_directories_go_and_a_live_haproxys_stays() {
        let state = tempfile::tempdir().unwrap();
        let lock = portico_statedir::lock(state.path()).unwrap();
        let root = state.path().join("loadbalancer/haproxy");
        let stale = root.join("11111111-1111-5111-8111-111111111111");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("haproxy.conf"), "global\n").unwrap();
        std::fs::write(stale.join("default.pem"), "key").unwrap();
        // A dead master socket (nobody listens) is stale too.
        drop(std::os::unix::net::UnixListener::bind(stale.join(MASTER_SOCKET)).unwrap());
        let live = root.join("22222222-2222-5222-8222-222222222222");
        std::fs::create_dir_all(&live).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(live.join(MASTER_SOCKET)).unwrap();
        let file = root.join("not-a-directory");
        std::fs::write(&file, "x").unwrap();

        assert_eq!(remove_stale(&root, &lock), vec![stale.clone()]);
        assert!(!stale.exists());
        assert!(live.join(MASTER_SOCKET).exists());
        assert!(file.exists());
        assert!(remove_stale(&root.join("missing"), &lock).is_empty());
    }

    #[test]
    fn nothing_is_removed_outside_the_locked_state_directory() {
        let (locked, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let lock = portico_statedir::lock(locked.path()).unwrap();
        let dir = other.path().join("11111111-1111-5111-8111-111111111111");
        std::fs::create_dir_all(&dir).unwrap();
        assert!(remove_stale(other.path(), &lock).is_empty());
        assert!(dir.exists());
    }
}
