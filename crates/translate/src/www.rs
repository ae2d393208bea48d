//! ingress-nginx's `from-to-www-redirect`: the other name of an Ingress's host (`www.` added
//! or taken off) answers 308 to the host, keeping the request's scheme, port, path and query.
//! As ingress-nginx does, no redirect is made for a name some route of the load balancer
//! already serves (a warning says so); the redirect's HTTPS handshakes get the certificate
//! `spec.tls` gives that name, if any, as for any other name.

use crate::route::{HostMatch, Route};
use portico_model::{
    CompareType, Diagnostic, L7Policy, L7PolicyId, L7Rule, L7RuleId, ListenerId, PolicyAction,
    Redirect, RuleType,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// ingress-nginx's `http-redirect-code` default, which this redirect answers with.
const STATUS: u16 = 308;

/// The other name of `host`: without its `www.`, else with one.
fn other_name(host: &str) -> String {
    match host.strip_prefix("www.") {
        Some(bare) => bare.to_owned(),
        None => format!("www.{host}"),
    }
}

/// The redirects the routes in `winners` ask for: from each other name to its host, with the
/// route whose Ingress asked first. A name already routed is a warning on that Ingress.
pub(crate) fn redirects<'r>(
    winners: &'r [Route<'r>],
    diagnostics: &mut Vec<Diagnostic>,
) -> BTreeMap<String, (String, &'r Route<'r>)> {
    let served: BTreeSet<&str> = (winners.iter())
        .filter_map(|r| match &r.spec.host {
            HostMatch::Exact(host) => Some(host.as_str()),
            _ => None,
        })
        .collect();
    let mut out = BTreeMap::new();
    let mut warned = BTreeSet::new();
    for route in winners.iter().filter(|r| r.source.location.from_to_www) {
        let HostMatch::Exact(host) = &route.spec.host else {
            continue;
        };
        let from = other_name(host);
        if served.contains(from.as_str()) {
            if warned.insert((from.clone(), route.source.key.clone())) {
                let ingress = route.source.ingress();
                let annotations = ingress.metadata.annotations.as_ref();
                let name = annotations
                    .and_then(|a| crate::annotations::get(a, "from-to-www-redirect"))
                    .map(|(name, _)| name)
                    .unwrap_or_default();
                let field = format!("metadata.annotations[{name}]");
                let message = format!(
                    "{from} is routed already: no redirect from it to {host} (as ingress-nginx)"
                );
                let warning = Diagnostic::warning((*route.source.object).clone(), field, message);
                diagnostics.push(warning);
            }
            continue;
        }
        out.entry(from).or_insert_with(|| (host.clone(), route));
    }
    out
}

/// The policies of `redirects` on `listener`: the other name's every path answers the redirect.
pub(crate) fn policies(
    redirects: &BTreeMap<String, (String, &Route<'_>)>,
    listener: ListenerId,
) -> Vec<L7Policy> {
    let policy = |(from, (to, route)): (&String, &(String, &Route<'_>))| {
        let id = L7PolicyId::derive(&format!("{listener}/from-to-www/{from}"));
        let rule = |rule_type, compare_type, value: &str| L7Rule {
            id: L7RuleId::derive(&format!("{id}/{rule_type:?}")),
            rule_type,
            compare_type,
            key: None,
            value: value.to_owned(),
        };
        L7Policy {
            id,
            action: PolicyAction::RequestRedirect(Redirect {
                status: STATUS,
                scheme: "http".to_owned(),
                hostname: Some(to.clone()),
                port: 80,
                path: None,
                same_scheme: true,
            }),
            rules: vec![
                rule(RuleType::HostName, CompareType::EqualTo, from),
                rule(RuleType::Path, CompareType::PathPrefix, "/"),
            ],
            source: Arc::clone(&route.source.object),
            options: None,
            precedence: 0,
        }
    };
    redirects.iter().map(policy).collect()
}

#[cfg(test)]
mod tests {
    use super::other_name;

    #[test]
    fn the_other_name_adds_or_takes_off_www() {
        assert_eq!(other_name("example.com"), "www.example.com");
        assert_eq!(other_name("www.example.com"), "example.com");
        assert_eq!(other_name("wwwexample.com"), "www.wwwexample.com");
    }
}
