//! What a policy does with a request: one target, or a weighted split between several (a
//! Gateway API rule with several backendRefs, an Ingress and its canary).

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

    /// Every target the action may send a request to.
    pub(crate) fn targets(&self) -> &[Target] {
        match self {
            Action::One(target) => std::slice::from_ref(target),
            Action::Split(split) => &split.targets,
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
}
