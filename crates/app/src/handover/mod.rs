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
//!
//! Each attempt's outcome is written to [`STATUS_FILE`] in the state directory, for
//! `portico upgrade`: `OLD-PID ready NEW-PID` or `OLD-PID failed REASON`.

mod manifest;
mod transfer;

use manifest::Entry;
pub use manifest::{Answer, HaState};
use portico_provider::{SocketKey, Sockets};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming the hand-over socket for a successor.
pub const SOCKET_ENV: &str = "PORTICO_UPGRADE_SOCKET";
/// The hand-over socket's name in the state directory.
pub const SOCKET_FILE: &str = "upgrade.sock";
/// The last upgrade's outcome, in the state directory.
pub const STATUS_FILE: &str = "upgrade.status";
/// How long a successor has to connect, start and apply its first state.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How this process was started, to start its successor the same way: the program as it was
/// named (argv\[0\], as nginx does: `/proc/self/exe` would be the old binary) and the arguments.
#[derive(Debug, Clone, Default)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// What a successor received from its predecessor.
#[derive(Debug)]
pub struct Successor {
    stream: std::os::unix::net::UnixStream,
    pub lock: Option<OwnedFd>,
    pub sockets: Vec<(SocketKey, OwnedFd)>,
    /// An agent's active-standby state.
    pub ha: Option<HaState>,
}

impl Successor {
    /// When [`SOCKET_ENV`] names a socket: connects and receives what the predecessor hands
    /// over.
    pub fn from_env() -> Result<Option<Successor>, String> {
        let Some(path) = std::env::var_os(SOCKET_ENV) else {
            return Ok(None);
        };
        let failed = |e: std::io::Error| format!("the upgrade socket {}: {e}", path.display());
        let stream = std::os::unix::net::UnixStream::connect(&path).map_err(failed)?;
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
        Ok(Some(Successor {
            stream,
            lock,
            sockets,
            ha,
        }))
    }

    /// Tells the predecessor how the start went.
    pub fn answer(self, answer: &Answer) {
        use std::io::Write;
        if let Err(error) = (&self.stream).write_all(answer.line().as_bytes()) {
            tracing::warn!(%error, "cannot answer the predecessor");
        }
    }
}

/// Starts a successor with `command` and hands it `lock`, `sockets` and `ha`; returns its PID
/// once it serves, or why it does not (it is then killed).
pub async fn upgrade(
    command: &Command,
    lock: &portico_statedir::Lock,
    sockets: &Sockets,
    ha: Option<HaState>,
) -> Result<u32, String> {
    let path = lock.dir().join(SOCKET_FILE);
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    let mut entries = vec![];
    let dup = lock.file().try_clone_to_owned();
    entries.push((Entry::Lock, dup.map_err(|e| e.to_string())?));
    let handed = sockets.hand_over().into_iter();
    entries.extend(handed.map(|(key, fd)| (Entry::Socket(key), fd)));
    let mut child = tokio::process::Command::new(&command.program)
        .args(&command.args)
        .env(SOCKET_ENV, &path)
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", command.program.display()))?;
    let talk = tokio::time::timeout(DEADLINE, converse(listener, entries, ha));
    let outcome = tokio::select! {
        answer = talk => match answer {
            Ok(Ok(Answer::Ready(pid))) => Ok(pid),
            Ok(Ok(Answer::Failed(why))) => Err(format!("the new process failed: {why}")),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("the new process was not ready within {DEADLINE:?}")),
        },
        status = child.wait() => Err(match status {
            Ok(status) => format!("the new process exited ({status}) before it was ready"),
            Err(e) => format!("the new process: {e}"),
        }),
    };
    let _ = std::fs::remove_file(&path);
    if outcome.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    outcome
}

/// Accepts the successor's connection, sends `entries` and reads its answer.
async fn converse(
    listener: tokio::net::UnixListener,
    entries: Vec<(Entry, OwnedFd)>,
    ha: Option<HaState>,
) -> Result<Answer, String> {
    let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
    let stream = stream.into_std().map_err(|e| e.to_string())?;
    let talk = move || -> std::io::Result<Option<Answer>> {
        use std::io::BufRead;
        stream.set_nonblocking(false)?;
        transfer::send(&stream, &entries, ha.as_ref())?;
        drop(entries);
        let mut line = String::new();
        std::io::BufReader::new(&stream).read_line(&mut line)?;
        Ok(Answer::parse(&line))
    };
    match tokio::task::spawn_blocking(talk).await {
        Ok(Ok(Some(answer))) => Ok(answer),
        Ok(Ok(None)) => Err("the new process closed the upgrade socket without an answer".into()),
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
