//! The pure half of the Event writer: which diagnostics to publish, and the Event for one.
//!
//! A diagnostic — (object, uid, field, severity, message) — is published once while it
//! persists. When it disappears from the report it is forgotten, so if it comes back it is
//! published again. A pass publishes at most `limit` Events; the rest wait for the next pass.
//!
//! Events are `events.k8s.io/v1` Events created directly rather than through kube-runtime's
//! `Recorder`: the Recorder's dedupe cache is keyed by (regarding, reason, action, type), not the
//! note, so two different diagnostics of one object with the same severity would merge into
//! one Event series and the second message would never be shown.
//!
//! Both severities are Events of type `Warning` (Kubernetes has only `Normal` and `Warning`, and
//! a diagnostic is never normal); the reason tells them apart: `InvalidConfiguration` for an
//! error (the object, or the part `field` names, is not served), `ConfigurationWarning` for a
//! warning (served, maybe not as meant). The note is `"{field}: {message}"`, built only from the
//! diagnostic, never from an object's data, so a Secret's data cannot end up in an Event.

use crate::report::{DiagnosticReport, Report};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use portico_model::{Diagnostic, Severity};
use std::collections::BTreeSet;

/// Kubernetes rejects longer notes.
pub const MAX_NOTE_BYTES: usize = 1024;
/// The longest object name (a DNS subdomain).
const MAX_NAME_BYTES: usize = 253;

/// The diagnostics published while they persist. Starts empty on becoming leader.
#[derive(Debug, Default)]
pub struct EventLedger {
    published: BTreeSet<(Diagnostic, Option<String>)>,
}

impl EventLedger {
    /// Forgets diagnostics that are gone and returns at most `limit` not yet published, plus
    /// whether more are waiting.
    pub fn plan<'r>(
        &mut self,
        report: &'r Report,
        limit: usize,
    ) -> (Vec<&'r DiagnosticReport>, bool) {
        let current: BTreeSet<_> = report.diagnostics.iter().map(key).collect();
        self.published.retain(|k| current.contains(k));
        let mut new = report
            .diagnostics
            .iter()
            .filter(|d| !self.published.contains(&key(d)));
        let batch: Vec<_> = new.by_ref().take(limit).collect();
        let more = new.next().is_some();
        (batch, more)
    }

    /// Records a published diagnostic (or one given up on).
    pub fn published(&mut self, d: &DiagnosticReport) {
        self.published.insert(key(d));
    }
}

fn key(d: &DiagnosticReport) -> (Diagnostic, Option<String>) {
    (d.diagnostic.clone(), d.regarding.uid.clone())
}

/// Who reports the Event.
#[derive(Debug, Clone, Copy)]
pub struct Reporting<'a> {
    pub controller: &'a str,
    pub instance: &'a str,
}

/// The Event for one diagnostic; `nanos` makes the name unique (see [`Stamps`]).
pub fn event(d: &DiagnosticReport, reporting: Reporting<'_>, now: Timestamp, nanos: i128) -> Event {
    let object = &d.diagnostic.object;
    let namespace = d
        .regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&object.name, nanos)),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        action: Some("Translate".to_owned()),
        event_time: Some(MicroTime(now)),
        note: Some(note(&d.diagnostic.field, &d.diagnostic.message)),
        reason: Some(reason(d.diagnostic.severity).to_owned()),
        regarding: Some(d.regarding.clone()),
        reporting_controller: Some(reporting.controller.to_owned()),
        reporting_instance: Some(reporting.instance.to_owned()),
        type_: Some("Warning".to_owned()),
        ..Event::default()
    }
}

pub fn reason(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "InvalidConfiguration",
        Severity::Warning => "ConfigurationWarning",
    }
}

/// `"{field}: {message}"` (just the message for a whole-object diagnostic), cut to
/// [`MAX_NOTE_BYTES`] on a character boundary.
pub fn note(field: &str, message: &str) -> String {
    let full = if field.is_empty() {
        message.to_owned()
    } else {
        format!("{field}: {message}")
    };
    truncate(full, MAX_NOTE_BYTES)
}

/// `{object name}.{nanos in hex}`, like client-go's recorder; the object name is shortened so
/// the whole stays a valid DNS subdomain.
pub fn event_name(object: &str, nanos: i128) -> String {
    let suffix = format!(".{nanos:x}");
    let room = MAX_NAME_BYTES.saturating_sub(suffix.len());
    let base = truncate(object.to_owned(), room);
    let base = base.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let base = if base.is_empty() { "object" } else { base };
    format!("{base}{suffix}")
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Strictly increasing nanosecond stamps from the wall clock, so two Events created in the
/// same nanosecond by this process still get different names.
#[derive(Debug, Default)]
pub struct Stamps {
    last: i128,
}

impl Stamps {
    pub fn next(&mut self, now: Timestamp) -> i128 {
        self.last = now.as_nanosecond().max(self.last.saturating_add(1));
        self.last
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
