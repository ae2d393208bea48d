//! The pair's adverts over UDP: one socket per agent, on its advertise address, for every load
//! balancer it serves (each advert names its load balancer).

use portico_ha::election::{Advert, MAX_LEN};
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// The agent's heartbeat socket.
#[derive(Debug)]
pub struct Heartbeat {
    socket: UdpSocket,
}

impl Heartbeat {
    pub async fn bind(address: SocketAddr) -> std::io::Result<Heartbeat> {
        let socket = UdpSocket::bind(address).await?;
        Ok(Heartbeat { socket })
    }

    /// The socket a predecessor bound (handed over by an upgrade).
    pub fn from_std(socket: std::net::UdpSocket) -> std::io::Result<Heartbeat> {
        socket.set_nonblocking(true)?;
        Ok(Heartbeat {
            socket: UdpSocket::from_std(socket)?,
        })
    }

    /// The socket, to be handed to a successor.
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sends one advert; a lost datagram is what heartbeats are made to survive, so errors
    /// are only logged.
    pub async fn send(&self, advert: &Advert, to: SocketAddr) {
        if let Err(e) = self.socket.send_to(&advert.encode(), to).await {
            tracing::debug!(%to, "cannot send an advert: {e}");
        }
    }

    /// The next datagram that is an advert, and its sender; others are logged and skipped.
    pub async fn recv(&self) -> std::io::Result<(Advert, SocketAddr)> {
        let mut buffer = [0u8; MAX_LEN + 1];
        loop {
            let (n, from) = self.socket.recv_from(&mut buffer).await?;
            match Advert::decode(&buffer[..n]) {
                Ok(advert) => return Ok((advert, from)),
                Err(e) => tracing::debug!(%from, "not an advert: {e}"),
            }
        }
    }
}
