//! Merging the routes of several Ingresses of one class: identical matches go to the oldest
//! Ingress, and so does the listener's default backend. Losers are reported.

use crate::policy::sort_key;
use crate::route::{Backend, Route};
use crate::source::Source;
use portico_model::{CompareType, Diagnostic};
use std::sync::Arc;

/// Keeps the first route for each (host, path match), in evaluation order (see
/// [`crate::policy::sort_key`]). `routes` must come oldest Ingress first, each Ingress's in YAML
/// order, so the first is the one the oldest Ingress wrote first.
///
/// Sorting by the evaluation order with the arrival as the last key puts every route next to
/// those with the same host and path, the first arrival leading: no map of the matches is
/// built (hashing 20,000 hosts and paths cost more than the sort, which is needed anyway).
pub(crate) fn merge<'a>(
    routes: impl Iterator<Item = Route<'a>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Route<'a>> {
    let mut all: Vec<(usize, Route<'a>)> = routes.enumerate().collect();
    all.sort_unstable_by(|(i, a), (j, b)| sort_key(a).cmp(&sort_key(b)).then(i.cmp(j)));
    let mut kept: Vec<Route<'a>> = Vec::with_capacity(all.len());
    for (_, route) in all {
        match kept.last() {
            Some(winner) if same_match(winner, &route) => {
                diagnostics.push(conflict(&route, winner));
            }
            _ => kept.push(route),
        }
    }
    kept
}

fn same_match(a: &Route<'_>, b: &Route<'_>) -> bool {
    a.spec.host == b.spec.host && a.spec.path == b.spec.path
}

fn conflict(loser: &Route<'_>, winner: &Route<'_>) -> Diagnostic {
    let kind = match loser.spec.path.compare {
        CompareType::EqualTo => "Exact",
        _ => "Prefix",
    };
    let by = if loser.source.key == winner.source.key {
        format!("{} of this Ingress", winner.spec.field())
    } else {
        format!(
            "Ingress {} ({}), which is older",
            winner.source.key,
            winner.spec.field()
        )
    };
    let message = format!(
        "{} path \"{}\" ({kind}) is already routed by {by}; this path is ignored",
        loser.spec.host, loser.spec.path.value
    );
    let field = format!("{}.path", loser.spec.field());
    Diagnostic::warning(loser.source.object.clone(), field, message)
}

/// The listener's default backend: the oldest Ingress's `spec.defaultBackend`. Returns it and
/// the Ingress that set it.
pub(crate) fn default_backend<'a>(
    sources: &'a [Arc<Source>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(&'a Backend, &'a Source)> {
    let mut winner: Option<(&Backend, &Source)> = None;
    for source in sources {
        let Some(backend) = &source.default else {
            continue;
        };
        match winner {
            None => winner = Some((backend, source)),
            // Two Ingresses naming the same Service port agree: nothing is ignored.
            Some((same, _)) if *same == *backend => {}
            Some((_, first)) => {
                let message = format!(
                    "the default backend is already set by Ingress {}, which is older; this \
                     defaultBackend is ignored",
                    first.key
                );
                let field = "spec.defaultBackend";
                diagnostics.push(Diagnostic::warning(source.object.clone(), field, message));
            }
        }
    }
    winner
}
