//! A policy's rules (a logical AND) reduced to one host and one path comparison. Any
//! conjunction of host rules is equivalent to one host rule or to "never", and the same holds
//! for path rules. Every provider (the built-in proxy's route table, the haproxy renderer)
//! reduces with this one function, so they agree on every odd combination. Header, query,
//! method and cookie rules are not reduced: they are conditions checked after the host and the path
//! ([`conditions`]).

use crate::{CompareType, L7Rule, RuleType};

/// A host rule reduced to one comparison against the normalized request host (lower-cased,
/// without port or trailing dot).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostMatch {
    Any,
    Exact(String),
    /// `*.suffix`: the suffix, lower-cased; exactly one non-empty label must precede it.
    Wildcard(String),
    /// `*.suffix` of the Gateway API: the suffix, lower-cased; one or more labels must precede
    /// it.
    Suffix(String),
}

/// A path rule reduced to one comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathMatch {
    /// The whole path, case-sensitive.
    Exact(String),
    /// Element-wise prefix, stored normalized: no trailing slash, `/` for the root.
    Prefix(String),
    /// A regular expression matched case-insensitively from the path's start
    /// ([`crate::CompareType::Regex`]).
    Regex(String),
}

impl PathMatch {
    pub fn prefix(value: &str) -> Self {
        PathMatch::Prefix(normalize_prefix(value).to_owned())
    }
}

/// A prefix rule's value without trailing slashes; `/` (or empty) stays the root.
pub fn normalize_prefix(value: &str) -> &str {
    match value.trim_end_matches('/') {
        "" => "/",
        v => v,
    }
}

/// Element-wise prefix match of a normalized prefix against a request path.
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    prefix == "/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The suffix a `*.suffix` rule would need to match `host`: everything after exactly one
/// non-empty label.
pub fn wildcard_suffix(host: &str) -> Option<&str> {
    match host.split_once('.') {
        Some((label, suffix)) if !label.is_empty() => Some(suffix),
        _ => None,
    }
}

/// Whether a host (normalized) matches a `*.suffix` rule of the Gateway API: it ends with
/// `.suffix` after at least one non-empty label.
pub fn suffix_matches(suffix: &str, host: &str) -> bool {
    host.strip_suffix(suffix)
        .and_then(|rest| rest.strip_suffix('.'))
        .is_some_and(|labels| !labels.is_empty() && !labels.starts_with('.'))
}

/// A policy's rules as one host and one path comparison; `None` when they can never all match
/// (a condition rule that [`condition`] does not take never does either).
pub fn reduce(rules: &[L7Rule]) -> Option<(HostMatch, PathMatch)> {
    let mut host = HostMatch::Any;
    let mut path = PathMatch::prefix("/");
    for rule in rules {
        match rule.rule_type {
            RuleType::HostName => host = both_hosts(host, host_rule(rule)?)?,
            RuleType::Path => path = both_paths(path, path_rule(rule)?)?,
            RuleType::Header | RuleType::Query | RuleType::Method | RuleType::Cookie => {
                condition(rule)?;
            }
        }
    }
    Some((host, path))
}

/// What a condition compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field<'a> {
    /// A header field of this lower-case name.
    Header(&'a str),
    /// A query parameter of this name.
    Query(&'a str),
    Method,
    /// The first cookie of this name in the `Cookie` fields (canary Ingresses).
    Cookie(&'a str),
}

/// A condition beside the host and the path: `field` equals `value`, or matches it as a
/// regular expression ([`CompareType::Regex`]) when `regex`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Condition<'a> {
    pub field: Field<'a>,
    pub value: &'a str,
    pub regex: bool,
}

/// The conditions of a policy's rules, which must all hold. Rules that can never match are
/// [`reduce`]'s to report.
pub fn conditions(rules: &[L7Rule]) -> impl Iterator<Item = Condition<'_>> {
    rules.iter().filter_map(condition)
}

/// A header or query rule with a key, `EQUAL_TO` or `REGEX`; a method rule `EQUAL_TO`; a
/// cookie rule with a key, `EQUAL_TO`.
fn condition(rule: &L7Rule) -> Option<Condition<'_>> {
    let regex = match rule.compare_type {
        CompareType::EqualTo => false,
        CompareType::Regex if matches!(rule.rule_type, RuleType::Header | RuleType::Query) => true,
        _ => return None,
    };
    let field = match (rule.rule_type, rule.key.as_deref()) {
        (RuleType::Header, Some(name)) => Field::Header(name),
        (RuleType::Query, Some(name)) => Field::Query(name),
        (RuleType::Method, _) => Field::Method,
        (RuleType::Cookie, Some(name)) => Field::Cookie(name),
        _ => return None,
    };
    Some(Condition {
        field,
        value: &rule.value,
        regex,
    })
}

/// A rule with a comparison its type does not support never matches.
fn host_rule(rule: &L7Rule) -> Option<HostMatch> {
    let value = rule.value.to_ascii_lowercase();
    match rule.compare_type {
        CompareType::EqualTo => Some(HostMatch::Exact(value)),
        CompareType::WildcardLabel => Some(HostMatch::Wildcard(value)),
        CompareType::WildcardSuffix => Some(HostMatch::Suffix(value)),
        CompareType::PathPrefix | CompareType::Regex => None,
    }
}

fn path_rule(rule: &L7Rule) -> Option<PathMatch> {
    match rule.compare_type {
        CompareType::EqualTo => Some(PathMatch::Exact(rule.value.clone())),
        CompareType::PathPrefix => Some(PathMatch::prefix(&rule.value)),
        CompareType::Regex => Some(PathMatch::Regex(rule.value.clone())),
        CompareType::WildcardLabel | CompareType::WildcardSuffix => None,
    }
}

fn both_hosts(a: HostMatch, b: HostMatch) -> Option<HostMatch> {
    use HostMatch::{Any, Exact, Suffix, Wildcard};
    match (a, b) {
        (Any, x) | (x, Any) => Some(x),
        (Exact(h), Wildcard(s)) | (Wildcard(s), Exact(h)) => {
            (wildcard_suffix(&h) == Some(s.as_str())).then_some(Exact(h))
        }
        (Exact(h), Suffix(s)) | (Suffix(s), Exact(h)) => suffix_matches(&s, &h).then_some(Exact(h)),
        // `x.w` for one label x lies under `*.s` when w is s or ends with `.s`.
        (Wildcard(w), Suffix(s)) | (Suffix(s), Wildcard(w)) => {
            (w == s || suffix_matches(&s, &w)).then_some(Wildcard(w))
        }
        (Suffix(s), Suffix(t)) if s == t || suffix_matches(&t, &s) => Some(Suffix(s)),
        (Suffix(s), Suffix(t)) => suffix_matches(&s, &t).then_some(Suffix(t)),
        (a, b) => (a == b).then_some(a),
    }
}

/// Two prefixes both match a path only when one lies above the other: the longer one decides.
/// A regular expression reduces with the root prefix (which every path matches) or with
/// itself; with anything else the conjunction is not one comparison, and is taken as never
/// matching (the translator gives a policy one path rule).
fn both_paths(a: PathMatch, b: PathMatch) -> Option<PathMatch> {
    use PathMatch::{Exact, Prefix, Regex};
    match (a, b) {
        (Prefix(v), Regex(r)) | (Regex(r), Prefix(v)) => (v == "/").then_some(Regex(r)),
        (Regex(r), Regex(s)) => (r == s).then_some(Regex(r)),
        (_, Regex(_)) | (Regex(_), _) => None,
        (Prefix(v), Prefix(w)) if prefix_matches(&v, &w) => Some(Prefix(w)),
        (Prefix(v), Prefix(w)) => prefix_matches(&w, &v).then_some(Prefix(v)),
        (Exact(e), Prefix(v)) | (Prefix(v), Exact(e)) => prefix_matches(&v, &e).then_some(Exact(e)),
        (a, b) => (a == b).then_some(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::L7RuleId;

    fn rule(rule_type: RuleType, compare_type: CompareType, value: &str) -> L7Rule {
        L7Rule {
            id: L7RuleId::derive(value),
            rule_type,
            compare_type,
            key: None,
            value: value.into(),
        }
    }

    #[test]
    fn suffix_wildcards_match_one_or_more_labels() {
        assert!(suffix_matches("foo.com", "a.foo.com"));
        assert!(suffix_matches("foo.com", "a.b.foo.com"));
        assert!(!suffix_matches("foo.com", "foo.com"));
        assert!(!suffix_matches("foo.com", "afoo.com"));
        assert!(!suffix_matches("foo.com", ".foo.com"));
    }

    #[test]
    fn nested_suffix_wildcards_reduce_to_the_longer_one() {
        let rules = [
            rule(RuleType::HostName, CompareType::WildcardSuffix, "foo.com"),
            rule(RuleType::HostName, CompareType::WildcardSuffix, "a.foo.com"),
        ];
        assert_eq!(
            reduce(&rules).map(|r| r.0),
            Some(HostMatch::Suffix("a.foo.com".into()))
        );
        let exact = [
            rule(RuleType::HostName, CompareType::WildcardSuffix, "foo.com"),
            rule(RuleType::HostName, CompareType::EqualTo, "x.y.foo.com"),
        ];
        assert_eq!(
            reduce(&exact).map(|r| r.0),
            Some(HostMatch::Exact("x.y.foo.com".into()))
        );
    }

    #[test]
    fn header_rules_are_conditions_beside_host_and_path() {
        let mut header = rule(RuleType::Header, CompareType::EqualTo, "v1");
        header.key = Some("x-version".into());
        let rules = [rule(RuleType::Path, CompareType::PathPrefix, "/a"), header];
        assert_eq!(
            reduce(&rules),
            Some((HostMatch::Any, PathMatch::Prefix("/a".into())))
        );
        let want = Condition {
            field: Field::Header("x-version"),
            value: "v1",
            regex: false,
        };
        assert_eq!(conditions(&rules).collect::<Vec<_>>(), [want]);
        let keyless = rule(RuleType::Header, CompareType::EqualTo, "v1");
        assert_eq!(
            reduce(&[keyless]),
            None,
            "a header rule without a name never matches"
        );
        let mut method = rule(RuleType::Method, CompareType::Regex, "GET");
        assert_eq!(reduce(&[method.clone()]), None, "methods compare exactly");
        method.compare_type = CompareType::EqualTo;
        assert_eq!(conditions(&[method]).next().unwrap().field, Field::Method);
    }

    #[test]
    fn no_rules_match_every_host_and_path() {
        assert_eq!(
            reduce(&[]),
            Some((HostMatch::Any, PathMatch::Prefix("/".into())))
        );
    }

    #[test]
    fn nested_prefixes_reduce_to_the_longer_one() {
        let rules = [
            rule(RuleType::Path, CompareType::PathPrefix, "/a/b/"),
            rule(RuleType::Path, CompareType::PathPrefix, "/a"),
        ];
        assert_eq!(
            reduce(&rules).map(|r| r.1),
            Some(PathMatch::Prefix("/a/b".into()))
        );
    }

    #[test]
    fn disjoint_prefixes_never_match() {
        let rules = [
            rule(RuleType::Path, CompareType::PathPrefix, "/a"),
            rule(RuleType::Path, CompareType::PathPrefix, "/ab"),
        ];
        assert_eq!(reduce(&rules), None);
    }

    #[test]
    fn exact_host_inside_a_wildcard_reduces_to_the_exact_host() {
        let rules = [
            rule(RuleType::HostName, CompareType::WildcardLabel, "foo.com"),
            rule(RuleType::HostName, CompareType::EqualTo, "Bar.foo.com"),
        ];
        assert_eq!(
            reduce(&rules).map(|r| r.0),
            Some(HostMatch::Exact("bar.foo.com".into()))
        );
    }

    #[test]
    fn host_rule_with_a_path_comparison_never_matches() {
        assert_eq!(
            reduce(&[rule(RuleType::HostName, CompareType::PathPrefix, "/")]),
            None
        );
    }

    #[test]
    fn prefix_match_is_element_wise() {
        assert!(prefix_matches("/foo", "/foo"));
        assert!(prefix_matches("/foo", "/foo/"));
        assert!(prefix_matches("/foo", "/foo/bar"));
        assert!(!prefix_matches("/foo", "/foobar"));
        assert!(prefix_matches("/", "/anything"));
    }

    #[test]
    fn normalized_prefix_drops_trailing_slashes() {
        assert_eq!(normalize_prefix("/foo/"), "/foo");
        assert_eq!(normalize_prefix("/"), "/");
        assert_eq!(normalize_prefix(""), "/");
    }

    #[test]
    fn wildcard_suffix_needs_one_non_empty_label() {
        assert_eq!(wildcard_suffix("bar.foo.com"), Some("foo.com"));
        assert_eq!(wildcard_suffix(".foo.com"), None);
        assert_eq!(wildcard_suffix("localhost"), None);
    }
}
