//! `X-Request-Id`: kept when the client sent one, else a random UUID (version 4, as haproxy's
//! `uuid` fetch makes) added before the request goes upstream.

use http::HeaderMap;
use http::header::{Entry, HeaderName, HeaderValue};
use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

thread_local! {
    /// splitmix64's state, seeded per thread from the OS's randomness (through std's hasher
    /// keys). Request ids need to be unique, not secret.
    static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()));
}

/// Gives the request an id: it keeps its first `X-Request-Id`, else gets a new one. (Nothing
/// is returned: a clone of a new header value would make its bytes shared, a heap block of
/// their own, and only the access log reads the id again.)
pub(crate) fn ensure_request_id(headers: &mut HeaderMap) {
    if let Entry::Vacant(vacant) = headers.entry(&X_REQUEST_ID) {
        vacant.insert(new_id());
    }
}

fn next() -> u64 {
    STATE.with(|state| {
        let s = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        state.set(s);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// A new request id's text: `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx` (a version 4 UUID) from 122
/// random bits.
fn new_id_text() -> [u8; 36] {
    uuid_text(new_id_bits())
}

/// A new request id's 128 bits (a version 4 UUID's: 122 random), [`uuid_text`] its text.
pub(crate) fn new_id_bits() -> u128 {
    let bits = (u128::from(next()) << 64 | u128::from(next())) & !(0xf000u128 << 64) & !(0xc << 60);
    bits | (0x4000u128 << 64) | (0x8 << 60)
}

fn new_id() -> HeaderValue {
    HeaderValue::from_bytes(&new_id_text()).unwrap_or(HeaderValue::from_static("-"))
}

/// The 36 characters of a UUID: 32 lowercase hex digits, most significant first, with a
/// hyphen after the 8th, 12th, 16th and 20th. (Through `core::fmt`, this was 7 % of the
/// proxy's instructions per request; a byte's two digits come from one table.)
pub(crate) fn uuid_text(bits: u128) -> [u8; 36] {
    let bytes = bits.to_be_bytes();
    let mut text = [b'-'; 36];
    // Where each byte's two digits go.
    const AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    for (byte, at) in bytes.into_iter().zip(AT) {
        let pair = HEX_PAIRS[usize::from(byte)];
        text[at] = pair[0];
        text[at + 1] = pair[1];
    }
    text
}

/// Each byte's two lowercase hex digits.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    pairs
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_missing_id_is_generated_as_a_version_4_uuid() {
        let mut headers = HeaderMap::new();
        ensure_request_id(&mut headers);
        let id = headers[&X_REQUEST_ID].to_str().unwrap();
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(&id[14..15], "4", "{id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }

    #[test]
    fn a_client_id_is_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(&X_REQUEST_ID, HeaderValue::from_static("abc"));
        ensure_request_id(&mut headers);
        assert_eq!(headers[&X_REQUEST_ID], "abc");
        assert_eq!(headers.get_all(&X_REQUEST_ID).iter().count(), 1);
    }

    #[test]
    fn a_uuid_is_written_most_significant_digit_first_with_its_hyphens() {
        let bits = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        let text = uuid_text(bits);
        assert_eq!(&text, b"01234567-89ab-cdef-fedc-ba9876543210");
        let text = uuid_text(u128::MAX);
        assert_eq!(&text, b"ffffffff-ffff-ffff-ffff-ffffffffffff");
    }

    #[test]
    fn generated_ids_differ() {
        let ids: HashSet<_> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
