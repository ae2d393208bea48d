//! What a policy does with a request: one target, or a weighted split between several (a
//! Gateway API rule with several backendRefs), and the header conditions a policy may add.

use super::pool::Target;
use portico_balance::wrr::SmoothWrr;
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

/// The request's header fields, for the header conditions of policies.
pub trait RequestHeaders {
    /// Whether a field named `name` (lower-case; names compare case-insensitively) has
    /// exactly the value `value`.
    fn has(&self, name: &str, value: &str) -> bool;
}

/// No header fields (routing by host and path alone).
impl RequestHeaders for () {
    fn has(&self, _: &str, _: &str) -> bool {
        false
    }
}

impl RequestHeaders for http::HeaderMap {
    fn has(&self, name: &str, value: &str) -> bool {
        self.get_all(name)
            .iter()
            .any(|v| v.as_bytes() == value.as_bytes())
    }
}

impl RequestHeaders for &[httparse::Header<'_>] {
    fn has(&self, name: &str, value: &str) -> bool {
        self.iter()
            .any(|h| h.name.eq_ignore_ascii_case(name) && h.value == value.as_bytes())
    }
}

/// The header conditions of one policy: all must hold.
pub(crate) type Guard = Box<[(Box<str>, Box<str>)]>;

pub(crate) fn holds(guard: &Guard, headers: &dyn RequestHeaders) -> bool {
    guard.iter().all(|(name, value)| headers.has(name, value))
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
}
