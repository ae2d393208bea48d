//! One load balancer's haproxy: check, write, start, reload, runtime changes, restart after a
//! crash, stop. A task per load balancer owns the process; [`Instance::set`] hands it the
//! desired configuration and it converges to it.

use crate::cli::{command, master_reloads};
use crate::files;
use crate::render::{CONFIG_FILE, Rendered, STATS_SOCKET, Server};
use crate::status::Reporter;
use portico_model::PoolId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

pub(crate) const MASTER_SOCKET: &str = "master.sock";
const PID_FILE: &str = "haproxy.pid";
const CANDIDATE: &str = "haproxy.conf.next";
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A process that ran this long before dying starts the back-off afresh.
const STABLE: Duration = Duration::from_secs(30);
/// How long a starting or reloading haproxy that is still alive may take to answer: it parses
/// its whole configuration first (seconds for tens of thousands of backends), so this only
/// catches a process that hangs; an exit ends the wait at once.
const LOAD_LIMIT: Duration = Duration::from_secs(600);
/// How often a start or reload that takes long is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// After a hard stop (SIGTERM): the master's time to exit before SIGKILL.
const KILL_MARGIN: Duration = Duration::from_secs(2);

/// How haproxy is started. Nothing ties its life to Portico's (no parent-death signal): it
/// must outlive a Portico that hands over to its successor, which adopts it ([`Process`]); a
/// Portico that dies without stopping it leaves it serving until the next one on the same
/// state directory adopts it.
#[derive(Debug, Clone)]
pub struct Binary {
    /// The haproxy executable.
    pub haproxy: PathBuf,
}

/// What one load balancer should serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Desired {
    pub rendered: Rendered,
    /// Certificate files: name → PEM (chain and key), default certificate included.
    pub certificates: BTreeMap<String, Arc<Vec<u8>>>,
}

/// Endpoints only: each pool's members now (every other setting unchanged), applied through
/// the runtime API alone; the files keep the configuration last handed to [`Instance::set`]
/// until the next one (which the provider renders off the hot path).
#[derive(Debug)]
pub(crate) struct Members {
    pub servers: BTreeMap<PoolId, Vec<Server>>,
}

/// The handle of one load balancer's task; dropping the senders stops it. Every change
/// carries its order: the task drops one older than what it applied already.
pub(crate) struct Instance {
    desired: watch::Sender<Option<(u64, Arc<Desired>)>>,
    members: mpsc::UnboundedSender<(u64, Arc<Members>)>,
    /// The order of the next change.
    next: AtomicU64,
    /// Whether members went since the last [`Instance::set`]: the next one is sent even when
    /// it equals the last (the running haproxy may differ from it).
    members_sent: AtomicBool,
    /// Set before the task is told to end: haproxy keeps running (a successor adopts it).
    keep: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Instance {
    /// `stop_timeout`: how long a stopping haproxy may finish what is in flight.
    pub(crate) fn start(
        dir: PathBuf,
        binary: Arc<Binary>,
        reporter: Reporter,
        stop_timeout: Duration,
        counters: Arc<crate::Counters>,
        reload_wanted: Arc<Notify>,
        guard: Arc<crate::provider::Guard>,
    ) -> Self {
        let (desired, rx) = watch::channel(None);
        let (members, members_rx) = mpsc::unbounded_channel();
        let keep = Arc::new(AtomicBool::new(false));
        let manager = Manager {
            keep: keep.clone(),
            dir,
            stop_timeout,
            binary,
            reporter,
            applied: None,
            process: None,
            backoff: FIRST_BACKOFF,
            restart_at: None,
            counters,
            live: crate::runtime::Live::default(),
            seen: 0,
            live_unknown: false,
            reload_wanted,
            guard,
        };
        let task = tokio::spawn(manager.run(rx, members_rx));
        Instance {
            desired,
            members,
            next: AtomicU64::new(1),
            members_sent: AtomicBool::new(false),
            keep,
            task,
        }
    }

    /// Converge to `desired` (a no-op when it is what the task already has).
    pub(crate) fn set(&self, desired: Arc<Desired>) {
        let order = self.next.fetch_add(1, Ordering::Relaxed);
        let force = self.members_sent.swap(false, Ordering::Relaxed);
        self.desired.send_if_modified(|current| {
            let same = !force && current.as_ref().is_some_and(|(_, c)| **c == *desired);
            if !same {
                *current = Some((order, desired));
            }
            !same
        });
    }

    /// Endpoints only: the members of `members`' pools through the runtime API, at once.
    pub(crate) fn members(&self, members: Arc<Members>) {
        let order = self.next.fetch_add(1, Ordering::Relaxed);
        self.members_sent.store(true, Ordering::Relaxed);
        let _ = self.members.send((order, members));
    }

    /// Stops haproxy and removes the directory.
    pub(crate) async fn stop(self) {
        drop(self.desired);
        let _ = self.task.await;
    }

    /// Leaves haproxy running and its directory as it is, for the successor that adopts it
    /// (after a hand-over): only this process's task ends.
    pub(crate) async fn release(self) {
        self.keep.store(true, Ordering::SeqCst);
        self.stop().await;
    }
}

/// A running haproxy master and when it started (or was adopted).
struct Process {
    master: Master,
    /// The guard of a master this process started ([`crate::provider::Guard`]).
    guard: Option<std::process::Child>,
    started: Instant,
}

impl Process {
    /// The master is stopped or gone: its guard goes.
    fn unguard(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let _ = guard.kill();
            let _ = guard.wait();
        }
    }
}

/// The master: started by this process, or adopted from a predecessor (or from a Portico
/// that died without stopping it). An adopted master is not this process's child (it is its
/// predecessor's until that one exits, then init's): it cannot be waited for, so it is
/// watched through a pidfd (readable once it exits; no PID reuse can fool it), polled every
/// [`ADOPTED_POLL`], and signalled by PID.
enum Master {
    Child(Child),
    Adopted {
        pid: rustix::process::Pid,
        pidfd: std::os::fd::OwnedFd,
    },
}

/// How many times (every 50 ms) a live master's CLI is asked before it is given up.
const ADOPT_TRIES: u32 = 40;

/// Whether the process `pid` is a haproxy.
fn is_haproxy(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "haproxy")
}

/// How often an adopted master is looked at: the delay before its exit is noticed.
const ADOPTED_POLL: Duration = Duration::from_millis(100);

impl Master {
    /// Adopts the master `pid`.
    fn adopt(pid: rustix::process::Pid) -> std::io::Result<Master> {
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())?;
        Ok(Master::Adopted { pid, pidfd })
    }

    fn pid(&self) -> Option<rustix::process::Pid> {
        match self {
            Master::Child(child) => child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw),
            Master::Adopted { pid, .. } => Some(*pid),
        }
    }

    /// Waits for the exit; how it ended, as far as this process can tell.
    async fn wait(&mut self) -> String {
        match self {
            Master::Child(child) => match child.wait().await {
                Ok(status) => status.to_string(),
                Err(e) => e.to_string(),
            },
            Master::Adopted { .. } => {
                while !self.has_exited() {
                    tokio::time::sleep(ADOPTED_POLL).await;
                }
                "the adopted master ended".to_owned()
            }
        }
    }

    /// Whether it has exited, without waiting.
    fn has_exited(&mut self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        match self {
            Master::Child(child) => child.try_wait().is_ok_and(|s| s.is_some()),
            Master::Adopted { pidfd, .. } => {
                let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
                poll(&mut fds, Some(&Timespec::default())).is_ok_and(|ready| ready > 0)
            }
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = self.pid() {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    async fn kill(&mut self) {
        match self {
            Master::Child(child) => {
                let _ = child.kill().await;
            }
            Master::Adopted { .. } => {
                self.signal(rustix::process::Signal::KILL);
                let _ = self.wait().await;
            }
        }
    }

    /// Lets it run on after this process (a successor adopts it).
    fn leave(self) {
        match self {
            // Not killed when dropped (`kill_on_drop`, for every other way a child is lost),
            // not waited for: the successor watches it, init reaps it.
            Master::Child(child) => std::mem::forget(child),
            Master::Adopted { .. } => {}
        }
    }
}

struct Manager {
    dir: PathBuf,
    /// Set when haproxy must keep running after the task ends (see [`Instance::release`]).
    keep: Arc<AtomicBool>,
    stop_timeout: Duration,
    binary: Arc<Binary>,
    reporter: Reporter,
    /// What haproxy.conf holds: the last configuration that passed the check.
    applied: Option<Arc<Desired>>,
    process: Option<Process>,
    /// The wait before the next start after a failed one or an exit.
    backoff: Duration,
    /// When haproxy is started again (after a failed start or an exit).
    restart_at: Option<tokio::time::Instant>,
    counters: Arc<crate::Counters>,
    /// Which server slot holds which member in the running haproxy.
    live: crate::runtime::Live,
    /// The order of the last change taken (see [`Instance`]).
    seen: u64,
    /// A runtime API change failed half-way: `live` may not be what runs, the next
    /// configuration is reloaded.
    live_unknown: bool,
    /// Told when an endpoints-only change needs a reload (no free slot, or the runtime API
    /// failed): the provider then renders the whole configuration at once.
    reload_wanted: Arc<Notify>,
    /// Started before the first haproxy this process starts.
    guard: Arc<crate::provider::Guard>,
}

impl Manager {
    async fn run(
        mut self,
        mut rx: watch::Receiver<Option<(u64, Arc<Desired>)>>,
        mut members: mpsc::UnboundedReceiver<(u64, Arc<Members>)>,
    ) {
        loop {
            tokio::select! {
                biased;
                changed = rx.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let desired = rx.borrow_and_update().clone();
                    if let Some((order, desired)) = desired.filter(|(o, _)| *o >= self.seen) {
                        self.seen = order;
                        self.apply(desired).await;
                    }
                }
                Some((order, update)) = members.recv() => {
                    if order >= self.seen {
                        self.seen = order;
                        self.members(&update).await;
                    }
                }
                exit = exited(&mut self.process) => {
                    let ran = self.process.take().map(|mut p| {
                        p.unguard();
                        p.started.elapsed()
                    }).unwrap_or_default();
                    if ran > STABLE {
                        self.backoff = FIRST_BACKOFF;
                    }
                    self.retry_later(format!("haproxy exited ({exit})"));
                }
                () = sleep_until(self.restart_at), if self.restart_at.is_some() => {
                    self.restart_at = None;
                    self.start_serving().await;
                }
            }
        }
        self.shutdown().await;
    }

    /// Check, write, then start, reload or change members through the runtime API.
    async fn apply(&mut self, desired: Arc<Desired>) {
        // Runtime-only changes (servers' state, route map entries) cannot make the
        // configuration invalid: no `haproxy -c` (seconds on a large configuration) for them.
        let plan = (self.applied.as_ref())
            .filter(|_| !std::mem::take(&mut self.live_unknown))
            .filter(|applied| applied.certificates == desired.certificates)
            .and_then(|applied| {
                crate::runtime::commands(&applied.rendered, &desired.rendered, &self.live)
            });
        // The very first configuration has no last good one to protect: the start parses it
        // (and reports haproxy's alerts when it fails), so it is not parsed twice.
        let first = self.applied.is_none() && self.process.is_none();
        // A master left running in the directory (by a predecessor that handed over, or a
        // Portico that died) is adopted: reloaded only if the files it reads change.
        let adopted = if first { self.adopt().await } else { None };
        let before = adopted
            .as_ref()
            .map(|_| files::snapshot(&self.dir, &[CANDIDATE, PID_FILE]));
        self.process = self.process.take().or(adopted);
        if let Err(problem) = self.stage(&desired, plan.is_none() && !first).await {
            tracing::warn!(dir = %self.dir.display(), "{problem}");
            self.restore();
            let serving = self.process.is_some();
            self.reporter.set(serving, Some(problem));
            return;
        }
        let previous = self.applied.replace(desired.clone());
        let outcome = match (&self.process, previous) {
            (None, _) => {
                self.start_serving().await;
                return;
            }
            (Some(_), Some(_)) if plan.is_some() => {
                let (exchanges, live) = plan.unwrap_or_default();
                match self.runtime(exchanges).await {
                    Ok(()) => {
                        self.live = live;
                        Ok(())
                    }
                    Err(error) => {
                        tracing::info!(%error, "runtime API change failed; reloading instead");
                        self.reload_applied().await
                    }
                }
            }
            // Adopted: the running master reads these files already.
            (Some(_), None)
                if before
                    .is_some_and(|b| b == files::snapshot(&self.dir, &[CANDIDATE, PID_FILE])) =>
            {
                self.live = crate::runtime::Live::of(&desired.rendered);
                tracing::info!(dir = %self.dir.display(), "adopted the running haproxy: its configuration is unchanged");
                Ok(())
            }
            (Some(_), _) => self.reload_applied().await,
        };
        files::remove_other_certificates(&self.dir, &desired.certificates);
        match outcome {
            Ok(()) => self.reporter.set(true, None),
            Err(problem) => self.reporter.set(true, Some(problem)),
        }
    }

    /// Endpoints only: the slot commands of the changed pools alone, through the runtime API.
    /// The files stay what they were (`applied`, which a restart reads): the provider hands
    /// the whole configuration with these members later, which writes them (and sends
    /// nothing more, `live` having them). When only a reload can, the provider is told.
    async fn members(&mut self, update: &Members) {
        if self.process.is_none() || self.applied.is_none() {
            return; // Not serving: the next configuration starts it with these members.
        }
        let Some((exchanges, part)) = crate::runtime::pool_commands(&self.live, &update.servers)
        else {
            tracing::debug!(dir = %self.dir.display(), "no free server slot: reloading");
            self.reload_wanted.notify_one();
            return;
        };
        match self.runtime(exchanges).await {
            Ok(()) => self.live.merge(part),
            Err(error) => {
                tracing::info!(%error, "runtime API change failed; reloading instead");
                self.live_unknown = true;
                self.reload_wanted.notify_one();
            }
        }
    }

    /// Writes the files and checks the candidate; on success it becomes haproxy.conf.
    async fn stage(&self, desired: &Desired, check: bool) -> Result<(), String> {
        let io = |e: std::io::Error| format!("cannot write {}: {e}", self.dir.display());
        files::create_dir(&self.dir).map_err(io)?;
        for name in [STATS_SOCKET, MASTER_SOCKET] {
            portico_statedir::make_socket_alias(&self.dir, name).map_err(io)?;
        }
        files::write_certificates(&self.dir, &desired.certificates).map_err(io)?;
        files::write_lists(&self.dir, &desired.rendered.crt_list).map_err(io)?;
        files::write_maps(&self.dir, &desired.rendered.maps).map_err(io)?;
        let candidate = self.dir.join(CANDIDATE);
        files::write(&candidate, desired.rendered.config.as_bytes(), 0o600).map_err(io)?;
        if check {
            self.check(&candidate).await?;
        }
        std::fs::rename(&candidate, self.dir.join(CONFIG_FILE)).map_err(io)
    }

    /// `haproxy -c` on `config`.
    async fn check(&self, config: &Path) -> Result<(), String> {
        let out = Command::new(&self.binary.haproxy)
            .arg("-c")
            .arg("-f")
            .arg(config)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| format!("cannot run {} -c: {e}", self.binary.haproxy.display()))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "haproxy -c rejected the new configuration ({}); the last good configuration keeps serving",
            check_reason(&out.stdout, &out.stderr, out.status)
        ))
    }

    /// After a rejected candidate: the files the running configuration reads are put back.
    fn restore(&self) {
        let _ = std::fs::remove_file(self.dir.join(CANDIDATE));
        if let Some(applied) = &self.applied {
            let _ = files::write_lists(&self.dir, &applied.rendered.crt_list);
            let _ = files::write_maps(&self.dir, &applied.rendered.maps);
            let _ = files::write_certificates(&self.dir, &applied.certificates);
            files::remove_other_certificates(&self.dir, &applied.certificates);
        }
    }

    /// Starts haproxy on haproxy.conf (when there is one) and waits until it answers; a start
    /// that fails is tried again after the back-off.
    async fn start_serving(&mut self) {
        if self.applied.is_none() || self.process.is_some() {
            return;
        }
        self.restart_at = None;
        match self.spawn().await {
            Ok(process) => {
                self.process = Some(process);
                if let Some(applied) = &self.applied {
                    self.live = crate::runtime::Live::of(&applied.rendered);
                }
                self.reporter.set(true, None);
            }
            Err(problem) => self.retry_later(problem),
        }
    }

    /// Not serving because of `problem`: reported (not ready, a diagnostic) and haproxy is
    /// started again after the back-off, which doubles up to its maximum.
    fn retry_later(&mut self, problem: String) {
        let backoff = self.backoff;
        let problem = format!("{problem}; starting it again in {backoff:?}");
        tracing::warn!(dir = %self.dir.display(), "{problem}");
        self.reporter.set(false, Some(problem));
        self.restart_at = Some(tokio::time::Instant::now() + backoff);
        self.backoff = (backoff * 2).min(MAX_BACKOFF);
    }

    /// The master running in the directory, if any: the PID its PID file names, when the
    /// master socket answers `show proc` with that PID as the master.
    async fn adopt(&self) -> Option<Process> {
        let pid = std::fs::read_to_string(self.dir.join(PID_FILE)).ok()?;
        let pid: i32 = pid.trim().parse().ok()?;
        let master = files::socket(&self.dir, MASTER_SOCKET);
        // A master re-executes itself once its first worker runs (haproxy's wait mode): its
        // CLI refuses connections meanwhile, so a live haproxy is asked again for a while.
        let mut tries = 0;
        let procs = loop {
            match command(&master, "show proc").await {
                Ok(procs) => break procs,
                Err(_) if tries < ADOPT_TRIES && is_haproxy(pid) => tries += 1,
                Err(_) => return None,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if crate::cli::master_pid(&procs) != Some(pid) {
            tracing::info!(dir = %self.dir.display(), pid, "the PID file names no running master: starting haproxy");
            return None;
        }
        // PIDs are read in the master's PID namespace: a master of another one (a pod that
        // shares the state directory, not its processes) is not this PID here.
        if !is_haproxy(pid) {
            tracing::info!(dir = %self.dir.display(), pid, "the running master is not visible here (another PID namespace): starting haproxy");
            return None;
        }
        let adopted = Master::adopt(rustix::process::Pid::from_raw(pid)?);
        match adopted {
            Ok(master) => {
                tracing::info!(dir = %self.dir.display(), pid, "adopting the running haproxy master");
                // Its guard is the predecessor's.
                Some(Process {
                    master,
                    guard: None,
                    started: Instant::now(),
                })
            }
            Err(error) => {
                tracing::warn!(dir = %self.dir.display(), pid, %error, "cannot watch the running haproxy master");
                None
            }
        }
    }

    async fn spawn(&self) -> Result<Process, String> {
        let mut command = Command::new(&self.binary.haproxy);
        command
            .arg("-W")
            .arg("-db")
            .arg("-f")
            .arg(self.dir.join(CONFIG_FILE))
            .arg("-p")
            .arg(self.dir.join(PID_FILE))
            .arg("-S")
            .arg(master_socket_arg(&self.dir))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.haproxy.display()))?;
        let alerts = Alerts::default();
        forward(child.stdout.take(), self.dir.clone(), alerts.clone());
        forward(child.stderr.take(), self.dir.clone(), alerts.clone());
        let started = Instant::now();
        let socket = files::socket(&self.dir, STATS_SOCKET);
        let mut progress = started + PROGRESS_EVERY;
        // While the process lives it is loading its configuration: wait for it (only a hang
        // is cut, after LOAD_LIMIT). An exit ends the wait with what haproxy said.
        while started.elapsed() < LOAD_LIMIT {
            if let Ok(Some(status)) = child.try_wait() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let said = alerts.text();
                let said = if said.is_empty() {
                    "it printed no alert".to_owned()
                } else {
                    said
                };
                let fix = crate::render::bind_fix(&said);
                return Err(format!("haproxy exited at start ({status}): {said}{fix}"));
            }
            if command_ok(&socket, "show info").await {
                tracing::info!(dir = %self.dir.display(), pid = child.id(), took = ?started.elapsed(), "haproxy serves");
                let guard =
                    (child.id()).and_then(|pid| self.guard.start(pid, &self.dir.join(CONFIG_FILE)));
                return Ok(Process {
                    master: Master::Child(child),
                    guard,
                    started,
                });
            }
            if Instant::now() > progress {
                progress += PROGRESS_EVERY;
                tracing::info!(dir = %self.dir.display(), for_ = ?started.elapsed(), "haproxy is still loading its configuration");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = child.kill().await;
        Err(format!(
            "haproxy was alive but did not answer on its stats socket within {LOAD_LIMIT:?}; it was killed"
        ))
    }

    /// A reload of what `applied` holds; the slots are then what its files say (whatever the
    /// outcome: a failed reload keeps the old worker, whose slots the next reload replaces).
    async fn reload_applied(&mut self) -> Result<(), String> {
        let outcome = self.reload().await;
        if let Some(applied) = &self.applied {
            self.live = crate::runtime::Live::of(&applied.rendered);
        }
        outcome
    }

    /// A hitless reload through the master CLI: the new worker gets the listening sockets.
    async fn reload(&mut self) -> Result<(), String> {
        let master = files::socket(&self.dir, MASTER_SOCKET);
        let proc = |e: std::io::Error| format!("haproxy master CLI: {e}");
        let before = command(&master, "show proc").await.map_err(proc)?;
        let (reloads, failed) = master_reloads(&before).ok_or("unreadable show proc")?;
        let _ = command(&master, "reload").await;
        (self.counters.reloads).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The master parses the new configuration before it answers again: wait as long as
        // it lives (it is the process this manager watches), up to LOAD_LIMIT.
        let deadline = Instant::now() + LOAD_LIMIT;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let master_exited = match self.process.as_mut() {
                Some(p) => p.master.has_exited(),
                None => true,
            };
            if master_exited {
                return Err("haproxy exited during its reload".to_owned());
            }
            let Ok(now) = command(&master, "show proc").await else {
                continue;
            };
            match master_reloads(&now) {
                Some((r, f)) if r > reloads && f > failed => {
                    return Err("haproxy could not load the new configuration; the previous one keeps serving".to_owned());
                }
                Some((r, _))
                    if r > reloads
                        && command_ok(&files::socket(&self.dir, STATS_SOCKET), "show info")
                            .await =>
                {
                    return Ok(());
                }
                _ => {}
            }
        }
        Err("haproxy did not finish its reload in time".to_owned())
    }

    /// Member readiness and weight through the runtime API, without a reload.
    /// Route map entries and servers' state through the runtime API, without a reload (the
    /// files are written already, so a later reload agrees). Each exchange must be answered
    /// with nothing but blank lines.
    async fn runtime(&self, exchanges: Vec<String>) -> Result<(), String> {
        let socket = files::socket(&self.dir, STATS_SOCKET);
        for exchange in &exchanges {
            let answer = command(&socket, exchange)
                .await
                .map_err(|e| e.to_string())?;
            if crate::runtime::failed(&answer) {
                return Err(answer.trim().to_owned());
            }
        }
        if !exchanges.is_empty() {
            (self.counters.runtime_updates).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(
                exchanges = exchanges.len(),
                "routes and members changed through the runtime API"
            );
        }
        Ok(())
    }

    async fn shutdown(&mut self) {
        if self.keep.load(Ordering::SeqCst) {
            if let Some(process) = self.process.take() {
                tracing::info!(dir = %self.dir.display(), pid = ?process.master.pid(), "haproxy keeps running for the new process");
                process.master.leave();
                // The guard stays (not killed, not waited for): it watches the lock the
                // successor holds now.
                drop(process.guard);
            }
            return;
        }
        if let Some(mut process) = self.process.take() {
            let master = files::socket(&self.dir, MASTER_SOCKET);
            terminate(&mut process.master, &master, self.stop_timeout).await;
            process.unguard();
        }
        portico_statedir::remove_socket_alias(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        self.reporter.remove();
    }
}

/// Why `haproxy -c` refused a configuration: its first alerts (the ones naming a line come
/// first), else the last lines it printed, else its exit status. Never empty.
fn check_reason(stdout: &[u8], stderr: &[u8], status: std::process::ExitStatus) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(stderr),
        String::from_utf8_lossy(stdout)
    );
    let strip = |l: &str| {
        // "[ALERT]    (1234) : config : parsing ..." → "parsing ..."
        let l = l.trim();
        l.split_once(") : ")
            .map_or(l, |(_, rest)| rest)
            .trim()
            .to_owned()
    };
    let alerts: Vec<String> = text
        .lines()
        .filter(|l| l.contains("ALERT"))
        .map(strip)
        .filter(|l| !l.is_empty())
        .take(5)
        .collect();
    if !alerts.is_empty() {
        return alerts.join(" | ");
    }
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("NOTICE"))
        .map(strip)
        .collect();
    match lines.len() {
        0 => format!("haproxy exited with {status} and printed no reason"),
        n => lines[n.saturating_sub(5)..].join(" | "),
    }
}

/// `-S <path>,mode,600`: the master CLI for this user only (the path holds no comma).
fn master_socket_arg(dir: &Path) -> std::ffi::OsString {
    let mut arg = files::socket(dir, MASTER_SOCKET).into_os_string();
    arg.push(",mode,600");
    arg
}

async fn command_ok(socket: &Path, cmd: &str) -> bool {
    command(socket, cmd).await.is_ok_and(|a| !a.is_empty())
}

/// SIGUSR1 to the master: a soft stop. The workers close their listeners, ask keep-alive
/// clients to close (`Connection: close` on their next response, HTTP/2 GOAWAY) and finish
/// what is in flight. haproxy keeps idle keep-alive connections for a last request (`option
/// idle-close-on-response`), so once no worker has a request or tunnel in flight, or after
/// `timeout`, SIGTERM (a hard stop) closes them; SIGKILL if even that is not enough.
async fn terminate(process: &mut Master, master: &Path, timeout: Duration) {
    use rustix::process::Signal;
    process.signal(Signal::USR1);
    let settled = tokio::time::timeout(timeout, async {
        while in_flight(master).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    tokio::select! {
        _ = process.wait() => return,
        _ = settled => {}
    }
    process.signal(Signal::TERM);
    if tokio::time::timeout(KILL_MARGIN, process.wait())
        .await
        .is_err()
    {
        tracing::warn!("haproxy did not stop after a hard stop: killing it");
        process.kill().await;
    }
}

/// Whether any worker still has a stream (a request or a tunnel) besides the CLI's own, as
/// the master CLI tells (`show proc`, then `@!<pid> show sess`); true when it cannot tell.
async fn in_flight(master: &Path) -> bool {
    let Ok(procs) = command(master, "show proc").await else {
        return true;
    };
    let workers = procs.lines().filter_map(|line| {
        let mut words = line.split_whitespace();
        let pid = words.next()?;
        (words.next() == Some("worker")).then_some(pid)
    });
    for pid in workers {
        let Ok(sessions) = command(master, &format!("@!{pid} show sess")).await else {
            return true;
        };
        if sessions.lines().any(is_traffic) {
            return true;
        }
    }
    false
}

/// A `show sess` line of a client's stream (not the CLI's: frontend `GLOBAL`).
fn is_traffic(line: &str) -> bool {
    line.contains(" fe=") && !line.contains(" fe=GLOBAL ")
}

/// Resolves when the process exits; never when there is none.
async fn exited(process: &mut Option<Process>) -> String {
    match process {
        Some(p) => p.master.wait().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The last alerts haproxy printed, for the diagnostic when it fails to start.
#[derive(Debug, Clone, Default)]
struct Alerts(Arc<std::sync::Mutex<Vec<String>>>);

impl Alerts {
    fn push(&self, line: &str) {
        let mut lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == 5 {
            lines.remove(0);
        }
        lines.push(line.to_owned());
    }

    fn text(&self) -> String {
        let lines = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.join(" | ")
    }
}

/// haproxy's own messages go to Portico's log: alerts as warnings, the rest at debug.
fn forward(output: Option<impl AsyncRead + Unpin + Send + 'static>, dir: PathBuf, alerts: Alerts) {
    let Some(output) = output else { return };
    tokio::spawn(async move {
        let mut lines = BufReader::new(output).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("ALERT") {
                alerts.push(&line);
                tracing::warn!(dir = %dir.display(), "haproxy: {line}");
            } else {
                tracing::debug!(dir = %dir.display(), "haproxy: {line}");
            }
        }
    });
}

#[cfg(test)]
#[path = "instance_tests.rs"]
mod tests;
