//! The life of a process that may be upgraded (`portico run`, `portico agent`): what a
//! predecessor hands over, SIGUSR2 and `--take-over` hand-overs to a successor.

use crate::error::AppError;
use crate::node::Node;
use portico_provider::Sockets;
use std::sync::Arc;
use tokio::sync::watch;

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
