//! The rows of the table, one function each, with the targets of the "Performance" issue.

use super::{NginxResults, Report, Row};
use crate::report::stats::{Summary, duration, mib, summarize};
use std::time::Duration;

const RSS_TARGET_KIB: u64 = 100 * 1024;

pub fn rows(r: Report<'_>) -> Vec<Row> {
    let mut rows = base_rows(r);
    if r.http_routes > 0 {
        rows.extend([routes_listed(r), route_change(r), route_status(r)]);
    }
    rows
}

fn base_rows(r: Report<'_>) -> Vec<Row> {
    vec![
        cold_start(r),
        quiet(r),
        listed(r),
        rss(r),
        ingress_change(r),
        endpoint_change(r),
        failed(r),
        idle(r),
        drift(r),
        change_cpu(r),
        deleted(r),
        peak(r),
    ]
}

fn row(metric: String, portico: String, target: &str, met: Option<bool>, nginx: String) -> Row {
    let target = target.to_owned();
    Row {
        metric,
        portico,
        target,
        met,
        nginx,
    }
}

fn on_nginx(r: Report<'_>, cell: impl Fn(&NginxResults) -> String) -> String {
    r.nginx
        .as_ref()
        .map(cell)
        .unwrap_or_else(|_| "not run".to_owned())
}

fn cold_start(r: Report<'_>) -> Row {
    let p = r.portico.cold_start;
    let nginx = on_nginx(r, |n| {
        let check = n.check.get(n.check.len() / 2).copied().unwrap_or_default();
        format!(
            "start to serving {}; `nginx -t` {} (median of 3)",
            duration(n.start),
            duration(check)
        )
    });
    let metric = format!("cold start to ready ({} Ingresses)", r.ingresses);
    row(
        metric,
        duration(p),
        "< 3 s",
        Some(p < Duration::from_secs(3)),
        nginx,
    )
}

fn quiet(r: Report<'_>) -> Row {
    let value = match r.portico.quiet_after {
        Some(d) => duration(d),
        None => "— (file mode, or never)".to_owned(),
    };
    row(
        "Kubernetes mode: ready to quiet (< 0.2 core for 1 s; the status writes done)".into(),
        value,
        "—",
        None,
        "—".into(),
    )
}

fn listed(r: Report<'_>) -> Row {
    let metric = "Ingresses listed once ready";
    count_row(metric, r.portico.ingresses_listed, r.ingresses)
}

/// `n` objects listed where `expected` were generated.
fn count_row(metric: &str, n: usize, expected: usize) -> Row {
    let target = expected.to_string();
    row(
        metric.into(),
        n.to_string(),
        &target,
        Some(n == expected),
        "—".into(),
    )
}

fn rss(r: Report<'_>) -> Row {
    let p = r.portico;
    let value = format!("{} (VmHWM {})", mib(p.rss_kib), mib(p.hwm_kib));
    let nginx = on_nginx(r, |n| format!("{} (master + worker)", mib(n.rss_kib)));
    row(
        "RSS 1 s after ready".into(),
        value,
        "≤ 100 MiB",
        Some(p.rss_kib <= RSS_TARGET_KIB),
        nginx,
    )
}

fn ingress_change(r: Report<'_>) -> Row {
    let nginx = on_nginx(r, |n| match summarize(&n.reloads) {
        Some(s) => format!(
            "reload: median {} / max {} (n={}{})",
            duration(s.p50),
            duration(s.max),
            s.n,
            timeouts(&s)
        ),
        None => "no reloads".into(),
    });
    change_row(
        "one-Ingress change served, p50 / p99 / max",
        &r.portico.ingress_changes,
        100,
        nginx,
    )
}

/// A series of changes against its p99 target (`p99_ms`), none left unserved.
fn change_row(metric: &str, changes: &[Option<Duration>], p99_ms: u64, nginx: String) -> Row {
    let s = summarize(changes);
    let target = Duration::from_millis(p99_ms);
    let met = s.map(|s| s.timeouts == 0 && s.p99 < target);
    row(
        metric.into(),
        latencies(s),
        &format!("p99 < {p99_ms} ms"),
        met,
        nginx,
    )
}

fn endpoint_change(r: Report<'_>) -> Row {
    let nginx = on_nginx(r, |_| "needs a reload too (open-source nginx)".into());
    change_row(
        "endpoint change served, p50 / p99 / max",
        &r.portico.endpoint_changes,
        50,
        nginx,
    )
}

fn failed(r: Report<'_>) -> Row {
    let t = &r.portico.traffic;
    let value = format!("{} of {}", t.failed, t.sent);
    let nginx = on_nginx(r, |n| {
        format!(
            "{} of {} (through its reloads)",
            n.traffic.failed, n.traffic.sent
        )
    });
    row(
        "failed requests (~200/s throughout)".into(),
        value,
        "0",
        Some(t.failed == 0 && t.sent > 0),
        nginx,
    )
}

fn idle(r: Report<'_>) -> Row {
    row(
        "idle RSS (empty directory)".into(),
        mib(r.portico.idle_rss_kib),
        "—",
        None,
        "—".into(),
    )
}

fn deleted(r: Report<'_>) -> Row {
    let p = r.portico;
    let ratio = p.deleted_rss_kib as f64 / p.idle_rss_kib.max(1) as f64;
    let value = format!("{} = {ratio:.2} × idle", mib(p.deleted_rss_kib));
    row(
        "RSS after every file is deleted".into(),
        value,
        "≤ 1.5 × idle",
        Some(ratio <= 1.5),
        "—".into(),
    )
}

fn drift(r: Report<'_>) -> Row {
    let d = r.portico.drift;
    if d.changes == 0 {
        return row(
            "RSS drift".into(),
            "not measured".into(),
            "< 5 %",
            None,
            "—".into(),
        );
    }
    let drift = (d.end_rss_kib as f64 / d.warm_rss_kib.max(1) as f64 - 1.0) * 100.0;
    let value = format!(
        "{} after {}, {} after {}: {drift:+.1} %{}",
        mib(d.warm_rss_kib),
        d.warm_up,
        mib(d.end_rss_kib),
        d.changes,
        match d.timeouts {
            0 => String::new(),
            t => format!(" ({t} not served within 30 s)"),
        }
    );
    row(
        format!(
            "RSS drift over {} Ingress changes (after the first {})",
            d.changes, d.warm_up
        ),
        value,
        "< 5 %",
        Some(drift < 5.0 && d.timeouts == 0),
        "—".into(),
    )
}

/// CPU per change is steadier than latency on a shared machine: other processes' load delays
/// a change but does not add to what Portico spends on it.
fn change_cpu(r: Report<'_>) -> Row {
    let d = r.portico.drift;
    let measured = d.changes.saturating_sub(d.warm_up);
    let value = if measured == 0 || d.cpu.is_zero() {
        "not measured".to_owned()
    } else {
        duration(d.cpu / measured as u32)
    };
    row(
        format!("Portico CPU per Ingress change (mean of {measured}, traffic included)"),
        value,
        "—",
        None,
        "—".into(),
    )
}

fn peak(r: Report<'_>) -> Row {
    row(
        "peak RSS over the run (VmHWM)".into(),
        mib(r.portico.run_hwm_kib),
        "—",
        None,
        "—".into(),
    )
}

fn routes_listed(r: Report<'_>) -> Row {
    let metric = "HTTPRoutes listed once ready (one Gateway)";
    count_row(metric, r.portico.routes_listed, r.http_routes)
}

fn route_change(r: Report<'_>) -> Row {
    change_row(
        "one-HTTPRoute change served, p50 / p99 / max",
        &r.portico.route_changes,
        100,
        "—".into(),
    )
}

fn route_status(r: Report<'_>) -> Row {
    let (value, met) = match r.portico.route_status {
        Some(d) => (duration(d), Some(d <= Duration::from_secs(10))),
        None => ("— (file mode, or not within 60 s)".to_owned(), None),
    };
    row(
        "Kubernetes mode: start to every HTTPRoute's status written".into(),
        value,
        "≤ 10 s",
        met,
        "—".into(),
    )
}

fn latencies(s: Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "{} / {} / {} (n={}{})",
            duration(s.p50),
            duration(s.p99),
            duration(s.max),
            s.n,
            timeouts(&s)
        ),
        None => "not measured".into(),
    }
}

fn timeouts(s: &Summary) -> String {
    match s.timeouts {
        0 => String::new(),
        t => format!(", {t} not served within 30 s"),
    }
}

/// Lines under the table: failures seen, and why nginx was not measured.
pub fn notes(r: Report<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for s in &r.portico.traffic.samples {
        out.push(format!("Portico failed request: {s}"));
    }
    match r.nginx {
        Ok(n) => out.extend(
            n.traffic
                .samples
                .iter()
                .map(|s| format!("nginx failed request: {s}")),
        ),
        Err(e) => out.push(format!("nginx not measured: {e}")),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::PorticoResults;
    use crate::traffic::Tally;

    fn results() -> PorticoResults {
        PorticoResults {
            cold_start: Duration::from_millis(2_500),
            ingresses_listed: 10,
            rss_kib: 50 * 1024,
            ingress_changes: vec![Some(Duration::from_millis(30)); 100],
            endpoint_changes: vec![Some(Duration::from_millis(60)); 100],
            traffic: Tally {
                sent: 10,
                failed: 0,
                samples: vec![],
            },
            idle_rss_kib: 10_000,
            deleted_rss_kib: 16_000,
            ..PorticoResults::default()
        }
    }

    fn met(metric_start: &str, p: &PorticoResults) -> Option<bool> {
        let nginx = Err("absent".to_owned());
        let r = Report {
            portico: p,
            nginx: &nginx,
            ingresses: 10,
            http_routes: p.routes_listed,
        };
        rows(r)
            .into_iter()
            .find(|row| row.metric.starts_with(metric_start))?
            .met
    }

    #[test]
    fn targets_are_checked_against_their_thresholds() {
        let p = results();
        assert_eq!(met("cold start", &p), Some(true));
        assert_eq!(met("RSS 1 s", &p), Some(true));
        assert_eq!(met("one-Ingress", &p), Some(true));
        assert_eq!(met("endpoint change", &p), Some(false));
        assert_eq!(met("failed", &p), Some(true));
        assert_eq!(met("RSS after every file", &p), Some(false));
        assert_eq!(met("RSS drift", &p), None, "not measured");
        let mut p = results();
        p.drift = crate::run::changes::Drift {
            changes: 1000,
            warm_up: 100,
            warm_rss_kib: 100_000,
            end_rss_kib: 104_000,
            timeouts: 0,
            cpu: Duration::from_secs(9),
        };
        assert_eq!(met("RSS drift", &p), Some(true));
        p.drift.end_rss_kib = 106_000;
        assert_eq!(met("RSS drift", &p), Some(false));
    }

    #[test]
    fn http_route_rows_come_with_routes_only() {
        let mut p = results();
        assert_eq!(met("one-HTTPRoute", &p), None, "no such row");
        p.routes_listed = 10;
        p.route_changes = vec![Some(Duration::from_millis(40)); 10];
        assert_eq!(met("HTTPRoutes listed", &p), Some(true));
        assert_eq!(met("one-HTTPRoute", &p), Some(true));
        assert_eq!(
            met("Kubernetes mode: start to every", &p),
            None,
            "file mode"
        );
        p.route_status = Some(Duration::from_secs(12));
        assert_eq!(met("Kubernetes mode: start to every", &p), Some(false));
        p.route_changes[3] = Some(Duration::from_millis(150));
        assert_eq!(met("one-HTTPRoute", &p), Some(false));
    }

    #[test]
    fn a_change_never_served_misses_its_target() {
        let mut p = results();
        p.ingress_changes[0] = None;
        assert_eq!(met("one-Ingress", &p), Some(false));
    }
}
