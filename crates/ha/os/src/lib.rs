//! Active-standby's OS adapter (the edge of `portico-ha`): adds and removes a load balancer's
//! addresses on the agent's interface (`ip address`), sends gratuitous ARP requests from a raw
//! `AF_PACKET` socket, and carries the pair's adverts over one UDP socket.
//!
//! Linux only. It may depend on `portico-ha`, tokio and libc; it must not depend on the store,
//! etcd or the data planes.

mod address;
mod garp;
mod heartbeat;

pub use address::{AddressError, Interface};
pub use garp::{Garp, GarpError, announcement};
pub use heartbeat::Heartbeat;
