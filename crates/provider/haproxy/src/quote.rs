//! haproxy's configuration quoting: every value that comes from an Ingress, a Service or a
//! Secret reaches the configuration as one double-quoted word in which every byte outside a
//! small safe set is a `\xNN` escape. No value can then end its word, start a comment, name an
//! environment variable or start a new line: it can never become a directive or an ACL flag.

use std::fmt::Write as _;

/// The one byte haproxy cannot carry in a word (its parser works on C strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("contains a NUL byte, which haproxy cannot represent")]
pub struct Unquotable;

/// Bytes written as they are inside double quotes: they mean nothing to haproxy's parser
/// there (no quote, backslash, `$`, `#`, `%`, space or control character).
fn is_plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'~' | b':' | b'@' | b'*')
}

/// `value` as one double-quoted haproxy word.
pub fn word(value: &str) -> Result<String, Unquotable> {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for b in value.bytes() {
        match b {
            0 => return Err(Unquotable),
            b if is_plain(b) => out.push(char::from(b)),
            b => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    Ok(out)
}

/// A path of Portico's own (the state directory) as one word: the same quoting.
pub fn path(path: &std::path::Path) -> Result<String, Unquotable> {
    word(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_are_only_quoted() {
        assert_eq!(
            word("/foo/bar-baz_1.html").unwrap(),
            "\"/foo/bar-baz_1.html\""
        );
    }

    #[test]
    fn syntax_characters_become_hex_escapes() {
        assert_eq!(
            word("a b\n#'\"\\$%").unwrap(),
            r#""a\x20b\x0a\x23\x27\x22\x5c\x24\x25""#
        );
    }

    #[test]
    fn non_ascii_is_escaped_byte_by_byte() {
        assert_eq!(word("é").unwrap(), r#""\xc3\xa9""#);
    }

    #[test]
    fn a_nul_byte_is_refused() {
        assert_eq!(word("a\0b"), Err(Unquotable));
    }
}
