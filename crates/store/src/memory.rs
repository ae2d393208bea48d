//! The memory store of the all-in-one process: the controller's writes are handed to the
//! agent in the same process as they are, without encoding.

use crate::contract::{AgentStore, Agents, ControllerStore, StoreHealth, Stored};
use crate::kv::View;
use crate::{Desired, Feedback};
use std::sync::Arc;
use tokio::sync::watch;

/// One writer, many readers; every write is a new revision. Cloning gives another handle on
/// the same store.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    desired: watch::Sender<Arc<Desired>>,
    feedback: watch::Sender<Agents>,
    /// Always true: the one controller of the process leads.
    leading: watch::Sender<bool>,
    /// Always empty: no active-standby in one process.
    claims: watch::Sender<View>,
    /// Always connected.
    health: watch::Sender<StoreHealth>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            desired: watch::Sender::new(Arc::new(Desired::default())),
            feedback: watch::Sender::new(Agents {
                listed: true,
                ..Agents::default()
            }),
            leading: watch::Sender::new(true),
            claims: watch::Sender::new(View::default()),
            health: watch::Sender::new(StoreHealth::default()),
        }
    }
}

impl MemoryStore {
    /// Stores `desired` as the next revision and returns that revision.
    pub fn write(&self, mut desired: Desired) -> u64 {
        let mut revision = 0;
        self.desired.send_modify(|current| {
            revision = current.revision + 1;
            desired.revision = revision;
            *current = Arc::new(std::mem::take(&mut desired));
        });
        revision
    }

    /// A receiver of every revision from now on; the current one is marked unseen unless
    /// nothing was written yet.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Desired>> {
        let mut rx = self.desired.subscribe();
        if rx.borrow().revision > 0 {
            rx.mark_changed();
        }
        rx
    }

    /// An agent's report replaces its previous one.
    pub fn report(&self, feedback: Feedback) {
        self.feedback.send_if_modified(|all| {
            let changed = all.feedback.get(&feedback.node) != Some(&feedback);
            all.feedback.insert(feedback.node.clone(), feedback);
            changed
        });
    }

    /// Every agent's latest report, by node.
    pub fn feedback(&self) -> watch::Receiver<Agents> {
        self.feedback.subscribe()
    }
}

impl ControllerStore for MemoryStore {
    type Error = std::convert::Infallible;

    fn agents_apart(&self) -> bool {
        false
    }

    fn feedback_follows_writes(&self) -> bool {
        true
    }

    fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    async fn stored(&mut self) -> Result<Stored, Self::Error> {
        Ok(Stored::default())
    }

    async fn write(&mut self, desired: &Desired) -> Result<Option<u64>, Self::Error> {
        Ok(Some(MemoryStore::write(self, desired.clone())))
    }

    fn agents(&self) -> watch::Receiver<Agents> {
        self.feedback()
    }

    fn claims(&self) -> watch::Receiver<View> {
        self.claims.subscribe()
    }

    async fn resign(&mut self) {}
}

impl AgentStore for MemoryStore {
    fn desired(&self) -> watch::Receiver<Arc<Desired>> {
        self.subscribe()
    }

    fn health(&self) -> watch::Receiver<StoreHealth> {
        self.health.subscribe()
    }

    fn report(&self, feedback: &Feedback) {
        MemoryStore::report(self, feedback.clone());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readers_see_every_write_as_a_new_revision() {
        let store = MemoryStore::default();
        let mut rx = store.subscribe();
        assert!(!rx.has_changed().unwrap());
        assert_eq!(store.write(Desired::default()), 1);
        rx.changed().await.unwrap();
        assert_eq!(rx.borrow_and_update().revision, 1);
        assert_eq!(store.write(Desired::default()), 2);
        // A reader that joins late starts from the latest revision.
        let mut late = store.subscribe();
        late.changed().await.unwrap();
        assert_eq!(late.borrow_and_update().revision, 2);
    }

    #[tokio::test]
    async fn an_unchanged_report_wakes_nobody() {
        let store = MemoryStore::default();
        let mut rx = store.feedback();
        let feedback = Feedback {
            node: "a".into(),
            ready: true,
            ..Feedback::default()
        };
        store.report(feedback.clone());
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        store.report(feedback);
        assert!(!rx.has_changed().unwrap());
    }

    #[tokio::test]
    async fn as_a_contract_it_always_leads_and_an_agents_report_reaches_the_controller() {
        let mut store = MemoryStore::default();
        assert!(*ControllerStore::leadership(&store).borrow());
        assert!(!store.agents_apart() && store.feedback_follows_writes());
        assert_eq!(store.stored().await.unwrap(), Stored::default());
        let mut desired = AgentStore::desired(&store);
        // Every write is a revision, changed or not: the one agent reports each.
        assert_eq!(
            ControllerStore::write(&mut store, &Desired::default())
                .await
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            ControllerStore::write(&mut store, &Desired::default())
                .await
                .unwrap(),
            Some(2)
        );
        desired.changed().await.unwrap();
        assert_eq!(desired.borrow_and_update().revision, 2);
        assert!(AgentStore::health(&store).borrow().connected);
        let mut agents = store.agents();
        assert!(agents.borrow_and_update().listed);
        AgentStore::report(
            &store,
            &Feedback {
                node: "local".into(),
                revision: 2,
                ..Feedback::default()
            },
        );
        agents.changed().await.unwrap();
        assert_eq!(agents.borrow().feedback["local"].revision, 2);
        assert!(store.claims().borrow().entries.is_empty());
    }
}
