//! Response compression: gzip, Brotli and zstd, chosen by the request's `Accept-Encoding` with
//! its q-values among the codings offered (`--compression`, or an Ingress's
//! `portico.dev/compression`), ties going to the offered order. Only responses worth it and
//! safe to change are compressed: a compressible type, at least [`MIN_LENGTH`] bytes when the
//! length is declared, not already encoded, not a range, no `Cache-Control: no-transform`, not
//! to a HEAD. `Vary: Accept-Encoding` is set on every response that could have been compressed.
//!
//! The body streams: what the member sent is compressed as it comes, and flushed whenever the
//! member pauses (or [`EMIT`] bytes of output are ready), so a slow or endless response reaches
//! the client as it is made; nothing buffers a whole response. Levels are nginx's and
//! ingress-nginx's fast defaults (gzip 1, Brotli 4), zstd's 1.

use bytes::Bytes;
use http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, HeaderMap, HeaderValue, VARY,
};
use http::{Response, StatusCode};
use hyper::body::{Body, Frame, SizeHint};
use portico_model::{Coding, Compression};
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Responses that declare a shorter body are sent as they are (ingress-nginx's
/// `gzip-min-length`).
pub const MIN_LENGTH: u64 = 256;
/// Compressed output ready to go out is sent once this large, without waiting for the member
/// to pause.
const EMIT: usize = 16 * 1024;
const GZIP_LEVEL: u32 = 1;
const BROTLI_QUALITY: u32 = 4;
/// Brotli's largest window (4 MiB); a response of known length gets the smallest window that
/// holds it ([`brotli_window`]): the encoder's ring buffer is allocated whole for each response.
const BROTLI_WINDOW: u32 = 22;
/// Brotli's smallest window.
const BROTLI_MIN_WINDOW: u32 = 10;
const BROTLI_BUFFER: usize = 4096;
const ZSTD_LEVEL: i32 = 1;

/// The request's `Accept-Encoding` fields as one list ("" when none), kept for the response.
pub fn accepted(headers: &HeaderMap) -> String {
    let mut values = headers.get_all(http::header::ACCEPT_ENCODING).iter();
    let Some(first) = values.next() else {
        return String::new();
    };
    let mut out = String::from_utf8_lossy(first.as_bytes()).into_owned();
    for more in values {
        out.push(',');
        out.push_str(&String::from_utf8_lossy(more.as_bytes()));
    }
    out
}

/// Whether a request with these header fields accepts one of the `offered` codings.
pub fn wanted(fields: &[httparse::Header<'_>], offered: Compression) -> bool {
    if offered.is_off() {
        return false;
    }
    let mut accept = String::new();
    for field in fields {
        if field.name.eq_ignore_ascii_case("accept-encoding") {
            accept.push_str(&String::from_utf8_lossy(field.value));
            accept.push(',');
        }
    }
    negotiate(&accept, offered).is_some()
}

/// The coding a request accepting `accept` asks for among `offered`: the highest q-value, ties
/// to the earlier offered coding; `*` stands for codings not named; q=0 refuses. None: send
/// it as it is.
pub fn negotiate(accept: &str, offered: Compression) -> Option<Coding> {
    if offered.is_off() || accept.is_empty() {
        return None;
    }
    let mut named: Vec<(&str, u16)> = Vec::new();
    {
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let token = parts.next().unwrap_or("").trim();
            if token.is_empty() {
                continue;
            }
            let q = parts.find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim().eq_ignore_ascii_case("q").then(|| qvalue(v.trim()))
            });
            named.push((token, q.unwrap_or(Some(1000)).unwrap_or(0)));
        }
    }
    let q_of = |coding: Coding| {
        let matches = |t: &str| {
            t.eq_ignore_ascii_case(coding.token())
                || (coding == Coding::Gzip && t.eq_ignore_ascii_case("x-gzip"))
        };
        let own = named.iter().find(|(t, _)| matches(t)).map(|&(_, q)| q);
        own.or_else(|| named.iter().find(|(t, _)| *t == "*").map(|&(_, q)| q))
            .unwrap_or(0)
    };
    let mut best: Option<(Coding, u16)> = None;
    for coding in offered.codings() {
        let q = q_of(coding);
        if q > 0 && best.is_none_or(|(_, b)| q > b) {
            best = Some((coding, q));
        }
    }
    best.map(|(coding, _)| coding)
}

/// A q-value in thousandths; None when malformed (then the item is refused).
fn qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{frac:0<3}").parse::<u16>().ok()?;
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Whether a response with this head may be compressed (for any client): a compressible type,
/// a body worth it, not encoded, not partial, no `no-transform`.
pub fn eligible(status: StatusCode, headers: &HeaderMap) -> bool {
    if !status.is_success() || status == StatusCode::NO_CONTENT || status.as_u16() == 206 {
        return false;
    }
    let encoded = headers
        .get(CONTENT_ENCODING)
        .is_some_and(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"));
    if encoded || headers.contains_key(CONTENT_RANGE) {
        return false;
    }
    let no_transform = headers.get_all(CACHE_CONTROL).iter().any(|v| {
        let v = v.to_str().unwrap_or("");
        v.split(',')
            .any(|d| d.trim().eq_ignore_ascii_case("no-transform"))
    });
    if no_transform {
        return false;
    }
    let length = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if length.is_some_and(|l| l < MIN_LENGTH) {
        return false;
    }
    headers
        .get(CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(compressible_type)
}

/// Text, JSON, JavaScript, XML, SVG, icons and fonts (ingress-nginx's `gzip-types`, and
/// `text/*` but event streams, which are made to be read as they come).
fn compressible_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let essence = essence.to_ascii_lowercase();
    if essence == "text/event-stream" {
        return false;
    }
    let (kind, sub) = essence.split_once('/').unwrap_or((&essence, ""));
    match kind {
        "text" => true,
        "application" => {
            matches!(
                sub,
                "json"
                    | "javascript"
                    | "x-javascript"
                    | "ecmascript"
                    | "xml"
                    | "xhtml+xml"
                    | "vnd.ms-fontobject"
                    | "x-font-ttf"
                    | "wasm"
            ) || sub.ends_with("+json")
                || sub.ends_with("+xml")
        }
        "image" => matches!(sub, "svg+xml" | "x-icon" | "vnd.microsoft.icon"),
        "font" => matches!(sub, "ttf" | "otf" | "opentype" | "sfnt"),
        _ => false,
    }
}

/// Compresses `response` with the coding `accept` picks among `offered`, when it is
/// [`eligible`] (and `head` is false: a HEAD response has no body to compress); sets `Vary`
/// whenever it is eligible.
pub fn respond<B>(
    response: Response<B>,
    accept: &str,
    offered: Compression,
    head: bool,
) -> Response<Compressible<B>>
where
    B: Body<Data = Bytes>,
{
    if offered.is_off() || head || !eligible(response.status(), response.headers()) {
        return response.map(Compressible::Plain);
    }
    let (mut parts, body) = response.into_parts();
    add_vary(&mut parts.headers);
    let Some(coding) = negotiate(accept, offered) else {
        return Response::from_parts(parts, Compressible::Plain(body));
    };
    let length =
        (parts.headers.get(CONTENT_LENGTH)).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let Some(encoder) = Encoder::new(coding, length) else {
        return Response::from_parts(parts, Compressible::Plain(body));
    };
    let headers = &mut parts.headers;
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
    headers.remove(CONTENT_LENGTH);
    headers.remove(ACCEPT_RANGES);
    // Another representation: a strong validator becomes weak, as nginx does.
    if let Some(etag) = headers.get(ETAG)
        && !etag.as_bytes().starts_with(b"W/")
    {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(etag.as_bytes());
        if let Ok(weak) = HeaderValue::from_bytes(&weak) {
            headers.insert(ETAG, weak);
        }
    }
    let compressed = Compressed {
        inner: body,
        encoder: Some(encoder),
        trailers: None,
        unflushed: false,
        done: false,
    };
    Response::from_parts(parts, Compressible::Compressed(Box::new(compressed)))
}

/// `Vary: Accept-Encoding`, unless it is there already (or `Vary: *`).
fn add_vary(headers: &mut HeaderMap) {
    let present = headers.get_all(VARY).iter().any(|v| {
        let v = v.to_str().unwrap_or("");
        v.split(',').any(|t| {
            let t = t.trim();
            t == "*" || t.eq_ignore_ascii_case("accept-encoding")
        })
    });
    if !present {
        headers.append(VARY, HeaderValue::from_static("accept-encoding"));
    }
}

/// A response body as the member sent it, or compressed.
#[derive(Debug)]
pub enum Compressible<B> {
    Plain(B),
    Compressed(Box<Compressed<B>>),
}

impl<B> Body for Compressible<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.get_mut() {
            Compressible::Plain(body) => Pin::new(body).poll_frame(cx),
            Compressible::Compressed(body) => Pin::new(body.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Compressible::Plain(body) => body.is_end_stream(),
            Compressible::Compressed(body) => body.done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Compressible::Plain(body) => body.size_hint(),
            Compressible::Compressed(_) => SizeHint::default(),
        }
    }
}

/// A body compressed as it streams.
#[derive(Debug)]
pub struct Compressed<B> {
    inner: B,
    /// None once finished.
    encoder: Option<Encoder>,
    /// The member's trailers, sent after the last compressed bytes.
    trailers: Option<HeaderMap>,
    /// Input was written since the last flush.
    unflushed: bool,
    done: bool,
}

impl<B> Compressed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        loop {
            let Some(encoder) = self.encoder.as_mut() else {
                self.done = true;
                return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))));
            };
            let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending if !self.unflushed => return Poll::Pending,
                Poll::Pending => {
                    // The member pauses: what was compressed so far goes out now (once: a
                    // flush without new input would still send a few bytes).
                    self.unflushed = false;
                    let out = encoder.flush();
                    if out.is_empty() {
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                Poll::Ready(frame) => frame,
            };
            match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        encoder.write(&data);
                        self.unflushed = true;
                        if encoder.ready() >= EMIT {
                            return Poll::Ready(Some(Ok(Frame::data(encoder.take()))));
                        }
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            self.trailers = Some(trailers);
                        }
                        if let Some(out) = self.finish() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => {
                    if let Some(out) = self.finish() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
            }
            // Nothing to send yet: read on (the loop ends at the member's end or pause).
        }
    }

    /// Ends the compressed stream; its last bytes, if any.
    fn finish(&mut self) -> Option<Bytes> {
        let out = self.encoder.take()?.finish();
        (!out.is_empty()).then_some(out)
    }
}

/// One coding's streaming compressor, writing into a buffer taken as it fills.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

/// The smallest brotli window (`lgwin`) that holds a body of `length` bytes (a window holds
/// 2^lgwin - 16), the largest when the length is unknown.
fn brotli_window(length: Option<u64>) -> u32 {
    let Some(length) = length else {
        return BROTLI_WINDOW;
    };
    (BROTLI_MIN_WINDOW..BROTLI_WINDOW)
        .find(|w| (1u64 << w) - 16 >= length)
        .unwrap_or(BROTLI_WINDOW)
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let coding = match self {
            Encoder::Gzip(_) => "gzip",
            Encoder::Br(_) => "br",
            Encoder::Zstd(_) => "zstd",
        };
        f.debug_tuple("Encoder").field(&coding).finish()
    }
}

impl Encoder {
    /// An encoder for a body of `length` bytes when known (brotli's window fitted to it: less
    /// memory to allocate and clear per response; a longer body still encodes correctly).
    fn new(coding: Coding, length: Option<u64>) -> Option<Encoder> {
        Some(match coding {
            Coding::Gzip => {
                let level = flate2::Compression::new(GZIP_LEVEL);
                Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), level))
            }
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                BROTLI_BUFFER,
                BROTLI_QUALITY,
                brotli_window(length),
            ))),
            Coding::Zstd => {
                let encoder = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL);
                Encoder::Zstd(encoder.ok()?)
            }
        })
    }

    fn sink(&mut self) -> &mut Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        }
    }

    /// Compresses `data` (writing to memory does not fail; a compressor that did would end
    /// the body short, never send it wrong).
    fn write(&mut self, data: &[u8]) {
        let written = match self {
            Encoder::Gzip(e) => e.write_all(data),
            Encoder::Br(e) => e.write_all(data),
            Encoder::Zstd(e) => e.write_all(data),
        };
        if let Err(error) = written {
            tracing::warn!(%error, "response compression failed");
        }
    }

    /// Compressed bytes ready to send.
    fn ready(&mut self) -> usize {
        self.sink().len()
    }

    fn take(&mut self) -> Bytes {
        Bytes::from(std::mem::take(self.sink()))
    }

    /// Everything compressed so far, decodable by the client now.
    fn flush(&mut self) -> Bytes {
        let flushed = match self {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Br(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        };
        if let Err(error) = flushed {
            tracing::warn!(%error, "response compression failed");
        }
        self.take()
    }

    /// The end of the compressed stream.
    fn finish(self) -> Bytes {
        let out = match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Br(e) => Ok(e.into_inner()),
            Encoder::Zstd(e) => e.finish(),
        };
        match out {
            Ok(out) => Bytes::from(out),
            Err(error) => {
                tracing::warn!(%error, "response compression failed");
                Bytes::new()
            }
        }
    }
}

#[cfg(test)]
mod tests;
