//! Providers: the drivers that serve load balancers, registered by provider type, as
//! contrail-svc-monitor hands each load balancer to the driver of its `loadbalancer_provider`.
//!
//! A [`Provider`] serves the LoadBalancers of the model whose `provider` is its
//! [`Provider::kind`]; the [`Registry`] hands every model to each registered provider and reports
//! the load balancers whose provider type nobody serves. Types: `proxy` (the built-in L7 proxy),
//! `haproxy` (the seed's "opencontrail" driver: a generated haproxy.conf and a real haproxy
//! per load balancer) and `l4` (Services of type LoadBalancer over TCP and UDP).
//!
//! This crate knows the model and certificate material only: no Kubernetes types, no sources,
//! no data plane.

mod registry;
mod sockets;

pub use registry::{Applied, Registry};
pub use sockets::{SocketKey, SocketKind, Sockets, bind_nonlocal_tcp, bind_nonlocal_udp};

pub use portico_model::Credentials;
use portico_model::{Diagnostic, Model, ObjectRef, PoolId};
use portico_tls::{CaBundle, Material};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tokio::sync::watch;

/// Usable key material by Secret reference (kind `Secret`), as the model's listeners name them.
pub type Certificates = BTreeMap<ObjectRef, Arc<Material>>;

/// Trusted CA bundles by Secret reference (kind `Secret`), as pools' `upstream_tls.ca` name
/// them: what verifying pools check their members' certificates against.
pub type CaBundles = BTreeMap<ObjectRef, Arc<CaBundle>>;

/// What a provider reports between changes: whether it serves its first configuration yet,
/// and the problems it found while applying (asynchronously, e.g. a configuration its data
/// plane rejected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub ready: bool,
    pub diagnostics: Vec<Diagnostic>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            ready: true,
            diagnostics: Vec::new(),
        }
    }
}

/// One driver: serves the load balancers of one provider type.
pub trait Provider: Send + Sync {
    /// The provider type, as `LoadBalancer::provider` and the IngressClass annotation
    /// `portico.dev/provider` name it.
    fn kind(&self) -> &'static str;

    /// Serves the load balancers of `model` from now on (the registry hands each provider
    /// only those of its [`Provider::kind`]), and stops serving those that are gone. Returns the problems found at once (a field the
    /// provider cannot serve); later ones come through [`Provider::status`].
    fn apply(
        &self,
        model: &Model,
        certificates: &Certificates,
        ca_bundles: &CaBundles,
    ) -> Vec<Diagnostic>;

    /// The htpasswd entries of basic-auth Secrets by reference, as policies'
    /// `basic_auth.secret` name them, for the next [`Provider::apply`] (the registry hands
    /// them over just before). A provider that does not serve basic auth ignores them (the
    /// default) and leaves such policies out.
    fn set_credentials(&self, _credentials: &Credentials) {}

    /// Only the members of `pools` changed since the last [`Provider::apply`] (`model` has
    /// them); the rest of the model stands.
    fn update_members(&self, model: &Model, pools: &HashSet<PoolId>);

    /// The provider's current status.
    fn status(&self) -> Status {
        Status::default()
    }

    /// A receiver that changes whenever [`Provider::status`] may have changed; `None` when it
    /// never does.
    fn subscribe(&self) -> Option<watch::Receiver<u64>> {
        None
    }
}
