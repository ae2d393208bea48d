//! Pure: haproxy's descriptor count for one load balancer, and what the load balancer gives up
//! so that haproxy starts within the descriptor limit it inherits from Portico.
//!
//! Before it serves, haproxy 2.6 adds up the descriptors it may need (`global.maxsock`): one
//! per listening socket (each bind address, the stats socket, the master CLI) and per
//! connection those CLIs take (10 each), one per server with `check` (however rarely the
//! checks overlap), two per connection under the global `maxconn`, and three per thread (an
//! epoll descriptor and a wake-up pipe). It raises its soft limit to that sum and, with
//! `strict-limits` (the default since 2.3), exits when the hard limit is lower: "Cannot
//! raise FD limit to N, limit is M". `fd-hard-limit` only bounds a `maxconn` haproxy
//! computes itself; with the explicit `maxconn` Portico writes, the sum is Portico's to fit.
//!
//! When the sum would pass the limit, the load balancer gives up, in this order and only
//! what it must:
//! 1. the checks of passive ejection: a server whose pool asks for no active health check
//!    carries `check` only so that `observe layer7` can mark it down and bring it back
//!    (haproxy observes only checked servers); without them its pool has no passive
//!    ejection in haproxy, and a failed connection still goes to another member;
//! 2. connections: `maxconn` lowered to what the limit leaves, not below [`MIN_MAXCONN`];
//! 3. active health checks, and `maxconn` to what is left without them.
//!
//! Every step is named in a warning on the load balancer ([`Fit::diagnostic`]).

use portico_model::{Diagnostic, ObjectRef};

/// The stats socket and the master CLI: their listeners, the 10 connections each accepts,
/// and what else haproxy counts for them (33 measured with haproxy 2.6), with room to spare.
const CLI: u64 = 64;
/// Three per thread, for haproxy's largest default thread count (64, one per CPU).
const THREADS: u64 = 3 * 64;
/// Descriptors haproxy holds without counting them: standard streams, the access log socket,
/// the master's pipes to its worker.
const UNCOUNTED: u64 = 16;
/// The fewest connections `maxconn` is lowered to before active checks give way.
pub const MIN_MAXCONN: usize = 256;

/// What one load balancer's haproxy needs descriptors for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// Bind addresses.
    pub listeners: usize,
    /// Servers (spare slots included) of pools with an active health check.
    pub active_checks: usize,
    /// Servers (spare slots included) checked only for passive ejection.
    pub passive_checks: usize,
    /// The `maxconn` asked for (`--max-connections`).
    pub max_connections: usize,
}

impl Needs {
    /// The descriptors haproxy counts with `checks` and `maxconn`, with Portico's margins.
    pub fn count(&self, checks: Checks, maxconn: usize) -> u64 {
        let checked = [
            (checks.active, self.active_checks),
            (checks.passive, self.passive_checks),
        ];
        let checked: usize = checked.iter().filter(|(on, _)| *on).map(|(_, n)| n).sum();
        self.fixed() + as_u64(checked) + 2 * as_u64(maxconn)
    }

    /// Everything but the checks and the connections.
    fn fixed(&self) -> u64 {
        as_u64(self.listeners) + CLI + THREADS + UNCOUNTED
    }
}

/// Which servers carry `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checks {
    pub active: bool,
    pub passive: bool,
}

impl Checks {
    pub const ALL: Checks = Checks {
        active: true,
        passive: true,
    };
}

/// What a load balancer's haproxy is given: its `maxconn` and which servers are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    pub maxconn: usize,
    pub checks: Checks,
    /// What was given up, in order; empty when everything fits.
    pub reductions: Vec<Reduction>,
    /// The descriptors counted with everything asked for, with what is given, and the limit.
    pub wanted: u64,
    pub given: u64,
    pub limit: Option<u64>,
}

/// One thing given up to fit the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// `check` left out on this many servers of pools without an active health check.
    PassiveChecks(usize),
    /// `check` left out on this many servers of pools with an active health check.
    ActiveChecks(usize),
    /// `maxconn` lowered.
    MaxConn { from: usize, to: usize },
}

/// Pure: `maxconn` and checks for `needs` under the hard descriptor `limit` (`None`:
/// unlimited or unknown, nothing is reduced). When even no check and a `maxconn` of 1 do not
/// fit, that is what it gives, and haproxy's refusal to start becomes the diagnostic.
pub fn fit(limit: Option<u64>, needs: &Needs) -> Fit {
    let wanted = needs.count(Checks::ALL, needs.max_connections);
    let mut fit = Fit {
        maxconn: needs.max_connections,
        checks: Checks::ALL,
        reductions: Vec::new(),
        wanted,
        given: wanted,
        limit,
    };
    let Some(limit) = limit.filter(|l| wanted > *l) else {
        return fit;
    };
    if needs.passive_checks > 0 {
        fit.checks.passive = false;
        fit.reductions
            .push(Reduction::PassiveChecks(needs.passive_checks));
    }
    let floor = needs.max_connections.min(MIN_MAXCONN);
    let room = |checks| connections(limit, needs, checks);
    if room(fit.checks) < floor && needs.active_checks > 0 {
        fit.checks.active = false;
        fit.reductions
            .push(Reduction::ActiveChecks(needs.active_checks));
    }
    let maxconn = room(fit.checks).clamp(1, needs.max_connections);
    if maxconn < needs.max_connections {
        let from = needs.max_connections;
        fit.reductions
            .push(Reduction::MaxConn { from, to: maxconn });
        fit.maxconn = maxconn;
    }
    fit.given = needs.count(fit.checks, fit.maxconn);
    fit
}

/// The most connections `limit` leaves beside `checks`.
fn connections(limit: u64, needs: &Needs, checks: Checks) -> usize {
    let left = limit.saturating_sub(needs.count(checks, 0)) / 2;
    usize::try_from(left).unwrap_or(usize::MAX)
}

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Fit {
    /// A warning on `object` naming what was given up and why; `None` when nothing was.
    pub fn diagnostic(&self, object: &ObjectRef) -> Option<Diagnostic> {
        let limit = self.limit?;
        if self.reductions.is_empty() {
            return None;
        }
        let given_up: Vec<String> = self.reductions.iter().map(Reduction::describe).collect();
        let mut message = format!(
            "haproxy would need {} file descriptors, more than the descriptor limit {limit} it \
             inherits from Portico: {}",
            self.wanted,
            given_up.join("; ")
        );
        if self.given > limit {
            message.push_str("; even so it does not fit, and haproxy will refuse to start");
        }
        message.push_str(
            ". Raise the hard limit (ulimit -Hn, systemd's LimitNOFILE, the container \
             runtime's nofile) to keep them",
        );
        Some(Diagnostic::warning(object.clone(), "", message))
    }
}

impl Reduction {
    fn describe(&self) -> String {
        match self {
            Reduction::PassiveChecks(n) => format!(
                "passive health checks left out on {n} servers of pools without an active \
                 health check (haproxy ejects a server after errors only when it checks it; \
                 a failed connection still goes to another member)"
            ),
            Reduction::ActiveChecks(n) => format!(
                "active health checks left out on {n} servers (their members stay in \
                 rotation whatever their health endpoint answers)"
            ),
            Reduction::MaxConn { from, to } => {
                format!("haproxy's maxconn reduced from {from} to {to}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(active: usize, passive: usize, maxconn: usize) -> Needs {
        Needs {
            listeners: 2,
            active_checks: active,
            passive_checks: passive,
            max_connections: maxconn,
        }
    }

    fn class() -> ObjectRef {
        ObjectRef::new("IngressClass", "", "portico")
    }

    /// The descriptors besides checks and connections, for `needs` above.
    const FIXED: u64 = 2 + CLI + THREADS + UNCOUNTED;

    #[test]
    fn what_fits_is_left_alone() {
        let n = needs(100, 5_000, 4096);
        let fit = fit(Some(20_000), &n);
        assert_eq!((fit.maxconn, fit.checks), (4096, Checks::ALL));
        assert!(fit.reductions.is_empty());
        assert_eq!(fit.wanted, FIXED + 5_100 + 8192);
        assert_eq!(fit.diagnostic(&class()), None);
        // Unlimited or unknown: nothing to fit.
        assert!(
            super::fit(None, &needs(0, 1_000_000, 4096))
                .reductions
                .is_empty()
        );
    }

    #[test]
    fn passive_checks_go_first_and_alone_when_that_is_enough() {
        // The scale benchmark's shape: 50,000 members and a spare per pool, 5,000 pools.
        let fit = fit(Some(20_000), &needs(0, 55_000, 4096));
        assert_eq!(fit.reductions, [Reduction::PassiveChecks(55_000)]);
        let checks = Checks {
            active: true,
            passive: false,
        };
        assert_eq!((fit.maxconn, fit.checks), (4096, checks));
        assert_eq!(fit.wanted, FIXED + 55_000 + 8192);
    }

    #[test]
    fn then_maxconn_is_lowered_to_what_the_limit_leaves() {
        let fit = fit(Some(1024), &needs(100, 300, 4096));
        let to = usize::try_from((1024 - FIXED - 100) / 2).unwrap();
        assert_eq!(
            fit.reductions,
            [
                Reduction::PassiveChecks(300),
                Reduction::MaxConn { from: 4096, to }
            ]
        );
        assert!(fit.checks.active);
        assert!(needs(100, 300, 4096).count(fit.checks, fit.maxconn) <= 1024);
        let d = fit.diagnostic(&class()).unwrap();
        assert!(
            d.message
                .contains(&format!("haproxy's maxconn reduced from 4096 to {to}"))
                && d.message.contains("descriptor limit 1024"),
            "{}",
            d.message
        );
        assert!(
            d.message
                .contains("passive health checks left out on 300 servers")
        );
    }

    #[test]
    fn active_checks_give_way_only_below_the_floor_of_maxconn() {
        // With its 900 active checks the limit would leave fewer than 256 connections.
        let limit = FIXED + 900 + 2 * 255;
        let fit = fit(Some(limit), &needs(900, 0, 4096));
        let to = usize::try_from((limit - FIXED) / 2).unwrap();
        assert_eq!(
            fit.reductions,
            [
                Reduction::ActiveChecks(900),
                Reduction::MaxConn { from: 4096, to }
            ]
        );
        assert!(!fit.checks.active);
        // One more connection's worth of room keeps them.
        let fit = super::fit(Some(limit + 2), &needs(900, 0, 4096));
        assert!(fit.checks.active);
        assert_eq!(fit.maxconn, 256);
    }

    /// Asked for fewer connections than the floor, maxconn is not lowered before the active
    /// checks go.
    #[test]
    fn a_small_maxconn_is_its_own_floor() {
        let fit = fit(Some(FIXED + 50 + 2 * 100), &needs(50, 0, 100));
        assert!(fit.reductions.is_empty());
        let fit = super::fit(Some(FIXED + 50 + 2 * 99), &needs(50, 0, 100));
        assert_eq!(fit.reductions, [Reduction::ActiveChecks(50)]);
        assert_eq!(fit.maxconn, 100);
    }

    #[test]
    fn a_limit_nothing_fits_in_says_haproxy_will_refuse() {
        let fit = fit(Some(100), &needs(10, 10, 4096));
        assert_eq!(fit.maxconn, 1);
        assert_eq!(
            fit.checks,
            Checks {
                active: false,
                passive: false
            }
        );
        let d = fit.diagnostic(&class()).unwrap();
        assert!(
            d.message.contains("haproxy will refuse to start"),
            "{}",
            d.message
        );
    }

    proptest::proptest! {
        /// Whatever is asked, what is given fits whenever a maxconn of 1 without checks
        /// fits, and never asks for more than was asked.
        #[test]
        fn the_fit_is_within_the_limit_and_the_asked(
            listeners in 0usize..10, active in 0usize..100_000, passive in 0usize..100_000,
            maxconn in 1usize..100_000, limit in 0u64..300_000,
        ) {
            let n = Needs { listeners, active_checks: active, passive_checks: passive, max_connections: maxconn };
            let fit = fit(Some(limit), &n);
            proptest::prop_assert!(fit.maxconn >= 1 && fit.maxconn <= maxconn);
            let none = Checks { active: false, passive: false };
            if n.count(none, 1) <= limit {
                proptest::prop_assert!(n.count(fit.checks, fit.maxconn) <= limit);
            }
            // Nothing given up that was not needed: everything asked fits, or something went.
            proptest::prop_assert_eq!(fit.reductions.is_empty(), n.count(Checks::ALL, maxconn) <= limit);
        }
    }
}
