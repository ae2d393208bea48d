//! A policy's conditions (`portico_model::matching::conditions`) as haproxy ACL terms, with
//! the proxy's semantics: a header field's whole value (`req.fhdr`, which does not split at
//! commas; every field of the name is tried), a cookie's value, the method, a query
//! parameter's value as written. Values are quoted words after `--` (no value can be read as
//! a flag); names go into a fetch's argument and must be plain; a regular expression is
//! anchored at the start and case-insensitive, as in the proxy, and is written only when it
//! keeps to syntax PCRE2 and Rust's `regex` read alike.

use super::policy::Refused;
use crate::quote;
use portico_model::L7Rule;
use portico_model::matching::{Condition, Field, conditions};

/// The ACL terms every one of `rules`' conditions adds, space-separated: empty without
/// conditions.
pub(super) fn when(rules: &[L7Rule]) -> Result<String, Refused> {
    let terms: Result<Vec<String>, Refused> = conditions(rules).map(|c| term(&c)).collect();
    Ok(terms?.join(" "))
}

/// One condition's `{ <fetch> -m <str|reg> -- <value> }`.
fn term(condition: &Condition<'_>) -> Result<String, Refused> {
    let (field, fetch) = match condition.field {
        Field::Header(name) => (
            "header match",
            format!("req.fhdr({})", name_of("header match", name)?),
        ),
        Field::Cookie(name) => (
            "cookie match",
            format!("req.cook({})", name_of("cookie match", name)?),
        ),
        Field::Query(name) => {
            name_of("query parameter match", name)?;
            (
                "query parameter match",
                format!("var({})", query_variable(name)),
            )
        }
        Field::Method => ("method match", "method".to_owned()),
    };
    if condition.value.is_empty() {
        return Err(Refused {
            field,
            why: "has an empty value, which haproxy cannot compare against".to_owned(),
        });
    }
    let (how, pattern) = if condition.regex {
        ("reg -i", regex(field, condition.value)?)
    } else {
        ("str", condition.value.to_owned())
    };
    let value = quote::word(&pattern).map_err(|e| Refused {
        field,
        why: e.to_string(),
    })?;
    Ok(format!("{{ {fetch} -m {how} -- {value} }}"))
}

/// The variable holding the first value of query parameter `name`: `urlp` in an ACL tries
/// every parameter of the name, the proxy only the first, which `urlp` gives as a sample.
fn query_variable(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("txn.query_{hex}")
}

/// The lines that set the variable of each query parameter `rules` compare (before the
/// route lookups); names [`when`] refuses are left out.
pub(super) fn query_lines<'a>(rules: impl Iterator<Item = &'a L7Rule>) -> String {
    let mut names = std::collections::BTreeSet::new();
    for rule in rules {
        if let Some(Condition {
            field: Field::Query(name),
            ..
        }) = conditions(std::slice::from_ref(rule)).next()
            && name_of("", name).is_ok()
        {
            names.insert(name);
        }
    }
    (names.into_iter())
        .map(|n| {
            format!(
                "    http-request set-var({}) urlp({n})\n",
                query_variable(n)
            )
        })
        .collect()
}

/// A name inside a fetch's parentheses: letters, digits, `-`, `_` and `.` only (a `,` or a
/// `)` would end the argument, a `#` start a comment).
fn name_of(field: &'static str, name: &str) -> Result<String, Refused> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    if name.is_empty() || !name.bytes().all(plain) {
        return Err(Refused {
            field,
            why: format!(
                "names {name:?}, which haproxy takes only with letters, digits, '-', '_' and '.'"
            ),
        });
    }
    Ok(name.to_owned())
}

/// `pattern` anchored at the start, when it keeps to the syntax both engines read alike:
/// literals, `.`, classes, groups (plain, `(?:`, and those setting flags `i` and `s`, as
/// `(?-i:` and a canary pattern's `(?s-i:`), alternation, the
/// quantifiers, anchors and the escapes `\d \D \w \W \s \S` and escaped punctuation. Anything
/// else (named groups, look-around, Unicode classes, back-references) is refused: haproxy
/// would fail to load, or match otherwise.
pub(super) fn regex(field: &'static str, pattern: &str) -> Result<String, Refused> {
    let refused = |what: &str| Refused {
        field,
        why: format!(
            "regular expression {pattern:?} uses {what}, which haproxy's PCRE2 may read otherwise than the proxy"
        ),
    };
    let bytes = pattern.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => match bytes.get(i + 1) {
                Some(b'd' | b'D' | b'w' | b'W' | b's' | b'S') => i += 1,
                Some(b) if b.is_ascii_punctuation() => i += 1,
                _ => {
                    return Err(refused(
                        "an escape other than \\d \\w \\s or escaped punctuation",
                    ));
                }
            },
            b'(' if bytes.get(i + 1) == Some(&b'?') => match flag_group(&bytes[i + 2..]) {
                Some(len) => i += 1 + len,
                None => {
                    return Err(refused(
                        "a group other than (?: or one setting flags i and s",
                    ));
                }
            },
            b if b.is_ascii_graphic() || b == b' ' => {}
            _ => return Err(refused("a control or non-ASCII character")),
        }
        i += 1;
    }
    Ok(format!("^(?:{pattern})"))
}

/// The length of `flags:` after `(?`, when the flags are only `i` and `s` (set, then unset
/// after a `-`), which PCRE2 and `regex` read alike.
fn flag_group(rest: &[u8]) -> Option<usize> {
    let end = rest.iter().position(|b| *b == b':')?;
    let flags = &rest[..end];
    let (on, off) = match flags.iter().position(|b| *b == b'-') {
        Some(at) => (&flags[..at], &flags[at + 1..]),
        None => (flags, &[][..]),
    };
    let known = |f: &[u8]| f.iter().all(|b| matches!(b, b'i' | b's'));
    (known(on) && known(off) && (flags.last() != Some(&b'-'))).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(field: Field<'_>, value: &'static str, regex: bool) -> Result<String, Refused> {
        term(&Condition {
            field,
            value,
            regex,
        })
    }

    #[test]
    fn conditions_become_quoted_acl_terms_after_a_double_dash() {
        assert_eq!(
            c(Field::Header("x-version"), "v1, v2", false).unwrap(),
            r#"{ req.fhdr(x-version) -m str -- "v1\x2c\x20v2" }"#
        );
        assert_eq!(
            c(Field::Query("animal"), "-i", false).unwrap(),
            r#"{ var(txn.query_616e696d616c) -m str -- "-i" }"#
        );
        assert_eq!(
            c(Field::Method, "PATCH", false).unwrap(),
            r#"{ method -m str -- "PATCH" }"#
        );
        assert_eq!(
            c(Field::Cookie("canary"), "always", false).unwrap(),
            r#"{ req.cook(canary) -m str -- "always" }"#
        );
        assert_eq!(
            c(Field::Header("x"), r"v[0-9]+\.(?-i:a)$", true).unwrap(),
            r#"{ req.fhdr(x) -m reg -i -- "\x5e\x28\x3f:v\x5b0-9\x5d\x2b\x5c.\x28\x3f-i:a\x29\x24\x29" }"#
        );
    }

    #[test]
    fn a_canary_pattern_is_written() {
        let term = c(
            Field::Header("x-version"),
            "(?s-i:.*?(?:^beta-[0-9]+$))",
            true,
        )
        .unwrap();
        assert!(
            term.starts_with("{ req.fhdr(x-version) -m reg -i -- "),
            "{term}"
        );
    }

    #[test]
    fn unwritable_names_values_and_expressions_are_refused_naming_the_field() {
        for (field, value, regex) in [
            (Field::Header("x,y"), "v", false),
            (Field::Header("x#"), "v", false),
            (Field::Query("a)b"), "v", false),
            (Field::Header("x"), "", false),
            (Field::Header("x"), "a\0b", false),
            (Field::Header("x"), r"(?P<n>a)", true),
            (Field::Header("x"), r"(?=a)", true),
            (Field::Header("x"), r"\pL", true),
            (Field::Header("x"), r"(a)\1", true),
            (Field::Header("x"), r"(?x: a)", true),
            (Field::Header("x"), r"(?i-:a)", true),
        ] {
            let refused = c(field, value, regex).unwrap_err();
            assert!(refused.field.ends_with("match"), "{refused:?}");
        }
    }
}
