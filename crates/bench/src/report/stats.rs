//! Percentiles and the units the table prints.

use crate::poll::CHANGE_TIMEOUT;
use std::time::Duration;

/// p50, p99 and max of change latencies; a change never served counts as the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub n: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub timeouts: usize,
}

pub fn summarize(samples: &[Option<Duration>]) -> Option<Summary> {
    let mut sorted: Vec<Duration> = samples
        .iter()
        .map(|s| s.unwrap_or(CHANGE_TIMEOUT))
        .collect();
    sorted.sort_unstable();
    let max = *sorted.last()?;
    Some(Summary {
        n: sorted.len(),
        p50: percentile(&sorted, 50.0),
        p99: percentile(&sorted, 99.0),
        max,
        timeouts: samples.iter().filter(|s| s.is_none()).count(),
    })
}

/// Nearest-rank percentile of sorted, non-empty `sorted`.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `12.3 ms` below a second, `1.23 s` above.
pub fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn p99_of_a_hundred_is_the_ninety_ninth() {
        let samples: Vec<Option<Duration>> = (1..=100).map(|v| Some(ms(v))).collect();
        let s = summarize(&samples).unwrap();
        assert_eq!((s.p50, s.p99, s.max), (ms(50), ms(99), ms(100)));
    }

    #[test]
    fn a_change_never_served_counts_as_the_timeout() {
        let s = summarize(&[Some(ms(5)), None]).unwrap();
        assert_eq!((s.max, s.timeouts), (CHANGE_TIMEOUT, 1));
    }

    #[test]
    fn no_samples_no_summary() {
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn durations_switch_to_seconds_at_one_second() {
        assert_eq!(duration(ms(12)), "12.0 ms");
        assert_eq!(duration(ms(1234)), "1.23 s");
    }
}
