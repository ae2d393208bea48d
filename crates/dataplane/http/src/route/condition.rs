//! The conditions a policy may add to its host and path (Gateway API header, query parameter
//! and method matches; the cookie of a canary Ingress), compiled once per policy, and what a
//! request offers to check them.

use portico_model::matching::{Condition, Field};
use regex::Regex;

/// What the conditions of policies look at in a request: its header fields, and its method
/// and query when known ([`RouteRequest`] gives them).
pub trait RequestHeaders {
    /// Whether a field named `name` (lower-case; names compare case-insensitively) has a
    /// value that passes `test`.
    fn any_value(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool;

    /// Whether a field named `name` has exactly the value `value`.
    fn has(&self, name: &str, value: &str) -> bool {
        self.any_value(name, &mut |v| v == value.as_bytes())
    }

    /// The request method, when known.
    fn method(&self) -> Option<&str> {
        None
    }

    /// The request's query (after `?`), when it has one.
    fn query(&self) -> Option<&str> {
        None
    }
}

/// No header fields (routing by host and path alone).
impl RequestHeaders for () {
    fn any_value(&self, _: &str, _: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        false
    }
}

impl RequestHeaders for http::HeaderMap {
    fn any_value(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.get_all(name).iter().any(|v| test(v.as_bytes()))
    }
}

impl RequestHeaders for &[httparse::Header<'_>] {
    fn any_value(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.iter()
            .any(|h| h.name.eq_ignore_ascii_case(name) && test(h.value))
    }
}

/// A request's method, query and header fields, for every kind of condition.
pub struct RouteRequest<'a, H: ?Sized> {
    pub method: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a H,
}

impl<H: RequestHeaders + ?Sized> RequestHeaders for RouteRequest<'_, H> {
    fn any_value(&self, name: &str, test: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        self.headers.any_value(name, test)
    }

    fn method(&self) -> Option<&str> {
        Some(self.method)
    }

    fn query(&self) -> Option<&str> {
        self.query
    }
}

/// One compiled condition.
#[derive(Debug)]
pub(crate) struct Check {
    field: On,
    value: Value,
}

#[derive(Debug)]
enum On {
    Header(Box<str>),
    Query(Box<str>),
    Method,
    /// The first cookie of this name in the `Cookie` fields.
    Cookie(Box<str>),
}

#[derive(Debug)]
enum Value {
    Exact(Box<str>),
    /// None: the expression did not compile, and the condition never holds.
    Regex(Option<Regex>),
}

/// The conditions of one policy: all must hold.
pub(crate) type Guard = Box<[Check]>;

impl Check {
    pub(crate) fn compile(condition: &Condition<'_>) -> Check {
        let field = match condition.field {
            Field::Header(name) => On::Header(name.into()),
            Field::Query(name) => On::Query(name.into()),
            Field::Method => On::Method,
            Field::Cookie(name) => On::Cookie(name.into()),
        };
        let value = if condition.regex {
            Value::Regex(super::options::path_regex(condition.value, true))
        } else {
            Value::Exact(condition.value.into())
        };
        Check { field, value }
    }

    fn passes(&self, value: &[u8]) -> bool {
        match &self.value {
            Value::Exact(want) => value == want.as_bytes(),
            Value::Regex(re) => {
                let text = std::str::from_utf8(value).ok();
                re.as_ref().zip(text).is_some_and(|(re, t)| re.is_match(t))
            }
        }
    }

    fn holds(&self, request: &dyn RequestHeaders) -> bool {
        match &self.field {
            On::Header(name) => request.any_value(name, &mut |v| self.passes(v)),
            On::Method => request.method().is_some_and(|m| self.passes(m.as_bytes())),
            On::Query(name) => query_value(request.query(), name).is_some_and(|v| self.passes(v)),
            On::Cookie(name) => request.any_value("cookie", &mut |field| {
                cookie(field, name).is_some_and(|v| self.passes(v))
            }),
        }
    }
}

/// The value of the first parameter named `name` in `query` (as written, not decoded).
fn query_value<'q>(query: Option<&'q str>, name: &str) -> Option<&'q [u8]> {
    let pairs = query?.split('&');
    let mut values = pairs.filter_map(|pair| match pair.split_once('=') {
        Some((n, v)) => (n == name).then_some(v),
        None => (pair == name).then_some(""),
    });
    values.next().map(str::as_bytes)
}

/// The value of the first cookie named `name` in a `Cookie` field (`a=1; b=2`).
fn cookie<'a>(field: &'a [u8], name: &str) -> Option<&'a [u8]> {
    field.split(|b| *b == b';').find_map(|pair| {
        let pair = pair.trim_ascii();
        let at = pair.iter().position(|b| *b == b'=')?;
        (&pair[..at] == name.as_bytes()).then(|| &pair[at + 1..])
    })
}

pub(crate) fn holds(guard: &Guard, request: &dyn RequestHeaders) -> bool {
    guard.iter().all(|check| check.holds(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(field: Field<'_>, value: &str, regex: bool) -> Check {
        Check::compile(&Condition {
            field,
            value,
            regex,
        })
    }

    #[test]
    fn header_names_compare_case_insensitively_and_values_exactly() {
        let mut map = http::HeaderMap::new();
        map.append("X-Version", "v1".parse().unwrap());
        map.append("x-version", "v2".parse().unwrap());
        assert!(map.has("x-version", "v2"));
        assert!(!map.has("x-version", "V1"));
        let fields = [httparse::Header {
            name: "X-Version",
            value: b"v1",
        }];
        let fields = &fields[..];
        assert!(fields.has("x-version", "v1"));
        assert!(!fields.has("x-other", "v1"));
    }

    #[test]
    fn query_parameters_compare_by_name_the_first_one_counting() {
        let request = |query| RouteRequest {
            method: "GET",
            query,
            headers: &(),
        };
        let animal = check(Field::Query("animal"), "whale", false);
        assert!(animal.holds(&request(Some("animal=whale"))));
        assert!(animal.holds(&request(Some("x=1&animal=whale&animal=dolphin"))));
        assert!(!animal.holds(&request(Some("animal=dolphin&animal=whale"))));
        assert!(!animal.holds(&request(Some("Animal=whale"))));
        assert!(!animal.holds(&request(None)));
        let regex = check(Field::Query("id"), "(?-i:[0-9]+)$", true);
        assert!(regex.holds(&request(Some("id=42"))));
        assert!(!regex.holds(&request(Some("id=42a"))));
    }

    #[test]
    fn methods_compare_exactly_and_need_a_known_method() {
        let post = check(Field::Method, "POST", false);
        let request = |method| RouteRequest {
            method,
            query: None,
            headers: &(),
        };
        assert!(post.holds(&request("POST")));
        assert!(!post.holds(&request("GET")));
        assert!(!post.holds(&()), "a request without a method");
    }

    #[test]
    fn cookies_compare_by_name_and_value() {
        let mut map = http::HeaderMap::new();
        map.append("cookie", "a=1; canary=always;b=never".parse().unwrap());
        let holds = |name, value| check(Field::Cookie(name), value, false).holds(&map);
        assert!(holds("canary", "always"));
        assert!(holds("b", "never"));
        assert!(!holds("Canary", "always"));
        assert!(!holds("canary", "never"));
        assert!(!holds("c", ""));
    }

    #[test]
    fn a_regex_that_does_not_compile_never_holds() {
        let mut map = http::HeaderMap::new();
        map.append("x", "anything".parse().unwrap());
        assert!(check(Field::Header("x"), "any.*", true).holds(&map));
        assert!(!check(Field::Header("x"), "(?=look)", true).holds(&map));
    }
}
