//! The Kubernetes API source: kube-rs watchers for Ingress, IngressClass, Service,
//! EndpointSlice, Secret and, where the cluster serves them, the Gateway API's GatewayClass,
//! Gateway, HTTPRoute and ReferenceGrant and Namespaces' labels ([`gateway_api`]) report the same [`portico_translate::Loaded`] as the manifest-file
//! source, so both feed one translator and the same providers.
//!
//! - Each kind has a kube-runtime watcher: list, then watch from the list's resourceVersion,
//!   resuming after a cut stream and relisting after 410 Gone. A relist is swapped in whole when
//!   complete ([`state`]), so nothing is lost or counted twice and the objects never have a gap.
//! - Only Secrets named by owned Ingresses' `spec.tls`, our Gateways' `certificateRefs` (and
//!   `--default-certificate`) are kept.
//! - Nothing is published until every kind has been listed once.
//! - `--publish-service` is followed by [`publish_service`].
//!
//! It reports facts and never translates them; it writes nothing to the API server (status,
//! Events and the leader Lease belong to `portico-report`).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod client;
mod gateway_api;
mod kinds;
mod publish;
mod state;
mod watch;

pub use client::{ClientError, client};
pub use kinds::Kind;
pub use publish::{publish_service, service_addresses};
pub use watch::{KubeSource, Scope};
