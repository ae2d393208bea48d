//! Merging the routes of several Ingresses of one class: identical matches go to the oldest
//! Ingress, and so does the listener's default backend. Losers are reported.

use crate::Objects;
use crate::backend::PoolKey;
use crate::route::{Route, backend_key};
use crate::source::Source;
use portico_model::{CompareType, Diagnostic};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// Keeps the first route for each (host, path match). `routes` must come oldest Ingress first,
/// each Ingress's in YAML order, so the first is the one the oldest Ingress wrote first.
pub(crate) fn merge<'a>(
    routes: Vec<Route<'a>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Route<'a>> {
    let mut winners = BTreeMap::new();
    for route in routes {
        match winners.entry((route.host.clone(), route.path.clone())) {
            Entry::Occupied(winner) => diagnostics.push(conflict(&route, winner.get())),
            Entry::Vacant(slot) => {
                slot.insert(route);
            }
        }
    }
    winners.into_values().collect()
}

fn conflict(loser: &Route<'_>, winner: &Route<'_>) -> Diagnostic {
    let kind = match loser.path.compare {
        CompareType::EqualTo => "Exact",
        _ => "Prefix",
    };
    let by = if loser.source.key == winner.source.key {
        format!("{} of this Ingress", winner.field)
    } else {
        format!(
            "Ingress {} ({}), which is older",
            winner.source.key, winner.field
        )
    };
    let message = format!(
        "{} path \"{}\" ({kind}) is already routed by {by}; this path is ignored",
        loser.host, loser.path.value
    );
    let field = format!("{}.path", loser.field);
    Diagnostic::warning(loser.source.object.clone(), field, message)
}

/// The listener's default backend: the oldest Ingress's `spec.defaultBackend`. Returns its pool
/// and the index of the Ingress in `sources` (oldest first).
pub(crate) fn default_backend(
    sources: &[Source<'_>],
    objects: &Objects,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(PoolKey, usize)> {
    let mut winner: Option<(PoolKey, usize)> = None;
    for (index, source) in sources.iter().enumerate() {
        let spec = source.ingress.spec.as_ref();
        let Some(backend) = spec.and_then(|s| s.default_backend.as_ref()) else {
            continue;
        };
        let field = "spec.defaultBackend";
        let Some(key) = backend_key(source, objects, backend, field, diagnostics) else {
            continue;
        };
        match &winner {
            None => winner = Some((key, index)),
            // Two Ingresses naming the same Service port agree: nothing is ignored.
            Some((same, _)) if *same == key => {}
            Some((_, first)) => {
                let message = format!(
                    "the default backend is already set by Ingress {}, which is older; this \
                     defaultBackend is ignored",
                    sources[*first].key
                );
                diagnostics.push(Diagnostic::warning(source.object.clone(), field, message));
            }
        }
    }
    winner
}
