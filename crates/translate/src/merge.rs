//! Merging the routes of several Ingresses of one class: identical matches go to the oldest
//! Ingress, and so does the listener's default backend. Losers are reported.

use crate::policy::sort_key;
use crate::route::{Backend, Canaried, Route};
use crate::source::Source;
use foldhash::HashSet;
use portico_model::{CompareType, Diagnostic};
use std::cmp::Ordering;
use std::sync::Arc;

/// One route of a load balancer's merged order: its Ingress and its index in the Ingress's
/// routes. The order is kept in the [`crate::Memo`] for the next translation.
pub(crate) type Entry = (Arc<Source>, u32);

/// Every route of `sources` (oldest Ingress first) in evaluation order (see
/// [`crate::policy::sort_key`]), ties broken by the Ingress's age and then by the route's
/// place in its Ingress: the oldest Ingress's first route leads among equal matches.
///
/// With `previous`, the order the last translation made for this load balancer, only the
/// routes of the Ingresses that are new or prepared again are sorted; they are inserted into
/// what is left of the previous order (the Ingresses still there, the very same `Arc`s). The
/// result is the same as sorting everything; a one-Ingress change costs a pass over the
/// order rather than a sort of 20,000 routes.
pub(crate) fn order(sources: &[Arc<Source>], previous: Option<Vec<Entry>>) -> Vec<Entry> {
    fn routes_of(source: &Arc<Source>) -> impl Iterator<Item = Entry> + '_ {
        let count = u32::try_from(source.routes.len()).unwrap_or(u32::MAX);
        (0..count).map(move |i| (Arc::clone(source), i))
    }
    let Some(previous) = previous else {
        let mut all: Vec<Entry> = sources.iter().flat_map(routes_of).collect();
        all.sort_unstable_by(compare);
        return all;
    };
    let ptr = |s: &Arc<Source>| Arc::as_ptr(s) as usize;
    let now: HashSet<usize> = sources.iter().map(ptr).collect();
    let before: HashSet<usize> = previous.iter().map(|(s, _)| ptr(s)).collect();
    let mut kept = previous;
    kept.retain(|(s, _)| now.contains(&ptr(s)));
    let fresh = sources.iter().filter(|s| !before.contains(&ptr(s)));
    let mut fresh: Vec<Entry> = fresh.flat_map(routes_of).collect();
    if fresh.is_empty() {
        return kept;
    }
    fresh.sort_unstable_by(compare);
    let mut merged = Vec::with_capacity(kept.len() + fresh.len());
    let mut rest = &kept[..];
    for entry in fresh {
        let before = rest.partition_point(|e| compare(e, &entry) == Ordering::Less);
        merged.extend_from_slice(&rest[..before]);
        merged.push(entry);
        rest = &rest[before..];
    }
    merged.extend_from_slice(rest);
    merged
}

fn compare((a, i): &Entry, (b, j): &Entry) -> Ordering {
    let (ra, rb) = (&a.routes[*i as usize], &b.routes[*j as usize]);
    (sort_key(ra).cmp(&sort_key(rb)))
        .then_with(|| a.age().cmp(&b.age()))
        .then(i.cmp(j))
}

/// Keeps the first route for each (host, path match) of `order` (see [`order`]): the one the
/// oldest Ingress wrote first, among the Ingresses that are not canaries. The first canary
/// Ingress's route for the same match becomes its canary (ingress-nginx serves one); a canary
/// without a main route is not served. The others are reported.
pub(crate) fn merge<'a>(order: &'a [Entry], diagnostics: &mut Vec<Diagnostic>) -> Vec<Route<'a>> {
    let mut kept: Vec<Route<'a>> = Vec::with_capacity(order.len());
    let mut group: Vec<Route<'a>> = Vec::new();
    for (source, i) in order {
        let route = Route {
            source,
            spec: &source.routes[*i as usize],
            canary: None,
        };
        if group
            .first()
            .is_some_and(|first| !same_match(first, &route))
        {
            kept.extend(merge_group(&mut group, diagnostics));
        }
        group.push(route);
    }
    kept.extend(merge_group(&mut group, diagnostics));
    kept
}

/// The winner of routes with one match, oldest first, with its canary; the group is emptied.
fn merge_group<'a>(
    group: &mut Vec<Route<'a>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Route<'a>> {
    let is_canary = |r: &Route<'_>| r.source.location.canary.is_some();
    let main = group.iter().position(|r| !is_canary(r));
    let mut winner = main.map(|m| group[m]);
    let mut canary: Option<Route<'a>> = None;
    for (n, route) in group.drain(..).enumerate() {
        match (&winner, is_canary(&route)) {
            (Some(_), false) if Some(n) == main => {}
            (Some(w), false) => diagnostics.push(conflict(&route, w)),
            (Some(_), true) => match &canary {
                Some(first) => diagnostics.push(conflict(&route, first)),
                None => canary = Some(route),
            },
            (None, true) => diagnostics.push(no_main(&route)),
            (None, false) => {}
        }
    }
    if let (Some(w), Some(c)) = (&mut winner, canary) {
        w.canary = Some(Canaried {
            source: c.source,
            spec: c.spec,
        });
    }
    winner
}

fn no_main(canary: &Route<'_>) -> Diagnostic {
    let message = format!(
        "canary: no Ingress without the canary annotation routes {} path \"{}\"; this path is \
         not served",
        canary.spec.host, canary.spec.path.value
    );
    let field = format!("{}.path", canary.spec.field());
    Diagnostic::warning(
        portico_model::ObjectRef::clone(&canary.source.object),
        field,
        message,
    )
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
    Diagnostic::warning(
        portico_model::ObjectRef::clone(&loser.source.object),
        field,
        message,
    )
}

/// The listener's default backend: the oldest Ingress's `spec.defaultBackend`. Returns it and
/// the Ingress that set it.
pub(crate) fn default_backend<'a>(
    sources: &'a [Arc<Source>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(&'a Backend, &'a Source)> {
    let mut winner: Option<(&Backend, &Source)> = None;
    for source in sources {
        let Some(backend) = source.default.as_deref() else {
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
                diagnostics.push(Diagnostic::warning(
                    portico_model::ObjectRef::clone(&source.object),
                    field,
                    message,
                ));
            }
        }
    }
    winner
}
