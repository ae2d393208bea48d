//! What the load balancers' tasks report: serving or not, and the last problem, turned into
//! the provider's status (diagnostics on each load balancer's IngressClass).

use portico_model::{Diagnostic, LoadBalancerId, ObjectRef};
use portico_provider::Status;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;

#[derive(Debug, Clone)]
struct Entry {
    /// Which reporter owns the entry: a load balancer removed and added again gets a new one.
    token: u64,
    object: ObjectRef,
    serving: bool,
    problem: Option<String>,
}

/// Every load balancer's entry, and a counter that changes with them.
#[derive(Debug)]
pub(crate) struct Statuses {
    entries: Mutex<BTreeMap<LoadBalancerId, Entry>>,
    tokens: std::sync::atomic::AtomicU64,
    changed: watch::Sender<u64>,
}

impl Statuses {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Statuses {
            entries: Mutex::new(BTreeMap::new()),
            tokens: std::sync::atomic::AtomicU64::new(0),
            changed: watch::channel(0).0,
        })
    }

    pub(crate) fn reporter(self: &Arc<Self>, id: LoadBalancerId, object: ObjectRef) -> Reporter {
        let token = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = Entry {
            token,
            object,
            serving: false,
            problem: None,
        };
        self.update(|entries| {
            entries.insert(id, entry);
        });
        Reporter {
            id,
            token,
            statuses: self.clone(),
        }
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Ready once every load balancer serves; a diagnostic per problem.
    pub(crate) fn status(&self) -> Status {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let ready = entries.values().all(|e| e.serving);
        let diagnostics = entries
            .iter()
            .filter_map(|(id, e)| {
                let problem = e.problem.as_ref()?;
                let message = format!("load balancer {id} (haproxy): {problem}");
                Some(Diagnostic::error(e.object.clone(), "", message))
            })
            .collect();
        Status { ready, diagnostics }
    }

    fn update(&self, f: impl FnOnce(&mut BTreeMap<LoadBalancerId, Entry>)) {
        f(&mut self.entries.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.send_modify(|n| *n += 1);
    }
}

/// One load balancer's way to report.
#[derive(Debug, Clone)]
pub(crate) struct Reporter {
    id: LoadBalancerId,
    token: u64,
    statuses: Arc<Statuses>,
}

impl Reporter {
    pub(crate) fn set(&self, serving: bool, problem: Option<String>) {
        self.statuses.update(|entries| {
            if let Some(e) = entries.get_mut(&self.id).filter(|e| e.token == self.token) {
                e.serving = serving;
                e.problem = problem;
            }
        });
    }

    pub(crate) fn remove(&self) {
        self.statuses.update(|entries| {
            if entries.get(&self.id).is_some_and(|e| e.token == self.token) {
                entries.remove(&self.id);
            }
        });
    }
}
