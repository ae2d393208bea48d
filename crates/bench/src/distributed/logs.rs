//! The steps of a change, read from the processes' own logs (at `info`): the controller's
//! `configuration compiled` and `desired state written to etcd revision=…`, each agent's
//! `desired state applied revision=…`. Timestamps are tracing's RFC 3339 UTC ones; the bench
//! notes the wall-clock time of each file rename on the same clock.

use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Compiled,
    Written { revision: i64 },
    Applied { revision: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub at: SystemTime,
    pub kind: Kind,
}

/// The events of a log, in order; other lines are skipped.
pub fn parse(text: &str) -> Vec<Event> {
    text.lines().filter_map(event).collect()
}

fn event(line: &str) -> Option<Event> {
    let line = strip_ansi(line);
    let at = timestamp(line.split_whitespace().next()?)?;
    let revision = || field(&line, "revision")?.parse().ok();
    let kind = if line.contains("configuration compiled") {
        Kind::Compiled
    } else if line.contains("desired state written to etcd") {
        Kind::Written {
            revision: revision()?,
        }
    } else if line.contains("desired state applied") {
        Kind::Applied {
            revision: revision()?,
        }
    } else {
        return None;
    };
    Some(Event { at, kind })
}

/// The value of ` name=value` in a line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    line[start..].split_whitespace().next()
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `2025-01-02T03:04:05.123456Z` as a time.
fn timestamp(token: &str) -> Option<SystemTime> {
    let (date, time) = token.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<u64>().ok()?,
        t.next()?.parse::<u64>().ok()?,
    );
    let secs: f64 = t.next()?.parse().ok()?;
    let days = u64::try_from(days_from_civil(y, m, day)).ok()?;
    let whole = days * 86_400 + h * 3600 + min * 60;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(whole) + Duration::from_secs_f64(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_seconds_since_the_epoch() {
        let t = timestamp("2024-03-01T00:00:01.500000Z").unwrap();
        let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(since, Duration::from_millis(1_709_251_201_500));
    }

    #[test]
    fn the_three_steps_are_recognised_with_colours_or_without() {
        let log = "2024-01-01T00:00:00.000001Z  INFO portico_app::controller: configuration compiled ingresses=3 diagnostics=0\n\
                   \u{1b}[2m2024-01-01T00:00:00.000002Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x: desired state written to etcd \u{1b}[3mrevision\u{1b}[0m\u{1b}[2m=\u{1b}[0m42 keys=2 bytes=900\n\
                   2024-01-01T00:00:00.000003Z  INFO x: desired state applied revision=42 load_balancers=1\n\
                   2024-01-01T00:00:00.000004Z  INFO x: something else\n";
        let kinds: Vec<Kind> = parse(log).into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::Compiled,
                Kind::Written { revision: 42 },
                Kind::Applied { revision: 42 }
            ]
        );
    }
}
