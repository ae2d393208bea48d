//! The memory store of the all-in-one process: the controller's writes are handed to the
//! agent in the same process as they are, without encoding. Its claims are a map under the
//! watch's lock, changed only by compare-and-swap on a revision of its own: the active-standby
//! loops of several agents run over one store in a test as they do over etcd.

use crate::contract::{
    AgentStore, Agents, ClaimName, ClaimStore, ClaimSwap, Claims, ControllerStore, StoreHealth,
    Stored,
};
use crate::kv::Entry;
use crate::{Desired, Feedback};
use bytes::Bytes;
use portico_model::LoadBalancerId;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use tokio::sync::watch;

/// One writer, many readers; every write is a new revision. Cloning gives another handle on
/// the same store.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    desired: watch::Sender<Arc<Desired>>,
    feedback: watch::Sender<Agents>,
    /// Always true: the one controller of the process leads.
    leading: watch::Sender<bool>,
    /// Empty in one process (no active-standby); written by [`ClaimStore::swap`].
    claims: watch::Sender<Claims>,
    /// The last name given to a process's claims.
    names: Arc<AtomicI64>,
    /// Connected, unless this handle's link was cut ([`MemoryStore::set_reachable`]).
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
            // Listed from the start: there is nothing to wait for.
            claims: watch::Sender::new(Claims {
                revision: 1,
                ..Claims::default()
            }),
            names: Arc::default(),
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

    /// Another handle on the same store with a link of its own, which
    /// [`MemoryStore::set_reachable`] cuts without cutting the others' (an agent apart from
    /// the store, in tests of active-standby).
    pub fn with_own_link(&self) -> MemoryStore {
        MemoryStore {
            health: watch::Sender::new(StoreHealth::default()),
            ..self.clone()
        }
    }

    /// Cuts (false) or restores this handle's link: while cut, its health says so and its
    /// claim swaps answer [`ClaimSwap::Unreachable`].
    pub fn set_reachable(&self, reachable: bool) {
        self.health.send_replace(StoreHealth {
            connected: reachable,
            detail: if reachable { "" } else { "the link is cut" }.to_owned(),
        });
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

    fn claims(&self) -> watch::Receiver<Claims> {
        self.claims.subscribe()
    }

    async fn resign(&mut self) {}
}

impl ClaimStore for MemoryStore {
    type Error = std::convert::Infallible;

    async fn name(&self) -> Result<ClaimName, Self::Error> {
        Ok(ClaimName::new(
            self.names.fetch_add(1, Ordering::SeqCst) + 1,
            None,
        ))
    }

    async fn adopt(&self, id: i64) -> Result<Option<ClaimName>, Self::Error> {
        let given = (1..=self.names.load(Ordering::SeqCst)).contains(&id);
        Ok(given.then(|| ClaimName::new(id, None)))
    }

    fn claims(&self) -> watch::Receiver<Claims> {
        self.claims.subscribe()
    }

    fn health(&self) -> watch::Receiver<StoreHealth> {
        self.health.subscribe()
    }

    fn agents(&self) -> watch::Receiver<Agents> {
        self.feedback()
    }

    async fn swap(self, lb: LoadBalancerId, expect: i64, value: Bytes) -> ClaimSwap {
        let health = self.health.borrow().clone();
        if !health.connected {
            return ClaimSwap::Unreachable(health.detail);
        }
        let mut outcome = ClaimSwap::Unreachable(String::new());
        self.claims.send_if_modified(|claims| {
            let current = claims.entries.get(&lb);
            if current.map_or(0, |e| e.mod_revision) != expect {
                outcome = ClaimSwap::Lost(current.cloned());
                return false;
            }
            let revision = claims.revision + 1;
            let entry = Entry {
                value,
                mod_revision: revision,
            };
            Arc::make_mut(&mut claims.entries).insert(lb, entry);
            claims.revision = revision;
            outcome = ClaimSwap::Done(revision);
            true
        });
        outcome
    }
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
        let mut agents = ControllerStore::agents(&store);
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
        assert!(ControllerStore::claims(&store).borrow().entries.is_empty());
    }

    #[tokio::test]
    async fn a_claim_is_swapped_only_from_the_revision_it_was_seen_at() {
        let store = MemoryStore::default();
        let lb = LoadBalancerId::derive("lb");
        let mut claims = ClaimStore::claims(&store);
        let first = store.clone().swap(lb, 0, Bytes::from("a")).await;
        let ClaimSwap::Done(revision) = first else {
            panic!("creating an absent claim from 0 wins: {first:?}")
        };
        assert!(claims.has_changed().unwrap());
        assert_eq!(claims.borrow_and_update().entries[&lb].value, "a");
        // A second create from 0 loses and reads the first.
        let second = store.clone().swap(lb, 0, Bytes::from("b")).await;
        let winner = Entry {
            value: Bytes::from("a"),
            mod_revision: revision,
        };
        assert_eq!(second, ClaimSwap::Lost(Some(winner)));
        assert!(
            !claims.has_changed().unwrap(),
            "a lost swap changes nothing"
        );
        // Racers from the same revision: exactly one wins.
        let racers = (0..8).map(|i| {
            let value = Bytes::from(format!("r{i}"));
            tokio::spawn(store.clone().swap(lb, revision, value))
        });
        let mut won = 0;
        for racer in racers {
            won += usize::from(matches!(racer.await.unwrap(), ClaimSwap::Done(_)));
        }
        assert_eq!(won, 1);
        // A handle whose link is cut swaps nothing; the others still do.
        let apart = store.with_own_link();
        apart.set_reachable(false);
        assert!(!ClaimStore::health(&apart).borrow().connected);
        assert!(ClaimStore::health(&store).borrow().connected);
        let now = ClaimStore::claims(&store).borrow().entries[&lb].mod_revision;
        let cut = apart.clone().swap(lb, now, Bytes::from("c")).await;
        assert!(matches!(cut, ClaimSwap::Unreachable(_)), "{cut:?}");
        assert!(matches!(
            store.swap(lb, now, Bytes::from("d")).await,
            ClaimSwap::Done(_)
        ));
    }

    #[tokio::test]
    async fn names_are_new_and_only_a_given_one_is_adopted() {
        let store = MemoryStore::default();
        let one = store.name().await.unwrap();
        let two = store.name().await.unwrap();
        assert_ne!(one.id(), two.id());
        let adopted = store.adopt(one.id()).await.unwrap();
        assert_eq!(adopted.map(|n| n.id()), Some(one.id()));
        assert!(store.adopt(two.id() + 1).await.unwrap().is_none());
    }
}
