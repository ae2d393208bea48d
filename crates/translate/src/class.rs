//! Which class an Ingress belongs to, and which classes are ours.

use crate::{Config, LEGACY_CLASS_ANNOTATION, Objects, PROVIDER_ANNOTATION};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use std::collections::BTreeSet;

/// `spec.ingressClassName`, else the deprecated `kubernetes.io/ingress.class` annotation.
pub(crate) fn ingress_class(ingress: &Ingress) -> Option<&str> {
    let field = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref());
    let annotations = ingress.metadata.annotations.as_ref();
    let annotation = annotations.and_then(|a| a.get(LEGACY_CLASS_ANNOTATION));
    field
        .or(annotation.map(String::as_str))
        .filter(|c| !c.is_empty())
}

fn is_ours(class: &IngressClass, config: &Config) -> bool {
    let controller = class.spec.as_ref().and_then(|s| s.controller.as_deref());
    controller == Some(config.controller.as_str())
}

/// Classes whose IngressClass names our controller, plus `config.ingress_class`.
pub(crate) fn owned_classes(objects: &Objects, config: &Config) -> BTreeSet<String> {
    let mut owned: BTreeSet<String> = objects
        .ingress_classes
        .iter()
        .filter(|(_, class)| is_ours(class, config))
        .map(|(name, _)| name.clone())
        .collect();
    owned.insert(config.ingress_class.clone());
    owned
}

/// Classes that get a load balancer: an IngressClass of ours exists, or an owned Ingress uses it.
pub(crate) fn load_balancer_classes<'a>(
    objects: &Objects,
    config: &Config,
    used: impl Iterator<Item = &'a str>,
) -> BTreeSet<String> {
    let mut classes: BTreeSet<String> = objects
        .ingress_classes
        .iter()
        .filter(|(_, class)| is_ours(class, config))
        .map(|(name, _)| name.clone())
        .collect();
    classes.extend(used.map(str::to_owned));
    classes
}

/// The IngressClass's `portico.dev/provider` annotation, else the configured default.
pub(crate) fn provider(objects: &Objects, class: &str, config: &Config) -> String {
    let annotations = objects
        .ingress_classes
        .get(class)
        .and_then(|c| c.metadata.annotations.as_ref());
    let annotated = annotations.and_then(|a| a.get(PROVIDER_ANNOTATION));
    annotated.unwrap_or(&config.default_provider).clone()
}
