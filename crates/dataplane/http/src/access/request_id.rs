//! `X-Request-Id`: kept when the client sent one, else a random UUID (version 4, as haproxy's
//! `uuid` fetch makes) added before the request goes upstream.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

thread_local! {
    /// splitmix64's state, seeded per thread from the OS's randomness (through std's hasher
    /// keys). Request ids need to be unique, not secret.
    static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(std::thread::current().id()));
}

/// The request's id: its first `X-Request-Id`, else a new one, inserted into `headers`.
pub(crate) fn ensure_request_id(headers: &mut HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(&X_REQUEST_ID) {
        return id.clone();
    }
    let id = new_id();
    headers.insert(X_REQUEST_ID.clone(), id.clone());
    id
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

/// `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx` from 122 random bits.
fn new_id() -> HeaderValue {
    let bits = (u128::from(next()) << 64 | u128::from(next())) & !(0xf000u128 << 64) & !(0xc << 60);
    let bits = bits | (0x4000u128 << 64) | (0x8 << 60);
    let hex = format!("{bits:032x}");
    let id = format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    );
    HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static("-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_missing_id_is_generated_as_a_version_4_uuid() {
        let mut headers = HeaderMap::new();
        let id = ensure_request_id(&mut headers);
        assert_eq!(headers[&X_REQUEST_ID], id);
        let id = id.to_str().unwrap();
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(&id[14..15], "4", "{id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }

    #[test]
    fn a_client_id_is_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(&X_REQUEST_ID, HeaderValue::from_static("abc"));
        assert_eq!(ensure_request_id(&mut headers), "abc");
        assert_eq!(headers.get_all(&X_REQUEST_ID).iter().count(), 1);
    }

    #[test]
    fn generated_ids_differ() {
        let ids: HashSet<_> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
