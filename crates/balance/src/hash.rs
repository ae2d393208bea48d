//! A 64-bit hash whose value never changes: FNV-1a over the bytes, then the splitmix64
//! finalizer so that short, similar keys (`10.0.0.1`, `10.0.0.2`) spread over the whole range.
//! Unlike std's `DefaultHasher`, it is specified, so a key maps to the same member on every
//! build, every replica and every version.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of `bytes` with a `seed` (different seeds give independent hashes).
pub fn hash64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ mix(seed);
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    mix(h)
}

/// splitmix64's finalizer: a bijection on `u64` with good avalanche.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_fixed() {
        // Pinned: a change here moves every hashed key to another member.
        assert_eq!(hash64(0, b""), 0x5b21_f68f_fa77_f14c);
        assert_eq!(hash64(0, b"10.0.0.1"), 0x5ed2_a82f_2402_b919);
        assert_ne!(hash64(0, b"abc"), hash64(1, b"abc"));
        assert_ne!(hash64(0, b"10.0.0.1"), hash64(0, b"10.0.0.2"));
    }
}
