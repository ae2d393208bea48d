//! The PROXY protocol (v1 text and v2 binary) on the proxy's listeners (`--proxy-protocol`),
//! as a cloud load balancer in front of Portico sends it: every connection starts with a
//! header naming the client, and that address is the connection's client from then on
//! (allowlists, rate limits, hashing, affinity, connection caps, `X-Forwarded-For`, the access
//! log). A connection without a valid header within the header deadline is closed unanswered.
//!
//! The header is read with `peek` until it is whole, then exactly its bytes are consumed, so
//! what follows (a TLS ClientHello, a request head) is left for the connection as it came.
//! `ppp` parses it.

use ppp::{HeaderResult, PartialResult};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The largest header read: v1's is at most 107 bytes, v2's 16 plus its addresses and TLVs.
const MAX_HEADER: usize = 1024;
/// The pause before peeking again at a header that is not whole yet.
const RETRY: Duration = Duration::from_millis(2);

/// Why a connection was closed before its first request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyHeaderError {
    #[error("no PROXY protocol header within {0:?}")]
    TimedOut(Duration),
    #[error("the connection closed before its PROXY protocol header was whole")]
    Closed,
    #[error("not a PROXY protocol header (v1 or v2)")]
    Invalid,
    #[error("a PROXY protocol header over {MAX_HEADER} bytes")]
    TooLong,
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads and consumes the PROXY header at the start of `stream` within `deadline`: the client
/// address it names, or `peer` for a header that names none (v2 LOCAL, v1 UNKNOWN: the load
/// balancer's own connections, such as health checks).
pub(crate) async fn read(
    stream: &mut TcpStream,
    peer: SocketAddr,
    deadline: Duration,
) -> Result<SocketAddr, ProxyHeaderError> {
    let read = async {
        let mut buf = [0u8; MAX_HEADER];
        loop {
            let n = stream.peek(&mut buf).await?;
            if n == 0 {
                return Err(ProxyHeaderError::Closed);
            }
            match client(&buf[..n], peer) {
                Parsed::Whole { len, client } => {
                    let mut header = vec![0u8; len];
                    stream.read_exact(&mut header).await?;
                    return Ok(client);
                }
                Parsed::Partial if n == MAX_HEADER => return Err(ProxyHeaderError::TooLong),
                Parsed::Partial => tokio::time::sleep(RETRY).await,
                Parsed::Invalid => return Err(ProxyHeaderError::Invalid),
            }
        }
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(ProxyHeaderError::TimedOut(deadline)))
}

/// What the bytes at the start of a connection hold.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A whole header of `len` bytes naming `client`.
    Whole {
        len: usize,
        client: SocketAddr,
    },
    /// The start of a header.
    Partial,
    Invalid,
}

/// Parses a header at the start of `input` (pure).
pub(crate) fn client(input: &[u8], peer: SocketAddr) -> Parsed {
    let parsed = HeaderResult::parse(input);
    if parsed.is_incomplete() {
        return Parsed::Partial;
    }
    match parsed {
        HeaderResult::V1(Ok(header)) => {
            let client = match header.addresses {
                ppp::v1::Addresses::Tcp4(a) => (a.source_address, a.source_port).into(),
                ppp::v1::Addresses::Tcp6(a) => (a.source_address, a.source_port).into(),
                ppp::v1::Addresses::Unknown => peer,
            };
            let len = header.header.len();
            Parsed::Whole { len, client }
        }
        HeaderResult::V2(Ok(header)) => {
            let named = match header.addresses {
                ppp::v2::Addresses::IPv4(a) => Some((a.source_address, a.source_port).into()),
                ppp::v2::Addresses::IPv6(a) => Some((a.source_address, a.source_port).into()),
                ppp::v2::Addresses::Unspecified | ppp::v2::Addresses::Unix(_) => None,
            };
            let client = match header.command {
                ppp::v2::Command::Proxy => named.unwrap_or(peer),
                ppp::v2::Command::Local => peer,
            };
            Parsed::Whole {
                len: header.len(),
                client,
            }
        }
        HeaderResult::V1(Err(_)) | HeaderResult::V2(Err(_)) => Parsed::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "10.0.0.1:40000".parse().unwrap()
    }

    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        h.push(0x20 | command);
        h.push(family);
        h.extend_from_slice(&u16::try_from(addresses.len()).unwrap().to_be_bytes());
        h.extend_from_slice(addresses);
        h
    }

    #[test]
    fn a_v1_header_names_the_client_and_its_length() {
        let line = b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443\r\n";
        let mut input = line.to_vec();
        input.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let client = "192.0.2.7:51000".parse().unwrap();
        let len = line.len();
        assert_eq!(super::client(&input, peer()), Parsed::Whole { len, client });
        let six = b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\n";
        let client = "[2001:db8::7]:51000".parse().unwrap();
        let len = six.len();
        assert_eq!(super::client(six, peer()), Parsed::Whole { len, client });
        let unknown = b"PROXY UNKNOWN\r\n";
        let whole = Parsed::Whole {
            len: unknown.len(),
            client: peer(),
        };
        assert_eq!(super::client(unknown, peer()), whole);
    }

    #[test]
    fn a_v2_header_names_the_client_unless_local() {
        let mut addresses = vec![192, 0, 2, 9, 198, 51, 100, 1];
        addresses.extend_from_slice(&52000u16.to_be_bytes());
        addresses.extend_from_slice(&443u16.to_be_bytes());
        let proxied = v2(1, 0x11, &addresses);
        let client = "192.0.2.9:52000".parse().unwrap();
        let len = proxied.len();
        assert_eq!(
            super::client(&proxied, peer()),
            Parsed::Whole { len, client }
        );
        let local = v2(0, 0x00, &[]);
        let len = local.len();
        assert_eq!(
            super::client(&local, peer()),
            Parsed::Whole {
                len,
                client: peer()
            }
        );
    }

    #[test]
    fn partial_and_foreign_starts_are_told_apart() {
        assert_eq!(super::client(b"PROXY TCP4 192.0", peer()), Parsed::Partial);
        assert_eq!(super::client(b"\r\n\r\n\0\r\n", peer()), Parsed::Partial);
        assert_eq!(
            super::client(b"GET / HTTP/1.1\r\n\r\n", peer()),
            Parsed::Invalid
        );
        assert_eq!(
            super::client(&[0x16, 3, 1, 0, 200, 1], peer()),
            Parsed::Invalid
        );
    }
}
