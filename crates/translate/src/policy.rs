//! L7 policies in evaluation order: the first policy whose rules all match wins.

use crate::route::{HostMatch, Route};
use portico_model::{
    CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, ListenerId, PolicyAction, PoolId, RuleType,
};
use std::cmp::Reverse;

/// Exact hosts, then wildcard hosts, then host-less rules; within a group by host, longer
/// paths first, Exact before Prefix at equal length, then by path, then older Ingress first.
pub(crate) fn order(routes: &mut [Route<'_>]) {
    routes.sort_by(|a, b| {
        sort_key(a)
            .cmp(&sort_key(b))
            .then_with(|| a.source.age.cmp(&b.source.age))
            .then_with(|| a.written.cmp(&b.written))
    });
}

type SortKey<'r> = (u8, &'r HostMatch, Reverse<usize>, bool, &'r str);

fn sort_key<'r>(route: &'r Route<'_>) -> SortKey<'r> {
    let path = &route.path;
    let prefix = path.compare != CompareType::EqualTo;
    (
        route.host.group(),
        &route.host,
        Reverse(path.value.len()),
        prefix,
        &path.value,
    )
}

pub(crate) fn build_policy(
    listener: ListenerId,
    position: usize,
    route: &Route<'_>,
    pool: PoolId,
) -> L7Policy {
    let id = L7PolicyId::derive(&format!("{listener}/policy/{}", route.written));
    let mut rules = Vec::with_capacity(2);
    if let Some((compare_type, value)) = host_rule(&route.host) {
        rules.push(L7Rule {
            id: L7RuleId::derive(&format!("{id}/host")),
            rule_type: RuleType::HostName,
            compare_type,
            value: value.to_owned(),
        });
    }
    rules.push(L7Rule {
        id: L7RuleId::derive(&format!("{id}/path")),
        rule_type: RuleType::Path,
        compare_type: route.path.compare,
        value: route.path.value.clone(),
    });
    L7Policy {
        id,
        position: u32::try_from(position).unwrap_or(u32::MAX),
        action: PolicyAction::RedirectToPool { pool },
        rules,
        source: route.source.object.clone(),
    }
}

fn host_rule(host: &HostMatch) -> Option<(CompareType, &str)> {
    match host {
        HostMatch::Exact(h) => Some((CompareType::EqualTo, h)),
        HostMatch::Wildcard(suffix) => Some((CompareType::WildcardLabel, suffix)),
        HostMatch::Any => None,
    }
}
