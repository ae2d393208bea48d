//! The distributed benchmark's table (pure): one column per cluster size, targets from the
//! issue; a missed target says MISSED and never fails the run.

use super::changes::Sample;
use super::steps::{self, Steps};
use super::watch::Commit;
use crate::report::stats::{Summary, duration, mib, summarize};
use std::fmt::Write as _;
use std::time::Duration;

const P99_TARGET: Duration = Duration::from_millis(150);
/// How much more a one-Ingress change may write at the largest size than at the smallest.
const FLAT: f64 = 1.10;

/// Everything measured at one cluster size.
#[derive(Debug, Clone, Default)]
pub struct Column {
    pub ingresses: usize,
    pub tls_secrets: usize,
    /// Controller spawn to both agents ready and serving a route.
    pub start: Duration,
    /// The controller's first commit.
    pub initial: Option<Commit>,
    pub db_bytes: u64,
    pub ingress: Vec<Change>,
    pub endpoint: Vec<Change>,
    /// etcd WAL fsyncs over both change phases: seconds, count.
    pub fsync: (f64, f64),
    pub cold_etcd: Vec<Option<Duration>>,
    pub cold_cache: Vec<Option<Duration>>,
    /// KiB 1 s after start: controller, agent A, agent B, etcd.
    pub rss: [u64; 4],
    /// VmHWM (KiB) after the change phases: controller, agent A, agent B, etcd.
    pub hwm: [u64; 4],
}

/// One timed change with what etcd recorded for it.
#[derive(Debug, Clone)]
pub struct Change {
    pub sample: Sample,
    /// The controller's commits seen while it was being served.
    pub commits: Vec<Commit>,
    pub steps: Option<Steps>,
}

impl Change {
    fn bytes(&self) -> u64 {
        self.commits.iter().map(|c| c.bytes).sum()
    }

    fn keys(&self) -> usize {
        self.commits.iter().map(|c| c.keys).sum()
    }
}

struct Row {
    metric: String,
    cells: Vec<String>,
    target: String,
    met: Option<bool>,
}

pub fn render(columns: &[Column]) -> String {
    let mut out = String::from("| metric |");
    for c in columns {
        let _ = write!(out, " {} Ingresses |", thousands(c.ingresses as u64));
    }
    out.push_str(" target |\n|---|");
    out.push_str(&"---|".repeat(columns.len() + 1));
    out.push('\n');
    for row in rows(columns) {
        let verdict = match row.met {
            Some(true) => " (met)",
            Some(false) => " **MISSED**",
            None => "",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {}{verdict} |",
            row.metric,
            row.cells.join(" | "),
            row.target
        );
    }
    out
}

fn rows(cs: &[Column]) -> Vec<Row> {
    let cell = |f: &dyn Fn(&Column) -> String| cs.iter().map(f).collect::<Vec<_>>();
    let plain = |metric: &str, f: &dyn Fn(&Column) -> String| Row {
        metric: metric.to_owned(),
        cells: cell(f),
        target: "—".into(),
        met: None,
    };
    vec![
        plain("TLS Secrets / paths", &|c| {
            format!("{} / {}", c.tls_secrets, c.ingresses * 2)
        }),
        plain("controller start → both agents ready and serving", &|c| {
            duration(c.start)
        }),
        plain(
            "first commit: keys, bytes (etcd's view); etcd db size after start",
            &initial,
        ),
        plain(
            "one-Ingress change served on agent A, p50 / p99 / max",
            &|c| agent(&c.ingress, 0),
        ),
        plain(
            "one-Ingress change served on agent B, p50 / p99 / max",
            &|c| agent(&c.ingress, 1),
        ),
        both_row(
            "one-Ingress change served on **both**, p50 / p99 / max",
            cs,
            |c| &c.ingress,
        ),
        plain(
            "  median steps: compiled / written to etcd / applied (later agent) / seen",
            &|c| step_cells(&c.ingress),
        ),
        bytes_row(cs),
        plain(
            "etcd WAL bytes per one-Ingress change (all etcd logged, agents' feedback included), median",
            &|c| median_u64(c.ingress.iter().map(|x| x.sample.wal_bytes)),
        ),
        both_row(
            "endpoint change served on **both**, p50 / p99 / max",
            cs,
            |c| &c.endpoint,
        ),
        plain(
            "  median steps: compiled / written to etcd / applied (later agent) / seen",
            &|c| step_cells(&c.endpoint),
        ),
        plain(
            "bytes written to etcd per endpoint change (desired/), median",
            &|c| median_u64(c.endpoint.iter().map(Change::bytes)),
        ),
        plain("etcd WAL fsync during the changes: mean (count)", &|c| {
            let (secs, n) = c.fsync;
            let mean = Duration::from_secs_f64(if n > 0.0 { secs / n } else { 0.0 });
            format!("{} ({n})", duration(mean))
        }),
        plain(
            "agent cold start from etcd (no cache) to ready + a route served: median (all)",
            &|c| cold(&c.cold_etcd),
        ),
        plain(
            "agent cold start from its cache, etcd stopped: median (all)",
            &|c| cold(&c.cold_cache),
        ),
        plain(
            "RSS 1 s after start: controller / agent A / agent B / etcd",
            &|c| mibs(&c.rss),
        ),
        plain(
            "VmHWM after the changes: controller / agent A / agent B / etcd",
            &|c| mibs(&c.hwm),
        ),
    ]
}

fn both_row(metric: &str, cs: &[Column], changes: fn(&Column) -> &[Change]) -> Row {
    let summaries: Vec<Option<Summary>> = cs
        .iter()
        .map(|c| {
            summarize(
                &changes(c)
                    .iter()
                    .map(|x| x.sample.both())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let met = summaries
        .iter()
        .all(|s| s.is_some_and(|s| s.timeouts == 0 && s.p99 < P99_TARGET));
    Row {
        metric: metric.to_owned(),
        cells: summaries.into_iter().map(latencies).collect(),
        target: format!("p99 < {}", duration(P99_TARGET)),
        met: Some(met),
    }
}

/// Desired bytes per one-Ingress change; met when the largest size writes at most [`FLAT`]
/// times what the smallest does.
fn bytes_row(cs: &[Column]) -> Row {
    let medians: Vec<Option<u64>> = cs
        .iter()
        .map(|c| median(c.ingress.iter().map(Change::bytes)))
        .collect();
    let cells = cs
        .iter()
        .zip(&medians)
        .map(|(c, m)| {
            let keys = median(c.ingress.iter().map(|x| x.keys() as u64)).unwrap_or(0);
            let max = c.ingress.iter().map(Change::bytes).max().unwrap_or(0);
            match m {
                Some(m) => format!("{} B / {} B ({keys} keys)", thousands(*m), thousands(max)),
                None => "not measured".into(),
            }
        })
        .collect();
    let met = match (medians.first(), medians.last()) {
        (Some(Some(small)), Some(Some(large))) => Some(*large as f64 <= *small as f64 * FLAT),
        _ => Some(false),
    };
    Row {
        metric: "bytes written to etcd per one-Ingress change (desired/ keys + values, etcd's watch), median / max".into(),
        cells,
        target: "does not grow with the Ingresses".into(),
        met,
    }
}

fn initial(c: &Column) -> String {
    match c.initial {
        Some(i) => format!(
            "{} keys, {}; {}",
            thousands(i.keys as u64),
            mib(i.bytes / 1024),
            mib(c.db_bytes / 1024)
        ),
        None => "not seen".into(),
    }
}

fn agent(changes: &[Change], i: usize) -> String {
    latencies(summarize(
        &changes
            .iter()
            .map(|x| x.sample.served[i])
            .collect::<Vec<_>>(),
    ))
}

fn step_cells(changes: &[Change]) -> String {
    let all: Vec<Steps> = changes.iter().filter_map(|c| c.steps).collect();
    match steps::medians(&all) {
        Some(s) => format!(
            "{} / {} / {} / {} (n={})",
            duration(s.compile),
            duration(s.write),
            duration(s.apply),
            duration(s.serve),
            all.len()
        ),
        None => "not in the logs".into(),
    }
}

fn cold(samples: &[Option<Duration>]) -> String {
    let Some(s) = summarize(samples) else {
        return "not measured".into();
    };
    let all: Vec<String> = samples
        .iter()
        .map(|d| d.map_or_else(|| "never".into(), duration))
        .collect();
    format!("{} ({})", duration(s.p50), all.join(", "))
}

fn latencies(s: Option<Summary>) -> String {
    match s {
        Some(s) if s.timeouts > 0 => format!(
            "{} / {} / {} (n={}, {} not served in 30 s)",
            duration(s.p50),
            duration(s.p99),
            duration(s.max),
            s.n,
            s.timeouts
        ),
        Some(s) => format!(
            "{} / {} / {} (n={})",
            duration(s.p50),
            duration(s.p99),
            duration(s.max),
            s.n
        ),
        None => "not measured".into(),
    }
}

fn mibs(kib: &[u64; 4]) -> String {
    kib.iter().map(|k| mib(*k)).collect::<Vec<_>>().join(" / ")
}

fn median(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

fn median_u64(values: impl Iterator<Item = u64>) -> String {
    median(values).map_or_else(|| "not measured".into(), |m| format!("{} B", thousands(m)))
}

/// `12345` as `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime};

    fn change(ms: u64, bytes: u64) -> Change {
        let now = Instant::now();
        let d = Some(Duration::from_millis(ms));
        Change {
            sample: Sample {
                wall: SystemTime::now(),
                start: now,
                end: now,
                served: [d, d],
                wal_bytes: 0,
            },
            commits: vec![Commit {
                seen: now,
                revision: 1,
                keys: 2,
                bytes,
            }],
            steps: None,
        }
    }

    fn column(ingresses: usize, ms: u64, bytes: u64) -> Column {
        Column {
            ingresses,
            ingress: vec![change(ms, bytes); 10],
            ..Column::default()
        }
    }

    #[test]
    fn latency_and_flat_bytes_targets_are_checked_across_sizes() {
        let table = render(&[column(1_000, 50, 2_000), column(10_000, 90, 2_100)]);
        assert!(
            table.contains("| 1,000 Ingresses | 10,000 Ingresses |"),
            "{table}"
        );
        assert!(table.contains("p99 < 150.0 ms (met)"), "{table}");
        assert!(
            table.contains("does not grow with the Ingresses (met)"),
            "{table}"
        );
        let table = render(&[column(1_000, 50, 2_000), column(10_000, 200, 20_000)]);
        assert_eq!(table.matches("**MISSED**").count(), 3, "{table}");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(
            (thousands(999), thousands(1_000), thousands(1_234_567)),
            ("999".into(), "1,000".into(), "1,234,567".into())
        );
    }
}
