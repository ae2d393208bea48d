//! The cores of load balancing and member health, pure: no I/O, no clock, no threads. Time is
//! passed in (a [`std::time::Duration`] since any fixed instant) and so is randomness, so the
//! HTTP data plane and a later L4 data plane share them and tests drive them exactly.
//!
//! - [`wrr`]: smooth weighted round robin (nginx's algorithm);
//! - [`least`]: least request, power of two choices over a latency EWMA × (in flight + 1);
//! - [`maglev`]: consistent hashing with a Maglev lookup table of prime size;
//! - [`hash`]: a hash stable across builds, platforms and Rust versions (FNV-1a, mixed);
//! - [`passive`]: ejection after failures in a row, with a doubling back-off;
//! - [`active`]: the healthy/unhealthy thresholds of active checks.

pub mod active;
pub mod hash;
pub mod least;
pub mod maglev;
pub mod passive;
pub mod wrr;
