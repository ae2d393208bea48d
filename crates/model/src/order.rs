//! A listener's evaluation order as a function of its policies' rules: exact hosts, then
//! wildcard hosts (Gateway API suffix wildcards longest first, then by suffix), then host-less
//! policies; within a host, longer paths first, Exact before Prefix at equal length (a regular
//! expression counts as a prefix of its own length, as ingress-nginx orders its regex
//! locations by length), then by path; then a method condition first, then more header and
//! cookie conditions, then more query conditions (the Gateway API's order); then by
//! `precedence` (the Gateway API's order of routes and rules, a canary's decisions). The
//! translator orders policies
//! the same way, and distinct policies of one listener differ in one of these, so this order
//! is total: the store does not need to keep positions, and listeners merged from several load
//! balancers can be ordered again (equal keys keep their order: the sort is stable).

use crate::L7Policy;
use crate::matching::{Field, HostMatch, PathMatch, conditions, reduce};
use std::cmp::Reverse;

/// The sort key of a policy (see the module's doc).
pub type Key = (
    u8,
    Reverse<usize>,
    String,
    Reverse<usize>,
    bool,
    String,
    Reverse<(bool, usize, usize)>,
    u32,
);

/// The first member of the key of a policy that can never match (its precedence is 0 in it).
pub const NEVER: u8 = 3;

/// The sort key of a policy; policies that can never match go last.
pub fn key(policy: &L7Policy) -> Key {
    let Some((host, path)) = reduce(&policy.rules) else {
        let never = (NEVER, Reverse(0), String::new(), Reverse(0), true);
        return (
            never.0,
            never.1,
            never.2,
            never.3,
            never.4,
            policy.id.to_string(),
            Reverse((false, 0, 0)),
            0,
        );
    };
    let (group, suffix, host) = match host {
        HostMatch::Exact(h) => (0, 0, h),
        HostMatch::Suffix(s) => (1, s.len(), s),
        HostMatch::Wildcard(s) => (1, 0, s),
        HostMatch::Any => (2, 0, String::new()),
    };
    let (prefix, path) = match path {
        PathMatch::Exact(p) => (false, p),
        PathMatch::Prefix(p) | PathMatch::Regex(p) => (true, p),
    };
    let (mut method, mut headers, mut queries) = (false, 0, 0);
    for condition in conditions(&policy.rules) {
        match condition.field {
            Field::Method => method = true,
            Field::Header(_) | Field::Cookie(_) => headers += 1,
            Field::Query(_) => queries += 1,
        }
    }
    let length = Reverse(path.len());
    (
        group,
        Reverse(suffix),
        host,
        length,
        prefix,
        path,
        Reverse((method, headers, queries)),
        policy.precedence,
    )
}

/// Puts `policies` in evaluation order (a policy's position is its index).
pub fn sort<P: std::ops::Deref<Target = L7Policy>>(policies: &mut [P]) {
    policies.sort_by_cached_key(|p| key(p));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompareType, L7PolicyId, L7Rule, L7RuleId, ObjectRef, PolicyAction, RuleType};
    use std::sync::Arc;

    fn policy(
        name: &str,
        host: Option<(CompareType, &str)>,
        headers: usize,
        precedence: u32,
    ) -> L7Policy {
        let rule = |rule_type, compare_type, key: Option<&str>, value: &str| L7Rule {
            id: L7RuleId::derive(&format!("{name}/{value}")),
            rule_type,
            compare_type,
            key: key.map(str::to_owned),
            value: value.to_owned(),
        };
        let mut rules = vec![rule(RuleType::Path, CompareType::PathPrefix, None, "/a")];
        rules.extend(host.map(|(c, h)| rule(RuleType::HostName, c, None, h)));
        for i in 0..headers {
            rules.push(rule(
                RuleType::Header,
                CompareType::EqualTo,
                Some(&format!("x-{i}")),
                "1",
            ));
        }
        L7Policy {
            id: L7PolicyId::derive(name),
            action: PolicyAction::Reject { status: 404 },
            rules,
            source: Arc::new(ObjectRef::new("HTTPRoute", "ns", name)),
            precedence,
            options: None,
        }
    }

    #[test]
    fn longer_suffix_wildcards_then_more_headers_then_precedence_go_first() {
        let mut policies = vec![
            policy("any-late", None, 0, 2),
            policy("any-early", None, 0, 1),
            policy("any-headers", None, 1, 9),
            policy("short", Some((CompareType::WildcardSuffix, "b.com")), 0, 0),
            policy("long", Some((CompareType::WildcardSuffix, "a.b.com")), 0, 0),
            policy("exact", Some((CompareType::EqualTo, "x.a.b.com")), 0, 0),
        ]
        .into_iter()
        .map(Arc::new)
        .collect::<Vec<_>>();
        sort(&mut policies);
        let names: Vec<&str> = policies.iter().map(|p| p.source.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "exact",
                "long",
                "short",
                "any-headers",
                "any-early",
                "any-late"
            ]
        );
    }
}
