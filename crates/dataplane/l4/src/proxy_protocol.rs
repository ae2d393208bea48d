//! The PROXY protocol version 2 header (haproxy's `doc/proxy-protocol.txt`, section 2.2) that a
//! TCP connection sends its member before the client's first byte: who the client is and which
//! address it connected to.
//!
//! Layout: the 12-byte signature; `0x21` (version 2, command PROXY); the family and transport
//! (`0x11` TCP over IPv4, `0x21` TCP over IPv6); the length of the address block (big endian);
//! then source address, destination address, source port, destination port (network order).

use std::net::{IpAddr, SocketAddr};

/// The fixed signature every version 2 header starts with.
pub const SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];
/// Version 2 in the high nibble, command PROXY (1) in the low one.
const VERSION_2_PROXY: u8 = 0x21;
const TCP_OVER_IPV4: u8 = 0x11;
const TCP_OVER_IPV6: u8 = 0x21;

/// The header for a TCP connection from `source` (the client) to `destination` (the
/// listener's address it reached). Both are IPv4 when both can be (IPv4-mapped IPv6 addresses
/// count as IPv4); else both are written as IPv6, an IPv4 one mapped (`::ffff:a.b.c.d`).
pub fn v2_tcp_header(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let (src, dst) = (source.ip().to_canonical(), destination.ip().to_canonical());
    let mut header = Vec::with_capacity(16 + 36);
    header.extend_from_slice(&SIGNATURE);
    header.push(VERSION_2_PROXY);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            header.push(TCP_OVER_IPV4);
            header.extend_from_slice(&12u16.to_be_bytes());
            header.extend_from_slice(&s.octets());
            header.extend_from_slice(&d.octets());
        }
        _ => {
            header.push(TCP_OVER_IPV6);
            header.extend_from_slice(&36u16.to_be_bytes());
            header.extend_from_slice(&v6(src));
            header.extend_from_slice(&v6(dst));
        }
    }
    header.extend_from_slice(&source.port().to_be_bytes());
    header.extend_from_slice(&destination.port().to_be_bytes());
    header
}

fn v6(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn tcp_over_ipv4_matches_the_byte_layout_of_the_spec() {
        // The header haproxy sends for 172.19.0.1:42578 → 172.19.0.3:80 (`send-proxy-v2`).
        let header = v2_tcp_header(addr("172.19.0.1:42578"), addr("172.19.0.3:80"));
        let want: [u8; 28] = [
            0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54,
            0x0a, // signature
            0x21, // version 2, PROXY
            0x11, // AF_INET, STREAM
            0x00, 0x0c, // 12 bytes of addresses
            0xac, 0x13, 0x00, 0x01, // source 172.19.0.1
            0xac, 0x13, 0x00, 0x03, // destination 172.19.0.3
            0xa6, 0x52, // source port 42578
            0x00, 0x50, // destination port 80
        ];
        assert_eq!(header, want);
    }

    #[test]
    fn tcp_over_ipv6_has_36_bytes_of_addresses() {
        let header = v2_tcp_header(addr("[2001:db8::1]:1234"), addr("[2001:db8::2]:443"));
        assert_eq!(header.len(), 16 + 36);
        assert_eq!(&header[..12], &SIGNATURE);
        assert_eq!(header[12..16], [0x21, 0x21, 0x00, 36]);
        let src: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: std::net::Ipv6Addr = "2001:db8::2".parse().unwrap();
        assert_eq!(header[16..32], src.octets());
        assert_eq!(header[32..48], dst.octets());
        assert_eq!(header[48..], [0x04, 0xd2, 0x01, 0xbb]);
    }

    #[test]
    fn mapped_ipv4_clients_are_written_as_ipv4() {
        let header = v2_tcp_header(addr("[::ffff:10.0.0.7]:5000"), addr("10.0.0.1:80"));
        assert_eq!(header[13], 0x11);
        assert_eq!(header[16..20], [10, 0, 0, 7]);
    }

    #[test]
    fn an_ipv4_client_of_an_ipv6_address_is_mapped() {
        let header = v2_tcp_header(addr("10.0.0.7:5000"), addr("[2001:db8::2]:80"));
        assert_eq!(header[13], 0x21);
        assert_eq!(
            header[16..32],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7]
        );
    }
}
