//! TCP: accept, choose, connect (next member on failure), copy both ways with half-close.

use crate::target::{Affinity, Target};
use crate::{L4Limits, drained, idle, now_ms};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A serving TCP listener. Dropping it stops accepting; its connections drain.
#[derive(Debug)]
pub struct TcpHandle {
    target: watch::Sender<Arc<Target>>,
    accept: JoinHandle<()>,
    local: SocketAddr,
}

impl TcpHandle {
    /// New connections use `target` from now on.
    pub fn set(&self, target: Target) {
        self.target.send_replace(Arc::new(target));
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TcpHandle {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Serves `listener` (a bound, listening socket) with `target`. Must be called within a tokio
/// runtime.
pub fn serve_tcp(
    listener: std::net::TcpListener,
    target: Target,
    limits: L4Limits,
) -> io::Result<TcpHandle> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let local = listener.local_addr()?;
    let (tx, rx) = watch::channel(Arc::new(target));
    let accept = tokio::spawn(accept_loop(listener, rx, limits));
    Ok(TcpHandle {
        target: tx,
        accept,
        local,
    })
}

async fn accept_loop(listener: TcpListener, rx: watch::Receiver<Arc<Target>>, limits: L4Limits) {
    let affinity = Arc::new(Affinity::default());
    loop {
        let (client, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: back off rather than spin.
                tracing::warn!(error = %e, "l4: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let target = rx.borrow().clone();
        if !target.allows(peer.ip()) {
            drop(client);
            continue;
        }
        let (rx, affinity) = (rx.clone(), affinity.clone());
        let flow = crate::Flow::start();
        tokio::spawn(async move {
            connection(client, peer, target, rx, &affinity, limits).await;
            drop(flow);
        });
    }
}

async fn connection(
    mut client: TcpStream,
    peer: SocketAddr,
    target: Arc<Target>,
    rx: watch::Receiver<Arc<Target>>,
    affinity: &Affinity,
    limits: L4Limits,
) {
    let mut upstream = None;
    for member in target.choose(peer, affinity, limits.tries) {
        match tokio::time::timeout(limits.connect_timeout, TcpStream::connect(member)).await {
            Ok(Ok(stream)) => {
                upstream = Some((stream, member));
                break;
            }
            Ok(Err(e)) => tracing::debug!(%member, error = %e, "l4: connect failed"),
            Err(_) => tracing::debug!(%member, "l4: connect timed out"),
        }
    }
    let Some((mut upstream, member)) = upstream else {
        return;
    };
    if target.proxy_protocol() {
        let local = client.local_addr();
        let header = local.map(|local| crate::proxy_protocol::v2_tcp_header(peer, local));
        let sent = match header {
            Ok(header) => upstream.write_all(&header).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            tracing::debug!(%member, error = %e, "l4: PROXY header not sent");
            return;
        }
    }
    if let Some(timeout) = target.affinity_timeout() {
        affinity.touch(peer.ip(), member, timeout);
    }
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let last = AtomicU64::new(now_ms());
    let (client_read, client_write) = client.split();
    let (member_read, member_write) = upstream.split();
    let copy = async {
        let _ = tokio::join!(
            pipe(client_read, member_write, &last),
            pipe(member_read, client_write, &last)
        );
    };
    tokio::select! {
        () = copy => {}
        () = idle(&last, limits.idle_timeout) => {}
        () = drained(rx, member, limits.drain) => {}
    }
    if let Some(timeout) = target.affinity_timeout() {
        affinity.touch(peer.ip(), member, timeout);
    }
}

/// The first buffer of each direction: enough for a short exchange. A read that fills it grows
/// it to [`BULK_BUFFER`] for the rest of the connection. Short connections then touch 8 KiB
/// instead of 64 KiB (with the allocator returning freed memory at once, every page of a
/// buffer is a page fault per connection).
const FIRST_BUFFER: usize = 4 * 1024;
const BULK_BUFFER: usize = 32 * 1024;

/// Copies until end of stream, then half-closes the other side.
async fn pipe(mut from: ReadHalf<'_>, mut to: WriteHalf<'_>, last: &AtomicU64) -> io::Result<()> {
    let mut buf = vec![0u8; FIRST_BUFFER];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
        last.store(now_ms(), Ordering::Relaxed);
        if n == buf.len() && buf.len() < BULK_BUFFER {
            buf.resize(BULK_BUFFER, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo member; returns its address.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    /// Bytes past the first buffer, in writes of every size, come back whole and in order,
    /// and the half-close reaches the member and back.
    #[tokio::test]
    async fn a_bulk_transfer_passes_whole_in_order_and_half_closes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = Target::new(vec![echo().await], None, Vec::new());
        let handle = serve_tcp(listener, target, L4Limits::default()).unwrap();
        let stream = TcpStream::connect(handle.local_addr()).await.unwrap();
        let (mut r, mut w) = stream.into_split();
        let sent: Vec<u8> = (0..3 * BULK_BUFFER + 17).map(|i| (i % 251) as u8).collect();
        let writer = {
            let sent = sent.clone();
            tokio::spawn(async move {
                for piece in sent.chunks(FIRST_BUFFER - 1) {
                    w.write_all(piece).await.unwrap();
                }
                w.shutdown().await.unwrap();
            })
        };
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "the echoed bytes differ");
    }
}
