//! The Gateway API's HTTPRoute filters as the model holds them: header changes, path
//! rewrites, mirrors, timeouts (beside the rewrite, upstream `Host` and CORS of
//! [`crate::PolicyOptions`]), and the redirect a policy answers with
//! ([`crate::PolicyAction::RequestRedirect`]). Pure data and the pure functions that apply
//! them to a path; the data plane applies the rest.

use crate::PoolId;
use serde::{Deserialize, Serialize};

/// Changes to a message's header fields, applied in this order: `set` replaces every field of
/// the name (or adds one), `add` appends a field, `remove` removes every field of the name.
/// Names are lower-case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeaderChanges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderChanges {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// A new path for a request (URLRewrite) or a redirect's `Location` (RequestRedirect).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PathRewrite {
    /// The whole path (`ReplaceFullPath`); the query is kept.
    Full { path: String },
    /// The matched path prefix replaced (`ReplacePrefixMatch`): `prefix` is the policy's
    /// `PathPrefix` value, normalized (no trailing slash, `/` for the root).
    Prefix { prefix: String, replacement: String },
}

impl PathRewrite {
    /// The new path of `path` (without query). A prefix rewrite of a path the prefix does not
    /// match leaves it unchanged.
    ///
    /// The Gateway API's slash rules for `ReplacePrefixMatch`: the prefix is matched element
    /// by element, the rest of the path keeps its leading slash, a replacement's trailing
    /// slash is not doubled, and an empty result is `/` (`/foo/bar` with prefix `/foo` and
    /// replacement `/xyz/` is `/xyz/bar`; `/foo` with replacement `` is `/`).
    pub fn apply(&self, path: &str) -> String {
        match self {
            PathRewrite::Full { path } => path.clone(),
            PathRewrite::Prefix {
                prefix,
                replacement,
            } => {
                let rest = if prefix == "/" {
                    Some(path)
                } else {
                    path.strip_prefix(prefix.as_str())
                        .filter(|r| r.is_empty() || r.starts_with('/'))
                };
                let Some(rest) = rest else {
                    return path.to_owned();
                };
                let head = replacement.trim_end_matches('/');
                let rest = if rest.is_empty() || rest.starts_with('/') {
                    rest.to_owned()
                } else {
                    format!("/{rest}")
                };
                match format!("{head}{rest}") {
                    joined if joined.is_empty() => "/".to_owned(),
                    joined if joined.starts_with('/') => joined,
                    joined => format!("/{joined}"),
                }
            }
        }
    }
}

/// A RequestRedirect: the answer's status and what the `Location` takes from the request.
/// The translator resolves the API's defaults it can: the scheme (the listener's when the
/// filter names none) and the port (the filter's, else the scheme's well-known one when the
/// filter names a scheme, else the listener's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Redirect {
    pub status: u16,
    /// `http` or `https`.
    pub scheme: String,
    /// None: the request's host (without port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Left out of the `Location` when it is the scheme's well-known port.
    pub port: u16,
    /// None: the request's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathRewrite>,
    /// The `Location` keeps the request's own scheme and the port its host named, in place of
    /// `scheme` and `port` (ingress-nginx's `from-to-www-redirect`: HTTPS stays HTTPS).
    #[serde(default, skip_serializing_if = "is_false")]
    pub same_scheme: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// What a redirect's `Location` may take from the request: the scheme it came over, its host
/// (without port) and the port that host named, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin<'a> {
    pub scheme: &'a str,
    pub host: &'a str,
    pub port: Option<u16>,
}

impl Redirect {
    /// The `Location` for a request from `origin` with `path` and `query`.
    pub fn location(&self, origin: &Origin<'_>, path: &str, query: Option<&str>) -> String {
        let host = self.hostname.as_deref().unwrap_or(origin.host);
        let (scheme, port) = if self.same_scheme {
            (origin.scheme, origin.port)
        } else {
            (self.scheme.as_str(), Some(self.port))
        };
        let port = match (scheme, port) {
            (_, None) | ("http", Some(80)) | ("https", Some(443)) => String::new(),
            (_, Some(port)) => format!(":{port}"),
        };
        let path = self
            .path
            .as_ref()
            .map_or_else(|| path.to_owned(), |p| p.apply(path));
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        format!("{scheme}://{host}{port}{path}{query}")
    }
}

/// A copy of each request sent to `pool` too, its answer ignored: all of them, or `percent`
/// in millionths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Mirror {
    pub pool: PoolId,
    /// Out of 1,000,000.
    pub per_million: u32,
}

/// HTTPRoute rule timeouts, in milliseconds: `request` for the whole answer's head (504 when
/// it runs out), `backend` for each try on a member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Timeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_rewrites_follow_the_gateway_apis_slash_rules() {
        // (request path, prefix, replacement, new path): the API's own table and more.
        let cases = [
            ("/foo/bar", "/foo", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo", "/xyz/", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz", "/xyz/bar"),
            ("/foo/bar", "/foo/", "/xyz/", "/xyz/bar"),
            ("/foo", "/foo", "/xyz", "/xyz"),
            ("/foo/", "/foo", "/xyz", "/xyz/"),
            ("/foo/bar", "/foo", "", "/bar"),
            ("/foo/", "/foo", "", "/"),
            ("/foo", "/foo", "", "/"),
            ("/foo/", "/foo", "/", "/"),
            ("/foo", "/foo", "/", "/"),
            ("/prefix/one/two", "/prefix/one", "/one", "/one/two"),
            ("/anything", "/", "/api", "/api/anything"),
            ("/", "/", "/api", "/api/"),
            ("/foobar", "/foo", "/x", "/foobar"),
        ];
        for (path, prefix, replacement, want) in cases {
            let rewrite = PathRewrite::Prefix {
                prefix: crate::matching::normalize_prefix(prefix).to_owned(),
                replacement: replacement.to_owned(),
            };
            assert_eq!(rewrite.apply(path), want, "{path} {prefix} → {replacement}");
        }
        let full = PathRewrite::Full {
            path: "/one".into(),
        };
        assert_eq!(full.apply("/full/path/original"), "/one");
    }

    #[test]
    fn a_redirect_action_and_filter_options_survive_serialization() {
        let action = crate::PolicyAction::RequestRedirect(Redirect {
            status: 301,
            scheme: "https".into(),
            hostname: Some("example.org".into()),
            port: 8443,
            path: Some(PathRewrite::Prefix {
                prefix: "/a".into(),
                replacement: "/b".into(),
            }),
            same_scheme: false,
        });
        let json = serde_json::to_string(&action).unwrap();
        assert_eq!(
            serde_json::from_str::<crate::PolicyAction>(&json).unwrap(),
            action
        );
        let options = crate::PolicyOptions {
            request_headers: Some(HeaderChanges {
                set: vec![("x".into(), "1".into())],
                ..HeaderChanges::default()
            }),
            mirrors: vec![Mirror {
                pool: PoolId::derive("p"),
                per_million: 500_000,
            }],
            timeouts: Timeouts {
                request_ms: Some(10),
                backend_ms: None,
            },
            ..crate::PolicyOptions::default()
        };
        let json = serde_json::to_string(&options).unwrap();
        assert_eq!(
            serde_json::from_str::<crate::PolicyOptions>(&json).unwrap(),
            options
        );
    }

    #[test]
    fn a_redirect_leaves_out_the_schemes_well_known_port() {
        let redirect = |scheme: &str, port| Redirect {
            status: 302,
            scheme: scheme.into(),
            hostname: None,
            port,
            path: None,
            same_scheme: false,
        };
        let origin = Origin {
            scheme: "http",
            host: "a.test",
            port: Some(8080),
        };
        let at = |r: Redirect| r.location(&origin, "/p", Some("q=1"));
        assert_eq!(at(redirect("http", 80)), "http://a.test/p?q=1");
        assert_eq!(at(redirect("https", 443)), "https://a.test/p?q=1");
        assert_eq!(at(redirect("https", 80)), "https://a.test:80/p?q=1");
        assert_eq!(at(redirect("http", 8080)), "http://a.test:8080/p?q=1");
        let mut moved = redirect("http", 80);
        moved.hostname = Some("example.org".into());
        moved.path = Some(PathRewrite::Full { path: "/x".into() });
        assert_eq!(moved.location(&origin, "/p", None), "http://example.org/x");
    }

    #[test]
    fn a_same_scheme_redirect_keeps_the_requests_scheme_and_port() {
        let to_www = Redirect {
            status: 308,
            scheme: "http".into(),
            hostname: Some("www.a.test".into()),
            port: 80,
            path: None,
            same_scheme: true,
        };
        let at = |scheme, port| {
            let origin = Origin {
                scheme,
                host: "a.test",
                port,
            };
            to_www.location(&origin, "/p/", Some("q=1"))
        };
        assert_eq!(at("https", None), "https://www.a.test/p/?q=1");
        assert_eq!(at("https", Some(443)), "https://www.a.test/p/?q=1");
        assert_eq!(at("https", Some(8443)), "https://www.a.test:8443/p/?q=1");
        assert_eq!(at("http", Some(80)), "http://www.a.test/p/?q=1");
        assert_eq!(at("http", Some(8080)), "http://www.a.test:8080/p/?q=1");
    }
}
