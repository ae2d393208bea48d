//! The agent's admin view with each load balancer's `placement.active` the holder of its claim
//! as this agent last saw it (and `standby` the other agent of the pair): who answers for the
//! addresses now, which may differ from where the controller first placed it.

use super::HaViews;
use portico_admin::{Admin, Snapshot};
use std::sync::{Arc, Mutex, PoisonError};

/// Publishes the agent's snapshots, again whenever an election changes.
pub(crate) struct AdminView {
    admin: Arc<Admin>,
    last: Mutex<Option<Snapshot>>,
    pub(crate) ha: HaViews,
}

impl AdminView {
    pub(crate) fn new(admin: Arc<Admin>) -> Self {
        AdminView {
            admin,
            last: Mutex::new(None),
            ha: HaViews::default(),
        }
    }

    pub(crate) fn publish(&self, snapshot: Snapshot) {
        let shown = self.apply(snapshot.clone());
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(snapshot);
        self.admin.publish(shown);
    }

    /// Publishes the last snapshot again with the elections as they are now.
    pub(crate) fn refresh(&self) {
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(snapshot) = last {
            self.admin.publish(self.apply(snapshot));
        }
    }

    fn apply(&self, mut snapshot: Snapshot) -> Snapshot {
        let ha = self.ha.lock().unwrap_or_else(PoisonError::into_inner);
        if ha.is_empty() {
            return snapshot;
        }
        let placements = (*snapshot.placements).clone();
        let placements = super::as_held(placements, |id| ha.get(id).and_then(|v| v.holder.clone()));
        snapshot.placements = Arc::new(placements);
        snapshot
    }
}
