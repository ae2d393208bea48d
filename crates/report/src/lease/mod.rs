//! Leader election with a `coordination.k8s.io/v1` Lease (kube-runtime 5 has none).
//!
//! Every `retry_period` the loop reads the Lease (a leader skips the read and renews the Lease
//! it last wrote), asks the [`Elector`] what to do, and writes: create when missing, renew when
//! held by this replica, take over when free or expired. Every write carries the
//! resourceVersion read, so of two replicas racing for one Lease only one succeeds; the other
//! gets 409 Conflict and is not leader. Each request is bounded by the time left as leader, so a
//! hanging API server cannot keep a stale leader writing. At shutdown a holder sets
//! `leader` to false first, then releases the Lease (no holder), so a successor takes over on its
//! next retry instead of waiting for expiry. A release that fails (API server unreachable within
//! one retry period) leaves the Lease to expire.

mod decide;
mod run;
mod spec;

pub use decide::{Action, Elector, Record};
pub(crate) use run::run;
pub use spec::{Claim, claimed, record, released};
