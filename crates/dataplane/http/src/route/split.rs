//! What a policy does with a request: one target, or a weighted split between several (a
//! Gateway API rule with several backendRefs, an Ingress and its canary), and the header and
//! cookie conditions a policy may add.

use super::pool::Target;
use portico_balance::wrr::SmoothWrr;
use portico_model::matching::Condition;
use regex::{Regex, RegexBuilder};
use std::sync::{Arc, Mutex, PoisonError};

/// A compiled policy action.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    One(Target),
    Split(Arc<Split>),
}

impl Action {
    /// The target of one request: a split draws a share.
    pub(crate) fn target(&self) -> &Target {
        match self {
            Action::One(target) => target,
            Action::Split(split) => split.pick(),
        }
    }
}

/// Shares of requests by weight, interleaved (smooth weighted round robin): over any run of
/// `sum(weights)` requests each share gets exactly its weight. A share of weight 0 gets
/// nothing; when every share weighs 0, every request is answered 500.
#[derive(Debug)]
pub(crate) struct Split {
    targets: Vec<Target>,
    weights: Vec<u32>,
    turn: Mutex<SmoothWrr>,
    none: Target,
}

impl Split {
    pub(crate) fn new(shares: Vec<(Target, u32)>) -> Self {
        let (targets, weights): (Vec<_>, Vec<_>) = shares.into_iter().unzip();
        Split {
            turn: Mutex::new(SmoothWrr::new(targets.len())),
            targets,
            weights,
            none: Target::Reject(500),
        }
    }

    fn pick(&self) -> &Target {
        let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let picked = turn.pick(&self.weights, |i| self.weights[i] > 0);
        picked.map_or(&self.none, |i| &self.targets[i])
    }
}

/// The request's header fields, for the header and cookie conditions of policies.
pub trait RequestHeaders {
    /// Whether some field named `name` (lower-case; names compare case-insensitively) has a
    /// value for which `test` holds.
    fn any(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool;

    /// Whether a field named `name` has exactly the value `value`.
    fn has(&self, name: &str, value: &str) -> bool {
        self.any(name, &mut |v| v == value.as_bytes())
    }
}

/// No header fields (routing by host and path alone).
impl RequestHeaders for () {
    fn any(&self, _: &str, _: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        false
    }
}

impl RequestHeaders for http::HeaderMap {
    fn any(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.get_all(name).iter().any(|v| test(v.as_bytes()))
    }
}

impl RequestHeaders for &[httparse::Header<'_>] {
    fn any(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.iter()
            .any(|h| h.name.eq_ignore_ascii_case(name) && test(h.value))
    }
}

/// One condition of a policy, compiled.
#[derive(Debug)]
pub(crate) enum Check {
    Header(Box<str>, Box<str>),
    /// A search in the value, case-sensitive; `None`: the expression did not compile and the
    /// condition never holds.
    HeaderRegex(Box<str>, Option<Regex>),
    Cookie(Box<str>, Box<str>),
}

impl Check {
    pub(crate) fn of(condition: Condition<'_>) -> Self {
        match condition {
            Condition::Header(name, value) => Check::Header(name.into(), value.into()),
            Condition::HeaderRegex(name, pattern) => {
                let regex = RegexBuilder::new(pattern)
                    .size_limit(super::options::REGEX_SIZE_LIMIT)
                    .build()
                    .ok();
                Check::HeaderRegex(name.into(), regex)
            }
            Condition::Cookie(name, value) => Check::Cookie(name.into(), value.into()),
        }
    }

    fn holds(&self, headers: &dyn RequestHeaders) -> bool {
        match self {
            Check::Header(name, value) => headers.has(name, value),
            Check::HeaderRegex(name, regex) => regex.as_ref().is_some_and(|re| {
                headers.any(name, &mut |v| {
                    std::str::from_utf8(v).is_ok_and(|v| re.is_match(v))
                })
            }),
            Check::Cookie(name, value) => headers.any("cookie", &mut |field| {
                cookie(field, name).is_some_and(|v| v == value.as_bytes())
            }),
        }
    }
}

/// The value of the first cookie named `name` in a `Cookie` field (`a=1; b=2`).
fn cookie<'a>(field: &'a [u8], name: &str) -> Option<&'a [u8]> {
    field.split(|b| *b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let at = pair.iter().position(|b| *b == b'=')?;
        (&pair[..at] == name.as_bytes()).then(|| &pair[at + 1..])
    })
}

/// The conditions of one policy: all must hold.
pub(crate) type Guard = Box<[Check]>;

pub(crate) fn holds(guard: &Guard, headers: &dyn RequestHeaders) -> bool {
    guard.iter().all(|check| check.holds(headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(split: &Split, n: usize) -> Vec<u16> {
        (0..n)
            .map(|_| match split.pick() {
                Target::Reject(status) => *status,
                _ => 0,
            })
            .collect()
    }

    #[test]
    fn shares_are_drawn_by_weight_and_interleaved() {
        let split = Split::new(vec![(Target::Reject(201), 3), (Target::Reject(202), 1)]);
        assert_eq!(
            statuses(&split, 8),
            [201, 201, 202, 201, 201, 201, 202, 201]
        );
    }

    #[test]
    fn weight_zero_gets_nothing_and_all_zero_answers_500() {
        let split = Split::new(vec![(Target::Reject(201), 0), (Target::Reject(202), 2)]);
        assert_eq!(statuses(&split, 3), [202, 202, 202]);
        let none = Split::new(vec![(Target::Reject(201), 0)]);
        assert_eq!(statuses(&none, 2), [500, 500]);
    }

    #[test]
    fn header_names_compare_case_insensitively_and_values_exactly() {
        let mut map = http::HeaderMap::new();
        map.append("X-Version", "v1".parse().unwrap());
        map.append("x-version", "v2".parse().unwrap());
        assert!(map.has("x-version", "v2"));
        assert!(!map.has("x-version", "V1"));
        let fields = [httparse::Header {
            name: "X-Version",
            value: b"v1",
        }];
        let fields = &fields[..];
        assert!(fields.has("x-version", "v1"));
        assert!(!fields.has("x-other", "v1"));
    }

    #[test]
    fn cookies_and_header_patterns_are_conditions() {
        let mut map = http::HeaderMap::new();
        map.append("cookie", "a=1; canary=always;b=never".parse().unwrap());
        map.append("x-canary", "beta-2".parse().unwrap());
        let check = |c| holds(&Box::from([Check::of(c)]), &map);
        assert!(check(Condition::Cookie("canary", "always")));
        assert!(check(Condition::Cookie("b", "never")));
        assert!(!check(Condition::Cookie("Canary", "always")));
        assert!(!check(Condition::Cookie("c", "")));
        assert!(check(Condition::HeaderRegex("x-canary", "^beta-[0-9]$")));
        assert!(check(Condition::HeaderRegex("x-canary", "ta")));
        assert!(!check(Condition::HeaderRegex("x-canary", "BETA")));
        assert!(!check(Condition::HeaderRegex("x-canary", "(")));
    }
}
