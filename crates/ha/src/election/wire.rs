//! The advert datagram between the two agents of a pair: a small versioned JSON object, e.g.
//! `{"v":1,"node":"n1","lb":"<uuid>","epoch":7,"role":"active","hearing":true,"release":false}`.
//! Decoding never panics: anything else is an error naming what is wrong.

use portico_model::LoadBalancerId;
use serde::{Deserialize, Serialize};

/// The version this code writes and reads.
pub const VERSION: u32 = 1;
/// Longer datagrams are rejected unread.
pub const MAX_LEN: usize = 512;
/// The longest node name (a DNS name).
const MAX_NODE: usize = 253;

/// What the sender says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdvertRole {
    /// It holds the addresses.
    Active,
    /// It does not.
    Standby,
}

/// One advert: "I am `node`, for load balancer `lb` at claim epoch `epoch` I am `role`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Advert {
    pub v: u32,
    pub node: String,
    pub lb: LoadBalancerId,
    /// The claim epoch the sender knows.
    pub epoch: u64,
    pub role: AdvertRole,
    /// The sender heard the receiver's adverts lately: the link works both ways.
    #[serde(default)]
    pub hearing: bool,
    /// The sender gives the addresses up now (shutdown), like VRRP's priority 0.
    #[serde(default)]
    pub release: bool,
}

/// Why a datagram is not an advert.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("advert of {0} bytes is longer than {MAX_LEN}")]
    TooLong(usize),
    #[error("advert is not valid: {0}")]
    Malformed(String),
    #[error("advert version {0} is not {VERSION}")]
    Version(u32),
    #[error("advert's node name is empty or longer than {MAX_NODE} bytes")]
    Node,
}

impl Advert {
    pub fn encode(&self) -> Vec<u8> {
        // Serializing plain fields into a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Advert, WireError> {
        if bytes.len() > MAX_LEN {
            return Err(WireError::TooLong(bytes.len()));
        }
        let advert: Advert =
            serde_json::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
        if advert.v != VERSION {
            return Err(WireError::Version(advert.v));
        }
        if advert.node.is_empty() || advert.node.len() > MAX_NODE {
            return Err(WireError::Node);
        }
        Ok(advert)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn advert() -> Advert {
        Advert {
            v: VERSION,
            node: "n1".into(),
            lb: LoadBalancerId::derive("lb"),
            epoch: 7,
            role: AdvertRole::Active,
            hearing: true,
            release: false,
        }
    }

    #[test]
    fn an_advert_round_trips() {
        let a = advert();
        assert_eq!(Advert::decode(&a.encode()).unwrap(), a);
    }

    #[test]
    fn bad_adverts_are_errors() {
        let mut a = advert();
        a.v = 2;
        assert_eq!(Advert::decode(&a.encode()), Err(WireError::Version(2)));
        a.v = 1;
        a.node = String::new();
        assert_eq!(Advert::decode(&a.encode()), Err(WireError::Node));
        assert!(matches!(
            Advert::decode(&[b' '; 600]),
            Err(WireError::TooLong(600))
        ));
        let extra = br#"{"v":1,"node":"n","lb":"x","epoch":1,"role":"active"}"#;
        assert!(matches!(
            Advert::decode(extra),
            Err(WireError::Malformed(_))
        ));
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
            let _ = Advert::decode(&bytes);
        }

        #[test]
        fn decoding_mangled_adverts_never_panics(cut in 0usize..120, flip in 0usize..120, byte in any::<u8>()) {
            let mut bytes = advert().encode();
            if flip < bytes.len() { bytes[flip] = byte; }
            bytes.truncate(cut);
            let _ = Advert::decode(&bytes);
        }
    }
}
