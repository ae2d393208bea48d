//! The seam between computing and applying: objects → desired state (the model with its
//! addresses assigned, the certificate material it names) plus what the translation found
//! (Ingress states, diagnostics). `run`, `controller`, `validate` and `render` all compile
//! through here; no I/O happens in it.
//!
//! A [`Compiler`] keeps what the last compile prepared, so the next one is incremental: only
//! endpoints changed → the touched pools get new members and the desired state says so
//! ([`Delta::Members`]); otherwise an incremental translation.

use crate::tls::CertificateStage;
use portico_model::LoadBalancerId;
use portico_model::{Diagnostic, Model};
use portico_store::{Delta, Desired};
use portico_translate::{
    Allocations, Config, Loaded, Memo, Previous, Selector, Translation, agent_selectors,
    translate_incremental,
};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One compile's result.
#[derive(Debug)]
pub struct Compiled {
    /// What providers are to serve (its revision is the store's to set).
    pub desired: Desired,
    /// The objects compiled.
    pub loaded: Arc<Loaded>,
    /// The translation's Ingress states and diagnostics (its model is `desired.model`).
    pub translation: Translation,
    /// The agents' labels each load balancer needs (`portico.dev/agent-selector`).
    pub selectors: BTreeMap<LoadBalancerId, Selector>,
    /// Which translation `translation` is: a new number for each, kept by an endpoint change
    /// (whose translation is the previous one).
    pub translation_id: u64,
}

impl Compiled {
    /// Every diagnostic: the source's, the translation's, the certificates' and the VIPs'.
    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.loaded
            .diagnostics
            .iter()
            .chain(&self.translation.diagnostics)
    }
}

/// Compiles one load after another, reusing what the previous compile prepared.
#[derive(Debug)]
pub struct Compiler {
    config: Config,
    certificates: CertificateStage,
    memo: Memo,
    /// The addresses handed out by the last compile: the next one keeps them.
    allocations: Allocations,
    /// Translations made so far.
    translations: u64,
}

impl Compiler {
    pub fn new(config: Config) -> Self {
        Compiler {
            config,
            certificates: CertificateStage::default(),
            memo: Memo::default(),
            allocations: Allocations::new(),
            translations: 0,
        }
    }

    /// Takes `allocations` (read from the store: what the last leader handed out) as the
    /// previous ones; the next compile keeps them where they still fit.
    pub fn seed(&mut self, allocations: Allocations) {
        self.allocations = allocations;
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Compiles `loaded`; `previous` is the last compile's result, whose load is handed back
    /// (second value) for its owner to free.
    pub fn compile(
        &mut self,
        loaded: Arc<Loaded>,
        previous: Option<Compiled>,
    ) -> (Compiled, Option<Arc<Loaded>>) {
        if let Some(previous) = previous {
            match endpoints_only(&previous, &loaded) {
                Some((model, pools)) => {
                    let desired = Desired {
                        model: Arc::new(model),
                        certificates: previous.desired.certificates,
                        ca_bundles: previous.desired.ca_bundles,
                        credentials: previous.desired.credentials,
                        delta: Delta::Members(pools),
                        ..Desired::default()
                    };
                    let compiled = Compiled {
                        desired,
                        loaded,
                        translation: previous.translation,
                        selectors: previous.selectors,
                        translation_id: previous.translation_id,
                    };
                    return (compiled, Some(previous.loaded));
                }
                None => {
                    let retired = previous.loaded.clone();
                    return (self.translate(loaded, Some(previous)), Some(retired));
                }
            }
        }
        (self.translate(loaded, None), None)
    }

    /// The general path: translate (reusing what `previous` prepared where its inputs did not
    /// change), assign VIPs and floating IPs, load the certificates the model names.
    fn translate(&mut self, loaded: Arc<Loaded>, previous: Option<Compiled>) -> Compiled {
        let started = Instant::now();
        let config = &self.config;
        let mut translation = match &previous {
            Some(p) => {
                let previous = Previous {
                    objects: &p.loaded.objects,
                    model: &p.desired.model,
                };
                translate_incremental(&loaded.objects, config, Some(previous), &mut self.memo)
            }
            None => {
                self.memo = Memo::default();
                translate_incremental(&loaded.objects, config, None, &mut self.memo)
            }
        };
        let translated = started.elapsed();
        drop(previous);
        let dropped = started.elapsed();
        let objects = &loaded.objects;
        let vips = portico_translate::assign_vips(&mut translation.model, objects, config);
        translation.diagnostics.extend(vips);
        let previous = &self.allocations;
        let (allocations, problems) =
            portico_translate::assign_addresses(&mut translation.model, objects, config, previous);
        self.allocations = allocations;
        translation.diagnostics.extend(problems);
        let collisions = portico_translate::l4_collisions(&mut translation.model, objects);
        translation.diagnostics.extend(collisions);
        let (selectors, problems) = agent_selectors(&translation.model, objects);
        translation.diagnostics.extend(problems);
        let addressed = started.elapsed();
        let (certificates, ca_bundles, credentials) =
            self.certificates.apply(objects, &mut translation, config);
        tracing::debug!(
            translate_ms = ms(translated),
            drop_previous_ms = ms(dropped - translated),
            addresses_ms = ms(addressed - dropped),
            certificates_ms = ms(started.elapsed() - addressed),
            "compile steps"
        );
        let model = Arc::new(std::mem::take(&mut translation.model));
        let desired = Desired {
            model,
            certificates,
            ca_bundles,
            credentials,
            rebuilt: self.memo.rebuilt().clone(),
            ..Desired::default()
        };
        self.translations += 1;
        Compiled {
            desired,
            loaded,
            translation,
            selectors,
            translation_id: self.translations,
        }
    }
}

/// When only endpoints changed: the model with the touched pools' new members, and those
/// pools.
fn endpoints_only(
    previous: &Compiled,
    loaded: &Loaded,
) -> Option<(Model, HashSet<portico_model::PoolId>)> {
    let services =
        portico_translate::endpoint_only_change(&previous.loaded.objects, &loaded.objects)?;
    let mut model = Model::clone(&previous.desired.model);
    let changed = portico_translate::refresh_members(&mut model, &loaded.objects, &services);
    Some((model, changed.into_iter().collect()))
}

/// Compiles `loaded` once, from nothing (`validate`, `render`).
pub fn compile_once(loaded: Arc<Loaded>, config: &Config) -> Compiled {
    Compiler::new(config.clone()).compile(loaded, None).0
}

/// A duration in milliseconds, for the timing logs.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
