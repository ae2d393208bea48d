//! Pure translation: Kubernetes objects (k8s-openapi types) → the load-balancer model plus
//! per-object diagnostics. Also the API server's admission jobs that the file source must do
//! itself: object validation and default-IngressClass assignment.
//!
//! No I/O, no async, no kube client: only `portico-model` and `k8s-openapi` types. The
//! Kubernetes API version feature of k8s-openapi is chosen by the binary crate, not here.

mod objects;

pub use objects::{ObjectKey, Objects};
