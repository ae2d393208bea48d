//! ingress-nginx's regex locations: a route whose Ingress sets `use-regex`, or rewrites its
//! path (`rewrite-target`), makes every path of its host a regular expression, whichever
//! Ingress the path comes from (`enforceRegexModifier`): matched case-insensitively from the
//! path's start, as written (`/foo` then also matches `/foobar`). Each such path is compiled
//! here once per translation; one that does not compile is an error on its Ingress naming the
//! annotation (or, when another Ingress turned the host to regular expressions, the path and
//! that Ingress), and that route alone is not served.

use crate::annotations::{self, table::NGINX};
use crate::route::{HostMatch, Route};
use foldhash::HashMap;
use portico_model::{Diagnostic, ObjectRef};

/// The routes of regex hosts by their index in the merged order, with the path as written.
pub(crate) type RegexPaths = HashMap<usize, String>;

/// Finds the regex hosts of `winners`, drops the routes whose path does not compile (with an
/// error each) and gives the written path of every other route of those hosts.
pub(crate) fn regex_paths<'s>(
    winners: &mut Vec<Route<'s>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> RegexPaths {
    let mut turned: HashMap<&HostMatch, &'s ObjectRef> = HashMap::default();
    let mut written: Vec<Option<String>> = Vec::with_capacity(winners.len());
    for route in winners.iter() {
        let location = &route.source.location;
        if location.use_regex || location.rewrite_target.is_some() {
            let path = written_path(route);
            if location.makes_regex(&path) {
                turned
                    .entry(&route.spec.host)
                    .or_insert(&route.source.object);
            }
            written.push(Some(path));
        } else {
            written.push(None);
        }
    }
    if turned.is_empty() {
        return RegexPaths::default();
    }
    let mut out = RegexPaths::default();
    let mut kept = Vec::with_capacity(winners.len());
    for (route, path) in winners.drain(..).zip(written) {
        let Some(by) = turned.get(&route.spec.host).copied() else {
            kept.push(route);
            continue;
        };
        let path = path.unwrap_or_else(|| written_path(&route));
        if let Err(error) = compiles(&path) {
            diagnostics.push(not_compiled(&route, by, &path, &error));
            continue;
        }
        out.insert(kept.len(), path);
        kept.push(route);
    }
    *winners = kept;
    out
}

/// The route's path as its Ingress writes it (`/` when empty).
fn written_path(route: &Route<'_>) -> String {
    let (i, j) = route.spec.position;
    let ingress = route.source.ingress();
    let path = ingress.paths().nth(i).and_then(|(_, paths)| paths.get(j));
    let path = path.and_then(|p| p.path.clone()).unwrap_or_default();
    if path.is_empty() {
        "/".to_owned()
    } else {
        path.into()
    }
}

/// Whether `path` compiles as the data planes compile it (see `CompareType::Regex`).
pub(crate) fn compiles(path: &str) -> Result<(), String> {
    regex::RegexBuilder::new(&format!("^(?:{path})"))
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map(drop)
        .map_err(|e| e.to_string().lines().last().unwrap_or_default().to_owned())
}

fn not_compiled(route: &Route<'_>, by: &ObjectRef, path: &str, error: &str) -> Diagnostic {
    let object = ObjectRef::clone(&route.source.object);
    let (field, why) = if *by == object {
        let ingress = route.source.ingress();
        let annotations = ingress.metadata.annotations.clone().unwrap_or_default();
        let name = ["use-regex", "rewrite-target"]
            .iter()
            .find_map(|k| annotations::get(&annotations, k).map(|(n, _)| n))
            .unwrap_or_else(|| format!("{NGINX}use-regex"));
        (format!("metadata.annotations[{name}]"), String::new())
    } else {
        let why = format!(" (its host's paths are regular expressions because of {by})");
        (format!("{}.path", route.spec.field()), why)
    };
    let message = format!(
        "path {path:?} is not a valid regular expression{why}: {error}; this path is not \
         served (the regex crate's syntax: no lookaround or backreferences)"
    );
    Diagnostic::warning(object, field, message)
}
