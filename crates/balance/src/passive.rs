//! Passive health: a member that fails `failures` times in a row is ejected (out of rotation)
//! for the ejection time, doubled at each ejection in a row up to a maximum. Back in rotation
//! when the time is up; the doubling starts over after its first success.
//!
//! The last member in rotation is never ejected: the caller says, at each failure, whether
//! another member of the pool is in rotation (`may_eject`). When none is, the member stays,
//! its failures keep counting, and its next failure after another member is back ejects it.
//! So passive health alone never empties a pool: with every member failing, requests keep
//! reaching one of them rather than none.
//!
//! Failures reported while a member is ejected (requests that started before) are ignored.

use std::time::Duration;

/// The thresholds of passive health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassiveConfig {
    /// Failures in a row that eject; 0 turns passive health off.
    pub failures: u32,
    /// The first ejection's length.
    pub ejection: Duration,
    /// The longest ejection.
    pub max_ejection: Duration,
}

/// One member's passive health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passive {
    failures: u32,
    /// Ejections in a row (without a success in between).
    ejections: u32,
    ejected_until: Option<Duration>,
}

impl Passive {
    /// Whether the member is out of rotation at `now`.
    pub fn is_ejected(&self, now: Duration) -> bool {
        self.ejected_until.is_some_and(|until| now < until)
    }

    /// Until when the member is out, if it is at `now`.
    pub fn ejected_until(&self, now: Duration) -> Option<Duration> {
        self.ejected_until.filter(|until| now < *until)
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Ejections in a row so far.
    pub fn ejections(&self) -> u32 {
        self.ejections
    }

    /// A success: the failures in a row and the doubling start over.
    pub fn success(&mut self, now: Duration) {
        if self.is_ejected(now) {
            return;
        }
        self.failures = 0;
        self.ejections = 0;
        self.ejected_until = None;
    }

    /// A failure at `now`. Returns the end of the ejection when this failure ejects the member.
    pub fn failure(
        &mut self,
        now: Duration,
        config: &PassiveConfig,
        may_eject: bool,
    ) -> Option<Duration> {
        if config.failures == 0 || self.is_ejected(now) {
            return None;
        }
        self.failures = self.failures.saturating_add(1);
        if self.failures < config.failures || !may_eject {
            return None;
        }
        let doubling = 1u32.checked_shl(self.ejections).unwrap_or(u32::MAX);
        let length = (config.ejection.saturating_mul(doubling)).min(config.max_ejection);
        self.ejections = self.ejections.saturating_add(1);
        self.failures = 0;
        let until = now + length;
        self.ejected_until = Some(until);
        Some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const CONFIG: PassiveConfig = PassiveConfig {
        failures: 3,
        ejection: Duration::from_secs(10),
        max_ejection: Duration::from_secs(300),
    };

    #[test]
    fn ejects_after_failures_in_row_and_comes_back() {
        let mut p = Passive::default();
        assert_eq!(p.failure(S, &CONFIG, true), None);
        assert_eq!(p.failure(S, &CONFIG, true), None);
        assert_eq!(p.failure(S, &CONFIG, true), Some(S * 11));
        assert!(p.is_ejected(S * 10));
        assert_eq!(p.ejected_until(S * 10), Some(S * 11));
        // Late failures of requests started earlier do not extend it.
        assert_eq!(p.failure(S * 5, &CONFIG, true), None);
        assert!(!p.is_ejected(S * 11));
    }

    #[test]
    fn a_success_resets_the_count() {
        let mut p = Passive::default();
        p.failure(S, &CONFIG, true);
        p.failure(S, &CONFIG, true);
        p.success(S);
        assert_eq!(p.failure(S, &CONFIG, true), None);
        assert_eq!(p.failures(), 1);
    }

    #[test]
    fn back_off_doubles_up_to_the_maximum_and_resets_after_success() {
        let mut p = Passive::default();
        let mut now = Duration::ZERO;
        let mut lengths = Vec::new();
        for _ in 0..7 {
            let until = (0..3).find_map(|_| p.failure(now, &CONFIG, true)).unwrap();
            lengths.push((until - now).as_secs());
            now = until;
        }
        assert_eq!(lengths, [10, 20, 40, 80, 160, 300, 300]);
        p.success(now);
        let until = (0..3).find_map(|_| p.failure(now, &CONFIG, true)).unwrap();
        assert_eq!(until - now, S * 10);
    }

    #[test]
    fn the_last_member_in_rotation_is_not_ejected() {
        let mut p = Passive::default();
        for _ in 0..10 {
            assert_eq!(p.failure(S, &CONFIG, false), None);
        }
        assert!(!p.is_ejected(S));
        // Once another member is in rotation, the next failure ejects.
        assert_eq!(p.failure(S, &CONFIG, true), Some(S * 11));
    }

    #[test]
    fn zero_failures_turns_it_off() {
        let off = PassiveConfig {
            failures: 0,
            ..CONFIG
        };
        let mut p = Passive::default();
        for _ in 0..10 {
            assert_eq!(p.failure(S, &off, true), None);
        }
    }
}
