//! The DefaultIngressClass admission plugin: Ingresses that name no class get the default one.

use super::report::Report;
use crate::KeptIngress;
use crate::{DEFAULT_CLASS_ANNOTATION, LEGACY_CLASS_ANNOTATION, Objects};
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use portico_model::{Diagnostic, ObjectRef};
use std::cmp::Reverse;

/// Sets `spec.ingressClassName` on every Ingress that has neither that field nor the legacy
/// `kubernetes.io/ingress.class` annotation, to the IngressClass annotated
/// `ingressclass.kubernetes.io/is-default-class: "true"`. With several defaults the newest by
/// creationTimestamp wins (a missing timestamp counts as oldest), then the first by name, as the
/// API server does since 1.30; that case is reported as a warning on the chosen class.
pub fn assign_default_class(objects: &mut Objects) -> Vec<Diagnostic> {
    let mut defaults: Vec<(&String, &IngressClass)> = objects
        .ingress_classes
        .iter()
        .filter(|(_, class)| is_default(class))
        .map(|(name, class)| (name, &**class))
        .collect();
    defaults.sort_by_key(|(name, class)| (Reverse(created(class)), *name));
    let Some((chosen, _)) = defaults.first() else {
        return Vec::new();
    };
    let chosen = (*chosen).clone();
    let diagnostics = several_defaults_warning(&chosen, &defaults);
    // Only the Ingresses that name no class are copied: the others stay the source's shared
    // objects, which later stages compare by pointer.
    // The map is copied only when some Ingress needs the class: a map that already has it
    // (the source reused it) stays shared.
    if !objects.ingresses.values().any(|i| names_no_class(i)) {
        return diagnostics;
    }
    for ingress in std::sync::Arc::make_mut(&mut objects.ingresses).values_mut() {
        if names_no_class(ingress) {
            std::sync::Arc::make_mut(ingress).spec.ingress_class_name = Some(chosen.clone());
        }
    }
    diagnostics
}

fn is_default(class: &IngressClass) -> bool {
    let annotations = class.metadata.annotations.as_ref();
    annotations
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

fn created(class: &IngressClass) -> Option<&Time> {
    class.metadata.creation_timestamp.as_ref()
}

fn names_no_class(ingress: &KeptIngress) -> bool {
    let field = ingress.spec.ingress_class_name.as_ref();
    let annotations = ingress.metadata.annotations.as_ref();
    let annotation = annotations.and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
    field.is_none() && annotation.is_none()
}

fn several_defaults_warning(
    chosen: &str,
    defaults: &[(&String, &IngressClass)],
) -> Vec<Diagnostic> {
    if defaults.len() < 2 {
        return Vec::new();
    }
    let all: Vec<String> = defaults
        .iter()
        .map(|(name, _)| format!("\"{name}\""))
        .collect();
    let mut report = Report::new(ObjectRef::new("IngressClass", "", chosen));
    let field = format!("metadata.annotations[{DEFAULT_CLASS_ANNOTATION}]");
    let message = format!(
        "{} IngressClasses are marked default ({}); Ingresses without a class get the newest, \"{chosen}\"",
        defaults.len(),
        all.join(", ")
    );
    report.warning(&field, message);
    report.finish()
}
