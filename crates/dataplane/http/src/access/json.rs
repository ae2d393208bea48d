//! JSON string escaping (RFC 8259): quotes, backslashes and control characters; bytes that are
//! not UTF-8 become U+FFFD.

/// Appends `value` as a JSON string, quotes included.
pub(crate) fn string(out: &mut Vec<u8>, value: &[u8]) {
    out.push(b'"');
    // The common value (printable ASCII, nothing to escape) is copied whole.
    if value
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.extend_from_slice(value);
        out.push(b'"');
        return;
    }
    for chunk in value.utf8_chunks() {
        escape_str(out, chunk.valid());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{FFFD}".as_bytes());
        }
    }
    out.push(b'"');
}

fn escape_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f | 0x7f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escaped);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends `n` in decimal, without the formatting machinery.
pub(crate) fn decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(value: &[u8]) -> String {
        let mut out = Vec::new();
        string(&mut out, value);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped() {
        assert_eq!(escaped(b"/a\"b\\c"), r#""/a\"b\\c""#);
        assert_eq!(escaped(b"x\ny\r\tz\x01\x7f"), r#""x\ny\r\tz\u0001\u007f""#);
        assert_eq!(escaped("caf\u{e9}".as_bytes()), "\"caf\u{e9}\"");
    }

    #[test]
    fn decimals_are_written_whole() {
        for n in [0, 7, 10, 999, 1000, 123_456_789, u64::MAX] {
            let mut out = Vec::new();
            decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_become_replacement_characters() {
        assert_eq!(escaped(b"a\xffb"), "\"a\u{FFFD}b\"");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_make_one_json_string_that_reads_back(value: Vec<u8>) {
            let text = escaped(&value);
            proptest::prop_assert!(!text.contains('\n'));
            let back: String = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(back, String::from_utf8_lossy(&value).into_owned());
        }
    }
}
