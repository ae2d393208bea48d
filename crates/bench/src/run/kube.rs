//! Kubernetes mode: the fake API server's example binary (`fake-apiserver`, from
//! `crates/fake-apiserver/examples`) as a process of its own, loaded with the generated
//! manifests; changes reach it as `apply FILE` commands on its stdin, as `kubectl apply -f`
//! would send them.

use crate::process;
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

const LOAD_TIMEOUT: Duration = Duration::from_secs(300);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct FakeApi {
    child: Mutex<Child>,
    io: Mutex<(ChildStdin, Lines<BufReader<ChildStdout>>)>,
    pub kubeconfig: PathBuf,
    /// How many objects it was loaded with.
    pub objects: usize,
}

impl FakeApi {
    /// Starts `bin KUBECONFIG MANIFESTS` and waits until it has stored every object.
    pub async fn start(bin: &Path, dir: &Path, manifests: &Path) -> anyhow::Result<Self> {
        let kubeconfig = dir.join("kubeconfig");
        let log = std::fs::File::create(dir.join("fake-apiserver.log"))?;
        let mut child = Command::new(bin)
            .arg(&kubeconfig)
            .arg(manifests)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdin = child.stdin.take().context("no stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let first = tokio::time::timeout(LOAD_TIMEOUT, lines.next_line())
            .await
            .context("the fake API server did not load the manifests in time")??
            .context("the fake API server exited while loading")?;
        let objects = first
            .strip_prefix("ready ")
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("unexpected first line: {first}"))?;
        Ok(FakeApi {
            child: Mutex::new(child),
            io: Mutex::new((stdin, lines)),
            kubeconfig,
            objects,
        })
    }

    /// Creates or replaces every object of `file`; how many.
    pub async fn apply(&self, file: &Path) -> anyhow::Result<usize> {
        let answer = self.command(&format!("apply {}", file.display())).await?;
        answer
            .strip_prefix("applied ")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("apply {}: {answer}", file.display()))
    }

    /// Deletes every generated object; how many.
    pub async fn delete_all(&self) -> anyhow::Result<usize> {
        let answer = self.command("delete-all").await?;
        answer
            .strip_prefix("deleted ")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("delete-all: {answer}"))
    }

    /// The HTTPRoutes it holds with a status written (a parent entry), and in all.
    pub async fn routes_with_status(&self) -> anyhow::Result<(usize, usize)> {
        let answer = self.command("route-status").await?;
        let counts = answer.strip_prefix("routes ").and_then(|rest| {
            let (with, all) = rest.split_once(' ')?;
            Some((with.parse().ok()?, all.parse().ok()?))
        });
        counts.with_context(|| format!("route-status: {answer}"))
    }

    async fn command(&self, line: &str) -> anyhow::Result<String> {
        let mut io = self.io.lock().await;
        let (stdin, lines) = &mut *io;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        match tokio::time::timeout(COMMAND_TIMEOUT, lines.next_line()).await {
            Ok(Ok(Some(answer))) => Ok(answer),
            Ok(Ok(None)) => bail!("the fake API server exited"),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => bail!("the fake API server did not answer {line:?} in time"),
        }
    }

    pub async fn stop(self) {
        process::stop(&mut *self.child.lock().await).await;
    }
}
