use super::*;
use std::collections::VecDeque;
use std::io::Read;

fn accept(value: &str) -> String {
    let mut h = HeaderMap::new();
    h.insert(http::header::ACCEPT_ENCODING, value.parse().unwrap());
    accepted(&h)
}

fn pick(value: &str) -> Option<&'static str> {
    negotiate(&accept(value), Compression::default()).map(Coding::token)
}

#[test]
fn the_highest_q_value_wins_and_ties_go_to_the_offered_order() {
    assert_eq!(pick("gzip, deflate, br, zstd"), Some("zstd"));
    assert_eq!(pick("gzip, br"), Some("br"));
    assert_eq!(pick("gzip;q=1.0, br;q=0.5"), Some("gzip"));
    assert_eq!(pick("br;q=0.8, zstd;q=0.9, gzip;q=0.85"), Some("zstd"));
    assert_eq!(pick("x-gzip"), Some("gzip"));
    assert_eq!(pick("GZIP"), Some("gzip"));
    let gzip_first = Compression::parse("gzip,br").unwrap();
    let both = negotiate(&accept("br, gzip, zstd"), gzip_first).map(Coding::token);
    assert_eq!(both, Some("gzip"), "the offered order, not the client's");
}

#[test]
fn q_zero_wildcards_and_identity() {
    assert_eq!(pick("identity"), None);
    assert_eq!(pick(""), None);
    assert_eq!(pick("*"), Some("zstd"));
    assert_eq!(pick("*;q=0.5, zstd;q=0, br;q=0"), Some("gzip"));
    assert_eq!(pick("gzip;q=0"), None);
    assert_eq!(pick("*;q=0"), None);
    // A malformed q-value refuses its coding, never the other way round.
    assert_eq!(pick("zstd;q=2, gzip"), Some("gzip"));
    assert_eq!(pick("zstd;q=0.0001, gzip;q=0.001"), Some("gzip"));
    assert_eq!(negotiate(&accept("gzip"), Compression::OFF), None);
}

fn head(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

#[test]
fn only_compressible_whole_untransformed_responses_are_eligible() {
    let ok = StatusCode::OK;
    let text = [("content-type", "text/html; charset=utf-8")];
    assert!(eligible(ok, &head(&text)));
    assert!(eligible(ok, &head(&[("content-type", "application/json")])));
    assert!(eligible(
        ok,
        &head(&[("content-type", "application/problem+json")])
    ));
    assert!(eligible(ok, &head(&[("content-type", "image/svg+xml")])));
    assert!(!eligible(ok, &head(&[("content-type", "image/png")])));
    assert!(!eligible(
        ok,
        &head(&[("content-type", "text/event-stream")])
    ));
    assert!(!eligible(ok, &head(&[])), "no type");
    let short = [("content-type", "text/plain"), ("content-length", "255")];
    assert!(!eligible(ok, &head(&short)));
    let long = [("content-type", "text/plain"), ("content-length", "256")];
    assert!(eligible(ok, &head(&long)));
    let encoded = [("content-type", "text/plain"), ("content-encoding", "gzip")];
    assert!(!eligible(ok, &head(&encoded)));
    let identity = [
        ("content-type", "text/plain"),
        ("content-encoding", "identity"),
    ];
    assert!(eligible(ok, &head(&identity)));
    let ranged = [
        ("content-type", "text/plain"),
        ("content-range", "bytes 0-9/100"),
    ];
    assert!(!eligible(StatusCode::PARTIAL_CONTENT, &head(&text)));
    assert!(!eligible(ok, &head(&ranged)));
    let kept = [
        ("content-type", "text/plain"),
        ("cache-control", "public, No-Transform"),
    ];
    assert!(!eligible(ok, &head(&kept)));
    assert!(!eligible(StatusCode::NOT_MODIFIED, &head(&text)));
    assert!(!eligible(StatusCode::NO_CONTENT, &head(&text)));
}

/// A body that yields its items in turn: `Some` data, `None` a pause (Pending, woken at once:
/// [`drain`] polls again at once, as an executor polling a body often would).
struct Scripted(VecDeque<Option<Bytes>>);

impl Body for Scripted {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.0.pop_front() {
            Some(Some(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Some(None) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(None),
        }
    }
}

/// Polls `body` until it ends; the data, and the data frames one by one.
fn drain<B: Body<Data = Bytes> + Unpin>(body: &mut B) -> (Vec<u8>, Vec<Bytes>) {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let (mut out, mut frames) = (Vec::new(), Vec::new());
    loop {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                    frames.push(data);
                }
            }
            Poll::Ready(Some(Err(_))) => panic!("body error"),
            Poll::Ready(None) => return (out, frames),
            Poll::Pending => {}
        }
    }
}

use portico_testkit::decode;

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("line {i} of a compressible body\n"))
        .collect::<String>()
        .into_bytes()
}

fn compressed(chunks: Vec<Option<Bytes>>, coding: &str) -> Response<Compressible<Scripted>> {
    let response = Response::builder()
        .header("content-type", "text/plain")
        .header("content-length", "999999")
        .header("etag", "\"v1\"")
        .body(Scripted(chunks.into()))
        .unwrap();
    respond(response, &accept(coding), Compression::default(), false)
}

#[test]
fn each_coding_decodes_to_the_exact_body() {
    let body = text(20_000);
    for coding in ["gzip", "br", "zstd"] {
        let chunks = body.chunks(7_000).map(|c| Some(Bytes::copy_from_slice(c)));
        let mut response = compressed(chunks.collect(), coding);
        let h = response.headers();
        assert_eq!(h["content-encoding"], coding);
        assert_eq!(h["vary"], "accept-encoding");
        assert_eq!(h["etag"], "W/\"v1\"");
        assert!(!h.contains_key("content-length"));
        let (out, _) = drain(response.body_mut());
        assert!(out.len() < body.len() / 3, "{coding}: {} bytes", out.len());
        assert_eq!(decode(coding, &out), body, "{coding}");
    }
}

#[test]
fn what_came_before_a_pause_goes_out_decodable_before_the_end() {
    let first = text(50);
    let second = text(60);
    for coding in ["gzip", "br", "zstd"] {
        // A long pause: the body is polled many times before the rest comes.
        let chunks = vec![
            Some(Bytes::from(first.clone())),
            None,
            None,
            None,
            None,
            Some(Bytes::from(second.clone())),
        ];
        let mut response = compressed(chunks, coding);
        let (out, frames) = drain(response.body_mut());
        // Less than the emit size came before the pause: only the pause can have sent the
        // first frame, which decodes (as a prefix) to the whole first part.
        assert!(frames.len() >= 2, "{coding}: one frame only");
        let mut partial = Vec::new();
        let prefix = &frames[0][..];
        let _ = match coding {
            "gzip" => flate2::read::GzDecoder::new(prefix).read_to_end(&mut partial),
            "br" => brotli::Decompressor::new(prefix, 4096).read_to_end(&mut partial),
            _ => zstd::stream::read::Decoder::new(prefix)
                .unwrap()
                .read_to_end(&mut partial),
        };
        assert_eq!(partial, first, "{coding}");
        let whole: Vec<u8> = [first.clone(), second.clone()].concat();
        assert_eq!(decode(coding, &out), whole, "{coding}");
        // One frame for the pause, one at the end: no empty flushes while the member waits.
        assert_eq!(frames.len(), 2, "{coding}");
    }
}

#[test]
fn without_an_accepted_coding_the_body_passes_with_vary_set() {
    let response = Response::builder()
        .header("content-type", "text/plain")
        .header("vary", "origin")
        .body(Scripted(vec![Some(Bytes::from_static(b"plain"))].into()))
        .unwrap();
    let mut response = respond(response, &accept("identity"), Compression::default(), false);
    let vary: Vec<_> = response.headers().get_all("vary").iter().collect();
    assert_eq!(vary, ["origin", "accept-encoding"]);
    assert!(!response.headers().contains_key("content-encoding"));
    assert_eq!(drain(response.body_mut()).0, b"plain");
    let head = Response::builder()
        .header("content-type", "text/plain")
        .body(Scripted(VecDeque::new()))
        .unwrap();
    let head = respond(head, &accept("gzip"), Compression::default(), true);
    assert!(!head.headers().contains_key("content-encoding"));
}

/// Brotli's ring buffer is allocated whole per response: a known length gets the smallest
/// window that holds it (2^lgwin - 16 bytes), an unknown one the largest.
#[test]
fn brotli_windows_fit_the_known_length() {
    assert_eq!(brotli_window(None), 22);
    assert_eq!(brotli_window(Some(300)), 10);
    assert_eq!(brotli_window(Some(1008)), 10);
    assert_eq!(brotli_window(Some(1009)), 11);
    assert_eq!(brotli_window(Some(65_536)), 17);
    assert_eq!(brotli_window(Some(1 << 30)), 22);
    // A body longer than its Content-Length said still decodes (the window only bounds how
    // far back a match may reach).
    let body = text(5_000);
    let response = Response::builder()
        .header("content-type", "text/plain")
        .header("content-length", "1000")
        .body(Scripted(vec![Some(Bytes::from(body.clone()))].into()))
        .unwrap();
    let mut response = respond(response, &accept("br"), Compression::default(), false);
    let (out, _) = drain(response.body_mut());
    assert_eq!(decode("br", &out), body);
}
