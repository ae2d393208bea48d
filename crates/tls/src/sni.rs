//! The server name a TLS ClientHello asks for, read without consuming the connection: the
//! built-in proxy peeks the first bytes of an accepted stream, asks [`peek_sni`], and either
//! splices the raw stream to a passthrough pool or hands it, unread, to rustls to terminate.
//!
//! Only the first TLS record is read (RFC 8446 §5.1 lets a ClientHello span records; clients
//! send it in one, well under the 16 KiB record limit). A hello cut across records is reported as
//! [`Sni::Unreadable`], which the caller treats like a hello without a name: terminate.

/// What the peeked bytes say about the server name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sni {
    /// Not enough bytes yet: peek again once more have arrived.
    Incomplete,
    /// A ClientHello naming this host (lowercased; names are case-insensitive).
    Host(String),
    /// A ClientHello without a server_name extension.
    Absent,
    /// Not a TLS ClientHello, a malformed one, or one spanning records.
    Unreadable,
}

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_NAME: u16 = 0;
const HOST_NAME: u8 = 0;

/// Reads the SNI host name from the start of a TLS stream.
pub fn peek_sni(buf: &[u8]) -> Sni {
    let Some(header) = buf.get(..5) else {
        return if buf.first().is_some_and(|&b| b != HANDSHAKE) {
            Sni::Unreadable
        } else {
            Sni::Incomplete
        };
    };
    if header[0] != HANDSHAKE {
        return Sni::Unreadable;
    }
    let record_len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    let Some(record) = buf.get(5..5 + record_len) else {
        return Sni::Incomplete;
    };
    hello_sni(record).unwrap_or(Sni::Unreadable)
}

/// The handshake message in one record; `None` for anything malformed.
fn hello_sni(record: &[u8]) -> Option<Sni> {
    let mut r = Reader(record);
    if r.u8()? != CLIENT_HELLO {
        return None;
    }
    let len = r.u24()?;
    let mut hello = Reader(r.take(len)?);
    hello.take(2 + 32)?; // legacy_version, random
    hello.vec8()?; // legacy_session_id
    hello.vec16()?; // cipher_suites
    hello.vec8()?; // legacy_compression_methods
    if hello.0.is_empty() {
        return Some(Sni::Absent);
    }
    let mut exts = Reader(hello.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let body = exts.vec16()?;
        if kind == SERVER_NAME {
            return server_name(body).map(Sni::Host);
        }
    }
    Some(Sni::Absent)
}

/// The host_name entry of a server_name extension (RFC 6066 §3).
fn server_name(body: &[u8]) -> Option<String> {
    let mut list = Reader(Reader(body).vec16()?);
    while !list.0.is_empty() {
        let kind = list.u8()?;
        let name = list.vec16()?;
        if kind == HOST_NAME {
            let name = std::str::from_utf8(name).ok()?;
            return Some(name.to_ascii_lowercase());
        }
    }
    None
}

/// A cursor over big-endian TLS wire fields; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u24(&mut self) -> Option<usize> {
        let b = self.take(3)?;
        Some(usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
}

#[cfg(test)]
#[path = "sni_tests.rs"]
mod tests;
