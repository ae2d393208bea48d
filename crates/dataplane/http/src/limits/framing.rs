//! A second look at the framing of an HTTP/1 client's bytes, for the one smuggling vector hyper
//! hides from the proxy.
//!
//! A request head carrying both `Content-Length` and `Transfer-Encoding` is served by hyper
//! by `Transfer-Encoding` alone, then the connection is closed (RFC 9112 section 6.1 allows
//! it); hyper drops `Content-Length` before the proxy sees the request. Portico refuses such a
//! request with 400, as nginx does. [`Framing`] follows the client's bytes as hyper reads them
//! (each head, then its body by its length or its chunks), and names the request, by its
//! ordinal on the connection, whose head carried both fields.
//!
//! It only ever adds a refusal: whatever it cannot follow (an HTTP/2 preface, a head hyper will
//! refuse anyway, bytes past an upgrade) turns it off for the rest of the connection, and
//! hyper's own parsing decides.

use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Header fields a head may carry for the scanner to follow it; a head with more turns the
/// scanner off (hyper's `--max-headers` refuses it first unless that limit is higher).
const MAX_FIELDS: usize = 256;
/// The longest chunk-size line or trailer field the scanner buffers.
const MAX_LINE: usize = 4096;
const NONE: u64 = u64::MAX;

/// The ordinal (0 for the connection's first request) of the request whose head carried both
/// `Content-Length` and `Transfer-Encoding`: written by the connection's [`Framing`], read by
/// its service.
#[derive(Debug)]
pub(crate) struct Ambiguous(AtomicU64);

impl Ambiguous {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Ambiguous(AtomicU64::new(NONE)))
    }

    /// Whether the `ordinal`-th request of the connection declared both lengths.
    pub(crate) fn is(&self, ordinal: u64) -> bool {
        self.0.load(Ordering::Relaxed) == ordinal
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for (the rest of) a request head.
    Head,
    /// In a body of this many bytes still to come.
    Fixed(u64),
    /// Waiting for a chunk-size line.
    ChunkSize,
    /// In a chunk's data, this many bytes still to come.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// The trailer section after the last chunk, up to its empty line.
    Trailers,
    /// Not following any more.
    Off,
}

/// What one head says about what follows it.
enum Head {
    /// The head is not complete yet.
    Partial,
    /// The head took this many bytes; its body follows in `State`.
    Done(usize, State),
}

pub(crate) struct Framing {
    state: State,
    /// Heads seen so far: the ordinal of the next one.
    heads: u64,
    /// Bytes of a head or line that did not end in what was read so far.
    pending: Vec<u8>,
    max_head: usize,
    ambiguous: Arc<Ambiguous>,
}

impl Framing {
    /// A scanner for heads of at most `max_head` bytes (hyper's read buffer).
    pub(crate) fn new(max_head: usize, ambiguous: Arc<Ambiguous>) -> Self {
        Framing {
            state: State::Head,
            heads: 0,
            pending: Vec::new(),
            max_head,
            ambiguous,
        }
    }

    /// Follows `input`, the next bytes the client sent.
    pub(crate) fn feed(&mut self, input: &[u8]) {
        if self.state == State::Off || input.is_empty() {
            return;
        }
        if self.pending.is_empty() {
            let rest = self.run(input).len();
            self.keep(&input[input.len() - rest..]);
        } else {
            let mut buffer = std::mem::take(&mut self.pending);
            buffer.extend_from_slice(input);
            let rest = self.run(&buffer).len();
            buffer.drain(..buffer.len() - rest);
            self.pending = buffer;
            self.bound();
        }
    }

    fn keep(&mut self, rest: &[u8]) {
        if !rest.is_empty() {
            self.pending.extend_from_slice(rest);
            self.bound();
        }
    }

    /// A head or line longer than hyper would buffer is hyper's to refuse.
    fn bound(&mut self) {
        let limit = if self.state == State::Head {
            self.max_head
        } else {
            MAX_LINE
        };
        if self.pending.len() > limit || self.state == State::Off {
            self.off();
        }
    }

    fn off(&mut self) {
        self.state = State::Off;
        self.pending = Vec::new();
    }

    /// Follows `input` as far as it goes; returns the tail that needs more bytes (the start of
    /// a head or of a line).
    fn run<'a>(&mut self, mut input: &'a [u8]) -> &'a [u8] {
        while !input.is_empty() {
            match self.state {
                State::Off => return &[],
                State::Head => match self.head(input) {
                    Head::Partial => return input,
                    Head::Done(n, next) => {
                        input = &input[n..];
                        self.state = next;
                    }
                },
                State::Fixed(left) | State::ChunkData(left) => {
                    let n = left.min(input.len() as u64);
                    input = &input[n as usize..];
                    self.state = match (self.state, left - n) {
                        (State::Fixed(_), 0) => State::Head,
                        (State::Fixed(_), left) => State::Fixed(left),
                        (_, 0) => State::ChunkEnd,
                        (_, left) => State::ChunkData(left),
                    };
                }
                State::ChunkSize => match httparse::parse_chunk_size(input) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        input = &input[n..];
                        self.state = State::Trailers;
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        input = &input[n..];
                        self.state = State::ChunkData(size);
                    }
                    Ok(httparse::Status::Partial) => return input,
                    Err(_) => self.state = State::Off,
                },
                State::ChunkEnd => match input {
                    [b'\r'] => return input,
                    [b'\r', b'\n', rest @ ..] => {
                        input = rest;
                        self.state = State::ChunkSize;
                    }
                    _ => self.state = State::Off,
                },
                State::Trailers => match input.iter().position(|b| *b == b'\n') {
                    None => return input,
                    Some(end) => {
                        let line = &input[..end];
                        input = &input[end + 1..];
                        if line.is_empty() || line == b"\r" {
                            self.state = State::Head;
                        }
                    }
                },
            }
        }
        &[]
    }

    /// Parses the head at the start of `input`: counts it, flags it if it carries both
    /// lengths, and says how its body is framed.
    fn head(&mut self, input: &[u8]) -> Head {
        // Uninitialised: filling 256 empty fields per head would cost more than the parse.
        let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
        let mut request = httparse::Request::new(&mut []);
        let size = match request.parse_with_uninit_headers(input, &mut fields) {
            Ok(httparse::Status::Complete(size)) => size,
            Ok(httparse::Status::Partial) => return Head::Partial,
            Err(_) => return Head::Done(input.len(), State::Off),
        };
        let ordinal = self.heads;
        self.heads += 1;
        if request.method == Some("PRI") {
            // The HTTP/2 preface: hyper serves the connection as HTTP/2.
            return Head::Done(size, State::Off);
        }
        let mut length: Option<u64> = None;
        let (mut has_length, mut chunked, mut encoded) = (false, false, false);
        for field in request.headers.iter() {
            if field.name.eq_ignore_ascii_case("content-length") {
                has_length = true;
                let value = std::str::from_utf8(field.value).ok();
                match value.and_then(|v| v.trim().parse::<u64>().ok()) {
                    Some(n) if length.is_none_or(|l| l == n) => length = Some(n),
                    // Invalid or differing: hyper refuses the request.
                    _ => return Head::Done(size, State::Off),
                }
            } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
                encoded = true;
                // As hyper reads it: the last field's last coding decides.
                let last = field.value.rsplit(|b| *b == b',').next().unwrap_or(b"");
                chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            }
        }
        if has_length && encoded {
            // hyper serves this request by its chunks and then closes the connection.
            self.ambiguous.0.store(ordinal, Ordering::Relaxed);
            return Head::Done(size, State::Off);
        }
        let next = match (encoded, length) {
            (true, _) if chunked && request.version == Some(1) => State::ChunkSize,
            (true, _) => State::Off,
            (false, Some(n)) if n > 0 => State::Fixed(n),
            (false, _) => State::Head,
        };
        Head::Done(size, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of `step` bytes; returns the flagged ordinal and the final state.
    fn scan(bytes: &[u8], step: usize) -> (Option<u64>, State) {
        let ambiguous = Ambiguous::new();
        let mut framing = Framing::new(8192, ambiguous.clone());
        for piece in bytes.chunks(step) {
            framing.feed(piece);
        }
        let flagged = ambiguous.0.load(Ordering::Relaxed);
        ((flagged != NONE).then_some(flagged), framing.state)
    }

    /// The same outcome whether the bytes come at once, byte by byte or in pieces of 7.
    fn scan_all_ways(bytes: &str) -> (Option<u64>, State) {
        let whole = scan(bytes.as_bytes(), bytes.len().max(1));
        assert_eq!(scan(bytes.as_bytes(), 1), whole, "byte by byte");
        assert_eq!(scan(bytes.as_bytes(), 7), whole, "in pieces of 7");
        whole
    }

    const GET: &str = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    const BOTH: &str = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";

    #[test]
    fn a_head_with_both_lengths_is_flagged_by_its_ordinal() {
        assert_eq!(scan_all_ways(BOTH), (Some(0), State::Off));
        let te_first = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(scan_all_ways(te_first).0, Some(0));
        assert_eq!(scan_all_ways(&format!("{GET}{GET}{BOTH}")).0, Some(2));
    }

    #[test]
    fn plain_heads_and_bodies_are_followed_without_a_flag() {
        assert_eq!(scan_all_ways(&format!("{GET}{GET}")), (None, State::Head));
        let fixed = "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(scan_all_ways(&format!("{fixed}{GET}")), (None, State::Head));
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
                       3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(
            scan_all_ways(&format!("{chunked}{GET}")),
            (None, State::Head)
        );
    }

    #[test]
    fn a_body_that_looks_like_a_smuggled_head_is_not_flagged() {
        let inner = "GET /x HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let fixed = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{inner}",
            inner.len()
        );
        assert_eq!(scan_all_ways(&fixed), (None, State::Head));
        let chunked = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{inner}\r\n0\r\n\r\n",
            inner.len()
        );
        assert_eq!(
            scan_all_ways(&format!("{chunked}{BOTH}")),
            (Some(1), State::Off)
        );
    }

    #[test]
    fn what_hyper_refuses_or_serves_otherwise_turns_the_scanner_off() {
        let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        assert_eq!(
            scan_all_ways(&format!("{preface}{BOTH}")),
            (None, State::Off)
        );
        let bad_chunk = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(
            scan_all_ways(&format!("{bad_chunk}{BOTH}")),
            (None, State::Off)
        );
        let differing = "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
        assert_eq!(scan_all_ways(differing), (None, State::Off));
        assert_eq!(
            scan_all_ways("GET / HTTP/1.1\r\nX A: b\r\n\r\n").1,
            State::Off
        );
    }

    #[test]
    fn a_head_longer_than_the_limit_turns_the_scanner_off() {
        let long = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n", "a".repeat(9000));
        assert_eq!(scan(long.as_bytes(), 100), (None, State::Off));
    }
}
