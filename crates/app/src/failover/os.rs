//! The OS side of the elections, behind a seam: the load balancers' addresses on the agent's
//! interface, the gratuitous ARP that announces them, and the heartbeat socket the pair's
//! adverts go through. [`LinuxOs`] is the real one (`portico-ha-os`: `ip address`, a packet
//! socket, UDP); the loop's tests use a recording one with adverts handed between the agents
//! in the process: an adapter at this I/O edge only (the claims go through a real store, the
//! elections and their loop are the real ones).

use portico_ha::election::Advert;
use portico_ha_os::{Garp, Heartbeat, Interface};
use portico_provider::{SocketKind, Sockets};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// The OS side of active-standby. Errors are said, not acted on.
pub(crate) trait Os: Clone + Send + Sync + 'static {
    type Heartbeat: Adverts;

    /// Adds `address` to the interface (idempotent).
    fn add(&self, address: IpAddr) -> impl Future<Output = Result<(), String>> + Send;

    /// Removes `address` from the interface (idempotent).
    fn remove(&self, address: IpAddr) -> impl Future<Output = Result<(), String>> + Send;

    /// The host addresses the interface holds now.
    fn hosts(&self) -> impl Future<Output = Result<Vec<IpAddr>, String>> + Send;

    /// One gratuitous ARP request for `address`; `None` when none can be sent at all (then
    /// takeovers rely on the neighbours' ARP timeouts).
    fn announce(&self, address: Ipv4Addr) -> Option<Result<(), String>>;

    /// The heartbeat socket on `address`: the one a predecessor handed over in `sockets`, or
    /// a new one; registered in `sockets` for a successor.
    fn heartbeat(
        &self,
        address: SocketAddr,
        sockets: &Sockets,
    ) -> impl Future<Output = std::io::Result<Self::Heartbeat>> + Send;
}

/// Where the pair's adverts go and come from.
pub(crate) trait Adverts: Send + Sync + 'static {
    /// Sends `advert` to `to` (best effort: a lost advert is a missed one).
    fn send(&self, advert: &Advert, to: SocketAddr) -> impl Future<Output = ()> + Send;

    /// The next advert and where it came from (cancel-safe).
    fn recv(&mut self) -> impl Future<Output = std::io::Result<(Advert, SocketAddr)>> + Send;
}

/// `--interface` and the UDP heartbeat, through `portico-ha-os`.
#[derive(Debug, Clone)]
pub(crate) struct LinuxOs {
    interface: Interface,
    /// None when the packet socket cannot be opened (logged once).
    garp: Option<Arc<Garp>>,
}

impl LinuxOs {
    pub(crate) fn open(interface: &str) -> LinuxOs {
        let garp = Garp::open(interface)
            .inspect_err(|e| tracing::error!("gratuitous ARP disabled: {e}"))
            .ok();
        LinuxOs {
            interface: Interface::new(interface),
            garp: garp.map(Arc::new),
        }
    }
}

impl Os for LinuxOs {
    type Heartbeat = Heartbeat;

    async fn add(&self, address: IpAddr) -> Result<(), String> {
        self.interface.add(address).await.map_err(|e| e.to_string())
    }

    async fn remove(&self, address: IpAddr) -> Result<(), String> {
        (self.interface.remove(address).await).map_err(|e| e.to_string())
    }

    async fn hosts(&self) -> Result<Vec<IpAddr>, String> {
        self.interface.hosts().await.map_err(|e| e.to_string())
    }

    fn announce(&self, address: Ipv4Addr) -> Option<Result<(), String>> {
        let garp = self.garp.as_ref()?;
        Some(garp.send(address).map_err(|e| e.to_string()))
    }

    async fn heartbeat(
        &self,
        address: SocketAddr,
        sockets: &Sockets,
    ) -> std::io::Result<Heartbeat> {
        let key = (SocketKind::Heartbeat, address);
        // Handed over by the process this one upgrades, or bound now.
        let heartbeat = match sockets.take(key) {
            Some(fd) => Heartbeat::from_std(std::net::UdpSocket::from(fd))?,
            None => Heartbeat::bind(address).await?,
        };
        sockets.listening(key, heartbeat.socket());
        Ok(heartbeat)
    }
}

impl Adverts for Heartbeat {
    async fn send(&self, advert: &Advert, to: SocketAddr) {
        Heartbeat::send(self, advert, to).await;
    }

    async fn recv(&mut self) -> std::io::Result<(Advert, SocketAddr)> {
        Heartbeat::recv(self).await
    }
}
