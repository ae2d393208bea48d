//! The registry: providers by type, each handed the load balancers of its type.

use crate::{CaBundles, Certificates, Credentials, Provider};
use portico_model::{Diagnostic, LoadBalancer, Model, PoolId};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

/// Providers by type.
#[derive(Default)]
pub struct Registry {
    providers: BTreeMap<&'static str, Arc<dyn Provider>>,
    generation: AtomicU64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<_> = self.providers.keys().collect();
        f.debug_struct("Registry")
            .field("providers", &kinds)
            .finish()
    }
}

/// The result of one apply: the configuration generation and the problems found at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub generation: u64,
    pub diagnostics: Vec<Diagnostic>,
}

/// The load balancers of `model` that provider type `kind` serves: each provider is handed
/// its own, so no data plane looks at provider names. When they are all its own (one provider
/// type serves everything, the common case) the model is handed on without a copy.
fn own<'a>(model: &'a Model, kind: &str) -> Cow<'a, Model> {
    let mine = |lb: &&LoadBalancer| lb.provider == kind;
    if model.load_balancers.iter().all(|lb| mine(&lb)) {
        return Cow::Borrowed(model);
    }
    Cow::Owned(Model {
        load_balancers: model.load_balancers.iter().filter(mine).cloned().collect(),
    })
}

impl Registry {
    /// Registers `provider` under its type; a second provider of the same type replaces the first.
    pub fn register(&mut self, provider: Arc<dyn Provider>) {
        self.providers.insert(provider.kind(), provider);
    }

    /// The registered provider types, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.providers.keys().copied().collect()
    }

    /// Hands `model` to every provider; a load balancer whose provider type is not registered
    /// is not served and gets an error on its IngressClass. Each provider is handed
    /// `credentials` first ([`Provider::set_credentials`]).
    pub fn apply(
        &self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
        credentials: &Credentials,
    ) -> Applied {
        let mut diagnostics = self.unknown(model);
        for provider in self.providers.values() {
            provider.set_credentials(credentials);
            diagnostics.extend(provider.apply(
                &own(model, provider.kind()),
                certificates,
                ca_bundles,
            ));
        }
        diagnostics.sort();
        diagnostics.dedup();
        Applied {
            generation: self.next_generation(),
            diagnostics,
        }
    }

    /// Only the members of `pools` changed: each provider updates them in place.
    pub fn update_members(&self, model: &Model, pools: &HashSet<PoolId>) -> u64 {
        for provider in self.providers.values() {
            let kind = provider.kind();
            // A provider none of whose load balancers has a changed pool has nothing to do.
            let touched = (model.load_balancers.iter())
                .any(|lb| lb.provider == kind && lb.pools.iter().any(|p| pools.contains(&p.id)));
            if touched {
                provider.update_members(&own(model, kind), pools);
            }
        }
        self.next_generation()
    }

    /// True when every provider serves its first configuration.
    pub fn ready(&self) -> bool {
        self.providers.values().all(|p| p.status().ready)
    }

    /// The problems the providers found since their last apply, sorted.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut all: Vec<Diagnostic> = self
            .providers
            .values()
            .flat_map(|p| p.status().diagnostics)
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Receivers that change when a provider's status may have changed.
    pub fn subscribe(&self) -> Vec<watch::Receiver<u64>> {
        self.providers
            .values()
            .filter_map(|p| p.subscribe())
            .collect()
    }

    fn unknown(&self, model: &Model) -> Vec<Diagnostic> {
        let known = self.kinds().join(", ");
        let unknown = model
            .load_balancers
            .iter()
            .filter(|lb| !self.providers.contains_key(lb.provider.as_str()));
        unknown
            .map(|lb| {
                let class = lb.origin.clone();
                let message = format!(
                    "provider \"{}\" is not known (known: {known}); load balancer {} is not served",
                    lb.provider, lb.id
                );
                Diagnostic::error(class, "metadata.annotations[portico.dev/provider]", message)
            })
            .collect()
    }

    fn next_generation(&self) -> u64 {
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use portico_model::{LoadBalancer, LoadBalancerId, ObjectRef};
    use std::sync::Mutex;

    /// Records the load balancers it was given.
    #[derive(Default)]
    struct Recorder {
        served: Mutex<Vec<String>>,
        members: Mutex<usize>,
    }

    impl Provider for Recorder {
        fn kind(&self) -> &'static str {
            "test"
        }
        fn apply(&self, model: &Model, _: &Certificates, _: &CaBundles) -> Vec<Diagnostic> {
            let given = model.load_balancers.iter();
            *self.served.lock().unwrap() = given.map(|lb| lb.name.clone()).collect();
            vec![]
        }
        fn update_members(&self, _: &Model, pools: &HashSet<PoolId>) {
            *self.members.lock().unwrap() += pools.len();
        }
        fn status(&self) -> Status {
            Status {
                ready: false,
                diagnostics: vec![],
            }
        }
    }

    fn lb(name: &str, provider: &str) -> LoadBalancer {
        LoadBalancer {
            id: LoadBalancerId::derive(name),
            name: name.into(),
            origin: ObjectRef::new("IngressClass", "", name),
            provider: provider.into(),
            vip: None,
            floating_ip: None,
            listeners: Arc::new(vec![]),
            pools: vec![],
        }
    }

    #[test]
    fn each_provider_sees_the_model_and_unknown_types_are_reported_on_the_class() {
        let recorder = Arc::new(Recorder::default());
        let mut registry = Registry::default();
        registry.register(recorder.clone());
        let model = Model {
            load_balancers: vec![lb("a", "test"), lb("b", "nginx")],
        };
        let applied = registry.apply(
            &model,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        );
        assert_eq!(*recorder.served.lock().unwrap(), ["a"]);
        assert_eq!(applied.generation, 1);
        assert_eq!(applied.diagnostics.len(), 1);
        let d = &applied.diagnostics[0];
        assert_eq!(d.object, ObjectRef::new("IngressClass", "", "b"));
        assert!(
            d.message.contains("\"nginx\" is not known (known: test)"),
            "{d}"
        );
        assert!(!registry.ready());
        // A changed pool of another provider's load balancer: nothing to update.
        let (mut model, p) = (model, PoolId::derive("p"));
        model.load_balancers[1].pools.push(Arc::new(pool(p)));
        let pools = HashSet::from([p]);
        assert_eq!(registry.update_members(&model, &pools), 2);
        assert_eq!(*recorder.members.lock().unwrap(), 0);
        // One of its own.
        model.load_balancers[0].pools.push(Arc::new(pool(p)));
        assert_eq!(registry.update_members(&model, &pools), 3);
        assert_eq!(*recorder.members.lock().unwrap(), 1);
    }

    fn pool(id: PoolId) -> portico_model::Pool {
        portico_model::Pool {
            id,
            name: "default_web_80".into(),
            service: ObjectRef::new("Service", "default", "web"),
            service_port: "80".into(),
            algorithm: Default::default(),
            protocol: Default::default(),
            settings: Default::default(),
            members: vec![],
        }
    }
}
