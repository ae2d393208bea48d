//! A Gateway API path rewrite (URLRewrite's, or a RequestRedirect's) as haproxy actions on
//! the request's path, with `PathRewrite::apply`'s slash rules: `ReplaceFullPath` is
//! `set-path`; `ReplacePrefixMatch` is `replace-path` with a regular expression made of the
//! escaped prefix, the rest of the path as its one group. The query is kept by both. The new
//! path is a log-format string to haproxy (and `\1` its group): a `%` or a `\` in it is
//! refused.

use super::policy::Refused;
use crate::quote;
use portico_model::{PathRewrite, Rewrite};
use std::fmt::Write as _;

/// The `http-request` actions (without the keyword) that rewrite the path.
pub(super) fn actions(rewrite: &PathRewrite, field: &'static str) -> Result<Vec<String>, Refused> {
    let word = |s: &str| -> Result<String, Refused> {
        if s.contains('%') || s.contains('\\') {
            return Err(Refused {
                field,
                why: format!(
                    "path {s:?} holds a % or a \\, which haproxy reads as a format directive"
                ),
            });
        }
        quote::word(s).map_err(|e| Refused {
            field,
            why: e.to_string(),
        })
    };
    let pattern = |s: &str| {
        quote::word(s).map_err(|e| Refused {
            field,
            why: e.to_string(),
        })
    };
    match rewrite {
        PathRewrite::Full { path } => Ok(vec![format!("set-path {}", word(path)?)]),
        PathRewrite::Prefix {
            prefix,
            replacement,
        } => {
            let prefix = if prefix == "/" { "" } else { prefix };
            let escaped = escape(prefix);
            let head = replacement.trim_end_matches('/');
            word(head)?;
            if head.is_empty() {
                if prefix.is_empty() {
                    return Ok(Vec::new());
                }
                return Ok(vec![
                    format!("replace-path {} \"/\"", pattern(&format!("^{escaped}$"))?),
                    format!(
                        "replace-path {} \"\\x5c1\"",
                        pattern(&format!("^{escaped}(/.*)$"))?
                    ),
                ]);
            }
            let head = if head.starts_with('/') {
                head.to_owned()
            } else {
                format!("/{head}")
            };
            let quoted = word(&head)?;
            // The quoted head without its closing quote, then `\1` (escaped) and the quote.
            let format = format!("{}\\x5c1\"", &quoted[..quoted.len() - 1]);
            Ok(vec![format!(
                "replace-path {} {format}",
                pattern(&format!("^{escaped}(/.*)?$"))?
            )])
        }
    }
}

/// ingress-nginx's `rewrite "(?i)<pattern>" <target> break;` (`rewrite-target` on a regex
/// host) as `replace-path`, which replaces the whole path when the expression matches
/// somewhere in it, as nginx's `rewrite` replaces the whole URI; the query is kept. The
/// target's `$1`…`$9` are the expression's groups (`\1`…`\9`: an unmatched group is empty in
/// both); any other `$` stays itself. `X-Forwarded-Prefix` goes with a rewritten request only.
/// A target holding `?` (nginx then puts its query first, or drops the client's), `%` (a
/// format directive to haproxy) or `\` is refused, as is an expression outside the syntax
/// both engines read alike.
pub(super) fn nginx_lines(rewrite: &Rewrite, when: &str) -> Result<String, Refused> {
    let refused = |why: String| Refused {
        field: "rewrite-target",
        why,
    };
    super::conditions::regex("rewrite-target", &rewrite.pattern)?;
    let target = &rewrite.target;
    if let Some(c) = target.chars().find(|c| matches!(c, '?' | '%' | '\\')) {
        return Err(refused(format!(
            "{target:?} holds {c:?}, which the haproxy provider does not write in a rewritten path"
        )));
    }
    let mut format = String::with_capacity(target.len());
    let mut chars = target.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('$', Some(d @ '1'..='9')) => {
                format.push('\\');
                format.push(*d);
                chars.next();
            }
            _ => format.push(c),
        }
    }
    let word = |s: &str| quote::word(s).map_err(|e| refused(e.to_string()));
    // `(?i)` at the top level covers every alternative, as the proxy's flag does.
    let pattern = word(&format!("(?i)(?:{})", rewrite.pattern))?;
    let mut s = String::new();
    if let Some(prefix) = &rewrite.forwarded_prefix {
        if prefix.contains('%') {
            return Err(Refused {
                field: "x-forwarded-prefix",
                why: format!("{prefix:?} holds a %, which haproxy reads as a format directive"),
            });
        }
        let prefix = quote::word(prefix).map_err(|e| Refused {
            field: "x-forwarded-prefix",
            why: e.to_string(),
        })?;
        let _ = writeln!(
            s,
            "    http-request set-header X-Forwarded-Prefix {prefix} {when} {{ path -m reg {pattern} }}"
        );
    }
    let _ = writeln!(
        s,
        "    http-request replace-path {pattern} {} {when}",
        word(&format)?
    );
    Ok(s)
}

/// `s` with every character a regular expression reads as syntax escaped.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(prefix: &str, replacement: &str) -> PathRewrite {
        PathRewrite::Prefix {
            prefix: prefix.into(),
            replacement: replacement.into(),
        }
    }

    #[test]
    fn a_full_path_is_set_and_a_prefix_replaced_by_its_escaped_expression() {
        let full = PathRewrite::Full {
            path: "/one".into(),
        };
        assert_eq!(actions(&full, "f").unwrap(), ["set-path \"/one\""]);
        assert_eq!(
            actions(&prefix("/a.b", "/new/"), "f").unwrap(),
            [r#"replace-path "\x5e/a\x5c.b\x28/.*\x29\x3f\x24" "/new\x5c1""#]
        );
        assert_eq!(
            actions(&prefix("/a", ""), "f").unwrap(),
            [
                r#"replace-path "\x5e/a\x24" "/""#,
                r#"replace-path "\x5e/a\x28/.*\x29\x24" "\x5c1""#
            ]
        );
        assert_eq!(
            actions(&prefix("/", "/"), "f").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            actions(&prefix("/", "x"), "f").unwrap(),
            [r#"replace-path "\x5e\x28/.*\x29\x3f\x24" "/x\x5c1""#]
        );
    }

    #[test]
    fn a_percent_or_backslash_in_the_new_path_is_refused() {
        let full = PathRewrite::Full {
            path: "/a%20b".into(),
        };
        assert!(actions(&full, "f").is_err());
        assert!(actions(&prefix("/a", "/b\\1"), "f").is_err());
        // In the matched prefix, both are only escaped.
        assert!(actions(&prefix("/a%20\\", "/b"), "f").is_ok());
    }
}
