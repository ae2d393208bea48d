//! Processes the bench started: memory from /proc, signals by PID, and a bounded stop.

use std::time::Duration;
use tokio::process::Child;

/// VmRSS of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

/// VmHWM (peak resident set) of `pid`, in KiB.
pub fn hwm_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// CPU time `pid` has used so far (user + system), from /proc/PID/stat.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) start after its ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

/// Direct children of `pid` (nginx's workers), from /proc.
pub fn children(pid: u32) -> Vec<u32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Sends `signal` (e.g. `TERM`, `HUP`) to exactly `pid`.
pub async fn signal(pid: u32, signal: &str) -> std::io::Result<()> {
    let status = tokio::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "kill -{signal} {pid} failed"
        )))
    }
}

/// SIGTERM, then SIGKILL if the process has not exited within 10 s.
pub async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        let _ = signal(pid, "TERM").await;
    }
    let waited = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    if waited.is_err() {
        let _ = child.kill().await;
    }
}
