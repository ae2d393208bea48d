use super::*;
use k8s_openapi::api::core::v1::ObjectReference;
use portico_model::ObjectRef;

fn diagnostic(name: &str, message: &str) -> DiagnosticReport {
    DiagnosticReport {
        diagnostic: Diagnostic::error(ObjectRef::new("Ingress", "shop", name), "spec", message),
        regarding: ObjectReference {
            api_version: Some("networking.k8s.io/v1".to_owned()),
            kind: Some("Ingress".to_owned()),
            namespace: Some("shop".to_owned()),
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        },
    }
}

fn report(diagnostics: Vec<DiagnosticReport>) -> Report {
    Report {
        diagnostics,
        ..Report::default()
    }
}

fn publish_all(ledger: &mut EventLedger, r: &Report) -> Vec<String> {
    let (batch, _) = ledger.plan(r, 100);
    let messages = batch.iter().map(|d| d.diagnostic.message.clone()).collect();
    let batch: Vec<_> = batch.into_iter().cloned().collect();
    for d in &batch {
        ledger.published(d);
    }
    messages
}

#[test]
fn a_diagnostic_is_published_once_while_it_persists() {
    let mut ledger = EventLedger::default();
    let r = report(vec![diagnostic("web", "bad path")]);
    assert_eq!(publish_all(&mut ledger, &r), ["bad path"]);
    assert!(publish_all(&mut ledger, &r).is_empty());
}

#[test]
fn a_diagnostic_that_comes_back_is_published_again() {
    let mut ledger = EventLedger::default();
    let r = report(vec![diagnostic("web", "bad path")]);
    publish_all(&mut ledger, &r);
    publish_all(&mut ledger, &report(vec![]));
    assert_eq!(publish_all(&mut ledger, &r), ["bad path"]);
}

#[test]
fn two_messages_about_one_object_are_two_events() {
    let mut ledger = EventLedger::default();
    let r = report(vec![diagnostic("web", "a"), diagnostic("web", "b")]);
    assert_eq!(publish_all(&mut ledger, &r), ["a", "b"]);
}

#[test]
fn a_recreated_object_gets_the_event_again() {
    let mut ledger = EventLedger::default();
    let before = diagnostic("web", "bad");
    publish_all(&mut ledger, &report(vec![before.clone()]));
    let mut after = before;
    after.regarding.uid = Some("uid-new".to_owned());
    assert_eq!(publish_all(&mut ledger, &report(vec![after])), ["bad"]);
}

#[test]
fn a_failed_publication_is_planned_again() {
    let mut ledger = EventLedger::default();
    let r = report(vec![diagnostic("web", "bad")]);
    assert_eq!(ledger.plan(&r, 10).0.len(), 1);
    assert_eq!(ledger.plan(&r, 10).0.len(), 1);
}

#[test]
fn a_pass_publishes_at_most_the_limit_and_says_more_wait() {
    let mut ledger = EventLedger::default();
    let r = report(
        (0..5)
            .map(|i| diagnostic("web", &format!("m{i}")))
            .collect(),
    );
    let (batch, more) = ledger.plan(&r, 3);
    assert_eq!(batch.len(), 3);
    assert!(more);
    let batch: Vec<_> = batch.into_iter().cloned().collect();
    batch.iter().for_each(|d| ledger.published(d));
    let (rest, more) = ledger.plan(&r, 3);
    assert_eq!(rest.len(), 2);
    assert!(!more);
}

#[test]
fn the_event_describes_the_diagnostic() {
    let d = diagnostic("web", "bad path");
    let reporting = Reporting {
        controller: "portico.dev/ingress-controller",
        instance: "pod-a",
    };
    let now = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let e = event(&d, reporting, now, 255);
    assert_eq!(e.metadata.name.as_deref(), Some("web.ff"));
    assert_eq!(e.metadata.namespace.as_deref(), Some("shop"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("InvalidConfiguration"));
    assert_eq!(e.action.as_deref(), Some("Translate"));
    assert_eq!(e.note.as_deref(), Some("spec: bad path"));
    assert_eq!(e.regarding.as_ref(), Some(&d.regarding));
    assert_eq!(
        e.reporting_controller.as_deref(),
        Some(reporting.controller)
    );
    assert_eq!(e.reporting_instance.as_deref(), Some("pod-a"));
    assert_eq!(e.event_time, Some(MicroTime(now)));
}

#[test]
fn events_about_cluster_scoped_objects_go_to_default() {
    let mut d = diagnostic("portico", "x");
    d.regarding.namespace = None;
    let reporting = Reporting {
        controller: "c",
        instance: "i",
    };
    let e = event(&d, reporting, Timestamp::UNIX_EPOCH, 1);
    assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
}

#[test]
fn warnings_have_their_own_reason() {
    assert_eq!(reason(Severity::Warning), "ConfigurationWarning");
}

#[test]
fn note_omits_an_empty_field() {
    assert_eq!(note("", "no rules"), "no rules");
}

#[test]
fn a_long_note_is_cut_on_a_character_boundary() {
    let message = "é".repeat(1000);
    let n = note("spec", &message);
    assert!(n.len() <= MAX_NOTE_BYTES);
    assert!(n.len() >= MAX_NOTE_BYTES - 1);
    assert!(n.starts_with("spec: é"));
}

#[test]
fn event_names_stay_valid_for_long_object_names() {
    let object = format!("{}-x", "a".repeat(250));
    let name = event_name(&object, i128::from(u64::MAX));
    assert!(name.len() <= 253);
    assert!(name.ends_with(".ffffffffffffffff"));
    let before_dot = name.split('.').next().unwrap_or_default();
    assert!(before_dot.ends_with('a'));
}

#[test]
fn stamps_are_strictly_increasing() {
    let mut stamps = Stamps::default();
    let now = Timestamp::UNIX_EPOCH;
    let a = stamps.next(now);
    let b = stamps.next(now);
    assert!(b > a);
}
