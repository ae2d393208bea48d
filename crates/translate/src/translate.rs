//! `translate(objects, config)`: the whole pipeline step from Kubernetes objects to the model.

use crate::admission::validate_ingress;
use crate::class::{ingress_class, load_balancer_classes, owned_classes};
use crate::loadbalancer::build_load_balancer;
use crate::members::SliceIndex;
use crate::source::{Source, by_age};
use crate::{Config, ObjectKey, Objects};
use k8s_openapi::api::networking::v1::Ingress;
use portico_model::{Diagnostic, Model};
use std::collections::BTreeMap;

/// The model, every diagnostic, and the verdict on every Ingress.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Translation {
    pub model: Model,
    /// Sorted and deduplicated, for all objects.
    pub diagnostics: Vec<Diagnostic>,
    /// One per Ingress in the input, ordered by key.
    pub ingresses: Vec<IngressState>,
}

/// What this controller makes of one Ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressState {
    pub key: ObjectKey,
    /// `spec.ingressClassName`, else the legacy annotation.
    pub class: Option<String>,
    /// The class is one of ours.
    pub owned: bool,
    /// Owned and admitted (no Error diagnostic): its routes are served and it gets a status.
    pub served: bool,
}

/// Translates `objects` into the shared-router model: one load balancer per owned class.
/// Ingresses of other classes are ignored without diagnostics; an owned Ingress the API server
/// would reject is not served at all and only yields its Error diagnostics.
pub fn translate(objects: &Objects, config: &Config) -> Translation {
    let owned = owned_classes(objects, config);
    let mut diagnostics = Vec::new();
    let mut by_class: BTreeMap<&str, Vec<Source<'_>>> = BTreeMap::new();
    let ingresses = objects
        .ingresses
        .iter()
        .map(|(key, ingress)| {
            let class = ingress_class(ingress).filter(|c| owned.contains(*c));
            let served = class.is_some_and(|class| {
                admit(
                    key,
                    ingress,
                    &mut diagnostics,
                    by_class.entry(class).or_default(),
                )
            });
            IngressState {
                key: key.clone(),
                class: ingress_class(ingress).map(str::to_owned),
                owned: class.is_some(),
                served,
            }
        })
        .collect();
    let classes = load_balancer_classes(objects, config, by_class.keys().copied());
    let slices = SliceIndex::new(objects);
    let mut load_balancers: Vec<_> = classes
        .iter()
        .map(|class| {
            let mut sources = by_class.remove(class.as_str()).unwrap_or_default();
            by_age(&mut sources);
            build_load_balancer(class, &sources, objects, &slices, config, &mut diagnostics)
        })
        .collect();
    load_balancers.sort_by_key(|lb| lb.id);
    diagnostics.sort();
    diagnostics.dedup();
    Translation {
        model: Model { load_balancers },
        diagnostics,
        ingresses,
    }
}

/// Validates an owned Ingress as the API server would; an admitted one joins its class's
/// sources. Returns whether it is served.
fn admit<'a>(
    key: &'a ObjectKey,
    ingress: &'a Ingress,
    diagnostics: &mut Vec<Diagnostic>,
    sources: &mut Vec<Source<'a>>,
) -> bool {
    let errors = validate_ingress(key, ingress);
    let served = !errors.iter().any(Diagnostic::is_error);
    diagnostics.extend(errors);
    if served {
        sources.push(Source::new(key, ingress));
    }
    served
}
