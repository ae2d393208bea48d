//! Where the time of one change went, from the logs (pure): rename → the controller's
//! `configuration compiled` (file watch, debounce, parse, translate) → `desired state written to
//! etcd` (encode, diff, the etcd txn and its fsync) → the later agent's `desired state applied`
//! of that revision or a newer one (etcd watch, mirror, decode, apply) → the first answer the
//! bench saw (its polling).

use super::changes::Sample;
use super::logs::{Event, Kind};
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    pub compile: Duration,
    pub write: Duration,
    pub apply: Duration,
    pub serve: Duration,
}

/// The steps of `sample`, if every one of them is in the logs.
pub fn of(sample: &Sample, controller: &[Event], agents: [&[Event]; 2]) -> Option<Steps> {
    let compiled = first_after(controller, sample.wall, |k| k == Kind::Compiled)?;
    let (written, revision) = controller.iter().find_map(|e| match e.kind {
        Kind::Written { revision } if e.at >= compiled => Some((e.at, revision)),
        _ => None,
    })?;
    let applied_by = |events: &[Event]| {
        first_after(
            events,
            written,
            |k| matches!(k, Kind::Applied { revision: r } if r >= revision),
        )
    };
    let applied = applied_by(agents[0])?.max(applied_by(agents[1])?);
    let served = sample.wall + sample.both()?;
    Some(Steps {
        compile: since(compiled, sample.wall),
        write: since(written, compiled),
        apply: since(applied, written),
        serve: since(served, applied),
    })
}

/// The median of each step over `steps`.
pub fn medians(steps: &[Steps]) -> Option<Steps> {
    let median = |f: fn(&Steps) -> Duration| {
        let mut v: Vec<Duration> = steps.iter().map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    Some(Steps {
        compile: median(|s| s.compile)?,
        write: median(|s| s.write)?,
        apply: median(|s| s.apply)?,
        serve: median(|s| s.serve)?,
    })
}

fn first_after(events: &[Event], t: SystemTime, kind: impl Fn(Kind) -> bool) -> Option<SystemTime> {
    events
        .iter()
        .find(|e| e.at >= t && kind(e.kind))
        .map(|e| e.at)
}

fn since(later: SystemTime, earlier: SystemTime) -> Duration {
    later.duration_since(earlier).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn ev(ms: u64, kind: Kind) -> Event {
        Event { at: at(ms), kind }
    }

    #[test]
    fn each_step_ends_at_its_log_line_and_the_later_agent_counts() {
        let now = Instant::now();
        let sample = Sample {
            wall: at(1_000),
            start: now,
            end: now,
            served: [
                Some(Duration::from_millis(90)),
                Some(Duration::from_millis(100)),
            ],
            wal_bytes: 0,
        };
        let controller = [
            ev(900, Kind::Compiled),
            ev(1_040, Kind::Compiled),
            ev(1_060, Kind::Written { revision: 7 }),
        ];
        let a = [
            ev(1_050, Kind::Applied { revision: 6 }),
            ev(1_080, Kind::Applied { revision: 7 }),
        ];
        let b = [ev(1_090, Kind::Applied { revision: 7 })];
        let steps = of(&sample, &controller, [&a, &b]).unwrap();
        let ms = Duration::from_millis;
        assert_eq!(
            (steps.compile, steps.write, steps.apply, steps.serve),
            (ms(40), ms(20), ms(30), ms(10))
        );
    }
}
