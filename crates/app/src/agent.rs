//! The agent's loop (the vRouter agent's role): the store's desired state → the providers on
//! this node, and what they serve back to the store as feedback.

use portico_model::{Diagnostic, LoadBalancerId};
use portico_provider::Registry;
use portico_store::{AgentStore, Delta, Desired, Feedback};
use std::sync::Arc;
use tokio::sync::watch;

pub use portico_store::StoreHealth;

/// Applies desired states to the providers and tells what they serve.
pub struct Agent {
    node: String,
    registry: Arc<Registry>,
    /// What was last applied, and the problems found then.
    served: Option<(Arc<Desired>, Vec<Diagnostic>)>,
}

impl Agent {
    pub fn new(node: String, registry: Arc<Registry>) -> Self {
        Agent {
            node,
            registry,
            served: None,
        }
    }

    /// Serves `desired`: only the members of its delta's pools when that is all that changed
    /// since the last state served, else the whole state.
    pub fn apply(&mut self, desired: Arc<Desired>) {
        let model = &desired.model;
        let found = match (&desired.delta, &self.served) {
            (Delta::Members(pools), Some((_, found))) => {
                self.registry.update_members(model, pools);
                found.clone()
            }
            _ => {
                self.registry
                    .apply(
                        model,
                        &desired.certificates,
                        &desired.ca_bundles,
                        &desired.credentials,
                    )
                    .diagnostics
            }
        };
        tracing::info!(
            revision = desired.revision,
            load_balancers = model.load_balancers.len(),
            "desired state applied"
        );
        self.served = Some((desired, found));
    }

    /// The state served now, if any.
    pub fn desired(&self) -> Option<&Arc<Desired>> {
        self.served.as_ref().map(|(d, _)| d)
    }

    /// What the agent serves now.
    pub fn feedback(&self, health: &StoreHealth) -> Feedback {
        let ready = self.registry.ready() && self.served.is_some();
        let kinds = self.registry.kinds();
        let mut diagnostics = self.registry.diagnostics();
        let mut served: Vec<LoadBalancerId> = vec![];
        let mut revision = 0;
        if let Some((desired, found)) = &self.served {
            revision = desired.revision;
            diagnostics.extend(found.iter().cloned());
            diagnostics.extend(desired.diagnostics.iter().cloned());
            let mine = desired.model.load_balancers.iter();
            let mine = mine.filter(|lb| kinds.contains(&lb.provider.as_str()));
            served = if ready {
                mine.map(|lb| lb.id).collect()
            } else {
                vec![]
            };
        }
        diagnostics.sort();
        diagnostics.dedup();
        Feedback {
            node: self.node.clone(),
            revision,
            ready,
            store_connected: health.connected,
            served,
            diagnostics,
            // The agent's registration (zone, labels, address) is set by its process.
            ..Feedback::default()
        }
    }
}

/// The agent loop, one for every store: serves every new desired state from `store` until
/// `shutdown`; after each apply and whenever a provider's status or the store's health
/// changes, hands the feedback to `register` (which adds what the process knows of itself)
/// and writes what it returns to the store.
pub async fn serve<S: AgentStore>(
    mut agent: Agent,
    store: &S,
    register: impl Fn(&Agent, Feedback) -> Feedback,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut desired = store.desired();
    let mut health = store.health();
    let status = status_changes(&agent.registry);
    loop {
        tokio::select! {
            changed = desired.changed() => {
                if changed.is_err() { break }
                let next = desired.borrow_and_update().clone();
                agent.apply(next);
            }
            () = status.notified() => {}
            changed = health.changed() => {
                if changed.is_err() { break }
            }
            _ = shutdown.wait_for(|s| *s) => break,
        }
        let feedback = agent.feedback(&health.borrow());
        store.report(&register(&agent, feedback));
    }
}

/// Wakes when any provider's status may have changed.
pub(crate) fn status_changes(providers: &Registry) -> Arc<tokio::sync::Notify> {
    let notify = Arc::new(tokio::sync::Notify::new());
    for mut rx in providers.subscribe() {
        let notify = notify.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                notify.notify_one();
            }
        });
    }
    notify
}
