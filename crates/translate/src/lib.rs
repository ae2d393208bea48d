//! Pure translation: Kubernetes objects (k8s-openapi types; Ingresses, Services and
//! EndpointSlices in the compact forms sources keep: [`KeptIngress`], [`KeptService`],
//! [`CompactSlice`]; the Gateway API kinds of `portico-gateway`, see [`gateway`]) → the
//! load-balancer model plus per-object diagnostics. Also the API server's admission jobs that the file source must do
//! itself: object validation and default-IngressClass assignment ([`admission`]).
//!
//! No I/O, no async, no kube client: only `portico-model` and `k8s-openapi` types. The
//! Kubernetes API version feature of k8s-openapi is chosen by the binary crate, not here.
//!
//! # Topology
//! Chosen per IngressClass by `portico.dev/topology`. Dedicated: one LoadBalancer per served
//! Ingress (`ingress/<namespace>/<name>`, its origin the Ingress, so its problems are reported
//! there), built like a shared one that carries only that Ingress. Shared (the default): one
//! LoadBalancer per owned IngressClass (`ingressclass/<class>`) with one HTTP
//! listener. Every served Ingress of the class becomes L7 policies on it, one per (rule host,
//! path, pathType); pools are per (namespace, service, port as written). An identical host and
//! path match in two Ingresses goes to the oldest one; so does the listener's default backend.
//!
//! # Evaluation order
//! `Listener::policies` is in evaluation order and the first policy whose rules all match wins
//! (the proxy and the haproxy renderer both rely on it): policies with an exact host first, then
//! wildcard hosts, then host-less ones; within a group by host, then longer (normalised) paths
//! first, Exact before Prefix at equal length, then by path, then the older Ingress first.
//! Consequence: a request whose host matches an exact host but none of that host's paths falls
//! through to the wildcard policies, then the host-less ones, then the default backend, like the
//! Gateway API's precedence. Rules without a host apply to every host.
//!
//! # TLS
//! Each load balancer also has a TERMINATED_HTTPS listener with the same policies and the
//! certificates (references to Secrets) of the hosts in served Ingresses' `spec.tls`; HTTP
//! requests for those hosts are redirected to it unless the Ingress opts out ([`tls`]). The key
//! material is loaded apart, by [`certificates()`], which reuses what unchanged Secrets gave.
//!
//! # Paths
//! Exact paths are compared whole and case-sensitively. Prefix paths are stored without trailing
//! slash (`/` for the root) and compared element-wise. ImplementationSpecific is treated as
//! Prefix, an empty ImplementationSpecific path as `/`. Two paths that normalise to the same
//! match (`/foo` and `/foo/` as Prefix, or Prefix and ImplementationSpecific) are one route.

pub mod address;
pub mod admission;
mod aliases;
mod annotations;
mod backend;
mod canary;
mod certificates;
mod class;
mod collision;
mod compat;
mod config;
mod errors;
pub mod gateway;
mod incremental;
mod kept;
mod loadbalancer;
mod loaded;
mod members;
mod memo;
mod merge;
pub mod migrate;
mod names;
mod objects;
mod passthrough;
mod policy;
mod pool;
mod rebuilt;
mod regex_hosts;
mod route;
mod selector;
mod service;
mod source;
mod tls;
mod translate;
mod vip;
mod www;

pub use address::{
    Allocations, Cidr, EXTERNAL_IP_ANNOTATION, FIP_POOL_ANNOTATION, VIP_POOL_ANNOTATION,
    assign_addresses,
};
pub use annotations::error_codes;
pub use annotations::table as annotation_table;
pub use certificates::{Certificates, SecretError, certificates};
pub use class::referenced_secrets;
pub use collision::l4_collisions;
pub use config::{
    CONTROLLER_NAME, Config, DEFAULT_CLASS_ANNOTATION, GATEWAY_CONTROLLER_NAME, L4_CLASS,
    LEGACY_CLASS_ANNOTATION, PROVIDER_ANNOTATION, SSL_REDIRECT_ANNOTATION, TOPOLOGY_ANNOTATION,
};
pub use incremental::{endpoint_only_change, refresh_members};
pub use kept::{
    KeptBackend, KeptBackendPort, KeptIngress, KeptIngressSpec, KeptMeta, KeptPath, KeptRule,
    KeptService, KeptServiceBackend, KeptServiceSpec, PathType,
};
pub use loaded::Loaded;
pub use memo::{Memo, Previous};
pub use objects::{CompactSlice, ObjectKey, Objects, SliceEndpoint, SlicePort, StatusSeen};
pub use selector::{AGENT_SELECTOR_ANNOTATION, Selector, agent_selectors};
pub use service::{L4_PROVIDER, PROXY_PROTOCOL_ANNOTATION, SERVICE_PROVIDERS};
pub use translate::{IngressState, Translation, translate, translate_incremental};
pub use vip::{HTTP_PORT_ANNOTATION, HTTPS_PORT_ANNOTATION, VIP_ANNOTATION, assign_vips};
