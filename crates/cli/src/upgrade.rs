//! `portico upgrade --pid PID`: sends SIGUSR2 to a running `portico run` or `portico agent`
//! and waits for the outcome its process records in the state directory (`upgrade.status`):
//! the new process's PID, or why it did not start and the old one serves on.

use anyhow::Context;
use clap::Args;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct UpgradeArgs {
    /// The running `portico run` or `portico agent` to upgrade (it starts the binary now at
    /// the path it was started from, with its arguments, and hands its sockets over).
    #[arg(long, value_name = "PID")]
    pid: i32,
    /// The state directory of that process, where it records the outcome.
    #[command(flatten)]
    state: crate::StateDirArgs,
}

pub fn run(args: &UpgradeArgs) -> anyhow::Result<ExitCode> {
    let dir = args.state.settings()?.state_dir;
    let pid = rustix::process::Pid::from_raw(args.pid)
        .with_context(|| format!("--pid {}: not a process id", args.pid))?;
    let status = dir.join(portico_app::handover::STATUS_FILE);
    match std::fs::remove_file(&status) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {}", status.display()));
        }
        _ => {}
    }
    rustix::process::kill_process(pid, rustix::process::Signal::USR2)
        .with_context(|| format!("sending SIGUSR2 to PID {}", args.pid))?;
    let old = args.pid.unsigned_abs();
    let deadline = Instant::now() + portico_app::handover::DEADLINE + Duration::from_secs(10);
    while Instant::now() < deadline {
        match portico_app::handover::recorded(&dir, old) {
            Some(Ok(new)) => {
                println!("portico upgrade: PID {new} serves; PID {old} drains and exits");
                return Ok(ExitCode::SUCCESS);
            }
            Some(Err(why)) => {
                eprintln!("portico upgrade: failed, PID {old} serves on: {why}");
                return Ok(ExitCode::FAILURE);
            }
            None if rustix::process::test_kill_process(pid).is_err() => {
                anyhow::bail!("PID {old} ended without recording an upgrade");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    anyhow::bail!(
        "PID {old} recorded no outcome in {} (is it a `portico run` with this --state-dir?)",
        dir.display()
    )
}
