//! A listener's evaluation order as a function of its policies' rules: exact hosts, then
//! wildcard hosts (by suffix), then host-less policies; within a host, longer paths first,
//! Exact before Prefix at equal length, then by path (a regular expression counts as a
//! prefix of its own length, as ingress-nginx orders its regex locations by length). The translator orders policies the same
//! way, and distinct policies of one listener differ in host or path, so this order is total:
//! the store does not need to keep positions, and listeners merged from several load
//! balancers can be ordered again (equal keys keep their order: the sort is stable).

use crate::L7Policy;
use crate::matching::{HostMatch, PathMatch, reduce};
use std::cmp::Reverse;

/// The sort key of a policy; policies that can never match go last.
pub fn key(policy: &L7Policy) -> (u8, String, Reverse<usize>, bool, String) {
    let Some((host, path)) = reduce(&policy.rules) else {
        return (3, String::new(), Reverse(0), true, policy.id.to_string());
    };
    let (group, host) = match host {
        HostMatch::Exact(h) => (0, h),
        HostMatch::Wildcard(s) => (1, s),
        HostMatch::Any => (2, String::new()),
    };
    let (prefix, path) = match path {
        PathMatch::Exact(p) => (false, p),
        PathMatch::Prefix(p) | PathMatch::Regex(p) => (true, p),
    };
    (group, host, Reverse(path.len()), prefix, path)
}

/// Puts `policies` in evaluation order and numbers their positions.
pub fn sort(policies: &mut [L7Policy]) {
    policies.sort_by_cached_key(key);
    for (position, policy) in policies.iter_mut().enumerate() {
        policy.position = u32::try_from(position).unwrap_or(u32::MAX);
    }
}
