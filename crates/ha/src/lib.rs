//! Active-standby for load balancers (contrail-svc-monitor's placement, keepalived's role):
//! [`place`] puts each load balancer on two agents on different nodes; [`election`] decides,
//! per agent and load balancer, when to hold its addresses; [`addresses`] says which of its
//! load balancers' addresses an agent must not have on its interface. Pure functions and
//! state machines at the centre; the OS adapter (addresses, gratuitous ARP, heartbeats) goes
//! at the edge.
//!
//! The pure parts depend on the model and serde (JSON for the advert datagram) only: no tokio, no etcd, no sockets.

pub mod addresses;
pub mod election;
mod place;

pub use place::{Agent, Request, place};
/// The placement record lives in the model, so that the store can hold it without depending
/// on this crate.
pub use portico_model::Placement;
