//! The listening sockets of a process, for an upgrade that hands them to its successor
//! (`portico run`'s SIGUSR2): every listener registers a duplicate of its descriptor while it
//! listens, and a process started as a successor takes the ones it was given before binding.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};

/// What a listening socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SocketKind {
    /// The node's default HTTP listener (`--http-listen`).
    Http,
    /// The node's default HTTPS listener (`--https-listen`).
    Https,
    /// The admin API (`--admin-listen`).
    Admin,
    /// A VIP's HTTP listener of the built-in proxy.
    VipHttp,
    /// A VIP's HTTPS listener of the built-in proxy.
    VipHttps,
    /// An `l4` TCP listener.
    Tcp,
    /// An `l4` UDP socket.
    Udp,
    /// An agent's active-standby heartbeat socket (`--advertise-address`).
    Heartbeat,
    /// The UDP socket of HTTP/3 beside an HTTPS listener of the built-in proxy (the default
    /// one or a VIP's).
    Quic,
}

impl SocketKind {
    const ALL: [(SocketKind, &'static str); 9] = [
        (SocketKind::Http, "http"),
        (SocketKind::Https, "https"),
        (SocketKind::Admin, "admin"),
        (SocketKind::VipHttp, "vip-http"),
        (SocketKind::VipHttps, "vip-https"),
        (SocketKind::Tcp, "tcp"),
        (SocketKind::Udp, "udp"),
        (SocketKind::Heartbeat, "heartbeat"),
        (SocketKind::Quic, "quic"),
    ];
}

impl fmt::Display for SocketKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Self::ALL.iter().find(|(k, _)| k == self).map(|(_, n)| *n);
        f.write_str(name.unwrap_or("?"))
    }
}

impl FromStr for SocketKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let found = Self::ALL.iter().find(|(_, n)| *n == s).map(|(k, _)| *k);
        found.ok_or_else(|| format!("unknown socket kind {s:?}"))
    }
}

/// A socket's identity: its kind and the address it was asked for (for the default
/// listeners the flag's address, port 0 included, so that a successor with the same flags
/// finds it).
pub type SocketKey = (SocketKind, SocketAddr);

/// The process's listening sockets (duplicates, registered while they listen) and those it
/// inherited from its predecessor and not yet took.
#[derive(Debug, Default)]
pub struct Sockets {
    listening: Mutex<BTreeMap<SocketKey, OwnedFd>>,
    inherited: Mutex<BTreeMap<SocketKey, OwnedFd>>,
}

impl Sockets {
    /// Sockets handed over by a predecessor, to be taken before binding.
    pub fn inherit(sockets: impl IntoIterator<Item = (SocketKey, OwnedFd)>) -> Sockets {
        Sockets {
            listening: Mutex::default(),
            inherited: Mutex::new(sockets.into_iter().collect()),
        }
    }

    /// The inherited socket for `key`, if there is one (each is taken once).
    pub fn take(&self, key: SocketKey) -> Option<OwnedFd> {
        let taken = lock(&self.inherited).remove(&key);
        if taken.is_some() {
            tracing::info!(kind = %key.0, addr = %key.1, "listening on a handed-over socket");
        }
        taken
    }

    /// Records that `socket` listens for `key` (a duplicate is kept until [`Sockets::closed`]).
    pub fn listening(&self, key: SocketKey, socket: impl AsFd) {
        match socket.as_fd().try_clone_to_owned() {
            Ok(dup) => {
                lock(&self.listening).insert(key, dup);
            }
            Err(error) => {
                tracing::warn!(kind = %key.0, addr = %key.1, %error, "an upgrade will not hand this socket over");
            }
        }
    }

    /// `key` no longer listens: its duplicate closes, so the socket does.
    pub fn closed(&self, key: SocketKey) {
        lock(&self.listening).remove(&key);
    }

    /// The process is shutting down: the duplicates close, so that each socket closes when
    /// its listener does (and no upgrade hands anything over any more).
    pub fn forget_all(&self) {
        lock(&self.listening).clear();
    }

    /// Duplicates of every listening socket, for a successor.
    pub fn hand_over(&self) -> Vec<(SocketKey, OwnedFd)> {
        let listening = lock(&self.listening);
        let dup = |(key, fd): (&SocketKey, &OwnedFd)| Some((*key, fd.try_clone().ok()?));
        listening.iter().filter_map(dup).collect()
    }

    /// Closes the inherited sockets nobody took (load balancers gone meanwhile).
    pub fn close_unclaimed(&self) {
        let left = std::mem::take(&mut *lock(&self.inherited));
        for (kind, addr) in left.keys() {
            tracing::info!(%kind, %addr, "a handed-over socket is not needed any more: closed");
        }
    }
}

/// A TCP listener on `addr` even while the address is not on any interface (IP_FREEBIND): a
/// standby agent listens on its load balancers' addresses, so that a takeover only moves the
/// addresses. Non-blocking, for the runtime.
pub fn bind_nonlocal_tcp(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    freebind(&socket, addr)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// A UDP socket on `addr` even while the address is not on any interface (IP_FREEBIND), as
/// [`bind_nonlocal_tcp`]: HTTP/3 beside an HTTPS listener, an `l4` UDP listener. Non-blocking.
pub fn bind_nonlocal_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    freebind(&socket, addr)?;
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

fn freebind(socket: &socket2::Socket, addr: SocketAddr) -> std::io::Result<()> {
    if addr.is_ipv4() {
        socket.set_freebind_v4(true)
    } else {
        socket.set_only_v6(true)?;
        socket.set_freebind_v6(true)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_what_they_print() {
        for (kind, _) in SocketKind::ALL {
            assert_eq!(kind.to_string().parse::<SocketKind>().unwrap(), kind);
        }
        assert!("ftp".parse::<SocketKind>().is_err());
    }

    /// 192.0.2.1 (TEST-NET-1) is on no interface of a test machine: a plain bind fails, the
    /// nonlocal ones succeed, as a standby agent's listeners on its VIPs must.
    #[test]
    fn nonlocal_binds_succeed_on_an_address_no_interface_holds() {
        let addr: SocketAddr = "192.0.2.1:0".parse().unwrap();
        assert!(std::net::TcpListener::bind(addr).is_err());
        let tcp = bind_nonlocal_tcp(addr).unwrap();
        assert_eq!(tcp.local_addr().unwrap().ip(), addr.ip());
        let udp = bind_nonlocal_udp(addr).unwrap();
        assert_eq!(udp.local_addr().unwrap().ip(), addr.ip());
    }

    #[test]
    fn a_closed_listener_is_not_handed_over_and_an_inherited_one_is_taken_once() {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let key = |l: &std::net::TcpListener| (SocketKind::Tcp, l.local_addr().unwrap());
        let sockets = Sockets::default();
        sockets.listening(key(&a), &a);
        sockets.listening(key(&b), &b);
        sockets.closed(key(&b));
        let handed: Vec<_> = sockets.hand_over().into_iter().map(|(k, _)| k).collect();
        assert_eq!(handed, vec![key(&a)]);
        let next = Sockets::inherit(sockets.hand_over());
        assert!(next.take(key(&a)).is_some());
        assert!(next.take(key(&a)).is_none());
    }
}
