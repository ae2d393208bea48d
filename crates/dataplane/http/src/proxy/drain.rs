//! Graceful shutdown, as Kubernetes expects of an Ingress controller's pod: readiness fails
//! first (the app's part), then the proxy keeps serving for a grace period while it asks
//! every client to go elsewhere, then it stops accepting and waits for what is in flight.

use super::Proxy;

/// Where a proxy is in its shutdown; it only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Serving,
    /// After the shutdown signal: still accepting; HTTP/1 responses carry `Connection:
    /// close`, HTTP/2 connections get GOAWAY.
    Draining,
    /// After the grace period: listeners closed, every connection shut down gracefully.
    Closing,
}

impl Proxy {
    /// Moves to `phase` unless the proxy is already there or past it.
    pub(super) fn enter(&self, phase: Phase) {
        self.phase.send_if_modified(|now| {
            let forward = *now < phase;
            if forward {
                *now = phase;
            }
            forward
        });
    }

    /// Whether clients are being asked to close their connections.
    pub(super) fn draining(&self) -> bool {
        *self.phase.borrow() >= Phase::Draining
    }
}
