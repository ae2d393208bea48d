//! What etcd itself says was written: `etcdctl watch --prefix <prefix>desired -w json` runs for
//! the whole measurement, and every response is added up until the commit marker
//! (`desired-commit`) is put, which closes one commit of the controller. Bytes are key plus value
//! of every put (key only for a delete) under `desired/`, the markers included.

use super::pids::Pids;
use anyhow::Context;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The etcd key prefix Portico uses by default.
pub const PREFIX: &str = "/portico/";

/// One commit of the controller as etcd recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commit {
    /// When the bench read the marker's event.
    pub seen: Instant,
    pub revision: i64,
    /// Keys put or deleted, the markers included.
    pub keys: usize,
    pub bytes: u64,
}

#[derive(Debug)]
pub struct CommitWatch {
    child: Child,
    commits: Arc<Mutex<Vec<Commit>>>,
}

impl CommitWatch {
    pub fn start(etcdctl: &Path, url: &str, pids: &Pids) -> anyhow::Result<Self> {
        let mut child = Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={url}"))
            .args([
                "watch",
                "--prefix",
                &format!("{PREFIX}desired"),
                "-w",
                "json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", etcdctl.display()))?;
        pids.record(child.id().context("etcdctl exited at once")?)?;
        let stdout = child.stdout.take().context("no stdout")?;
        let commits = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(read(BufReader::new(stdout), commits.clone()));
        Ok(CommitWatch { child, commits })
    }

    /// Every commit seen so far.
    pub fn commits(&self) -> Vec<Commit> {
        self.commits.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub async fn stop(mut self) {
        crate::process::stop(&mut self.child).await;
    }
}

async fn read(stdout: BufReader<tokio::process::ChildStdout>, out: Arc<Mutex<Vec<Commit>>>) {
    let mut lines = stdout.lines();
    let mut open = Open::default();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some(response) = parse(&line) else {
            continue;
        };
        if let Some(commit) = open.add(&response, Instant::now())
            && let Ok(mut out) = out.lock()
        {
            out.push(commit);
        }
    }
}

/// One watch response: its revision and, per event, (key bytes, value bytes, is the marker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub revision: i64,
    pub events: Vec<(u64, u64, bool)>,
}

/// A response line of `etcdctl watch -w json` (keys and values in base64).
pub fn parse(line: &str) -> Option<Response> {
    let json: Value = serde_json::from_str(line).ok()?;
    let revision = json["Header"]["revision"].as_i64()?;
    let marker = format!("{PREFIX}desired-commit");
    let events = json["Events"].as_array()?.iter().map(|e| {
        let key = e["kv"]["key"].as_str().unwrap_or_default();
        let value = e["kv"]["value"].as_str().unwrap_or_default();
        let is_marker = key == base64_of(&marker) && e["type"].as_i64().unwrap_or(0) == 0;
        (decoded_len(key), decoded_len(value), is_marker)
    });
    Some(Response {
        revision,
        events: events.collect(),
    })
}

/// What has been written since the last marker.
#[derive(Debug, Default)]
struct Open {
    keys: usize,
    bytes: u64,
}

impl Open {
    /// Adds a response; the whole commit once its marker is in it.
    fn add(&mut self, r: &Response, now: Instant) -> Option<Commit> {
        self.keys += r.events.len();
        self.bytes += r.events.iter().map(|(k, v, _)| k + v).sum::<u64>();
        if !r.events.iter().any(|e| e.2) {
            return None;
        }
        let commit = Commit {
            seen: now,
            revision: r.revision,
            keys: self.keys,
            bytes: self.bytes,
        };
        *self = Open::default();
        Some(commit)
    }
}

/// The length of what standard base64 `s` decodes to.
fn decoded_len(s: &str) -> u64 {
    let pad = s.bytes().rev().take_while(|&b| b == b'=').count();
    (s.len() / 4 * 3).saturating_sub(pad) as u64
}

fn base64_of(text: &str) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            let c = if i <= chunk.len() {
                ABC[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            };
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUT: &str = r#"{"Header":{"revision":2},"Events":[{"kv":{"key":"L3BvcnRpY28vZGVzaXJlZC9h","mod_revision":2,"value":"aGVsbG8="}},{"kv":{"key":"L3BvcnRpY28vZGVzaXJlZC1jb21taXQ=","value":"MQ=="}}]}"#;
    const DELETE: &str = r#"{"Header":{"revision":3},"Events":[{"type":1,"kv":{"key":"L3BvcnRpY28vZGVzaXJlZC9h"}}]}"#;

    #[test]
    fn base64_matches_what_etcdctl_prints() {
        assert_eq!(
            base64_of("/portico/desired-commit"),
            "L3BvcnRpY28vZGVzaXJlZC1jb21taXQ="
        );
        assert_eq!(decoded_len("aGVsbG8="), 5);
        assert_eq!(decoded_len("MQ=="), 1);
    }

    #[test]
    fn a_commit_closes_at_its_marker_and_counts_keys_and_values() {
        let mut open = Open::default();
        let now = Instant::now();
        assert_eq!(open.add(&parse(DELETE).unwrap(), now), None);
        let commit = open.add(&parse(PUT).unwrap(), now).unwrap();
        // "/portico/desired/a" (18) three times, "hello" (5), the marker (23 + 1).
        assert_eq!(
            (commit.revision, commit.keys, commit.bytes),
            (2, 3, 18 * 2 + 5 + 24)
        );
        assert_eq!(open.keys, 0);
    }
}
