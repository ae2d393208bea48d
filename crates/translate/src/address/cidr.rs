//! Address pools written as CIDR prefixes (`198.18.0.0/24`, `fd00::/120`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A prefix of addresses. Host bits written after the prefix are cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not an address prefix such as 198.18.0.0/24");
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if prefix > bits(addr) {
            return Err(format!(
                "{s:?}: the prefix length is longer than the address"
            ));
        }
        let mask = mask(bits(addr), prefix);
        Ok(Cidr {
            network: from_u128(addr, to_u128(addr) & mask),
            prefix,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.network.is_ipv4()
            && to_u128(ip) & mask(bits(ip), self.prefix) == to_u128(self.network)
    }

    /// Whether `ip` may be handed out: in the prefix, and for IPv4 prefixes shorter than /31
    /// neither the network nor the broadcast address; for IPv6 prefixes shorter than /127 not
    /// the subnet-router anycast address (the first one).
    pub fn usable(&self, ip: IpAddr) -> bool {
        let (first, last) = self.usable_range();
        let n = to_u128(ip);
        self.contains(ip) && first <= n && n <= last
    }

    /// The lowest usable address that `taken` does not refuse.
    pub fn lowest_free(&self, taken: impl Fn(IpAddr) -> bool) -> Option<IpAddr> {
        let (first, last) = self.usable_range();
        let mut n = first;
        loop {
            if n > last {
                return None;
            }
            let ip = from_u128(self.network, n);
            if !taken(ip) {
                return Some(ip);
            }
            n = n.checked_add(1)?;
        }
    }

    fn usable_range(&self) -> (u128, u128) {
        let host_bits = u32::from(bits(self.network) - self.prefix);
        let first = to_u128(self.network);
        let last = first | 1u128.checked_shl(host_bits).map_or(u128::MAX, |v| v - 1);
        let skip_ends = match self.network {
            IpAddr::V4(_) => self.prefix < 31,
            IpAddr::V6(_) => self.prefix < 127,
        };
        match (skip_ends, self.network) {
            (true, IpAddr::V4(_)) => (first + 1, last - 1),
            (true, IpAddr::V6(_)) => (first + 1, last),
            (false, _) => (first, last),
        }
    }
}

fn bits(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

fn mask(bits: u8, prefix: u8) -> u128 {
    let all = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let host = u32::from(bits - prefix);
    all & !(1u128.checked_shl(host).map_or(u128::MAX, |v| v - 1))
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// `n` as an address of `like`'s family (IPv4 values fit in 32 bits by construction).
fn from_u128(like: IpAddr, n: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(u32::try_from(n).unwrap_or(u32::MAX).into()),
        IpAddr::V6(_) => IpAddr::V6(n.into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_clear_host_bits() {
        let c: Cidr = "198.18.0.77/24".parse().unwrap();
        assert_eq!(c.to_string(), "198.18.0.0/24");
        assert!(c.contains(ip("198.18.0.255")));
        assert!(!c.contains(ip("198.18.1.0")));
        assert!(!c.contains(ip("::1")));
        for bad in [
            "198.18.0.0",
            "198.18.0.0/33",
            "x/24",
            "198.18.0.0/-1",
            "::/129",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("255.255.255.255")));
        let v6: Cidr = "fd00::/120".parse().unwrap();
        assert!(v6.contains(ip("fd00::ff")));
    }

    #[test]
    fn network_and_broadcast_are_skipped_below_slash_31() {
        let c: Cidr = "198.18.0.0/30".parse().unwrap();
        assert!(!c.usable(ip("198.18.0.0")));
        assert!(c.usable(ip("198.18.0.1")));
        assert!(c.usable(ip("198.18.0.2")));
        assert!(!c.usable(ip("198.18.0.3")));
        let p2p: Cidr = "198.18.0.0/31".parse().unwrap();
        assert!(p2p.usable(ip("198.18.0.0")) && p2p.usable(ip("198.18.0.1")));
        let host: Cidr = "198.18.0.9/32".parse().unwrap();
        assert_eq!(host.lowest_free(|_| false), Some(ip("198.18.0.9")));
        let v6: Cidr = "fd00::/126".parse().unwrap();
        assert_eq!(v6.lowest_free(|_| false), Some(ip("fd00::1")));
    }

    #[test]
    fn lowest_free_skips_taken_addresses_and_ends() {
        let c: Cidr = "198.18.0.0/30".parse().unwrap();
        let taken = |a: IpAddr| a == ip("198.18.0.1");
        assert_eq!(c.lowest_free(taken), Some(ip("198.18.0.2")));
        assert_eq!(c.lowest_free(|_| true), None);
        let huge: Cidr = "::/0".parse().unwrap();
        assert_eq!(huge.lowest_free(|_| false), Some(ip("::1")));
    }
}
