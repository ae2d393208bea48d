//! Smooth weighted round robin, nginx's algorithm: at each pick every eligible member's
//! current weight grows by its weight, the member with the largest current weight is picked
//! (the first on ties) and loses the sum of the eligible weights. Over any run of
//! `sum(weights)` picks each member is picked `weight` times, interleaved (weights 5, 1, 1 give
//! `a a b a c a a`, not `a a a a a b c`). Equal weights give plain rotation.

/// The state of one pool: a current weight per member, in the pool's member order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmoothWrr {
    current: Vec<i64>,
}

impl SmoothWrr {
    pub fn new(members: usize) -> Self {
        SmoothWrr {
            current: vec![0; members],
        }
    }

    /// The state for a new member list, keeping the current weight of each member that stays:
    /// `previous[i]` is the old index of new member `i`, if it was there.
    pub fn remap(&self, previous: &[Option<usize>]) -> Self {
        let current = previous
            .iter()
            .map(|old| old.and_then(|i| self.current.get(i).copied()).unwrap_or(0))
            .collect();
        SmoothWrr { current }
    }

    pub fn len(&self) -> usize {
        self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// Picks a member among those `eligible` says may take the request; `weights[i]` is member
    /// `i`'s weight (0 counts as 1: a ready member with weight 0 still gets its turn, as a
    /// Kubernetes endpoint has no weight). `None` when no member is eligible.
    pub fn pick(&mut self, weights: &[u32], eligible: impl Fn(usize) -> bool) -> Option<usize> {
        if self.current.len() != weights.len() {
            self.current.resize(weights.len(), 0);
        }
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for (i, w) in weights.iter().enumerate() {
            if !eligible(i) {
                continue;
            }
            let w = i64::from((*w).max(1));
            self.current[i] += w;
            total += w;
            if best.is_none_or(|b| self.current[i] > self.current[b]) {
                best = Some(i);
            }
        }
        let best = best?;
        self.current[best] -= total;
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nginx_sequence() {
        let mut wrr = SmoothWrr::new(3);
        let picks: Vec<usize> = (0..7)
            .map(|_| wrr.pick(&[5, 1, 1], |_| true).unwrap())
            .collect();
        assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn equal_weights_rotate() {
        let mut wrr = SmoothWrr::new(3);
        let picks: Vec<usize> = (0..6)
            .map(|_| wrr.pick(&[1, 1, 1], |_| true).unwrap())
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn ineligible_members_are_skipped_and_none_when_empty() {
        let mut wrr = SmoothWrr::new(3);
        for _ in 0..10 {
            assert_ne!(wrr.pick(&[1, 1, 1], |i| i != 1), Some(1));
        }
        assert_eq!(wrr.pick(&[1, 1, 1], |_| false), None);
        assert_eq!(SmoothWrr::default().pick(&[], |_| true), None);
    }

    #[test]
    fn remap_keeps_positions() {
        let mut wrr = SmoothWrr::new(3);
        wrr.pick(&[1, 1, 1], |_| true);
        // Member 0 removed: the new list is (old 1, old 2, a new one).
        let next = wrr.remap(&[Some(1), Some(2), None]);
        assert_eq!(next.current, vec![wrr.current[1], wrr.current[2], 0]);
    }

    proptest! {
        #[test]
        fn shares_follow_weights(weights in proptest::collection::vec(1u32..6, 1..6)) {
            let mut wrr = SmoothWrr::new(weights.len());
            let total: u32 = weights.iter().sum();
            let mut counts = vec![0u32; weights.len()];
            for _ in 0..total * 3 {
                counts[wrr.pick(&weights, |_| true).unwrap()] += 1;
            }
            for (c, w) in counts.iter().zip(&weights) {
                prop_assert_eq!(*c, w * 3);
            }
        }
    }
}
