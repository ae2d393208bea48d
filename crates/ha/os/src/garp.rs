//! Gratuitous ARP: an ARP request announcing `ip` at the interface's MAC address (RFC 5227's
//! announcement: sender and target address both `ip`), broadcast from a raw `AF_PACKET`
//! socket, so that neighbours move their ARP entry for the address to this node.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Why gratuitous ARP could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum GarpError {
    #[error("cannot read interface {interface}'s {what}: {reason}")]
    Interface {
        interface: String,
        what: &'static str,
        reason: String,
    },
    #[error("cannot open a packet socket for gratuitous ARP on {interface}: {source}")]
    Socket {
        interface: String,
        source: std::io::Error,
    },
    #[error("cannot send gratuitous ARP for {ip} on {interface}: {source}")]
    Send {
        ip: Ipv4Addr,
        interface: String,
        source: std::io::Error,
    },
}

const ETH_P_ARP: u16 = 0x0806;
const BROADCAST: [u8; 6] = [0xff; 6];

/// The Ethernet frame of an ARP announcement of `ip` by `mac`.
pub fn announcement(mac: [u8; 6], ip: Ipv4Addr) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[0..6].copy_from_slice(&BROADCAST);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&ETH_P_ARP.to_be_bytes());
    // Hardware Ethernet (1), protocol IPv4, address sizes 6 and 4, operation request (1).
    f[14..22].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip.octets());
    // Target hardware address unknown (zero); target protocol address: the same ip.
    f[38..42].copy_from_slice(&ip.octets());
    f
}

/// A packet socket on one interface.
#[derive(Debug)]
pub struct Garp {
    interface: String,
    index: i32,
    mac: [u8; 6],
    socket: OwnedFd,
}

impl Garp {
    /// Opens a packet socket for `interface` (needs CAP_NET_RAW).
    pub fn open(interface: &str) -> Result<Garp, GarpError> {
        let read = |what: &'static str| {
            let path = format!("/sys/class/net/{interface}/{what}");
            std::fs::read_to_string(path).map_err(|e| GarpError::Interface {
                interface: interface.to_owned(),
                what,
                reason: e.to_string(),
            })
        };
        let index = read("ifindex")?.trim().parse::<i32>();
        let index = index.map_err(|e| GarpError::Interface {
            interface: interface.to_owned(),
            what: "ifindex",
            reason: e.to_string(),
        })?;
        let mac = parse_mac(read("address")?.trim()).ok_or_else(|| GarpError::Interface {
            interface: interface.to_owned(),
            what: "address",
            reason: "not an Ethernet address".to_owned(),
        })?;
        let socket = packet_socket().map_err(|source| GarpError::Socket {
            interface: interface.to_owned(),
            source,
        })?;
        Ok(Garp {
            interface: interface.to_owned(),
            index,
            mac,
            socket,
        })
    }

    /// Broadcasts one announcement of `ip`.
    pub fn send(&self, ip: Ipv4Addr) -> Result<(), GarpError> {
        let frame = announcement(self.mac, ip);
        send_frame(&self.socket, self.index, &frame).map_err(|source| GarpError::Send {
            ip,
            interface: self.interface.clone(),
            source,
        })
    }
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn packet_socket() -> std::io::Result<OwnedFd> {
    let kind = libc::SOCK_RAW | libc::SOCK_CLOEXEC;
    // Protocol 0: the socket sends only and receives nothing.
    #[allow(unsafe_code)]
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new descriptor we own.
    let fd = unsafe { libc::socket(libc::AF_PACKET, kind, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(unsafe_code)]
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn send_frame(socket: &OwnedFd, index: i32, frame: &[u8]) -> std::io::Result<()> {
    let mut address = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: ETH_P_ARP.to_be(),
        sll_ifindex: index,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr: [0; 8],
    };
    address.sll_addr[..6].copy_from_slice(&BROADCAST);
    let length = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    #[allow(unsafe_code)]
    // SAFETY: the buffer and the address are valid for the lengths given for the whole call;
    // the descriptor is open (borrowed from `socket`).
    let sent = unsafe {
        libc::sendto(
            socket.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&raw const address).cast(),
            length,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_names_the_address_twice_and_the_mac_as_sender() {
        let mac = [2, 0, 0, 0, 0, 9];
        let f = announcement(mac, Ipv4Addr::new(198, 18, 0, 5));
        assert_eq!(&f[0..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &mac);
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        assert_eq!(&f[20..22], &[0, 1], "a request");
        assert_eq!(&f[22..28], &mac);
        assert_eq!(&f[28..32], &[198, 18, 0, 5]);
        assert_eq!(&f[32..38], &[0; 6]);
        assert_eq!(&f[38..42], &[198, 18, 0, 5]);
    }

    #[test]
    fn macs_parse_only_whole() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }
}
