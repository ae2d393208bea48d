//! UDP: per-flow sessions (client address and port → a socket connected to one member), with
//! idle expiry; replies leave from the listener's socket.

use crate::target::{Affinity, Target};
use crate::{L4Limits, drained, idle, now_ms};
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Most sessions one listener keeps; datagrams of new clients beyond are dropped.
const MAX_SESSIONS: usize = 65_536;

/// A serving UDP listener. Dropping it stops receiving; its sessions drain.
#[derive(Debug)]
pub struct UdpHandle {
    target: watch::Sender<Arc<Target>>,
    task: JoinHandle<()>,
    local: SocketAddr,
}

impl UdpHandle {
    /// New sessions use `target` from now on.
    pub fn set(&self, target: Target) {
        self.target.send_replace(Arc::new(target));
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for UdpHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Session {
    upstream: Arc<UdpSocket>,
    last: AtomicU64,
}

type Sessions = Arc<Mutex<HashMap<SocketAddr, Arc<Session>>>>;

/// Serves `socket` (bound) with `target`. Must be called within a tokio runtime.
pub fn serve_udp(
    socket: std::net::UdpSocket,
    target: Target,
    limits: L4Limits,
) -> io::Result<UdpHandle> {
    socket.set_nonblocking(true)?;
    let socket = Arc::new(UdpSocket::from_std(socket)?);
    let local = socket.local_addr()?;
    let (tx, rx) = watch::channel(Arc::new(target));
    let task = tokio::spawn(receive_loop(socket, rx, limits));
    Ok(UdpHandle {
        target: tx,
        task,
        local,
    })
}

async fn receive_loop(socket: Arc<UdpSocket>, rx: watch::Receiver<Arc<Target>>, limits: L4Limits) {
    let sessions: Sessions = Arc::default();
    let affinity = Affinity::default();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(received) => received,
            Err(e) => {
                tracing::debug!(error = %e, "l4: udp receive failed");
                continue;
            }
        };
        let existing = lock(&sessions).get(&peer).cloned();
        let session = match existing {
            Some(s) => s,
            None => {
                let target = rx.borrow().clone();
                if !target.allows(peer.ip()) || lock(&sessions).len() >= MAX_SESSIONS {
                    continue;
                }
                let Some(member) = target.choose(peer, &affinity, 1).first().copied() else {
                    continue;
                };
                let Ok(session) = open(member).await else {
                    continue;
                };
                if let Some(timeout) = target.affinity_timeout() {
                    affinity.touch(peer.ip(), member, timeout);
                }
                lock(&sessions).insert(peer, session.clone());
                let (socket, sessions, rx) = (socket.clone(), sessions.clone(), rx.clone());
                let s = session.clone();
                tokio::spawn(async move {
                    replies(&socket, peer, &s, member, rx, limits).await;
                    let mut all = lock(&sessions);
                    if all
                        .get(&peer)
                        .is_some_and(|current| Arc::ptr_eq(current, &s))
                    {
                        all.remove(&peer);
                    }
                });
                session
            }
        };
        session.last.store(now_ms(), Ordering::Relaxed);
        let _ = session.upstream.send(&buf[..n]).await;
    }
}

fn lock(sessions: &Sessions) -> std::sync::MutexGuard<'_, HashMap<SocketAddr, Arc<Session>>> {
    sessions.lock().unwrap_or_else(|e| e.into_inner())
}

async fn open(member: SocketAddr) -> io::Result<Arc<Session>> {
    let any: IpAddr = match member {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let upstream = UdpSocket::bind(SocketAddr::new(any, 0)).await?;
    upstream.connect(member).await?;
    Ok(Arc::new(Session {
        upstream: Arc::new(upstream),
        last: AtomicU64::new(now_ms()),
    }))
}

/// Forwards the member's datagrams to the client until the session idles out or drains.
async fn replies(
    socket: &UdpSocket,
    peer: SocketAddr,
    session: &Session,
    member: SocketAddr,
    rx: watch::Receiver<Arc<Target>>,
    limits: L4Limits,
) {
    let forward = async {
        let mut buf = vec![0u8; 65_536];
        loop {
            match session.upstream.recv(&mut buf).await {
                Ok(n) => {
                    session.last.store(now_ms(), Ordering::Relaxed);
                    let _ = socket.send_to(&buf[..n], peer).await;
                }
                // ICMP port unreachable and the like: the member is gone or not listening.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    };
    tokio::select! {
        () = forward => {}
        () = idle(&session.last, limits.udp_idle_timeout) => {}
        () = drained(rx, member, limits.drain) => {}
    }
}
