//! Consistent hashing with a Maglev lookup table (Eisenbud et al., NSDI 2016): each member has
//! a permutation of the table's slots (an offset and a skip from two hashes of its key; the
//! table size is prime, so every skip visits every slot), and members take turns claiming
//! their next free slot, more turns for more weight, until the table is full. A request key
//! hashes to a slot, the slot names the member.
//!
//! The table is balanced (each member owns its weight's share of slots, within one slot per
//! round) and a change of members moves few keys: those of a removed member, plus a small
//! fraction (a few percent when the table has at least 100 slots per member) of the others.
//!
//! The table size depends on the number of members: [`SMALL`] slots up to
//! [`SMALL_MEMBERS`] members, [`LARGE`] beyond; crossing that line rebuilds the table at the
//! other size and moves most keys once.

use crate::hash::hash64;

/// Table size for pools of up to [`SMALL_MEMBERS`] members (a prime).
pub const SMALL: usize = 4099;
/// Table size for larger pools (a prime).
pub const LARGE: usize = 65537;
/// The most members a [`SMALL`] table serves (about 100 slots each).
pub const SMALL_MEMBERS: usize = 40;

/// How many other slots a key tries when its member may not take the request, before the
/// first eligible member in order is used.
const PROBES: u64 = 16;

/// A Maglev lookup table: for each slot, the index of its member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maglev {
    slots: Vec<u32>,
    members: usize,
}

impl Maglev {
    /// The table for members with these stable keys (e.g. a hash of the member's id) and
    /// weights (0 counts as 1). An empty member list gives an empty table.
    pub fn new(keys: &[u64], weights: &[u32]) -> Self {
        let size = if keys.len() <= SMALL_MEMBERS {
            SMALL
        } else {
            LARGE
        };
        Self::with_size(keys, weights, size)
    }

    /// Like [`Maglev::new`] with a given table size, which must be a prime larger than the
    /// number of members.
    pub fn with_size(keys: &[u64], weights: &[u32], size: usize) -> Self {
        let n = keys.len();
        if n == 0 {
            return Maglev {
                slots: Vec::new(),
                members: 0,
            };
        }
        let m = size as u64;
        let perm: Vec<(u64, u64)> = keys
            .iter()
            .map(|k| {
                let bytes = k.to_le_bytes();
                let offset = hash64(1, &bytes) % m;
                let skip = hash64(2, &bytes) % (m - 1) + 1;
                (offset, skip)
            })
            .collect();
        let weights: Vec<u64> = (0..n)
            .map(|i| u64::from(weights.get(i).copied().unwrap_or(1).max(1)))
            .collect();
        let max_w = weights.iter().copied().max().unwrap_or(1);
        let mut next = vec![0u64; n];
        let mut credit = vec![0u64; n];
        let mut slots = vec![u32::MAX; size];
        let mut filled = 0;
        'fill: loop {
            for i in 0..n {
                credit[i] += weights[i];
                if credit[i] < max_w {
                    continue;
                }
                credit[i] -= max_w;
                let (offset, skip) = perm[i];
                loop {
                    let c = ((offset + next[i] * skip) % m) as usize;
                    next[i] += 1;
                    if slots[c] == u32::MAX {
                        slots[c] = i as u32;
                        filled += 1;
                        break;
                    }
                }
                if filled == size {
                    break 'fill;
                }
            }
        }
        Maglev { slots, members: n }
    }

    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// The member of a key's hash, whatever its health.
    pub fn get(&self, hash: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        Some(self.slots[(hash % self.slots.len() as u64) as usize] as usize)
    }

    /// The member for a key's hash among those `eligible` allows: the table's member when it
    /// is eligible, else the member of another slot derived from the same hash (so the keys of
    /// an ejected member spread over the others, and come back when it does), else the first
    /// eligible member. `None` when none is eligible.
    pub fn pick(&self, hash: u64, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        let first = self.get(hash)?;
        if eligible(first) {
            return Some(first);
        }
        for probe in 1..=PROBES {
            let h = hash64(probe, &hash.to_le_bytes());
            let i = self.get(h)?;
            if eligible(i) {
                return Some(i);
            }
        }
        (0..self.members).find(|&i| eligible(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys(n: u64) -> Vec<u64> {
        (0..n).map(|i| hash64(9, &i.to_le_bytes())).collect()
    }

    #[test]
    fn balanced_and_weighted() {
        let t = Maglev::new(&keys(3), &[1, 1, 1]);
        assert_eq!(t.size(), SMALL);
        let mut counts = [0usize; 3];
        for s in &t.slots {
            counts[*s as usize] += 1;
        }
        for c in counts {
            assert!(c.abs_diff(SMALL / 3) <= 2, "{counts:?}");
        }
        let t = Maglev::new(&keys(2), &[3, 1]);
        let heavy = t.slots.iter().filter(|s| **s == 0).count();
        assert!(heavy.abs_diff(SMALL * 3 / 4) <= 3, "{heavy}");
        assert_eq!(Maglev::new(&keys(41), &[1; 41]).size(), LARGE);
        assert_eq!(Maglev::new(&[], &[]).get(5), None);
    }

    #[test]
    fn ineligible_member_keys_go_elsewhere_and_come_back() {
        let t = Maglev::new(&keys(4), &[1; 4]);
        for h in 0..500u64 {
            let h = hash64(0, &h.to_le_bytes());
            let own = t.get(h).unwrap();
            let other = t.pick(h, |i| i != own).unwrap();
            assert_ne!(other, own);
            assert_eq!(t.pick(h, |_| true), Some(own));
        }
        assert_eq!(t.pick(1, |_| false), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// Removing one member moves its keys and at most a small fraction of the others.
        #[test]
        fn removal_moves_few_keys(n in 3u64..30, gone in 0usize..30) {
            let gone = gone % n as usize;
            let all = keys(n);
            let before = Maglev::new(&all, &vec![1; all.len()]);
            let mut rest = all.clone();
            rest.remove(gone);
            let after = Maglev::new(&rest, &vec![1; rest.len()]);
            let mut moved = 0;
            let samples = 20_000u64;
            for k in 0..samples {
                let h = hash64(7, &k.to_le_bytes());
                let old = before.get(h).unwrap();
                let new = after.get(h).unwrap();
                // Indices after the removed one shift by one.
                let old_key = all[old];
                if old == gone {
                    continue;
                }
                if rest[new] != old_key {
                    moved += 1;
                }
            }
            prop_assert!((moved as f64) < samples as f64 * 0.08, "moved {} of {}", moved, samples);
        }
    }
}
