//! Active health: the outcome of periodic checks. A member starts healthy; `unhealthy` failed
//! checks in a row take it out of rotation, `healthy` passed checks in a row bring it back (as
//! haproxy's `fall` and `rise`).

/// One member's active health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Active {
    healthy: bool,
    /// Checks in a row whose outcome disagrees with `healthy`.
    streak: u32,
}

impl Default for Active {
    fn default() -> Self {
        Active {
            healthy: true,
            streak: 0,
        }
    }
}

impl Active {
    pub fn is_healthy(&self) -> bool {
        self.healthy
    }

    /// Failed checks in a row while healthy, or passed checks in a row while unhealthy.
    pub fn streak(&self) -> u32 {
        self.streak
    }

    /// One check's outcome; returns whether the member changed state.
    pub fn record(&mut self, passed: bool, healthy: u32, unhealthy: u32) -> bool {
        if passed == self.healthy {
            self.streak = 0;
            return false;
        }
        self.streak += 1;
        let needed = if self.healthy { unhealthy } else { healthy };
        if self.streak >= needed.max(1) {
            self.healthy = passed;
            self.streak = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let mut a = Active::default();
        assert!(a.is_healthy());
        assert!(!a.record(false, 2, 3));
        assert!(!a.record(false, 2, 3));
        assert!(a.record(false, 2, 3));
        assert!(!a.is_healthy());
        assert!(!a.record(true, 2, 3));
        assert!(!a.record(false, 2, 3));
        assert!(!a.record(true, 2, 3));
        assert!(a.record(true, 2, 3));
        assert!(a.is_healthy());
        // A pass between failures starts the count over.
        a.record(false, 2, 3);
        a.record(false, 2, 3);
        a.record(true, 2, 3);
        assert!(!a.record(false, 2, 3));
        assert!(a.is_healthy());
    }
}
