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
//! for a later record of the same thread, with the pool the request went to (its names are
//! read by the writer, not copied).
//!
//! What has a fixed size goes into a fixed head written in one copy, so that the usual request
//! copies only its host and path: the client's address as an address (not its text), the
//! method as a code when it is one of the usual nine, a request id Portico generated as its
//! 128 bits.
//!
//! Layout (little-endian): a kind byte ([`REQUEST`] or [`LINE`]);
//! for a request, the method's code (0: its text
//! follows), the client's address (a family byte 0/4/6, 16 address bytes, the port; family 0:
//! its text follows; the port is not shown), a byte 1 and the 128 bits of a generated request id (else 0 and its
//! text follows), the six lengths then the six byte strings (request id, client, host,
//! method, path, trace id; an empty one: none or given above); then, once the response is
//! done, status, bytes in, bytes out and upstream time (µs, `u64::MAX`: none) and the
//! member's address (as the client's). The request's start and end travel as instants beside
//! the bytes: the request time and the wall-clock time are the writer's to compute.

use super::entry::{Asked, Client, RequestId};
use super::{json, request_id, time};
use crate::route::PoolState;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A request's record.
const REQUEST: u8 = 0;
/// A whole line, written as it is.
const LINE: u8 = 1;

/// A record as the writer takes it: its bytes, and the pool whose names its line shows.
pub(crate) struct Record {
    pub(crate) bytes: Vec<u8>,
    pub(crate) pool: Option<Arc<dyn Named>>,
    /// When the request began to arrive, and when its response ended.
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
}

/// What names a line's pool: its load balancer's name and its own.
pub(crate) trait Named: Send + Sync {
    fn names(&self) -> (&str, &str);
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

impl Named for PoolState {
    fn names(&self) -> (&str, &str) {
        (self.load_balancer(), self.name())
    }
}

/// What the record says once the response is done.
pub(crate) struct Done {
    pub(crate) status: u16,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) upstream_time: Option<Duration>,
    pub(crate) upstream: Option<SocketAddr>,
}

/// The methods a record holds as a code (its index + 1) instead of text.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE",
];

fn method_code(method: &str) -> u8 {
    match method {
        "GET" => 1,
        "HEAD" => 2,
        "POST" => 3,
        "PUT" => 4,
        "DELETE" => 5,
        "OPTIONS" => 6,
        "PATCH" => 7,
        "CONNECT" => 8,
        "TRACE" => 9,
        _ => 0,
    }
}

/// An address as 19 bytes: family (0 none, 4, 6), 16 address bytes, the port.
fn address_bytes(addr: Option<SocketAddr>) -> [u8; 19] {
    let mut out = [0u8; 19];
    match addr {
        None => {}
        Some(SocketAddr::V4(a)) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&a.ip().octets());
            out[17..19].copy_from_slice(&a.port().to_le_bytes());
        }
        Some(SocketAddr::V6(a)) => {
            out[0] = 6;
            out[1..17].copy_from_slice(&a.ip().octets());
            out[17..19].copy_from_slice(&a.port().to_le_bytes());
        }
    }
    out
}

/// The fixed head of a request's record.
const HEAD: usize = 1 + 1 + 19 + 1 + 16 + 4 * 6;
/// What [`finish`] adds.
const FINISH: usize = 8 * 4 + 19;

/// Starts a record in `out` (emptied first) of the request `asked`. The fixed head goes in
/// one copy, then each value that has no place in it (usually the host and the path): this
/// runs on the request path.
pub(crate) fn begin(out: &mut Vec<u8>, asked: &Asked<'_>) {
    let code = method_code(asked.method);
    let (client, client_text) = match asked.client {
        Client::Addr(ip) => (address_bytes(Some(SocketAddr::new(ip, 0))), &[][..]),
        Client::Text(text) => (address_bytes(None), text),
    };
    let (generated, id_text) = match asked.request_id {
        RequestId::New(bits) => (Some(bits), &[][..]),
        RequestId::Sent(text) => (None, text),
    };
    let values = [
        id_text,
        client_text,
        asked.host,
        if code == 0 {
            asked.method.as_bytes()
        } else {
            &[]
        },
        asked.path,
        asked.trace_id.unwrap_or_default(),
    ];
    let mut head = [0u8; HEAD];
    head[0] = REQUEST;
    head[1] = code;
    head[2..21].copy_from_slice(&client);
    if let Some(bits) = generated {
        head[21] = 1;
        head[22..38].copy_from_slice(&bits.to_le_bytes());
    }
    for (i, value) in values.iter().enumerate() {
        let at = 38 + 4 * i;
        head[at..at + 4].copy_from_slice(&length(value).to_le_bytes());
    }
    out.clear();
    out.reserve(HEAD + asked.host.len() + asked.path.len() + FINISH + 64);
    out.extend_from_slice(&head);
    for value in values {
        if !value.is_empty() {
            out.extend_from_slice(&value[..value.len().min(MAX_VALUE)]);
        }
    }
}

/// Completes the record begun in `out`, as [`begin`] does: one copy of a fixed part.
pub(crate) fn finish(out: &mut Vec<u8>, done: &Done) {
    let mut fixed = [0u8; FINISH];
    let numbers = [
        u64::from(done.status),
        done.bytes_in,
        done.bytes_out,
        done.upstream_time.map_or(u64::MAX, micros),
    ];
    for (i, n) in numbers.iter().enumerate() {
        fixed[8 * i..8 * i + 8].copy_from_slice(&n.to_le_bytes());
    }
    fixed[32..51].copy_from_slice(&address_bytes(done.upstream));
    out.extend_from_slice(&fixed);
}

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

/// Reads the 19 bytes [`address_bytes`] wrote.
fn read_address(r: &mut Reader<'_>) -> Option<Option<SocketAddr>> {
    let bytes = r.take(19)?;
    let port = u16::from_le_bytes(bytes[17..19].try_into().ok()?);
    let octets: [u8; 16] = bytes[1..17].try_into().ok()?;
    Some(match bytes[0] {
        0 => None,
        4 => {
            let ip = Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]);
            Some(SocketAddr::new(IpAddr::V4(ip), port))
        }
        6 => Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(octets)), port)),
        _ => return None,
    })
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
    /// The wall clock's time since the Unix epoch.
    wall: Duration,
}

impl Clock {
    pub(crate) fn now() -> Clock {
        let wall = SystemTime::now();
        Clock {
            instant: Instant::now(),
            wall: wall.duration_since(UNIX_EPOCH).unwrap_or_default(),
        }
    }

    /// The wall-clock time of the instant `at`, since the Unix epoch.
    fn since_epoch(&self, at: Instant) -> Duration {
        let ago = self.instant.saturating_duration_since(at);
        self.wall.saturating_sub(ago)
    }

    /// The wall-clock time of the instant `at`.
    #[cfg(test)]
    fn wall(&self, at: Instant) -> SystemTime {
        UNIX_EPOCH + self.since_epoch(at)
    }
}

/// Formats each record of `records` as its JSON line into `out`, dated by `clock`; how many
/// records were damaged (none unless a bug made them so): they are left out.
pub(crate) fn format_all(records: &[Record], clock: Clock, out: &mut Vec<u8>) -> usize {
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
fn format(record: &Record, clock: Clock, out: &mut Vec<u8>) -> Option<()> {
    let mut r = Reader {
        rest: &record.bytes,
    };
    match r.take(1)?[0] {
        REQUEST => {}
        LINE => {
            out.extend_from_slice(r.rest);
            return Some(());
        }
        _ => return None,
    }
    let code = usize::from(r.take(1)?[0]);
    let client = read_address(&mut r)?;
    let generated = match r.take(1)?[0] {
        0 => None,
        _ => Some(u128::from_le_bytes(r.take(16)?.try_into().ok()?)),
    };
    if generated.is_none() {
        r.take(16)?;
    }
    let [id_text, client_text, host, method_text, path, trace_id] = r.values::<6>()?;
    let method = match code {
        0 => method_text,
        _ => METHODS.get(code - 1)?.as_bytes(),
    };
    out.extend_from_slice(b"{\"time\":\"");
    time::rfc3339_since_epoch(out, clock.since_epoch(record.started));
    out.extend_from_slice(b"\",\"request_id\":");
    match generated {
        Some(bits) => {
            out.push(b'"');
            out.extend_from_slice(&request_id::uuid_text(bits));
            out.push(b'"');
        }
        None => json::string(out, id_text),
    }
    out.extend_from_slice(b",\"client\":");
    match client {
        Some(addr) => {
            out.push(b'"');
            ip_text(out, addr.ip());
            out.push(b'"');
        }
        None => json::string(out, client_text),
    }
    let fields: [(&[u8], &[u8]); 3] = [
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
    millis(
        out,
        micros(record.ended.saturating_duration_since(record.started)),
    );
    out.extend_from_slice(b",\"upstream_time_ms\":");
    match r.u64()? {
        u64::MAX => out.extend_from_slice(b"-1"),
        micros => millis(out, micros),
    }
    let upstream = read_address(&mut r)?;
    out.extend_from_slice(b",\"upstream_addr\":\"");
    match upstream {
        Some(addr) => address(out, addr.ip(), addr.port()),
        None => out.push(b'-'),
    }
    out.push(b'"');
    let (load_balancer, pool) = record.pool.as_ref().map_or(("-", "-"), |p| p.names());
    out.extend_from_slice(b",\"load_balancer\":");
    json::string(out, load_balancer.as_bytes());
    out.extend_from_slice(b",\"pool\":");
    json::string(out, pool.as_bytes());
    out.extend_from_slice(b"}\n");
    Some(())
}

/// `a.b.c.d:port` or `[v6]:port`, as `SocketAddr`'s Display writes them.
fn address(out: &mut Vec<u8>, ip: IpAddr, port: u16) {
    match ip {
        IpAddr::V4(_) => ip_text(out, ip),
        IpAddr::V6(_) => {
            out.push(b'[');
            ip_text(out, ip);
            out.push(b']');
        }
    }
    out.push(b':');
    json::decimal(out, u64::from(port));
}

/// `a.b.c.d` or the v6 text, as `IpAddr`'s Display writes them.
fn ip_text(out: &mut Vec<u8>, ip: IpAddr) {
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
            let _ = write!(out, "{ip}");
        }
    }
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
pub(crate) fn sample(path: &[u8]) -> Record {
    let asked = Asked {
        started: Instant::now(),
        request_id: RequestId::Sent(b"id"),
        client: Client::Text(b"127.0.0.1"),
        host: b"a.test",
        method: "GET",
        path,
        trace_id: None,
    };
    let done = Done {
        status: 200,
        bytes_in: 0,
        bytes_out: 0,
        upstream_time: None,
        upstream: None,
    };
    let mut bytes = Vec::new();
    begin(&mut bytes, &asked);
    finish(&mut bytes, &done);
    Record {
        bytes,
        pool: None,
        started: asked.started,
        ended: asked.started,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Names(&'static str, &'static str);

    impl Named for Names {
        fn names(&self) -> (&str, &str) {
            (self.0, self.1)
        }
    }

    fn record(asked: &Asked<'_>, done: &Done) -> Record {
        let mut bytes = Vec::new();
        begin(&mut bytes, asked);
        finish(&mut bytes, done);
        let pool: Arc<dyn Named> = Arc::new(Names("default", "default/web:80"));
        Record {
            bytes,
            pool: Some(pool),
            started: asked.started,
            ended: asked.started + Duration::from_micros(1_234),
        }
    }

    fn asked<'a>(path: &'a [u8], trace_id: Option<&'a [u8]>, started: Instant) -> Asked<'a> {
        Asked {
            started,
            request_id: RequestId::Sent(b"id-1"),
            client: Client::Text(b"10.0.0.9"),
            host: b"a.test",
            method: "GET",
            path,
            trace_id,
        }
    }

    fn done(upstream: Option<SocketAddr>) -> Done {
        Done {
            status: 200,
            bytes_in: 12,
            bytes_out: 3456,
            upstream_time: Some(Duration::from_micros(987)),
            upstream,
        }
    }

    fn lines(records: &[Record]) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        assert_eq!(format_all(records, Clock::now(), &mut out), 0);
        let text = String::from_utf8(out).unwrap();
        (text.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_record_becomes_its_json_line_with_every_field() {
        let started = Instant::now();
        let path = b"/a\"b\\c\n\xff";
        let member = "10.1.2.3:8080".parse().unwrap();
        let v6 = "[2001:db8::1]:443".parse().unwrap();
        let mut other = done(Some(v6));
        other.upstream_time = None;
        let mut haproxy = Vec::new();
        line(&mut haproxy, b"{\"haproxy\":1}\n");
        let mut unnamed = record(&asked(b"/", None, started), &done(None));
        unnamed.pool = None;
        let records = [
            record(&asked(path, Some(b"4bf9"), started), &done(Some(member))),
            record(&asked(b"/", None, started), &other),
            unnamed,
            Record {
                bytes: haproxy,
                pool: None,
                started,
                ended: started,
            },
        ];
        let lines = lines(&records);
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
        assert_eq!(lines[2]["load_balancer"], "-");
        assert_eq!(lines[2]["pool"], "-");
    }

    #[test]
    fn an_address_a_method_code_and_a_generated_id_read_as_their_text() {
        let started = Instant::now();
        let bits = 0x0123_4567_89ab_4def_8edc_ba98_7654_3210_u128;
        let mut records = Vec::new();
        for (client, method) in [
            ("10.0.0.9", "GET"),
            ("2001:db8::2", "DELETE"),
            ("127.0.0.1", "PROPFIND"),
        ] {
            let mut asked = asked(b"/", None, started);
            asked.client = Client::Addr(client.parse().unwrap());
            asked.method = method;
            asked.request_id = RequestId::New(bits);
            records.push(record(&asked, &done(None)));
        }
        let lines = lines(&records);
        let id = "01234567-89ab-4def-8edc-ba9876543210";
        assert_eq!(lines[0]["client"], "10.0.0.9");
        assert_eq!(lines[0]["method"], "GET");
        assert_eq!(lines[0]["request_id"], id);
        assert_eq!(lines[1]["client"], "2001:db8::2");
        assert_eq!(lines[1]["method"], "DELETE");
        assert_eq!(lines[2]["method"], "PROPFIND");
        assert_eq!(lines[2]["request_id"], id);
        for (code, method) in METHODS.iter().enumerate() {
            assert_eq!(usize::from(method_code(method)), code + 1);
        }
    }

    #[test]
    fn the_time_is_the_requests_start_on_the_wall_clock() {
        let started = Instant::now();
        let wall = SystemTime::now();
        std::thread::sleep(Duration::from_millis(30));
        let clock = Clock::now();
        let dated = clock.wall(started);
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
        cut.bytes.truncate(cut.bytes.len() - 3);
        let records = [
            record(&asked(b"/ok", None, started), &done(None)),
            cut,
            Record {
                bytes: vec![9],
                pool: None,
                started,
                ended: started,
            },
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
            let asked = Asked { started: Instant::now(), request_id: RequestId::Sent(&id), client: Client::Text(b"c"), host: &host, method: "GET", path: &path, trace_id: None };
            let records = [record(&asked, &done(None))];
            let mut out = Vec::new();
            proptest::prop_assert_eq!(format_all(&records, Clock::now(), &mut out), 0);
            let text = String::from_utf8(out).unwrap();
            proptest::prop_assert_eq!(text.lines().count(), 1);
            let line: serde_json::Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(line["path"].as_str().unwrap(), String::from_utf8_lossy(&path));
            proptest::prop_assert_eq!(line["request_id"].as_str().unwrap(), String::from_utf8_lossy(&id));
        }
    }
}
