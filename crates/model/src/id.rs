use serde::{Deserialize, Serialize};
use std::fmt;
use uuid::Uuid;

/// The UUID namespace under which every Portico id is derived (UUIDv5 of a readable key).
const PORTICO_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2b0e_5d0a_4c8e_9a51_7e0f_3c2d_1b4a);

/// A UUIDv5 derived from `key`: the same source objects always give the same ids, so regenerated
/// configuration is identical and diffs stay small.
///
/// The same value as `Uuid::new_v5`, with RustCrypto's SHA-1 (which uses the CPU's SHA
/// instructions where there are some): a large cluster derives ~100,000 ids per translation.
pub fn stable_uuid(key: &str) -> Uuid {
    use sha1::Digest;
    let mut hasher = sha1::Sha1::new();
    hasher.update(PORTICO_NAMESPACE.as_bytes());
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_sha1_bytes(bytes).into_uuid()
}

macro_rules! id_type {
    ($name:ident) => {
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// The id derived from a readable key (see [`stable_uuid`]).
            pub fn derive(key: &str) -> Self {
                $name(stable_uuid(key))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

id_type!(LoadBalancerId);
id_type!(ListenerId);
id_type!(L7PolicyId);
id_type!(L7RuleId);
id_type!(PoolId);
id_type!(MemberId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_the_standard_uuid_v5() {
        for key in ["", "a", "loadbalancer/portico", &"x".repeat(200)] {
            assert_eq!(
                stable_uuid(key),
                Uuid::new_v5(&PORTICO_NAMESPACE, key.as_bytes())
            );
        }
    }

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        assert_eq!(PoolId::derive("a"), PoolId::derive("a"));
        assert_ne!(PoolId::derive("a"), PoolId::derive("b"));
        assert_eq!(stable_uuid("a").get_version_num(), 5);
    }
}
