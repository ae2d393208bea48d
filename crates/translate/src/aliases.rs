//! ingress-nginx's `server-alias`: more names for the hosts of an Ingress's rules. A request
//! for an alias is routed as one for the host it names, by every route of that host (other
//! Ingresses' too: ingress-nginx adds the alias to the host's `server`). An alias that is a
//! host of some rule is ignored with a warning, as ingress-nginx ignores it.

use crate::route::{HostMatch, PolicyIds, Route, RouteSpec};
use crate::source::Source;
use foldhash::{HashMap, HashSet};
use portico_model::{Diagnostic, L7PolicyId, L7RuleId};

/// The routes the aliases add: for each route of a host with aliases, the same route under
/// each alias, with its own ids. `winners` are the merged routes.
pub(crate) fn alias_routes<'a>(
    winners: &[Route<'a>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(usize, &'a Source, RouteSpec)> {
    let hosts: HashSet<&HostMatch> = winners.iter().map(|r| &r.spec.host).collect();
    let mut aliases: HashMap<&HostMatch, Vec<HostMatch>> = HashMap::default();
    let mut warned = HashSet::default();
    for route in winners {
        for alias in &route.source.location.aliases {
            let alias_host = HostMatch::of(Some(alias));
            if hosts.contains(&alias_host) || route.spec.host == HostMatch::Any {
                if warned.insert((&route.source.key, alias)) {
                    diagnostics.push(ignored(route.source, alias));
                }
                continue;
            }
            let list = aliases.entry(&route.spec.host).or_default();
            if !list.contains(&alias_host) {
                list.push(alias_host);
            }
        }
    }
    let mut out = Vec::new();
    for (i, route) in winners.iter().enumerate() {
        for alias in aliases.get(&route.spec.host).into_iter().flatten() {
            out.push((i, route.source, aliased(route.spec, alias)));
        }
    }
    out
}

fn aliased(spec: &RouteSpec, alias: &HostMatch) -> RouteSpec {
    let ids = |ids: &PolicyIds| {
        let policy = L7PolicyId::derive(&format!("{}/alias/{alias}", ids.policy));
        PolicyIds {
            policy,
            host_rule: Some(L7RuleId::derive(&format!("{policy}/host"))),
            path_rule: L7RuleId::derive(&format!("{policy}/path")),
        }
    };
    RouteSpec {
        host: alias.clone(),
        path: spec.path.clone(),
        position: spec.position,
        backend: spec.backend.clone(),
        http: ids(&spec.http),
        https: ids(&spec.https),
    }
}

fn ignored(source: &Source, alias: &str) -> Diagnostic {
    let ingress = source.ingress();
    let annotations = ingress.metadata.annotations.as_ref();
    let name = annotations.and_then(|a| crate::annotations::get(a, "server-alias"));
    let name = name.map_or_else(|| "server-alias".to_owned(), |(name, _)| name);
    let field = format!("metadata.annotations[{name}]");
    let message = format!(
        "alias \"{alias}\" is the host of a rule (or this Ingress's rules have no host); it is \
         ignored"
    );
    Diagnostic::warning(
        portico_model::ObjectRef::clone(&source.object),
        field,
        message,
    )
}
