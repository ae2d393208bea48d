//! The controller's side of the etcd store: the campaign for leadership (again after a loss),
//! the leader's commits of what changed since its last write (read from etcd once per
//! leadership, and again after a failed commit), and the mirrors of the agents' feedback and
//! claims.

use crate::connect::RETRY;
use crate::{Etcd, EtcdError, HA, Leadership};
use portico_store::codec;
use portico_store::kv::{Op, View};
use portico_store::{Agents, Claims, ControllerStore, Desired, Feedback, Stored};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The controllers' leader lease.
const LEADER_TTL: Duration = Duration::from_secs(5);

/// What the encoder knows of the stored `desired/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Synced {
    /// Nothing: the next write reads the store first.
    No,
    /// Read under this lease, not written yet: the next write commits even nothing, so that
    /// agents see a first state (maybe empty).
    Read(i64),
    /// Read or written under this lease.
    Yes(i64),
}

/// The etcd store as a controller sees it. Campaigns from the start; stopped when dropped.
#[derive(Debug)]
pub struct EtcdController {
    etcd: Etcd,
    /// The leadership while this controller leads (set by the campaign task).
    current: Arc<watch::Sender<Option<Arc<Leadership>>>>,
    leading: watch::Receiver<bool>,
    agents: watch::Receiver<Agents>,
    claims: watch::Receiver<Claims>,
    synced: Synced,
    /// Encodes only what changed since the last write, as the changes to commit.
    encoder: codec::Encoder,
    tasks: Vec<JoinHandle<()>>,
    /// Keeps the mirrors running.
    _mirrors: (crate::Mirror, crate::Mirror),
}

impl EtcdController {
    /// Starts campaigning as `identity` and mirroring the agents and their claims.
    pub fn start(etcd: Etcd, identity: String) -> EtcdController {
        let current = Arc::new(watch::Sender::new(None));
        let (leading_tx, leading) = watch::channel(false);
        let campaign = tokio::spawn(lead(etcd.clone(), identity, current.clone(), leading_tx));
        let agents_mirror = etcd.mirror(codec::AGENTS);
        let claims_mirror = etcd.mirror(HA);
        let (agents_tx, agents) = watch::channel(Agents::default());
        let follow = tokio::spawn(follow_agents(agents_mirror.views(), agents_tx));
        let (claims_tx, claims) = watch::channel(Claims::default());
        let decode = tokio::spawn(crate::claims::follow_claims(
            claims_mirror.views(),
            claims_tx,
        ));
        EtcdController {
            claims,
            etcd,
            current,
            leading,
            agents,
            synced: Synced::No,
            encoder: codec::Encoder::default(),
            tasks: vec![campaign, follow, decode],
            _mirrors: (agents_mirror, claims_mirror),
        }
    }

    /// Takes `view` (what the store holds under `desired/`) as what the encoder wrote.
    fn assume(&mut self, view: &View) {
        let stored = view.entries.iter();
        (self.encoder).assume(stored.map(|(k, e)| (k.clone(), e.value.clone())).collect());
    }
}

impl Drop for EtcdController {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Campaigns until elected, leads until the leadership is lost, and again.
async fn lead(
    etcd: Etcd,
    identity: String,
    current: Arc<watch::Sender<Option<Arc<Leadership>>>>,
    leading: watch::Sender<bool>,
) {
    loop {
        let leadership = loop {
            match etcd.campaign(&identity, LEADER_TTL).await {
                Ok(l) => break l,
                Err(e) => {
                    tracing::warn!("campaign for leadership failed: {e}");
                    tokio::time::sleep(RETRY).await;
                }
            }
        };
        tracing::info!(identity = %identity, "leading: this controller writes the desired state");
        let mut lost = leadership.lost();
        current.send_replace(Some(Arc::new(leadership)));
        leading.send_replace(true);
        let _ = lost.wait_for(|lost| *lost).await;
        tracing::warn!("leadership lost: this controller stops writing");
        current.send_replace(None);
        leading.send_replace(false);
    }
}

/// Decodes every view of `agents/` into `agents`.
pub(crate) async fn follow_agents(mut views: watch::Receiver<View>, agents: watch::Sender<Agents>) {
    loop {
        let view = views.borrow_and_update().clone();
        agents.send_replace(Agents {
            listed: view.revision > 0,
            feedback: feedback_of(&view),
        });
        if views.changed().await.is_err() {
            return;
        }
    }
}

/// The agents' feedback by node; an unreadable value is skipped with a warning.
fn feedback_of(view: &View) -> BTreeMap<String, Feedback> {
    let mut out = BTreeMap::new();
    for (key, entry) in view.entries.iter() {
        let Some(node) = key.strip_prefix(codec::AGENTS) else {
            continue;
        };
        match serde_json::from_slice::<Feedback>(&entry.value) {
            Ok(f) => {
                out.insert(node.to_owned(), f);
            }
            Err(e) => tracing::warn!(key, "unreadable agent feedback: {e}"),
        }
    }
    out
}

impl ControllerStore for EtcdController {
    type Error = EtcdError;

    fn agents_apart(&self) -> bool {
        true
    }

    fn feedback_follows_writes(&self) -> bool {
        false
    }

    fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    async fn stored(&mut self) -> Result<Stored, EtcdError> {
        let lease = self.current.borrow().as_ref().map(|l| l.lease_id());
        let view = self.etcd.read_desired().await?;
        if let Some(lease) = lease {
            self.assume(&view);
            self.synced = Synced::Read(lease);
        }
        let (placements, problems) = codec::decode_placements(&view);
        for d in problems {
            tracing::warn!(diagnostic = %d, "unreadable placement");
        }
        Ok(Stored {
            addresses: codec::addresses(&view),
            placements,
        })
    }

    async fn write(&mut self, desired: &Desired) -> Result<Option<u64>, EtcdError> {
        let Some(leadership) = self.current.borrow().clone() else {
            return Ok(None);
        };
        let lease = leadership.lease_id();
        let first = match self.synced {
            Synced::Yes(l) if l == lease => false,
            Synced::Read(l) if l == lease => true,
            _ => {
                let view = self.etcd.read_desired().await?;
                self.assume(&view);
                true
            }
        };
        let placements = codec::encode_placements(&desired.placements);
        let ops = self.encoder.desired_changes(desired, placements);
        // From here on the encoder takes its encoding as what the store holds; if the commit
        // fails, the next write reads the store again.
        self.synced = Synced::No;
        // A new leader commits even nothing, so that agents see a first state (maybe empty).
        if ops.is_empty() && !first {
            self.synced = Synced::Yes(lease);
            return Ok(None);
        }
        let bytes: usize = ops
            .iter()
            .map(|op| match op {
                Op::Put { key, value } => key.len() + value.len(),
                Op::Delete { key } => key.len(),
            })
            .sum();
        let count = ops.len();
        let hashed = self.encoder.hashed();
        let revision = self.etcd.commit(&leadership, ops).await?;
        tracing::info!(
            revision,
            keys = count,
            bytes,
            hashed,
            "desired state written to etcd"
        );
        self.synced = Synced::Yes(lease);
        Ok(Some(u64::try_from(revision).unwrap_or(0)))
    }

    fn agents(&self) -> watch::Receiver<Agents> {
        self.agents.clone()
    }

    fn claims(&self) -> watch::Receiver<Claims> {
        self.claims.clone()
    }

    async fn resign(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        // Only the channel holds the leadership (a write holds it only while it runs).
        let current = self.current.send_replace(None);
        if let Some(l) = current.and_then(|l| Arc::try_unwrap(l).ok()) {
            let _ = l.resign().await;
        }
    }
}
