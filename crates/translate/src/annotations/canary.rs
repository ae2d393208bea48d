//! `canary: "true"` and its `canary-by-*` settings: the Ingress is not routed on its own but
//! as the alternative backend of the Ingress that routes the same host and path, in
//! ingress-nginx's order: the header (its value, its pattern, or `always`/`never`), then the
//! cookie (`always`/`never`), then the weight. A bad value is a warning and that setting is
//! left out.

use super::{Reader, parse};

/// How requests reach a canary Ingress's backends instead of the main Ingress's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Canary {
    /// `canary-by-header`, lower-case.
    pub header: Option<String>,
    /// `canary-by-header-value`, or else `canary-by-header-pattern`; neither: `always` and
    /// `never` decide.
    pub header_match: HeaderMatch,
    /// `canary-by-cookie`.
    pub cookie: Option<String>,
    /// `canary-weight` out of `total`.
    pub weight: u32,
    /// `canary-weight-total` (100 unless larger, as ingress-nginx draws it).
    pub total: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum HeaderMatch {
    AlwaysNever,
    Value(String),
    /// A regular expression searched in the header's value, case-sensitive.
    Pattern(String),
}

pub(super) fn canary(r: &mut Reader<'_>) -> Option<Canary> {
    let enabled = r.value("canary", parse::bool_value).unwrap_or(false);
    let header = r.value("canary-by-header", header_name);
    let value = r.value("canary-by-header-value", parse::header_value);
    let pattern = r.value("canary-by-header-pattern", pattern);
    let cookie = r.value("canary-by-cookie", parse::cookie_name);
    let weight = r.value("canary-weight", parse::u32_value);
    let total = r.value("canary-weight-total", parse::u32_value);
    if !enabled {
        return None;
    }
    let header_match = match (value, pattern) {
        (Some(v), _) => HeaderMatch::Value(v),
        (None, Some(p)) => HeaderMatch::Pattern(p),
        (None, None) => HeaderMatch::AlwaysNever,
    };
    Some(Canary {
        header,
        header_match,
        cookie,
        weight: weight.unwrap_or(0),
        total: total.unwrap_or(100).max(100),
    })
}

fn header_name(v: &str) -> Result<String, String> {
    if parse::is_token(v) {
        Ok(v.to_ascii_lowercase())
    } else {
        Err("must be a header name: letters, digits and !#$%&'*+-.^_`|~".to_owned())
    }
}

/// A regular expression in the `regex` crate's syntax.
fn pattern(v: &str) -> Result<String, String> {
    match regex::RegexBuilder::new(v).size_limit(1 << 20).build() {
        Ok(_) => Ok(v.to_owned()),
        Err(_) => Err("is not a valid regular expression (the regex crate's syntax)".to_owned()),
    }
}
