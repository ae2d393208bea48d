//! Header rewriting between client and upstream: hop-by-hop removal and `X-Forwarded-*`.

use http::HeaderMap;
use http::header::{CONNECTION, Entry, HOST, HeaderName, HeaderValue};
use portico_model::Cidr;
use std::net::IpAddr;

pub(crate) static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The scheme the client used to reach the proxy, as reported in `X-Forwarded-Proto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `http` or `https`, as `X-Forwarded-Proto` says it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(self.as_str())
    }
}

/// The fields that describe one connection rather than the message (RFC 9110 §7.6.1), as
/// text: what the own HTTP/1.1 path compares raw field names with.
pub(super) const HOP_BY_HOP_NAMES: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The same fields as header names, by [`hop_by_hop`]'s index. `Connection` first: the fields
/// it names go too.
static HOP_BY_HOP: [HeaderName; 7] = [
    HeaderName::from_static(HOP_BY_HOP_NAMES[0]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[1]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[2]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[3]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[4]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[5]),
    HeaderName::from_static(HOP_BY_HOP_NAMES[6]),
];

/// `name`'s index in [`HOP_BY_HOP`], if it is one. Names compare by their standard-header
/// tag where they have one, which is cheaper than reading them as strings.
fn hop_by_hop(name: &HeaderName) -> Option<usize> {
    HOP_BY_HOP.iter().position(|hop| hop == name)
}

/// Removes the headers that describe one connection rather than the message (RFC 9110 §7.6.1),
/// including those the `Connection` header names.
///
/// One pass over the field names finds which are present: most messages carry none, or only
/// `Connection: keep-alive`, and a lookup per name would hash seven names every time.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let mut present = [false; HOP_BY_HOP.len()];
    for at in headers.keys().filter_map(hop_by_hop) {
        present[at] = true;
    }
    if present[0] {
        for name in connection_named(headers) {
            headers.remove(name);
        }
    }
    for (name, _) in HOP_BY_HOP.iter().zip(present).filter(|(_, there)| *there) {
        headers.remove(name);
    }
}

/// The other fields `Connection` names: those not removed anyway as hop-by-hop (`close` and
/// `keep-alive`, the usual values, name no field to remove).
fn connection_named(headers: &HeaderMap) -> Vec<HeaderName> {
    let values = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let tokens = values.flat_map(|v| v.split(',')).map(str::trim);
    let named = tokens
        .filter(|t| !t.eq_ignore_ascii_case("close") && !t.eq_ignore_ascii_case("keep-alive"));
    named
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect()
}

/// Adds `Server: name` to a response that has no `Server` field, the backend's own being
/// kept (the rule of both request paths; the own HTTP/1.1 path applies it while it copies the
/// upstream's head, `h1::head::answer`).
pub(crate) fn add_server(headers: &mut HeaderMap, name: Option<&'static str>) {
    let value = name.and_then(|n| HeaderValue::from_str(n).ok());
    if let Some(value) = value
        && let Entry::Vacant(vacant) = headers.entry(http::header::SERVER)
    {
        vacant.insert(value);
    }
}

/// The client a request from a trusted proxy (`peer` in `trusted`) is from: walking its
/// `X-Forwarded-For` from the right, the first address that is not a trusted proxy itself
/// (nginx's `real_ip_recursive`); the leftmost when all are. None when `peer` is not trusted,
/// or the list names no address: the peer is the client. An entry that is not an address
/// (with or without a port) ends the walk: nothing left of it is believed.
pub(crate) fn forwarded_client<'a>(
    peer: IpAddr,
    forwarded_for: impl DoubleEndedIterator<Item = &'a HeaderValue>,
    trusted: &[Cidr],
) -> Option<IpAddr> {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return None;
    }
    let mut last = None;
    for value in forwarded_for.rev() {
        let Ok(list) = value.to_str() else { break };
        for entry in list.rsplit(',').map(str::trim) {
            let ip = entry
                .parse::<IpAddr>()
                .ok()
                .or_else(|| entry.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()));
            let Some(ip) = ip.map(|ip| ip.to_canonical()) else {
                return last;
            };
            if !is_trusted(ip) {
                return Some(ip);
            }
            last = Some(ip);
        }
    }
    last
}

/// What the proxy tells the upstream about the client.
#[derive(Debug, Clone)]
pub(crate) struct Forwarded {
    /// The client address, rendered once per connection.
    pub(crate) client: HeaderValue,
    pub(crate) scheme: Scheme,
}

impl Forwarded {
    /// Rewrites a request's headers for the upstream. `host` is the host the client asked for
    /// (its `Host` header, or the URI authority of an HTTP/2 or absolute-form request).
    pub(crate) fn apply(&self, headers: &mut HeaderMap, host: HeaderValue) {
        strip_hop_by_hop(headers);
        self.append_for(headers);
        headers.insert(X_FORWARDED_PROTO.clone(), self.scheme.header_value());
        let host = match headers.entry(HOST) {
            Entry::Occupied(_) => host,
            Entry::Vacant(vacant) => vacant.insert(host).clone(),
        };
        headers.insert(X_FORWARDED_HOST.clone(), host);
    }

    /// Appends the client address to any `X-Forwarded-For` list the client sent.
    fn append_for(&self, headers: &mut HeaderMap) {
        let mut entry = match headers.entry(X_FORWARDED_FOR.clone()) {
            Entry::Vacant(vacant) => {
                vacant.insert(self.client.clone());
                return;
            }
            Entry::Occupied(entry) => entry,
        };
        let mut list = Vec::new();
        for value in entry.iter() {
            list.extend_from_slice(value.as_bytes());
            list.extend_from_slice(b", ");
        }
        list.extend_from_slice(self.client.as_bytes());
        let value = HeaderValue::from_bytes(&list).unwrap_or_else(|_| self.client.clone());
        entry.insert(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    fn forwarded() -> Forwarded {
        Forwarded {
            client: HeaderValue::from_static("127.0.0.1"),
            scheme: Scheme::Http,
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_named_in_connection_are_removed() {
        let mut h = headers(&[
            ("connection", "keep-alive, X-Secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("te", "trailers"),
            ("user-agent", "curl"),
        ]);
        strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["user-agent"]);
    }

    #[test]
    fn every_hop_by_hop_name_is_known_by_its_index() {
        for (at, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop(name), Some(at), "{name}");
        }
        assert_eq!(hop_by_hop(&HOST), None);
        assert_eq!(hop_by_hop(&X_FORWARDED_FOR), None);
    }

    #[test]
    fn a_connection_header_of_keep_alive_alone_leaves_the_other_fields() {
        let mut h = headers(&[
            ("connection", "Keep-Alive"),
            ("keep-alive", "timeout=5"),
            ("content-type", "text/plain"),
            ("content-length", "3"),
        ]);
        strip_hop_by_hop(&mut h);
        let mut left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["content-length", "content-type"]);
    }

    #[test]
    fn a_trusted_proxys_forwarded_for_names_the_first_untrusted_address_from_the_right() {
        let trusted: Vec<Cidr> = ["10.0.0.0/8", "192.0.2.7/32"]
            .iter()
            .map(|c| c.parse().unwrap())
            .collect();
        let client = |peer: &str, values: &[&'static str]| {
            let values: Vec<HeaderValue> =
                values.iter().map(|v| HeaderValue::from_static(v)).collect();
            forwarded_client(peer.parse().unwrap(), values.iter(), &trusted)
                .map(|ip| ip.to_string())
        };
        let some = |ip: &str| Some(ip.to_owned());
        assert_eq!(client("10.1.1.1", &["203.0.113.9"]), some("203.0.113.9"));
        // A client's forged entry left of the real one changes nothing.
        let forged = ["1.2.3.4, 203.0.113.9, 10.2.2.2"];
        assert_eq!(client("10.1.1.1", &forged), some("203.0.113.9"));
        assert_eq!(
            client("10.1.1.1", &["1.2.3.4", "203.0.113.9:5000"]),
            some("203.0.113.9")
        );
        assert_eq!(
            client("10.1.1.1", &["[2001:db8::9]:443"]),
            some("2001:db8::9")
        );
        // All trusted: the leftmost. Nothing usable: the peer.
        assert_eq!(
            client("10.1.1.1", &["192.0.2.7, 10.3.3.3"]),
            some("192.0.2.7")
        );
        assert_eq!(client("10.1.1.1", &[]), None);
        assert_eq!(client("10.1.1.1", &["unknown"]), None);
        assert_eq!(
            client("10.1.1.1", &["203.0.113.9, garbage, 10.4.4.4"]),
            some("10.4.4.4")
        );
        // An untrusted peer's header is not read at all.
        assert_eq!(client("198.51.100.1", &["203.0.113.9"]), None);
    }

    #[test]
    fn client_address_is_appended_to_an_existing_forwarded_for_list() {
        let mut h = headers(&[
            ("x-forwarded-for", "10.1.2.3"),
            ("x-forwarded-for", "10.4.5.6"),
        ]);
        forwarded().apply(&mut h, HeaderValue::from_static("a.test"));
        assert_eq!(h["x-forwarded-for"], "10.1.2.3, 10.4.5.6, 127.0.0.1");
        assert_eq!(h.get_all("x-forwarded-for").iter().count(), 1);
    }

    #[test]
    fn forwarded_headers_are_set_and_host_is_kept() {
        let mut h = headers(&[("host", "A.test:8080"), ("x-forwarded-proto", "gopher")]);
        let https = Forwarded {
            scheme: Scheme::Https,
            ..forwarded()
        };
        https.apply(&mut h, HeaderValue::from_static("A.test:8080"));
        assert_eq!(h["x-forwarded-for"], "127.0.0.1");
        assert_eq!(h["x-forwarded-proto"], "https");
        assert_eq!(h["x-forwarded-host"], "A.test:8080");
        assert_eq!(h["host"], "A.test:8080");
    }

    #[test]
    fn missing_host_header_is_filled_from_the_authority() {
        let mut h = HeaderMap::new();
        forwarded().apply(&mut h, HeaderValue::from_static("h2.test"));
        assert_eq!(h["host"], "h2.test");
    }
}
