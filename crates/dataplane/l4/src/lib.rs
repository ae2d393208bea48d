//! The L4 data plane: a TCP or UDP listener spreading flows over a pool's ready members with
//! Maglev consistent hashing (`portico-balance`), so that a change of members moves as few
//! flows as possible.
//!
//! - A flow's key is the client's address and port, or only its address with ClientIP
//!   affinity (then the client also keeps its last member while it stays in the pool, until
//!   the affinity timeout has passed since its last flow).
//! - TCP: accept, connect to the chosen member within the connect timeout, else try the next
//!   member; copy both ways with half-close; close after the idle timeout.
//! - UDP: one session per client address and port, with a connected socket towards its member;
//!   replies leave from the listener's socket; sessions end after the idle timeout.
//! - Changes ([`TcpHandle::set`], [`UdpHandle::set`]) swap the target without rebinding:
//!   established flows stay on their member (the connection or session is the flow table);
//!   new flows follow the new table; flows to a member that left end after the drain limit.
//! - Clients outside the source ranges are refused: connections closed, datagrams dropped.
//! - TCP pools may ask for a PROXY protocol v2 header towards their members
//!   ([`proxy_protocol`]), written before the client's first byte.

pub mod proxy_protocol;
mod target;
mod tcp;
mod udp;

pub use target::Target;
pub use tcp::{TcpHandle, serve_tcp};
pub use udp::{UdpHandle, serve_udp};

use std::time::{Duration, Instant};

/// Deadlines of the L4 data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L4Limits {
    /// Connecting to one member (TCP).
    pub connect_timeout: Duration,
    /// A TCP connection without bytes either way for this long is closed.
    pub idle_timeout: Duration,
    /// A UDP session without datagrams either way for this long ends.
    pub udp_idle_timeout: Duration,
    /// How long flows to a member that left the pool (or of a removed listener) may go on.
    pub drain: Duration,
    /// Most members one TCP connection is tried on.
    pub tries: usize,
}

impl Default for L4Limits {
    fn default() -> Self {
        L4Limits {
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(3600),
            udp_idle_timeout: Duration::from_secs(30),
            drain: Duration::from_secs(30),
            tries: 3,
        }
    }
}

/// TCP connections in flight in this process, of every listener.
static FLOWS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many TCP connections this process carries now, listeners gone or not: what a process
/// that handed its sockets over waits for before it exits. UDP sessions are not counted: a
/// successor receives the client's next datagrams on the same socket and opens its own.
pub fn tcp_flows() -> usize {
    FLOWS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Counts a TCP connection while it lives.
struct Flow;

impl Flow {
    fn start() -> Flow {
        FLOWS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Flow
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        FLOWS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Milliseconds since the process's first call: cheap activity stamps for idle timeouts.
fn now_ms() -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Resolves when `last` (a [`now_ms`] stamp, updated by the flow) is older than `idle`.
async fn idle(last: &std::sync::atomic::AtomicU64, idle: Duration) {
    use std::sync::atomic::Ordering;
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    loop {
        let since = now_ms().saturating_sub(last.load(Ordering::Relaxed));
        if since >= idle_ms {
            return;
        }
        tokio::time::sleep(Duration::from_millis(idle_ms - since)).await;
    }
}

/// Resolves once `member` has been out of the target for the drain limit (or the listener has
/// been gone that long).
async fn drained(
    mut rx: tokio::sync::watch::Receiver<std::sync::Arc<Target>>,
    member: std::net::SocketAddr,
    drain: Duration,
) {
    loop {
        if rx.changed().await.is_err() {
            break;
        }
        if !rx.borrow_and_update().has_member(member) {
            break;
        }
    }
    tokio::time::sleep(drain).await;
}
