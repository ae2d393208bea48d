//! `portico migrate`'s report: for every Ingress, every ingress-nginx (and Portico) annotation
//! with what the provider serving it makes of it, from the one table the annotation reader
//! uses ([`crate::annotations::table`]), corrected by what the translation said about the
//! value (a bad value is not served as written); and the controller ConfigMap's keys.
//! Pure: objects and their translation in, a report out.

mod configmap;
#[cfg(test)]
mod docs;
mod gateway;

pub use configmap::{CONFIG_KEYS, ConfigKey, config_key};
pub use gateway::{Converted, GatewayOptions, Note, to_gateway_api};

use crate::annotations::table::{Outcome, classify};
use crate::{ObjectKey, Objects, Translation};
use portico_model::{Diagnostic, ObjectRef};
use serde::Serialize;
use std::collections::BTreeMap;

/// The whole report, as `-o json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub ingresses: Vec<IngressReport>,
    /// The ConfigMap's keys, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configmap: Option<Vec<KeyReport>>,
    pub summary: Summary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngressReport {
    pub namespace: String,
    pub name: String,
    /// The provider that would serve it (`proxy`, `haproxy`).
    pub provider: String,
    /// Why it would not be served at all, if so (another class, rejected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_served: Option<String>,
    pub annotations: Vec<KeyReport>,
}

/// One key and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyReport {
    pub key: String,
    /// `served`, `served-differently`, `ignored` or `refused`.
    pub outcome: &'static str,
    /// What differs, why it is ignored, what replaces it, or what serves it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Keys per outcome, Ingresses and ConfigMap keys together.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ingresses: usize,
    pub served: usize,
    pub served_differently: usize,
    pub ignored: usize,
    pub refused: usize,
    /// Ingresses that would not be served at all.
    pub not_served: usize,
}

impl Summary {
    /// Everything is served as ingress-nginx serves it: `migrate` exits 0.
    pub fn all_served(&self) -> bool {
        self.served_differently + self.ignored + self.refused + self.not_served == 0
    }

    fn count(&mut self, key: &KeyReport) {
        match key.outcome {
            "served" => self.served += 1,
            "served-differently" => self.served_differently += 1,
            "ignored" => self.ignored += 1,
            _ => self.refused += 1,
        }
    }
}

/// The report for `objects` as `translation` serves them; `fallback_provider` for Ingresses
/// the model does not name (the default provider); `configmap` the controller ConfigMap's
/// `data`, if given.
pub fn report(
    objects: &Objects,
    translation: &Translation,
    fallback_provider: &str,
    configmap: Option<&BTreeMap<String, String>>,
) -> Report {
    let providers = providers(translation);
    let warnings = annotation_warnings(&translation.diagnostics);
    let mut summary = Summary::default();
    let mut ingresses = Vec::new();
    for state in &translation.ingresses {
        let Some(ingress) = objects.ingresses.get(&state.key) else {
            continue;
        };
        let key = &state.key;
        let provider = providers.get(key).map_or(fallback_provider, String::as_str);
        let not_served = if !state.owned {
            let class = state.class.as_deref().unwrap_or("none");
            Some(format!(
                "its class ({class}) is not one this controller serves (--ingress-class)"
            ))
        } else if !state.served {
            Some("rejected: see `portico validate`".to_owned())
        } else {
            None
        };
        let annotations = ingress.metadata.annotations.iter().flatten();
        let keys: Vec<KeyReport> = annotations
            .filter_map(|(name, _)| {
                let outcome = classify(name, provider)?;
                let warned = warnings.get(&(key.clone(), name.clone()));
                Some(key_report(name, outcome, warned.map(String::as_str)))
            })
            .collect();
        keys.iter().for_each(|k| summary.count(k));
        summary.not_served += usize::from(not_served.is_some());
        ingresses.push(IngressReport {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            provider: provider.to_owned(),
            not_served,
            annotations: keys,
        });
    }
    summary.ingresses = ingresses.len();
    let configmap = configmap.map(|data| {
        let keys: Vec<KeyReport> = data.keys().map(|k| config_report(k)).collect();
        keys.iter().for_each(|k| summary.count(k));
        keys
    });
    Report {
        ingresses,
        configmap,
        summary,
    }
}

/// A key's report: the table's outcome, unless the translation warned about a key it
/// serves (a bad value: the default applies, or it has no effect), which is then ignored
/// with the warning as the reason.
fn key_report(name: &str, outcome: Outcome, warned: Option<&str>) -> KeyReport {
    let (label, detail) = match warned {
        Some(message) if outcome.is_served() => ("ignored", message.to_owned()),
        _ => (outcome.label(), outcome.detail().to_owned()),
    };
    KeyReport {
        key: name.to_owned(),
        outcome: label,
        detail,
    }
}

fn config_report(key: &str) -> KeyReport {
    let entry = config_key(key);
    let detail = if entry.outcome.is_served() && !entry.by.is_empty() {
        match entry.outcome.detail() {
            "" => entry.by.to_owned(),
            how => format!("{}: {how}", entry.by),
        }
    } else {
        entry.outcome.detail().to_owned()
    };
    KeyReport {
        key: key.to_owned(),
        outcome: entry.outcome.label(),
        detail,
    }
}

/// The provider of each Ingress the model routes for.
/// The provider of each Ingress the model serves (the load balancer its policies are in).
pub(crate) fn providers(translation: &Translation) -> BTreeMap<ObjectKey, String> {
    let mut out = BTreeMap::new();
    for lb in &translation.model.load_balancers {
        for listener in lb.listeners.iter() {
            let sources = listener.policies.iter().map(|p| &*p.source);
            for source in sources.chain(listener.default_source.as_ref()) {
                let key = ObjectKey::new(&source.namespace, &source.name);
                out.entry(key).or_insert_with(|| lb.provider.clone());
            }
        }
    }
    out
}

/// The first warning about each (Ingress, annotation), by the field it names.
fn annotation_warnings(diagnostics: &[Diagnostic]) -> BTreeMap<(ObjectKey, String), String> {
    let mut out = BTreeMap::new();
    for d in diagnostics {
        let ObjectRef {
            kind,
            namespace,
            name,
        } = &d.object;
        let annotation = d
            .field
            .strip_prefix("metadata.annotations[")
            .and_then(|f| f.strip_suffix(']'));
        if let (true, Some(annotation)) = (kind == "Ingress", annotation) {
            let key = (ObjectKey::new(namespace, name), annotation.to_owned());
            out.entry(key).or_insert_with(|| d.message.clone());
        }
    }
    out
}
