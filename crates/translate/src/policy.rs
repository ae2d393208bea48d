//! L7 policies in evaluation order: the first policy whose rules all match wins.

use crate::annotations::Location;
use crate::errors::ControllerErrors;
use crate::route::{HostMatch, PolicyIds, Route, RouteSpec};
use portico_model::{
    CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, PolicyAction, PolicyOptions, Rewrite,
    RuleType,
};
use std::cmp::Reverse;
use std::sync::Arc;

/// The evaluation order: exact hosts, then wildcard hosts, then host-less rules; within a group
/// by host, longer paths first, Exact before Prefix at equal length, then by path. Merged
/// routes differ in host or path, so this order is total on them.
type SortKey<'r> = (u8, &'r HostMatch, Reverse<usize>, bool, &'r str);

pub(crate) fn sort_key(spec: &RouteSpec) -> SortKey<'_> {
    let RouteSpec { host, path, .. } = spec;
    let prefix = path.compare != CompareType::EqualTo;
    (
        host.group(),
        host,
        Reverse(path.value.len()),
        prefix,
        &path.value,
    )
}

/// The policies of `route` on one listener (`ids`), pushed onto `out`: its own, and before it
/// the `app-root` redirect of `/` when its Ingress has one and its path is the root. `regex`
/// is the route's path as written when its host's paths are regular expressions
/// ([`crate::regex_hosts`]). `controller` is the pool of `--default-backend-service`.
pub(crate) fn build_policies(
    route: &Route<'_>,
    ids: &PolicyIds,
    (regex, controller): (Option<&str>, Option<ControllerErrors<'_>>),
    out: &mut Vec<L7Policy>,
) {
    let spec = route.spec;
    let location = &route.source.location;
    let root = spec.path.compare == CompareType::PathPrefix && spec.path.value == "/";
    if let (Some(app_root), true) = (&location.app_root, root) {
        let id = L7PolicyId::derive(&format!("{}/app-root", ids.policy));
        let path = (CompareType::EqualTo, "/".to_owned());
        let action = PolicyAction::RedirectToUrl {
            status: APP_ROOT_STATUS,
            url: app_root.clone(),
        };
        let rules = (
            Some(L7RuleId::derive(&format!("{id}/host"))),
            L7RuleId::derive(&format!("{id}/path")),
        );
        out.push(policy(route, (id, rules), path, action, None));
    }
    let path = match regex {
        Some(written) => (CompareType::Regex, written.to_owned()),
        None => (spec.path.compare, spec.path.value.clone()),
    };
    let (action, options) = match &location.redirect {
        Some((status, url)) => {
            let action = PolicyAction::RedirectToUrl {
                status: *status,
                url: url.clone(),
            };
            (action, None)
        }
        // An auth-url or basic auth that cannot be served refuses rather than lets requests
        // through.
        None if matches!(location.external_auth, Some(Err(())))
            || matches!(location.basic_auth, Some(Err(()))) =>
        {
            (PolicyAction::Reject { status: 503 }, None)
        }
        None => (
            crate::canary::action(route, spec.backend.pool),
            options(route, regex, controller),
        ),
    };
    let rules = (ids.host_rule, ids.path_rule);
    let main = policy(route, (ids.policy, rules), path, action, options);
    if main.action.pools().next().is_some() {
        crate::canary::guarded(route, ids, &main, out);
    }
    out.push(main);
}

/// `app-root`'s status, as ingress-nginx answers it.
const APP_ROOT_STATUS: u16 = 302;

/// The options of a route forwarded to its pool: the rewrite (only on a regex host, where
/// the written path is its pattern), the upstream `Host`, CORS, rate limits, external auth,
/// HSTS, compression, error pages.
fn options(
    route: &Route<'_>,
    regex: Option<&str>,
    controller: Option<ControllerErrors<'_>>,
) -> Option<Arc<PolicyOptions>> {
    let location: &Location = &route.source.location;
    let rewrite = regex
        .filter(|path| location.rewrites(path))
        .and_then(|path| {
            Some(Rewrite {
                pattern: path.to_owned(),
                target: location.rewrite_target.clone()?,
                forwarded_prefix: location.forwarded_prefix.clone(),
            })
        });
    let options = PolicyOptions {
        rewrite,
        upstream_host: location.upstream_host.clone(),
        cors: location.cors.clone(),
        rate_limit: location.rate_limit.clone(),
        external_auth: location.external_auth.clone().and_then(Result::ok),
        basic_auth: location.basic_auth.clone().and_then(Result::ok),
        hsts: location.hsts,
        compression: location.compression,
        errors: crate::errors::error_pages(route.source, route.spec, controller),
        ..PolicyOptions::default()
    };
    (options != PolicyOptions::default()).then(|| Arc::new(options))
}

/// A policy of `route` matching its host and `path`: its id and those of its host rule (used
/// when the route has a host) and path rule.
fn policy(
    route: &Route<'_>,
    (id, (host_rule, path_rule)): (L7PolicyId, (Option<L7RuleId>, L7RuleId)),
    (compare_type, value): (CompareType, String),
    action: PolicyAction,
    options: Option<Arc<PolicyOptions>>,
) -> L7Policy {
    let mut rules = Vec::with_capacity(2);
    if let (Some(host_id), Some((host_compare, host))) = (host_rule, host_rule_of(&route.spec.host))
    {
        rules.push(L7Rule {
            id: host_id,
            rule_type: RuleType::HostName,
            compare_type: host_compare,
            key: None,
            value: host.to_owned(),
        });
    }
    rules.push(L7Rule {
        id: path_rule,
        rule_type: RuleType::Path,
        compare_type,
        key: None,
        value,
    });
    L7Policy {
        id,
        action,
        rules,
        source: route.source.object.clone(),
        precedence: 0,
        options,
    }
}

fn host_rule_of(host: &HostMatch) -> Option<(CompareType, &str)> {
    match host {
        HostMatch::Exact(h) => Some((CompareType::EqualTo, h)),
        HostMatch::Wildcard(suffix) => Some((CompareType::WildcardLabel, suffix)),
        HostMatch::Any => None,
    }
}
