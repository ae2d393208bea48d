//! L7 policies in evaluation order: the first policy whose rules all match wins.

use crate::route::{HostMatch, PolicyIds, Route, RouteSpec};
use portico_model::{CompareType, L7Policy, L7Rule, PolicyAction, RuleType};
use std::cmp::Reverse;

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

/// The policy of `route` at `position`, with the ids of one listener's copy (`ids`).
pub(crate) fn build_policy(position: usize, route: &Route<'_>, ids: &PolicyIds) -> L7Policy {
    let spec = route.spec;
    let mut rules = Vec::with_capacity(2);
    if let (Some(id), Some((compare_type, value))) = (ids.host_rule, host_rule(&spec.host)) {
        rules.push(L7Rule {
            id,
            rule_type: RuleType::HostName,
            compare_type,
            key: None,
            value: value.to_owned(),
        });
    }
    rules.push(L7Rule {
        id: ids.path_rule,
        rule_type: RuleType::Path,
        compare_type: spec.path.compare,
        key: None,
        value: spec.path.value.clone(),
    });
    L7Policy {
        id: ids.policy,
        position: u32::try_from(position).unwrap_or(u32::MAX),
        action: PolicyAction::RedirectToPool {
            pool: spec.backend.pool,
        },
        rules,
        source: route.source.object.clone(),
        precedence: 0,
    }
}

fn host_rule(host: &HostMatch) -> Option<(CompareType, &str)> {
    match host {
        HostMatch::Exact(h) => Some((CompareType::EqualTo, h)),
        HostMatch::Wildcard(suffix) => Some((CompareType::WildcardLabel, suffix)),
        HostMatch::Any => None,
    }
}
