//! The etcd backend of Portico's store (`portico-store`'s key-value contract over etcd v3).
//!
//! It owns the connection (TLS, client certificates, user/password, require-leader), the
//! controllers' fenced leader election and atomic commits of the desired state (split into
//! several txns when too big for one, made visible at a commit marker), the agents' mirrors
//! (snapshot, then watch; relist and sweep on compaction or a broken stream; health), leased
//! agent keys, compare-and-swap of the agents' claims (`ha/<lb>`), and the agents' checksummed
//! local cache of the last view. The key layout is in [`keys`]. It implements
//! `portico-store`'s contract for both sides: [`EtcdController`] (campaign, commits of what
//! changed, the agents' feedback and claims), [`EtcdAgent`] (the link to etcd, decoding of
//! each view, the local cache) and [`EtcdClaims`] (active-standby: the claims and the agents
//! mirrored, the lease that names the process, granted or taken over, compare-and-swap).
//!
//! It speaks etcd's gRPC API through clients generated at build time from its own
//! `proto/etcd.proto` (protox and tonic-prost-build: no protoc). It may depend on
//! `portico-store`, `portico-model`, tonic, prost and tokio; it must not depend
//! on data planes, providers or Kubernetes types.

mod agent;
pub mod cache;
mod claims;
mod client;
mod commit;
mod config;
mod connect;
mod controller;
mod election;
mod error;
pub mod keys;
mod lease;
mod mirror;
mod publish;
mod rpc;
mod swap;
mod task;

pub use agent::{AgentLink, EtcdAgent};
pub use cache::CacheError;
pub use claims::{EtcdClaims, claim_key};
pub use client::Etcd;
pub use config::{ConfigError, DEFAULT_PREFIX, EtcdConfig, Problem, TlsFiles};
pub use connect::{RETRY, connect};
pub use controller::EtcdController;
pub use election::Leadership;
pub use error::EtcdError;
pub use lease::Lease;
pub use mirror::{Health, Mirror};
pub use publish::Publication;
pub use swap::{HA, Swap};
