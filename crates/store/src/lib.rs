//! The store: the revisioned desired state that the controller writes and agents serve, keyed
//! per load balancer and per certificate, and the agents' feedback. One writer, many readers,
//! each reader watching from the revision it has. In memory for the all-in-one process
//! ([`MemoryStore`]); in etcd (`portico-store-etcd`) when the controller and the agents run
//! apart, through the pure key layout and codec here ([`codec`]) over the [`kv`] contract. Both
//! implement the [`contract`] the controller loop and the agent loop are written against.
//!
//! This crate holds types, the pure codec and the memory store. It must not depend on etcd,
//! hyper, kube or any data plane.

pub mod codec;
pub mod contract;
mod desired;
pub mod kv;
mod memory;

pub use contract::{
    AgentStore, Agents, ClaimName, ClaimStore, ClaimSwap, Claims, ControllerStore, StoreHealth,
    Stored,
};
pub use desired::{CaBundles, Certificates, Delta, Desired, Feedback};
pub use memory::MemoryStore;

/// The version of the value format written under the store's prefix. A value of another
/// version is reported, not served.
pub const SCHEMA: u32 = 1;
