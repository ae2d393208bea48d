//! Upgrades without closing a socket (`portico run` and `portico agent`): on SIGUSR2 the process (the
//! predecessor) starts the binary at the path it was started from, with its arguments and
//! [`SOCKET_ENV`] naming a Unix socket in the state directory. The new process (the successor)
//! connects, receives the state directory's lock file and every listening socket (SCM_RIGHTS,
//! with a list saying what each is), serves on them, binds only what it did not receive, and
//! answers `ready PID` once its first desired state is applied. The predecessor then drains
//! as a shutdown does, without the grace period (the successor accepts on the same sockets),
//! and exits. A successor that exits, says it failed, or is not ready within [`DEADLINE`] is
//! killed, and the predecessor serves on as before.
//!
//! An agent with active-standby also hands over its heartbeat socket and [`HaState`]: the
//! etcd lease its claims carry and the claims it holds. Its successor keeps that lease alive
//! and starts those elections as the holder (the addresses stay on the interface); the
//! predecessor, once handed over, neither releases its claims nor removes its addresses.
//! Both processes share that heartbeat socket, and the kernel gives each advert to one of
//! them: so after the successor's `ready`, the predecessor stops its elections ([`HaHandOver`])
//! and says [`QUIET`], and only then does the successor start its own. At no time do both
//! read the adverts or renew the claims (a successor that did so beside its predecessor heard
//! too few of its peer's adverts and fenced itself under load). Between the two the
//! predecessor keeps sending its held claims' adverts (and only those), until the successor
//! says [`ELECTING`] (its elections' first adverts are out), closes the connection, or
//! [`KEEP_WAIT`] passes: the standby hears no gap, however long the successor takes to start
//! its elections on a loaded node (a gap longer than the election's dead interval, 200 ms by
//! default, was an election).
//!
//! A process that was not started by its predecessor asks for the same hand-over with
//! `--take-over` (a DaemonSet's new pod beside the old one): finding the state directory
//! locked by a live Portico, it connects to that process's hand-over socket ([`SOCKET_FILE`],
//! which a serving process keeps bound) and receives what a SIGUSR2 successor receives; the
//! predecessor then drains as after SIGUSR2. One conversation serves both ([`hand_over`]);
//! only who starts the successor differs.
//!
//! Each attempt's outcome is written to [`STATUS_FILE`] in the state directory, for
//! `portico upgrade`: `OLD-PID ready NEW-PID` or `OLD-PID failed REASON`.

mod manifest;
mod transfer;

use manifest::Entry;
pub use manifest::{Answer, ELECTING, HaState, QUIET};
use portico_provider::{SocketKey, Sockets};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The environment variable naming the hand-over socket for a successor.
pub const SOCKET_ENV: &str = "PORTICO_UPGRADE_SOCKET";
/// The hand-over socket's name in the state directory.
pub const SOCKET_FILE: &str = "upgrade.sock";
/// The last upgrade's outcome, in the state directory.
pub const STATUS_FILE: &str = "upgrade.status";
/// How long a successor has to connect, start and apply its first state.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// How long a predecessor waits for its elections to stop after its successor's `ready`, and
/// a successor for the predecessor's [`QUIET`], before going on without.
pub const QUIET_WAIT: Duration = Duration::from_secs(1);
/// How long a predecessor that stopped its elections keeps advertising its claims at most,
/// waiting for its successor's [`ELECTING`].
pub const KEEP_WAIT: Duration = Duration::from_secs(5);
/// How long `--take-over` waits for the lock holder's hand-over socket to accept (a process
/// binds it once it serves its first state).
pub const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// How this process was started, to start its successor the same way: the program as it was
/// named (argv\[0\], as nginx does: `/proc/self/exe` would be the old binary) and the arguments.
#[derive(Debug, Clone, Default)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// `--take-over`: a state directory locked by a live Portico is taken over from it
    /// instead of refused.
    pub take_over: bool,
}

/// What a successor received from its predecessor.
#[derive(Debug)]
pub struct Successor {
    stream: std::os::unix::net::UnixStream,
    pub lock: Option<OwnedFd>,
    pub sockets: Vec<(SocketKey, OwnedFd)>,
    /// An agent's active-standby state.
    pub ha: Option<HaState>,
    /// The predecessor says [`QUIET`] after this process's `ready` ([`HaState::quiets`]).
    quiets: bool,
}

impl Successor {
    /// When [`SOCKET_ENV`] names a socket: connects and receives what the predecessor hands
    /// over.
    pub fn from_env() -> Result<Option<Successor>, String> {
        let Some(path) = std::env::var_os(SOCKET_ENV) else {
            return Ok(None);
        };
        let path = Path::new(&path);
        let stream = std::os::unix::net::UnixStream::connect(path);
        let stream = stream.map_err(|e| format!("the upgrade socket {}: {e}", path.display()))?;
        Successor::receive(stream, path).map(Some)
    }

    /// `--take-over`: when another Portico holds the lock of the state directory `dir`, asks
    /// it over its hand-over socket for what it would hand a SIGUSR2 successor. `None` when
    /// the lock is free (or the directory unusable: the start says why).
    pub fn take_over(dir: &Path) -> Result<Option<Successor>, String> {
        let holder = match portico_statedir::lock(dir) {
            Err(portico_statedir::StateDirError::InUse { holder, .. }) => holder,
            _ => return Ok(None),
        };
        let path = dir.join(SOCKET_FILE);
        tracing::info!(%holder, socket = %path.display(), "the state directory is in use: taking over");
        let deadline = Instant::now() + CONNECT_WAIT;
        let stream = loop {
            match std::os::unix::net::UnixStream::connect(&path) {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    return Err(format!(
                        "the state directory {} is in use by {holder}, whose hand-over socket {} \
                         does not answer ({e}): is it a Portico that serves?",
                        dir.display(),
                        path.display()
                    ));
                }
            }
        };
        Successor::receive(stream, &path).map(Some)
    }

    /// Receives the lock, the sockets and an agent's state over `stream`.
    fn receive(stream: std::os::unix::net::UnixStream, path: &Path) -> Result<Successor, String> {
        let failed = |e: std::io::Error| format!("the upgrade socket {}: {e}", path.display());
        stream.set_read_timeout(Some(DEADLINE)).map_err(failed)?;
        let (mut lock, mut sockets) = (None, Vec::new());
        let (received, ha) = transfer::receive(&stream).map_err(failed)?;
        for (entry, fd) in received {
            match entry {
                Entry::Lock => lock = Some(fd),
                Entry::Socket(key) => sockets.push((key, fd)),
            }
        }
        tracing::info!(
            sockets = sockets.len(),
            "received the predecessor's sockets"
        );
        let quiets = ha.as_ref().is_some_and(|h| h.quiets);
        Ok(Successor {
            stream,
            lock,
            sockets,
            ha,
            quiets,
        })
    }

    /// Whether this process must wait for its predecessor's [`QUIET`] before its elections
    /// start (then it answers with [`Successor::ready`]).
    pub fn waits_for_quiet(&self) -> bool {
        self.quiets
    }

    /// Answers `ready` and waits for the predecessor's [`QUIET`] (blocking, up to
    /// [`QUIET_WAIT`]); whether it came. Then [`Successor::electing`].
    pub fn ready(&self) -> bool {
        use std::io::BufRead;
        self.answer_ref(&Answer::Ready(std::process::id()));
        if self.stream.set_read_timeout(Some(QUIET_WAIT)).is_err() {
            return false;
        }
        let mut line = String::new();
        let read = std::io::BufReader::new(&self.stream).read_line(&mut line);
        read.is_ok() && line.trim_end() == QUIET
    }

    /// Tells the predecessor that this process's elections run: it stops advertising.
    pub fn electing(self) {
        use std::io::Write;
        if let Err(error) = (&self.stream).write_all(format!("{ELECTING}\n").as_bytes()) {
            tracing::warn!(%error, "cannot tell the predecessor that the elections run");
        }
    }

    /// Tells the predecessor how the start went.
    pub fn answer(self, answer: &Answer) {
        self.answer_ref(answer);
    }

    fn answer_ref(&self, answer: &Answer) {
        use std::io::Write;
        if let Err(error) = (&self.stream).write_all(answer.line().as_bytes()) {
            tracing::warn!(%error, "cannot answer the predecessor");
        }
    }
}

/// An agent's active-standby as the hand-over sees it: the state to hand over, and the switch
/// that stops the elections once the successor is ready.
#[derive(Clone)]
pub(crate) struct HaHandOver {
    state: Arc<Mutex<Option<HaState>>>,
    quiesce: Arc<watch::Sender<bool>>,
    electing: watch::Receiver<bool>,
    kept: Arc<watch::Sender<bool>>,
}

/// The elections' side of an [`HaHandOver`].
pub(crate) struct Quieting {
    /// What the elections publish for a successor (none before the lease).
    pub(crate) state: Arc<Mutex<Option<HaState>>>,
    /// Turns true when a successor is ready: the elections stop, releasing nothing.
    pub(crate) quiesce: watch::Receiver<bool>,
    /// True while the elections run. They set it before they look at `quiesce`, so that a
    /// hand-over either stops them or sees them not started.
    pub(crate) electing: watch::Sender<bool>,
    /// Turns true when the successor's elections run (or it is gone, or [`KEEP_WAIT`]
    /// passed): the stopped elections' adverts stop.
    pub(crate) kept: watch::Receiver<bool>,
}

/// A connected [`HaHandOver`] and [`Quieting`].
pub(crate) fn ha_hand_over() -> (HaHandOver, Quieting) {
    let state = Arc::new(Mutex::new(None));
    let (quiesce_tx, quiesce) = watch::channel(false);
    let (electing, electing_rx) = watch::channel(false);
    let (kept_tx, kept) = watch::channel(false);
    let hand = HaHandOver {
        state: state.clone(),
        quiesce: Arc::new(quiesce_tx),
        electing: electing_rx,
        kept: Arc::new(kept_tx),
    };
    let quieting = Quieting {
        state,
        quiesce,
        electing,
        kept,
    };
    (hand, quieting)
}

impl HaHandOver {
    /// The state to hand over, if the elections have a lease.
    fn state(&self) -> Option<HaState> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = state.clone()?;
        state.quiets = true;
        Some(state)
    }

    /// Stops the elections and waits (up to [`QUIET_WAIT`]) until they no longer run.
    async fn quiesce(&self) {
        self.quiesce.send_replace(true);
        let mut electing = self.electing.clone();
        let stopped = electing.wait_for(|running| !*running);
        if tokio::time::timeout(QUIET_WAIT, stopped).await.is_err() {
            tracing::warn!(
                "the elections did not stop within {QUIET_WAIT:?}: the successor starts its own"
            );
        }
    }
}

/// Binds this process's hand-over socket in the state directory `dir` (under a name of its
/// own, then renamed over [`SOCKET_FILE`]: a predecessor's, still draining, is replaced at
/// once), where a successor asks for the sockets.
pub fn listen(dir: &Path) -> Result<tokio::net::UnixListener, String> {
    let path = dir.join(SOCKET_FILE);
    let own = dir.join(format!("{SOCKET_FILE}.{}", std::process::id()));
    let _ = std::fs::remove_file(&own);
    let failed = |e: std::io::Error| format!("cannot listen on {}: {e}", path.display());
    let listener = tokio::net::UnixListener::bind(&own).map_err(failed)?;
    std::fs::rename(&own, &path).map_err(failed)?;
    Ok(listener)
}

/// Starts a successor with `command` (SIGUSR2), which connects to `listener`, and hands it
/// `lock`, `sockets` and `ha`; returns its PID once it serves, or why it does not (it is then
/// killed).
pub(crate) async fn upgrade(
    command: &Command,
    listener: &tokio::net::UnixListener,
    (lock, sockets): (&portico_statedir::Lock, &Sockets),
    ha: Option<&HaHandOver>,
) -> Result<u32, String> {
    let mut child = tokio::process::Command::new(&command.program)
        .args(&command.args)
        .env(SOCKET_ENV, lock.dir().join(SOCKET_FILE))
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", command.program.display()))?;
    let talk = async {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        hand_over(stream, (lock, sockets), ha).await
    };
    let outcome = tokio::select! {
        outcome = talk => outcome,
        status = child.wait() => Err(match status {
            Ok(status) => format!("the new process exited ({status}) before it was ready"),
            Err(e) => format!("the new process: {e}"),
        }),
    };
    if outcome.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    outcome
}

/// The one hand-over, to a successor connected on `stream` (started by [`upgrade`], or
/// `--take-over`): sends `lock`, `sockets` and `ha`'s state, and returns its PID once it
/// serves (an agent's elections stopped and the successor told [`QUIET`]), or why it does
/// not.
pub(crate) async fn hand_over(
    stream: tokio::net::UnixStream,
    (lock, sockets): (&portico_statedir::Lock, &Sockets),
    ha: Option<&HaHandOver>,
) -> Result<u32, String> {
    let mut entries = vec![];
    let dup = lock.file().try_clone_to_owned();
    entries.push((Entry::Lock, dup.map_err(|e| e.to_string())?));
    let handed = sockets.hand_over().into_iter();
    entries.extend(handed.map(|(key, fd)| (Entry::Socket(key), fd)));
    let state = ha.and_then(HaHandOver::state);
    let (answer, stream) =
        match tokio::time::timeout(DEADLINE, converse(stream, entries, state)).await {
            Ok(Ok(talked)) => talked,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(format!("the new process was not ready within {DEADLINE:?}")),
        };
    match answer {
        Answer::Ready(pid) => {
            if let Some(ha) = ha {
                ha.quiesce().await;
                use std::io::Write;
                if let Err(error) = (&stream).write_all(format!("{QUIET}\n").as_bytes()) {
                    tracing::warn!(%error, "cannot tell the new process that the elections stopped");
                }
                // The stopped elections advertise until the successor's run.
                let kept = ha.kept.clone();
                tokio::task::spawn_blocking(move || {
                    use std::io::BufRead;
                    let mut line = String::new();
                    let read = (stream.set_read_timeout(Some(KEEP_WAIT)))
                        .and_then(|()| std::io::BufReader::new(&stream).read_line(&mut line));
                    if read.is_err() {
                        tracing::warn!(
                            "the new process did not say its elections run within {KEEP_WAIT:?}"
                        );
                    }
                    kept.send_replace(true);
                });
            }
            Ok(pid)
        }
        Answer::Failed(why) => Err(format!("the new process failed: {why}")),
    }
}

/// Sends `entries` over the successor's connection and reads its answer; the connection stays
/// open for [`QUIET`].
async fn converse(
    stream: tokio::net::UnixStream,
    entries: Vec<(Entry, OwnedFd)>,
    ha: Option<HaState>,
) -> Result<(Answer, std::os::unix::net::UnixStream), String> {
    let stream = stream.into_std().map_err(|e| e.to_string())?;
    let talk = move || -> std::io::Result<(Option<Answer>, std::os::unix::net::UnixStream)> {
        use std::io::BufRead;
        stream.set_nonblocking(false)?;
        transfer::send(&stream, &entries, ha.as_ref())?;
        drop(entries);
        let mut line = String::new();
        std::io::BufReader::new(&stream).read_line(&mut line)?;
        Ok((Answer::parse(&line), stream))
    };
    match tokio::task::spawn_blocking(talk).await {
        Ok(Ok((Some(answer), stream))) => Ok((answer, stream)),
        Ok(Ok((None, _))) => {
            Err("the new process closed the upgrade socket without an answer".into())
        }
        Ok(Err(e)) => Err(format!("the upgrade socket: {e}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Records an attempt's outcome for `portico upgrade`.
pub fn record(dir: &Path, outcome: &Result<u32, String>) {
    let me = std::process::id();
    let line = match outcome {
        Ok(pid) => format!("{me} ready {pid}\n"),
        Err(why) => format!("{me} failed {}\n", why.replace('\n', " ")),
    };
    let path = dir.join(STATUS_FILE);
    if let Err(error) = portico_statedir::write_file(&path, line.as_bytes(), 0o600) {
        tracing::warn!(%error, path = %path.display(), "cannot record the upgrade's outcome");
    }
}

/// The outcome recorded by the process `pid`, if its last attempt is there: the new PID, or
/// why it failed.
pub fn recorded(dir: &Path, pid: u32) -> Option<Result<u32, String>> {
    let text = std::fs::read_to_string(dir.join(STATUS_FILE)).ok()?;
    let (who, rest) = text.trim_end().split_once(' ')?;
    if who.parse::<u32>().ok()? != pid {
        return None;
    }
    match rest.split_once(' ')? {
        ("ready", new) => new.parse().ok().map(Ok),
        ("failed", why) => Some(Err(why.to_owned())),
        _ => None,
    }
}
