//! W3C trace context (`traceparent`), pure: parsed from a request's field value and written
//! for the upstream, without allocating (the request path's cost when tracing is on).

/// A `traceparent` field value's length: `00-<32 hex>-<16 hex>-<2 hex>`.
pub(crate) const LEN: usize = 55;

/// A parent span, as a client's `traceparent` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    /// Its `sampled` flag.
    pub(crate) sampled: bool,
}

/// Reads a `traceparent` value (W3C Trace Context §3.2): version 00 exactly 55 bytes, a
/// later version at least that long with `-` after them; lowercase hex; trace and span ids
/// not all zero; version `ff` invalid. None: no parent (the proxy starts a new trace).
pub(crate) fn parse(value: &[u8]) -> Option<Parent> {
    if value.len() < LEN || (value.len() > LEN && value[LEN] != b'-') {
        return None;
    }
    let version = hex::<1>(&value[0..2])?[0];
    if version == 0xff || (version == 0 && value.len() != LEN) {
        return None;
    }
    if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let trace_id = hex::<16>(&value[3..35])?;
    let span_id = hex::<8>(&value[36..52])?;
    let flags = hex::<1>(&value[53..55])?[0];
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(Parent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
    })
}

/// `N` bytes from `2 × N` lowercase hex digits.
fn hex<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// The `traceparent` value of the proxy's span: version 00, its trace id, its span id and
/// the sampled flag.
pub(crate) fn format(trace_id: [u8; 16], span_id: [u8; 8], sampled: bool) -> [u8; LEN] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; LEN];
    out[0] = b'0';
    out[1] = b'0';
    let mut put = |at: usize, bytes: &[u8]| {
        for (i, b) in bytes.iter().enumerate() {
            out[at + 2 * i] = DIGITS[usize::from(b >> 4)];
            out[at + 2 * i + 1] = DIGITS[usize::from(b & 15)];
        }
    };
    put(3, &trace_id);
    put(36, &span_id);
    put(53, &[u8::from(sampled)]);
    out
}

/// A trace id as the access log shows it: 32 lowercase hex digits.
pub(crate) fn trace_id_text(traceparent: &[u8; LEN]) -> &[u8] {
    &traceparent[3..35]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLED: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_the_same() {
        let parent = parse(SAMPLED).expect("valid");
        assert!(parent.sampled);
        assert_eq!(
            parent.span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        let text = format(parent.trace_id, parent.span_id, parent.sampled);
        assert_eq!(&text[..], SAMPLED);
        assert_eq!(trace_id_text(&text), b"4bf92f3577b34da6a3ce929d0e0e4736");
        let unsampled = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert!(!parse(unsampled).expect("valid").sampled);
    }

    #[test]
    fn a_later_version_is_read_by_its_first_fields() {
        let later = b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert_eq!(parse(later), parse(SAMPLED));
    }

    #[test]
    fn invalid_values_name_no_parent() {
        let bad: [&[u8]; 9] = [
            b"",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ];
        for value in bad {
            assert_eq!(parse(value), None, "{}", String::from_utf8_lossy(value));
        }
    }
}
