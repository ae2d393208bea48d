//! A policy's rules (a logical AND) reduced to one host and one path comparison, exactly as
//! the built-in proxy reduces them, so both providers agree on every odd combination.

use portico_model::{CompareType, L7Rule, RuleType};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostMatch {
    Any,
    Exact(String),
    /// `*.suffix`: the suffix; exactly one non-empty label must precede it.
    Wildcard(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PathMatch {
    Exact(String),
    /// Normalized: no trailing slash, `/` for the root.
    Prefix(String),
}

/// One host and one path comparison; `None` when the rules can never all match.
pub(super) fn reduce(rules: &[L7Rule]) -> Option<(HostMatch, PathMatch)> {
    let mut host = HostMatch::Any;
    let mut path = PathMatch::Prefix("/".to_owned());
    for rule in rules {
        match rule.rule_type {
            RuleType::HostName => host = both_hosts(host, host_rule(rule)?)?,
            RuleType::Path => path = both_paths(path, path_rule(rule)?)?,
        }
    }
    Some((host, path))
}

fn host_rule(rule: &L7Rule) -> Option<HostMatch> {
    let value = rule.value.to_ascii_lowercase();
    match rule.compare_type {
        CompareType::EqualTo => Some(HostMatch::Exact(value)),
        CompareType::WildcardLabel => Some(HostMatch::Wildcard(value)),
        CompareType::PathPrefix => None,
    }
}

fn path_rule(rule: &L7Rule) -> Option<PathMatch> {
    match rule.compare_type {
        CompareType::EqualTo => Some(PathMatch::Exact(rule.value.clone())),
        CompareType::PathPrefix => Some(PathMatch::Prefix(normalize_prefix(&rule.value))),
        CompareType::WildcardLabel => None,
    }
}

pub(super) fn normalize_prefix(value: &str) -> String {
    match value.trim_end_matches('/') {
        "" => "/".to_owned(),
        v => v.to_owned(),
    }
}

/// Everything after exactly one non-empty label.
fn wildcard_suffix(host: &str) -> Option<&str> {
    match host.split_once('.') {
        Some((label, suffix)) if !label.is_empty() => Some(suffix),
        _ => None,
    }
}

fn prefix_matches(prefix: &str, path: &str) -> bool {
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn both_hosts(a: HostMatch, b: HostMatch) -> Option<HostMatch> {
    use HostMatch::{Any, Exact, Wildcard};
    match (a, b) {
        (Any, x) | (x, Any) => Some(x),
        (Exact(h), Wildcard(s)) | (Wildcard(s), Exact(h)) => {
            (wildcard_suffix(&h) == Some(s.as_str())).then_some(Exact(h))
        }
        (a, b) => (a == b).then_some(a),
    }
}

fn both_paths(a: PathMatch, b: PathMatch) -> Option<PathMatch> {
    use PathMatch::{Exact, Prefix};
    match (a, b) {
        (Prefix(v), Prefix(w)) if prefix_matches(&v, &w) => Some(Prefix(w)),
        (Prefix(v), Prefix(w)) => prefix_matches(&w, &v).then_some(Prefix(v)),
        (Exact(e), Prefix(v)) | (Prefix(v), Exact(e)) => prefix_matches(&v, &e).then_some(Exact(e)),
        (a, b) => (a == b).then_some(a),
    }
}
