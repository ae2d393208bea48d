//! The own HTTP/1.1 path's heads, pure: which request heads it serves (the rest go to hyper),
//! the request head written for the upstream, and the response head written for the client.

use super::super::headers::HOP_BY_HOP_NAMES;
use httparse::{Header, Status};

/// The most fields a head may have here; a head with more goes to hyper (which answers by
/// `--max-headers`) or, from an upstream, is a bad response.
pub(super) const MAX_FIELDS: usize = 128;

/// The most fields `Connection` may name for removal on this path.
const MAX_NAMED: usize = 8;

/// A request head the own path serves.
#[derive(Debug)]
pub(super) struct Request<'a> {
    /// The head's length in bytes.
    pub(super) len: usize,
    pub(super) method: &'a str,
    /// Origin-form: `/path?query`.
    pub(super) target: &'a str,
    pub(super) host: &'a str,
    /// `Connection: close`.
    pub(super) close: bool,
    /// The client's `X-Request-Id`, if it sent one.
    pub(super) request_id: Option<&'a [u8]>,
    /// The client's first `traceparent`, if it sent one.
    pub(super) traceparent: Option<&'a [u8]>,
    /// It has an `Accept-Encoding` field (its response may be compressed).
    pub(super) accept_encoding: bool,
    /// It has an `X-Forwarded-For` field (a trusted proxy's names the client).
    pub(super) forwarded_for: bool,
    pub(super) body: Body,
    pub(super) fields: &'a [Header<'a>],
}

/// How a request's body is framed on the own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    None,
    /// By its one `Content-Length` field, of this many bytes (not 0).
    Length(u64),
    /// By its one `Transfer-Encoding: chunked` field.
    Chunked,
}

/// What a buffer holds, for the own path.
#[derive(Debug)]
pub(super) enum Inspected<'a> {
    /// Not a whole head yet.
    Partial,
    /// Not for this path: hyper serves it (and the rest of the connection), errors included.
    Decline,
    Request(Request<'a>),
}

/// Reads the request head at the start of `input` into `fields`.
///
/// The own path takes HTTP/1.1 requests in origin form, with one `Host`, without a body or with
/// one `Content-Length` of plain digits or one `Transfer-Encoding: chunked`; anything else
/// (HTTP/1.0, HTTP/2's preface, both framings, another transfer coding or a list, a second
/// `Content-Length` or `Transfer-Encoding` field, `Upgrade`, `Expect`, an absolute
/// or asterisk target, a malformed head) is declined, so that hyper answers it exactly as it
/// answers every other request: whatever hyper would refuse as ambiguous framing never gets
/// here.
pub(super) fn inspect<'a>(
    input: &'a [u8],
    fields: &'a mut [Header<'a>; MAX_FIELDS],
    max_fields: usize,
) -> Inspected<'a> {
    if input.starts_with(b"PRI ") {
        return Inspected::Decline;
    }
    let mut parsed = httparse::Request::new(fields);
    let len = match parsed.parse(input) {
        Ok(Status::Complete(len)) => len,
        Ok(Status::Partial) => return Inspected::Partial,
        Err(_) => return Inspected::Decline,
    };
    let (Some(method), Some(target), Some(1)) = (parsed.method, parsed.path, parsed.version) else {
        return Inspected::Decline;
    };
    if method == "CONNECT" || !target.starts_with('/') || parsed.headers.len() > max_fields {
        return Inspected::Decline;
    }
    let fields: &'a [Header<'a>] = parsed.headers;
    let mut host = None;
    let mut close = false;
    let (mut request_id, mut traceparent) = (None, None);
    let (mut accept_encoding, mut forwarded_for) = (false, false);
    let mut body = None;
    let mut chunked = false;
    for field in fields {
        let name = field.name;
        if name.eq_ignore_ascii_case("host") {
            let value = std::str::from_utf8(field.value).ok();
            let visible = value.filter(|v| v.bytes().all(|b| b.is_ascii_graphic()));
            if host.is_some() || visible.is_none_or(|v| v.contains(',')) {
                return Inspected::Decline;
            }
            host = visible;
        } else if name.eq_ignore_ascii_case("content-length") {
            let length = content_length(field.value);
            if body.is_some() || length.is_none() {
                return Inspected::Decline;
            }
            body = length;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in tokens(field.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    return Inspected::Decline;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked || !field.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Inspected::Decline;
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case("upgrade") || name.eq_ignore_ascii_case("expect") {
            return Inspected::Decline;
        } else if name.eq_ignore_ascii_case("x-request-id") && request_id.is_none() {
            request_id = Some(field.value);
        } else if name.eq_ignore_ascii_case("traceparent") && traceparent.is_none() {
            traceparent = Some(field.value);
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            accept_encoding = true;
        } else if name.eq_ignore_ascii_case("x-forwarded-for") {
            forwarded_for = true;
        }
    }
    let Some(host) = host else {
        return Inspected::Decline;
    };
    let body = match (body, chunked) {
        (Some(_), true) => return Inspected::Decline,
        (None, true) => Body::Chunked,
        (None | Some(0), false) => Body::None,
        (Some(length), false) => Body::Length(length),
    };
    Inspected::Request(Request {
        len,
        method,
        target,
        host,
        close,
        request_id,
        traceparent,
        accept_encoding,
        forwarded_for,
        body,
        fields,
    })
}

/// A `Content-Length` value of digits only (no sign, list or space; at most 19 digits, so
/// that it fits in a `u64`): its length; `None` for anything else, which is hyper's to judge.
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The comma-separated tokens of a field value, trimmed.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|b| *b == b',')
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty())
}

/// The fields `Connection` names (besides `close` and `keep-alive`), which go with it;
/// `None` when there are more than this path keeps track of.
fn named_by_connection<'a>(fields: &[Header<'a>]) -> Option<([&'a [u8]; MAX_NAMED], usize)> {
    let mut named = [&b""[..]; MAX_NAMED];
    let mut count = 0;
    let values = fields
        .iter()
        .filter(|f| f.name.eq_ignore_ascii_case("connection"));
    for token in values.flat_map(|f| tokens(f.value)) {
        if token.eq_ignore_ascii_case(b"close") || token.eq_ignore_ascii_case(b"keep-alive") {
            continue;
        }
        *named.get_mut(count)? = token;
        count += 1;
    }
    Some((named, count))
}

fn is_hop_by_hop(name: &str, named: &[&[u8]]) -> bool {
    HOP_BY_HOP_NAMES
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
        || named
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name.as_bytes()))
}

/// What the proxy adds to a request for the upstream.
pub(super) struct Forwarding<'a> {
    /// The client's address, as `X-Forwarded-For` carries it.
    pub(super) client: &'a [u8],
    /// `http` or `https`.
    pub(super) proto: &'a str,
    /// A new request id, when the client sent none.
    pub(super) request_id: Option<&'a [u8]>,
    /// The proxy's span's `traceparent`, in place of the client's (tracing on).
    pub(super) traceparent: Option<&'a [u8]>,
}

/// Writes the head of `request` for the upstream into `out`: the same request line in
/// HTTP/1.1, its fields but the hop-by-hop ones and those `Connection` names, the client's
/// `X-Forwarded-For` list with the client's address appended, `X-Forwarded-Proto` and
/// `X-Forwarded-Host` replaced, an `X-Request-Id` when the client sent none, and the
/// proxy's `traceparent` in place of the client's when tracing is on. `false`
/// when `Connection` names more fields than this path keeps track of (hyper serves it then).
pub(super) fn write_upstream(
    out: &mut Vec<u8>,
    request: &Request<'_>,
    forwarding: &Forwarding<'_>,
) -> bool {
    let fields = request.fields;
    let Some((named, count)) = named_by_connection(fields) else {
        return false;
    };
    let named = &named[..count];
    out.extend_from_slice(request.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut forwarded_for: Option<Vec<u8>> = None;
    for field in fields {
        let name = field.name;
        if is_hop_by_hop(name, named)
            || name.eq_ignore_ascii_case("x-forwarded-proto")
            || name.eq_ignore_ascii_case("x-forwarded-host")
            || (forwarding.traceparent.is_some() && name.eq_ignore_ascii_case("traceparent"))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("x-forwarded-for") {
            let list = forwarded_for.get_or_insert_with(Vec::new);
            list.extend_from_slice(field.value);
            list.extend_from_slice(b", ");
            continue;
        }
        field_line(out, name.as_bytes(), field.value);
    }
    out.extend_from_slice(b"x-forwarded-for: ");
    if let Some(list) = forwarded_for {
        out.extend_from_slice(&list);
    }
    out.extend_from_slice(forwarding.client);
    out.extend_from_slice(b"\r\n");
    field_line(out, b"x-forwarded-proto", forwarding.proto.as_bytes());
    field_line(out, b"x-forwarded-host", request.host.as_bytes());
    if let Some(id) = forwarding.request_id {
        field_line(out, b"x-request-id", id);
    }
    if let Some(traceparent) = forwarding.traceparent {
        field_line(out, b"traceparent", traceparent);
    }
    if request.body == Body::Chunked {
        field_line(out, b"transfer-encoding", b"chunked");
    }
    out.extend_from_slice(b"\r\n");
    true
}

fn field_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// None (a response to HEAD, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection.
    UntilClose,
}

/// A response head from the upstream, translated for the client.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Response {
    /// The upstream head's length in bytes.
    pub(super) len: usize,
    pub(super) status: u16,
    pub(super) framing: Framing,
    /// The upstream connection may carry another request once this body is read.
    pub(super) reusable: bool,
    /// The client connection closes after this response (`Connection: close` was written).
    pub(super) close: bool,
}

/// What the upstream's buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Partial,
    /// An interim response (1xx but 101) of this length, not forwarded (as nginx does).
    Interim(usize),
    Response(Response),
    Bad(&'static str),
}

/// What a client response head gets besides the upstream's fields.
pub(super) struct Finish<'a> {
    /// The request was HEAD: the response has no body whatever it declares.
    pub(super) head: bool,
    /// The client connection is to close after this response.
    pub(super) close: bool,
    /// `Date` for a response that has none.
    pub(super) date: &'a [u8],
    /// `Server` for a response that has none (`--server-header`), if any.
    pub(super) server: Option<&'a [u8]>,
    /// `Strict-Transport-Security` for a response that has none (an HTTPS request, with
    /// `--hsts-max-age`), if any.
    pub(super) hsts: Option<&'a [u8]>,
    /// `Alt-Svc` for a response that has none (an HTTPS request while HTTP/3 is served), if
    /// any.
    pub(super) alt_svc: Option<&'a [u8]>,
}

/// Reads the response head at the start of `input` and, once it is whole, writes the client's
/// head into `out`: the status line in HTTP/1.1, the fields but the hop-by-hop ones and those
/// `Connection` names, `Transfer-Encoding: chunked` for a chunked body, `Date` and `Server`
/// (see [`crate::proxy::headers::add_server`]) when missing, and `Connection: close` when the client connection closes after it (asked for, draining,
/// or a body delimited by the upstream's close).
pub(super) fn answer(input: &[u8], out: &mut Vec<u8>, finish: &Finish<'_>) -> Answer {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut parsed = httparse::Response::new(&mut fields);
    let len = match parsed.parse(input) {
        Ok(Status::Complete(len)) => len,
        Ok(Status::Partial) => return Answer::Partial,
        Err(_) => return Answer::Bad("malformed head"),
    };
    let (Some(version), Some(status)) = (parsed.version, parsed.code) else {
        return Answer::Bad("malformed head");
    };
    if status == 101 {
        return Answer::Bad("switching protocols without an upgrade");
    }
    if (100..200).contains(&status) {
        return Answer::Interim(len);
    }
    let fields = parsed.headers;
    let Some((named, count)) = named_by_connection(fields) else {
        return Answer::Bad("too many fields named by Connection");
    };
    let named = &named[..count];
    let mut length: Option<u64> = None;
    let mut chunked = None;
    let mut reusable = version == 1;
    let mut dated = false;
    let mut served_by = false;
    let mut secured = false;
    let mut advertised = false;
    for field in fields.iter() {
        let name = field.name;
        if name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(field.value).ok();
            let Some(value) = value.and_then(|v| v.trim().parse::<u64>().ok()) else {
                return Answer::Bad("invalid Content-Length");
            };
            if length.is_some_and(|l| l != value) {
                return Answer::Bad("conflicting Content-Length");
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = tokens(field.value).last();
            chunked = Some(last.is_some_and(|t| t.eq_ignore_ascii_case(b"chunked")));
        } else if name.eq_ignore_ascii_case("connection") {
            reusable &= !tokens(field.value).any(|t| t.eq_ignore_ascii_case(b"close"));
        } else if name.eq_ignore_ascii_case("date") {
            dated = true;
        } else if name.eq_ignore_ascii_case("server") {
            served_by = true;
        } else if name.eq_ignore_ascii_case("strict-transport-security") {
            secured = true;
        } else if name.eq_ignore_ascii_case("alt-svc") {
            advertised = true;
        }
    }
    let framing = if finish.head || status == 204 || status == 304 {
        Framing::Empty
    } else {
        match (chunked, length) {
            (Some(true), _) => Framing::Chunked,
            (Some(false), _) => return Answer::Bad("a transfer coding other than chunked"),
            (None, Some(length)) => Framing::Length(length),
            (None, None) => Framing::UntilClose,
        }
    };
    // Both lengths given: the message is suspect (RFC 9112 §6.3); its connection is not reused.
    reusable &= !(chunked.is_some() && length.is_some()) && framing != Framing::UntilClose;
    let close = finish.close || framing == Framing::UntilClose;
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    let reason = parsed.reason.filter(|r| !r.is_empty());
    let canonical = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason());
    out.extend_from_slice(reason.or(canonical).unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for field in fields.iter().filter(|f| !is_hop_by_hop(f.name, named)) {
        field_line(out, field.name.as_bytes(), field.value);
    }
    if framing == Framing::Chunked || (finish.head && chunked == Some(true)) {
        field_line(out, b"transfer-encoding", b"chunked");
    }
    if !dated {
        field_line(out, b"date", finish.date);
    }
    if let (false, Some(server)) = (served_by, finish.server) {
        field_line(out, b"server", server);
    }
    if let (false, Some(hsts)) = (secured, finish.hsts) {
        field_line(out, b"strict-transport-security", hsts);
    }
    if let (false, Some(alt_svc)) = (advertised, finish.alt_svc) {
        field_line(out, b"alt-svc", alt_svc);
    }
    if close {
        field_line(out, b"connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    Answer::Response(Response {
        len,
        status,
        framing,
        reusable,
        close,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inspected(input: &[u8]) -> Option<(usize, String, bool, Option<Vec<u8>>)> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        match inspect(input, &mut fields, 100) {
            Inspected::Request(r) => Some((
                r.len,
                format!("{} {} {}", r.method, r.target, r.host),
                r.close,
                r.request_id.map(<[u8]>::to_vec),
            )),
            _ => None,
        }
    }

    fn outcome(input: &[u8]) -> &'static str {
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        match inspect(input, &mut fields, 3) {
            Inspected::Partial => "partial",
            Inspected::Decline => "decline",
            Inspected::Request(_) => "request",
        }
    }

    #[test]
    fn a_plain_request_without_a_body_is_served_here() {
        let head = b"GET /a?b=1 HTTP/1.1\r\nHost: web.test\r\nX-Request-Id: abc\r\n\r\nGET /next";
        let (len, line, close, id) = inspected(head).unwrap();
        assert_eq!(len, head.len() - b"GET /next".len());
        assert_eq!(line, "GET /a?b=1 web.test");
        assert!(!close);
        assert_eq!(id.as_deref(), Some(&b"abc"[..]));
        let closing = b"HEAD / HTTP/1.1\r\nhost: a\r\nConnection: keep-alive, close\r\n\r\n";
        assert!(inspected(closing).unwrap().2);
        let empty_body = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(outcome(empty_body), "request");
    }

    #[test]
    fn what_hyper_serves_or_refuses_is_declined() {
        let declined: [&[u8]; 14] = [
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
            b"GET / HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a, b\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
            b"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
        ];
        for head in declined {
            assert_eq!(
                outcome(head),
                "decline",
                "{}",
                String::from_utf8_lossy(head)
            );
        }
        assert_eq!(outcome(b"GET / HTTP/1.1\r\nHost: a\r\n"), "partial");
        assert_eq!(outcome(b"GET / HT"), "partial");
    }

    /// The body a request head with `fields` is served with here, or `None`: declined.
    fn body_of(fields: &str) -> Option<Body> {
        let head = format!("POST / HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
        let mut parsed = [httparse::EMPTY_HEADER; MAX_FIELDS];
        match inspect(head.as_bytes(), &mut parsed, 100) {
            Inspected::Request(request) => Some(request.body),
            Inspected::Partial | Inspected::Decline => None,
        }
    }

    #[test]
    fn a_body_is_served_here_only_when_one_content_length_frames_it() {
        use Body::{Chunked, Length};
        let cases: [(&str, Option<Body>); 26] = [
            ("", Some(Body::None)),
            ("Content-Length: 0\r\n", Some(Body::None)),
            ("Content-Length: 1024\r\n", Some(Length(1024))),
            ("content-length: 007\r\n", Some(Length(7))),
            ("Content-Length: 18446744073709551615\r\n", None),
            (
                "Content-Length: 9999999999999999999\r\n",
                Some(Length(9_999_999_999_999_999_999)),
            ),
            ("Transfer-Encoding: chunked\r\n", Some(Chunked)),
            ("transfer-encoding: CHUNKED \r\n", Some(Chunked)),
            ("Transfer-Encoding: gzip, chunked\r\n", None),
            ("Transfer-Encoding: chunked, chunked\r\n", None),
            (
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                None,
            ),
            ("Transfer-Encoding: identity\r\n", None),
            ("Transfer-Encoding: \r\n", None),
            ("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", None),
            ("Content-Length: 5, 5\r\n", None),
            ("Content-Length: 5\r\nContent-Length: 5\r\n", None),
            ("Content-Length: 5\r\nContent-Length: 6\r\n", None),
            ("Content-Length: +5\r\n", None),
            ("Content-Length: -1\r\n", None),
            ("Content-Length: 0x10\r\n", None),
            ("Content-Length: 5 5\r\n", None),
            ("Content-Length:\r\n", None),
            ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", None),
            ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", None),
            ("Expect: 100-continue\r\nContent-Length: 5\r\n", None),
            (
                "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n",
                None,
            ),
        ];
        for (fields, want) in cases {
            assert_eq!(body_of(fields), want, "{fields:?}");
        }
    }

    fn upstream_head(input: &[u8], request_id: Option<&[u8]>) -> String {
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let Inspected::Request(request) = inspect(input, &mut fields, 100) else {
            panic!("not served here");
        };
        let forwarding = Forwarding {
            client: b"10.0.0.9",
            proto: "https",
            request_id,
            traceparent: None,
        };
        let mut out = Vec::new();
        assert!(write_upstream(&mut out, &request, &forwarding));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_proxys_traceparent_replaces_the_clients_and_tracestate_stays() {
        let input = b"GET / HTTP/1.1\r\nHost: a\r\ntraceparent: client\r\n\
            TraceParent: second\r\ntracestate: k=v\r\n\r\n";
        let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
        let Inspected::Request(request) = inspect(input, &mut fields, 100) else {
            panic!("not served here");
        };
        assert_eq!(request.traceparent, Some(&b"client"[..]));
        let forwarding = |traceparent| Forwarding {
            client: b"10.0.0.9",
            proto: "http",
            request_id: None,
            traceparent,
        };
        let mut out = Vec::new();
        assert!(write_upstream(
            &mut out,
            &request,
            &forwarding(Some(b"ours"))
        ));
        let head = String::from_utf8(out).unwrap();
        assert_eq!(
            head,
            "GET / HTTP/1.1\r\nHost: a\r\ntracestate: k=v\r\nx-forwarded-for: 10.0.0.9\r\n\
             x-forwarded-proto: http\r\nx-forwarded-host: a\r\ntraceparent: ours\r\n\r\n"
        );
        // Tracing off: the client's fields go on untouched.
        let mut out = Vec::new();
        assert!(write_upstream(&mut out, &request, &forwarding(None)));
        let head = String::from_utf8(out).unwrap();
        assert!(
            head.contains("traceparent: client\r\nTraceParent: second\r\n"),
            "{head}"
        );
    }

    #[test]
    fn the_upstream_head_drops_hop_by_hop_fields_and_adds_the_forwarded_ones() {
        let head = b"GET /p?q HTTP/1.1\r\nHost: web.test\r\nConnection: keep-alive, X-Secret\r\n\
            X-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Forwarded-For: 1.1.1.1\r\n\
            X-Forwarded-For: 2.2.2.2\r\nX-Forwarded-Proto: ftp\r\nX-Forwarded-Host: evil\r\n\
            Accept: */*\r\n\r\n";
        assert_eq!(
            upstream_head(head, Some(b"id-1")),
            "GET /p?q HTTP/1.1\r\nHost: web.test\r\nAccept: */*\r\n\
             x-forwarded-for: 1.1.1.1, 2.2.2.2, 10.0.0.9\r\nx-forwarded-proto: https\r\n\
             x-forwarded-host: web.test\r\nx-request-id: id-1\r\n\r\n"
        );
        let plain = b"GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: mine\r\n\r\n";
        assert_eq!(
            upstream_head(plain, None),
            "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: mine\r\nx-forwarded-for: 10.0.0.9\r\n\
             x-forwarded-proto: https\r\nx-forwarded-host: a\r\n\r\n"
        );
    }

    fn answered(input: &[u8], head: bool, close: bool) -> (Answer, String) {
        let mut out = Vec::new();
        let finish = Finish {
            head,
            close,
            date: b"Fri, 27 Nov 2026 00:00:00 GMT",
            server: None,
            hsts: None,
            alt_svc: None,
        };
        let answer = answer(input, &mut out, &finish);
        (answer, String::from_utf8(out).unwrap())
    }

    #[test]
    fn strict_transport_security_is_added_only_where_the_upstream_sent_none() {
        let finish = Finish {
            head: false,
            close: false,
            date: b"then",
            server: None,
            hsts: Some(b"max-age=60"),
            alt_svc: None,
        };
        let mut out = Vec::new();
        answer(b"HTTP/1.1 204 No Content\r\n\r\n", &mut out, &finish);
        let out = String::from_utf8(out).unwrap();
        let added = "HTTP/1.1 204 No Content\r\ndate: then\r\nstrict-transport-security: max-age=60\r\n\r\n";
        assert_eq!(out, added);
        let mut out = Vec::new();
        let own = b"HTTP/1.1 204 No Content\r\nStrict-Transport-Security: max-age=1\r\n\r\n";
        answer(own, &mut out, &finish);
        let out = String::from_utf8(out).unwrap();
        let kept =
            "HTTP/1.1 204 No Content\r\nStrict-Transport-Security: max-age=1\r\ndate: then\r\n\r\n";
        assert_eq!(out, kept);
    }

    #[test]
    fn a_server_field_is_added_only_where_the_upstream_sent_none() {
        let finish = Finish {
            head: false,
            close: false,
            date: b"then",
            server: Some(b"portico"),
            hsts: None,
            alt_svc: None,
        };
        let mut out = Vec::new();
        answer(b"HTTP/1.1 204 No Content\r\n\r\n", &mut out, &finish);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "HTTP/1.1 204 No Content\r\ndate: then\r\nserver: portico\r\n\r\n"
        );
        let mut out = Vec::new();
        answer(
            b"HTTP/1.1 204 No Content\r\nServer: app\r\n\r\n",
            &mut out,
            &finish,
        );
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "HTTP/1.1 204 No Content\r\nServer: app\r\ndate: then\r\n\r\n"
        );
    }

    #[test]
    fn a_response_head_is_framed_and_rewritten_for_the_client() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive, X-Hop\r\n\
            X-Hop: 1\r\nKeep-Alive: timeout=5\r\nDate: then\r\n\r\nhello";
        let (answer, out) = answered(head, false, false);
        let expected = Response {
            len: head.len() - 5,
            status: 200,
            framing: Framing::Length(5),
            reusable: true,
            close: false,
        };
        assert_eq!(answer, Answer::Response(expected));
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nDate: then\r\n\r\n"
        );
        let chunked = b"HTTP/1.1 404 \r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        let (answer, out) = answered(chunked, false, true);
        assert!(matches!(
            answer,
            Answer::Response(Response {
                framing: Framing::Chunked,
                reusable: true,
                close: true,
                ..
            })
        ));
        assert_eq!(
            out,
            "HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\
             date: Fri, 27 Nov 2026 00:00:00 GMT\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn bodies_are_delimited_as_rfc_9112_says() {
        let framing = |input: &[u8], head: bool| match answered(input, head, false).0 {
            Answer::Response(r) => (r.framing, r.reusable, r.close),
            other => panic!("{other:?}"),
        };
        let length = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n";
        assert_eq!(framing(length, true), (Framing::Empty, true, false));
        assert_eq!(
            framing(b"HTTP/1.1 204 No Content\r\n\r\n", false),
            (Framing::Empty, true, false)
        );
        assert_eq!(
            framing(b"HTTP/1.1 200 OK\r\n\r\n", false),
            (Framing::UntilClose, false, true)
        );
        assert_eq!(
            framing(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false),
            (Framing::Length(1), false, false)
        );
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(framing(both, false), (Framing::Chunked, false, false));
        let closing = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\n";
        assert_eq!(framing(closing, false), (Framing::Length(1), false, false));
    }

    #[test]
    fn interim_and_invalid_responses_are_told_apart() {
        let interim = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n";
        assert_eq!(answered(interim, false, false).0, Answer::Interim(40));
        let bad: [&[u8]; 5] = [
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTX/1.1 200 OK\r\n\r\n",
        ];
        for head in bad {
            assert!(
                matches!(answered(head, false, false).0, Answer::Bad(_)),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
        assert_eq!(
            answered(b"HTTP/1.1 200 OK\r\n", false, false).0,
            Answer::Partial
        );
    }
}
