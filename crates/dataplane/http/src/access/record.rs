//! A request's record as the request path leaves it for the writer thread, and the JSON line
//! the writer makes of it. The request path only copies: the bytes the client sent (request
//! id, client, host, method, path), the numbers, the member's address and the pool's names go
//! into the record as they are, length-prefixed; escaping, number and address formatting and
//! the timestamp are the writer's, off the request path's core (a saturated proxy core pays a
//! few hundred instructions per line instead of several thousand).
//!
//! A line made elsewhere (haproxy's, already JSON) travels whole: [`line`].
//!
//! Each record is a buffer of its own, passed to the writer whole (no copy) and given back empty
//! for a later record of the same thread.
//!
//! Layout (little-endian): a kind byte ([`REQUEST`] or [`LINE`]);
//! for a request, the start as nanoseconds since [`anchor`], the six lengths then the six byte
//! strings of [`Asked`] (an empty trace id: none); then, once the response is done, status,
//! bytes in, bytes out, request time and upstream time (µs, `u64::MAX`: none), the member's
//! address (a family byte 0/4/6, 16 address bytes, the port), the two lengths then the two
//! names of the load balancer and the pool.

use super::entry::Asked;
use super::{json, time};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// A request's record.
const REQUEST: u8 = 0;
/// A whole line, written as it is.
const LINE: u8 = 1;

/// The instant record times count from (the first record's).
fn anchor() -> Instant {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    *ANCHOR.get_or_init(Instant::now)
}

/// What the record says once the response is done.
pub(crate) struct Done<'a> {
    pub(crate) status: u16,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) request_time: Duration,
    pub(crate) upstream_time: Option<Duration>,
    pub(crate) upstream: Option<SocketAddr>,
    pub(crate) load_balancer: &'a str,
    pub(crate) pool: &'a str,
}

/// Starts a record in `out` (emptied first) of the request `asked`. The fixed part and the
/// lengths go in one copy, then each value in one: this runs on the request path.
pub(crate) fn begin(out: &mut Vec<u8>, asked: &Asked<'_>) {
    let values = [
        asked.request_id,
        asked.client,
        asked.host,
        asked.method.as_bytes(),
        asked.path,
        asked.trace_id.unwrap_or_default(),
    ];
    let mut head = [0u8; 1 + 8 + 4 * 6];
    head[0] = REQUEST;
    let started = nanos(asked.started.saturating_duration_since(anchor()));
    head[1..9].copy_from_slice(&started.to_le_bytes());
    for (i, value) in values.iter().enumerate() {
        let at = 9 + 4 * i;
        head[at..at + 4].copy_from_slice(&length(value).to_le_bytes());
    }
    out.clear();
    out.reserve(head.len() + values.iter().map(|v| v.len()).sum::<usize>() + FINISH);
    out.extend_from_slice(&head);
    for value in values {
        out.extend_from_slice(&value[..value.len().min(MAX_VALUE)]);
    }
}

/// Completes the record begun in `out`, as [`begin`] does: one copy of the fixed part.
pub(crate) fn finish(out: &mut Vec<u8>, done: &Done<'_>) {
    let (family, octets, port) = match done.upstream {
        None => (0u8, [0u8; 16], 0u16),
        Some(SocketAddr::V4(a)) => {
            let mut octets = [0u8; 16];
            octets[..4].copy_from_slice(&a.ip().octets());
            (4, octets, a.port())
        }
        Some(SocketAddr::V6(a)) => (6, a.ip().octets(), a.port()),
    };
    let names = [done.load_balancer.as_bytes(), done.pool.as_bytes()];
    let mut fixed = [0u8; 8 * 5 + 1 + 16 + 2 + 4 * 2];
    let numbers = [
        u64::from(done.status),
        done.bytes_in,
        done.bytes_out,
        micros(done.request_time),
        done.upstream_time.map_or(u64::MAX, micros),
    ];
    for (i, n) in numbers.iter().enumerate() {
        fixed[8 * i..8 * i + 8].copy_from_slice(&n.to_le_bytes());
    }
    fixed[40] = family;
    fixed[41..57].copy_from_slice(&octets);
    fixed[57..59].copy_from_slice(&port.to_le_bytes());
    fixed[59..63].copy_from_slice(&length(names[0]).to_le_bytes());
    fixed[63..67].copy_from_slice(&length(names[1]).to_le_bytes());
    out.extend_from_slice(&fixed);
    for name in names {
        out.extend_from_slice(&name[..name.len().min(MAX_VALUE)]);
    }
}

/// What [`finish`] adds besides the names.
const FINISH: usize = 8 * 5 + 1 + 16 + 2 + 4 * 2 + 64;

/// The longest value a record keeps (a request head is far shorter).
const MAX_VALUE: usize = u32::MAX as usize;

fn length(value: &[u8]) -> u32 {
    u32::try_from(value.len()).unwrap_or(u32::MAX)
}

/// A record in `out` (emptied first) of a whole `line` (ending with `\n`), made elsewhere.
pub(crate) fn line(out: &mut Vec<u8>, line: &[u8]) {
    out.clear();
    out.push(LINE);
    out.extend_from_slice(line);
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Reads records, and within one its fields, one after another.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(taken)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// `N` lengths, then the `N` values.
    fn values<const N: usize>(&mut self) -> Option<[&'a [u8]; N]> {
        let mut lengths = [0usize; N];
        for length in &mut lengths {
            *length = usize::try_from(self.u32()?).ok()?;
        }
        let mut values = [&[][..]; N];
        for (value, length) in values.iter_mut().zip(lengths) {
            *value = self.take(length)?;
        }
        Some(values)
    }
}

/// The writer's clock: now as an instant and as the wall clock, read together at each wake-up,
/// to date the records it formats then.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    instant: Instant,
    wall: SystemTime,
}

impl Clock {
    pub(crate) fn now() -> Clock {
        Clock {
            instant: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// The wall-clock time of the instant `since` after the anchor.
    fn wall(&self, since: Duration) -> SystemTime {
        let at = anchor() + since;
        let ago = self.instant.saturating_duration_since(at);
        self.wall.checked_sub(ago).unwrap_or(self.wall)
    }
}

/// Formats each record of `records` as its JSON line into `out`, dated by `clock`; how many
/// records were damaged (none unless a bug made them so): they are left out.
pub(crate) fn format_all(records: &[Vec<u8>], clock: Clock, out: &mut Vec<u8>) -> usize {
    let mut bad = 0;
    for record in records {
        let start = out.len();
        if format(record, clock, out).is_none() {
            out.truncate(start);
            bad += 1;
        }
    }
    bad
}

/// One record's line.
fn format(record: &[u8], clock: Clock, out: &mut Vec<u8>) -> Option<()> {
    let mut r = Reader { rest: record };
    match r.take(1)?[0] {
        REQUEST => {}
        LINE => {
            out.extend_from_slice(r.rest);
            return Some(());
        }
        _ => return None,
    }
    let started = Duration::from_nanos(r.u64()?);
    let [request_id, client, host, method, path, trace_id] = r.values::<6>()?;
    out.extend_from_slice(b"{\"time\":\"");
    time::rfc3339(out, clock.wall(started));
    let fields: [(&[u8], &[u8]); 5] = [
        (b"\",\"request_id\":", request_id),
        (b",\"client\":", client),
        (b",\"host\":", host),
        (b",\"method\":", method),
        (b",\"path\":", path),
    ];
    for (key, value) in fields {
        out.extend_from_slice(key);
        json::string(out, value);
    }
    if !trace_id.is_empty() {
        out.extend_from_slice(b",\"trace_id\":");
        json::string(out, trace_id);
    }
    let numbers: [&[u8]; 3] = [b",\"status\":", b",\"bytes_in\":", b",\"bytes_out\":"];
    for key in numbers {
        out.extend_from_slice(key);
        json::decimal(out, r.u64()?);
    }
    out.extend_from_slice(b",\"request_time_ms\":");
    millis(out, r.u64()?);
    out.extend_from_slice(b",\"upstream_time_ms\":");
    match r.u64()? {
        u64::MAX => out.extend_from_slice(b"-1"),
        micros => millis(out, micros),
    }
    let family = r.take(1)?[0];
    let octets: [u8; 16] = r.take(16)?.try_into().ok()?;
    let port = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
    let [load_balancer, pool] = r.values::<2>()?;
    out.extend_from_slice(b",\"upstream_addr\":\"");
    match family {
        4 => {
            let ip = Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]);
            address(out, IpAddr::V4(ip), port);
        }
        6 => address(out, IpAddr::V6(Ipv6Addr::from(octets)), port),
        _ => out.push(b'-'),
    }
    out.push(b'"');
    out.extend_from_slice(b",\"load_balancer\":");
    json::string(out, load_balancer);
    out.extend_from_slice(b",\"pool\":");
    json::string(out, pool);
    out.extend_from_slice(b"}\n");
    Some(())
}

/// `a.b.c.d:port` or `[v6]:port`, as `SocketAddr`'s Display writes them.
fn address(out: &mut Vec<u8>, ip: IpAddr, port: u16) {
    match ip {
        IpAddr::V4(ip) => {
            for (i, octet) in ip.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                json::decimal(out, u64::from(octet));
            }
        }
        IpAddr::V6(ip) => {
            use std::io::Write as _;
            let _ = write!(out, "[{ip}]");
        }
    }
    out.push(b':');
    json::decimal(out, u64::from(port));
}

/// Appends microseconds as milliseconds with three decimals, without floating point.
fn millis(out: &mut Vec<u8>, micros: u64) {
    json::decimal(out, micros / 1000);
    let rest = micros % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (rest / 100) as u8,
        b'0' + (rest / 10 % 10) as u8,
        b'0' + (rest % 10) as u8,
    ]);
}

/// A whole record of a GET of `path` (for the writer's tests).
#[cfg(test)]
pub(crate) fn sample(path: &[u8]) -> Vec<u8> {
    let asked = Asked {
        started: Instant::now(),
        request_id: b"id",
        client: b"127.0.0.1",
        host: b"a.test",
        method: "GET",
        path,
        trace_id: None,
    };
    let done = Done {
        status: 200,
        bytes_in: 0,
        bytes_out: 0,
        request_time: Duration::ZERO,
        upstream_time: None,
        upstream: None,
        load_balancer: "-",
        pool: "-",
    };
    let mut out = Vec::new();
    begin(&mut out, &asked);
    finish(&mut out, &done);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(asked: &Asked<'_>, done: &Done<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        begin(&mut out, asked);
        finish(&mut out, done);
        out
    }

    fn asked<'a>(path: &'a [u8], trace_id: Option<&'a [u8]>, started: Instant) -> Asked<'a> {
        Asked {
            started,
            request_id: b"id-1",
            client: b"10.0.0.9",
            host: b"a.test",
            method: "GET",
            path,
            trace_id,
        }
    }

    fn done(upstream: Option<SocketAddr>) -> Done<'static> {
        Done {
            status: 200,
            bytes_in: 12,
            bytes_out: 3456,
            request_time: Duration::from_micros(1_234),
            upstream_time: Some(Duration::from_micros(987)),
            upstream,
            load_balancer: "default",
            pool: "default/web:80",
        }
    }

    #[test]
    fn a_record_becomes_its_json_line_with_every_field() {
        let started = Instant::now();
        let clock = Clock::now();
        let path = b"/a\"b\\c\n\xff";
        let member = "10.1.2.3:8080".parse().unwrap();
        let v6 = "[2001:db8::1]:443".parse().unwrap();
        let mut other = done(Some(v6));
        other.upstream_time = None;
        let mut haproxy = Vec::new();
        line(&mut haproxy, b"{\"haproxy\":1}\n");
        let records = [
            record(&asked(path, Some(b"4bf9"), started), &done(Some(member))),
            record(&asked(b"/", None, started), &other),
            record(&asked(b"/", None, started), &done(None)),
            haproxy,
        ];
        let mut out = Vec::new();
        assert_eq!(format_all(&records, clock, &mut out), 0);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = (text.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3]["haproxy"], 1);
        let first = &lines[0];
        assert_eq!(first["path"], "/a\"b\\c\n\u{FFFD}");
        assert_eq!(first["trace_id"], "4bf9");
        assert_eq!(first["request_id"], "id-1");
        assert_eq!(first["client"], "10.0.0.9");
        assert_eq!(first["host"], "a.test");
        assert_eq!(first["method"], "GET");
        assert_eq!(first["status"], 200);
        assert_eq!(first["bytes_in"], 12);
        assert_eq!(first["bytes_out"], 3456);
        assert_eq!(first["request_time_ms"], 1.234);
        assert_eq!(first["upstream_time_ms"], 0.987);
        assert_eq!(first["upstream_addr"], "10.1.2.3:8080");
        assert_eq!(first["load_balancer"], "default");
        assert_eq!(first["pool"], "default/web:80");
        assert!(first["time"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[1]["upstream_addr"], "[2001:db8::1]:443");
        assert_eq!(lines[1]["upstream_time_ms"], -1);
        assert!(lines[1].get("trace_id").is_none());
        assert_eq!(lines[2]["upstream_addr"], "-");
    }

    #[test]
    fn the_time_is_the_requests_start_on_the_wall_clock() {
        let started = Instant::now();
        let wall = SystemTime::now();
        std::thread::sleep(Duration::from_millis(30));
        let clock = Clock::now();
        let since = started.saturating_duration_since(anchor());
        let dated = clock.wall(since);
        let off = match dated.duration_since(wall) {
            Ok(d) => d,
            Err(e) => e.duration(),
        };
        assert!(off < Duration::from_millis(5), "{off:?}");
    }

    #[test]
    fn a_damaged_record_loses_only_its_line() {
        let started = Instant::now();
        let mut cut = record(&asked(b"/cut", None, started), &done(None));
        cut.truncate(cut.len() - 3);
        let records = [
            record(&asked(b"/ok", None, started), &done(None)),
            cut,
            vec![9],
        ];
        let mut out = Vec::new();
        assert_eq!(format_all(&records, Clock::now(), &mut out), 2);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.contains("\"/ok\""));
    }

    #[test]
    fn durations_are_milliseconds_with_three_decimals() {
        for (micros, text) in [
            (0, "0.000"),
            (7, "0.007"),
            (1_234, "1.234"),
            (60_000_010, "60000.010"),
        ] {
            let mut out = Vec::new();
            millis(&mut out, micros);
            assert_eq!(String::from_utf8(out).unwrap(), text);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_request_bytes_make_one_json_line(path: Vec<u8>, host: Vec<u8>, id: Vec<u8>) {
            let asked = Asked { started: Instant::now(), request_id: &id, client: b"c", host: &host, method: "GET", path: &path, trace_id: None };
            let records = [record(&asked, &done(None))];
            let mut out = Vec::new();
            proptest::prop_assert_eq!(format_all(&records, Clock::now(), &mut out), 0);
            let text = String::from_utf8(out).unwrap();
            proptest::prop_assert_eq!(text.lines().count(), 1);
            let line: serde_json::Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(line["path"].as_str().unwrap(), String::from_utf8_lossy(&path));
        }
    }
}
