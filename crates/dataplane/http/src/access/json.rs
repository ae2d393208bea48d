//! JSON string escaping (RFC 8259): quotes, backslashes and control characters; bytes that are
//! not UTF-8 become U+FFFD.

/// Appends `value` as a JSON string, quotes included.
pub(crate) fn string(out: &mut Vec<u8>, value: &[u8]) {
    out.push(b'"');
    // The common value (printable ASCII, nothing to escape) is copied whole.
    if plain(value) {
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

/// Whether `value` is printable ASCII without `"` or `\\` (nothing to escape), eight bytes
/// at a time: a byte below 0x20, 0x7f and above, a quote or a backslash each set its byte's
/// high bit in one of the words tested.
fn plain(value: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// Not zero when a byte of `x` is zero.
    fn zero_bytes(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGH
    }
    let mut chunks = value.chunks_exact(8);
    let mut bad = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        bad |= x & HIGH;
        // Below 0x20: with the high bits cleared (those bytes are caught above), a byte plus
        // 0x60 reaches the high bit from 0x20 up, and carries into no other byte.
        bad |= !((x & !HIGH).wrapping_add(ONES * 0x60)) & HIGH;
        bad |= zero_bytes(x ^ (ONES * u64::from(b'"')));
        bad |= zero_bytes(x ^ (ONES * u64::from(b'\\')));
        bad |= zero_bytes(x ^ (ONES * 0x7f));
    }
    bad == 0
        && (chunks.remainder())
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// Appends `n` in decimal, without the formatting machinery; up to four digits (statuses,
/// octets, ports, most durations) in one copy of a fixed size.
pub(crate) fn decimal(out: &mut Vec<u8>, n: u64) {
    let digit = |d: u64| b'0' + (d % 10) as u8;
    match n {
        0..10 => out.push(digit(n)),
        10..100 => out.extend_from_slice(&[digit(n / 10), digit(n)]),
        100..1000 => out.extend_from_slice(&[digit(n / 100), digit(n / 10), digit(n)]),
        1000..10_000 => {
            out.extend_from_slice(&[digit(n / 1000), digit(n / 100), digit(n / 10), digit(n)])
        }
        _ => long_decimal(out, n),
    }
}

fn long_decimal(out: &mut Vec<u8>, mut n: u64) {
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

    /// What [`plain`] answers, a byte at a time.
    fn plain_bytewise(value: &[u8]) -> bool {
        (value.iter()).all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    }

    #[test]
    fn every_byte_that_needs_escaping_is_found_at_every_place_in_a_word() {
        for len in 1..=24 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut value = vec![b'a'; len];
                    value[at] = byte;
                    assert_eq!(
                        plain(&value),
                        plain_bytewise(&value),
                        "{byte:#x} at {at} of {len}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn plain_answers_as_a_byte_at_a_time(value: Vec<u8>) {
            proptest::prop_assert_eq!(plain(&value), plain_bytewise(&value));
        }

        #[test]
        fn decimals_read_back(n: u64) {
            let mut out = Vec::new();
            decimal(&mut out, n);
            proptest::prop_assert_eq!(out, n.to_string().into_bytes());
            for small in [n % 10, n % 100, n % 1000, n % 10_000, n % 100_000] {
                let mut out = Vec::new();
                decimal(&mut out, small);
                proptest::prop_assert_eq!(out, small.to_string().into_bytes());
            }
        }

        #[test]
        fn any_bytes_make_one_json_string_that_reads_back(value: Vec<u8>) {
            let text = escaped(&value);
            proptest::prop_assert!(!text.contains('\n'));
            let back: String = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(back, String::from_utf8_lossy(&value).into_owned());
        }
    }
}
