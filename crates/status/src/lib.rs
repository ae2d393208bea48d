//! What Portico shows about what it serves, as plain types: the snapshot per configuration
//! generation (model, Ingress views with their status addresses and diagnostics, readiness).
//! The admin API serves it and the reporter writes it to the Kubernetes API; both depend on
//! this crate, not on each other.
//!
//! Types only: it depends on the model, the Gateway API types and serde, on no I/O crate.

use portico_model::{Diagnostic, LoadBalancerId, Model, Placement};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One pool's members and their health as a data plane sees them now
/// (`GET /api/v1/pools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolHealthView {
    pub id: String,
    pub name: String,
    pub provider: String,
    pub members: Vec<MemberHealthView>,
}

/// One member of a [`PoolHealthView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberHealthView {
    /// `address:port`.
    pub address: String,
    /// `healthy`, `ejected` (passive health) or `failing_checks` (active health).
    pub health: String,
    /// While ejected: how much longer, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ejected_for_ms: Option<u64>,
}

/// What the admin API shows for one configuration generation.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub generation: u64,
    /// True once the first complete sync is being served.
    pub ready: bool,
    pub model: Arc<Model>,
    /// Where each load balancer runs (active-standby), as the store records it.
    pub placements: Arc<BTreeMap<LoadBalancerId, Placement>>,
    /// Shared: a snapshot after an endpoint change shows the same Ingresses as the last one.
    pub ingresses: Arc<Vec<IngressView>>,
    /// Services of type LoadBalancer served by provider `l4`, with the status they should have.
    pub services: Vec<ServiceView>,
    /// Diagnostics about objects that are not Ingresses (files, Services, …).
    pub diagnostics: Vec<Diagnostic>,
    /// The Gateway API objects with the status Portico would write (ours computed, others' as
    /// read). Shared, like `ingresses`.
    pub gateway_api: Arc<portico_gateway::Statuses>,
    /// Lines `/readyz` adds to its answer (e.g. an agent that does not reach its store).
    pub detail: Vec<String>,
    /// When this generation was first published to the admin API (set by the admin API when
    /// the generation changes; a republished generation keeps its time).
    pub applied_at: Option<std::time::SystemTime>,
}

/// One Ingress as `GET /api/v1/ingresses` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressView {
    pub namespace: String,
    pub name: String,
    pub ingress_class_name: Option<String>,
    /// Whether this controller serves the Ingress (its class is ours).
    pub owned: bool,
    pub status: IngressStatusView,
    pub diagnostics: Vec<Diagnostic>,
}

/// One Service of type LoadBalancer as `GET /api/v1/services` shows it: its load balancer's
/// VIP and floating IP once an agent serves it, else no address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    /// `status.loadBalancer` as Portico writes it (the same shape as an Ingress's).
    pub status: IngressStatusView,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressStatusView {
    pub load_balancer: LoadBalancerStatusView,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadBalancerStatusView {
    pub ingress: Vec<LoadBalancerAddress>,
}

/// `status.loadBalancer.ingress[]` entry: an IP or a hostname.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadBalancerAddress {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

impl ServiceView {
    pub fn new(namespace: String, name: String, addresses: Vec<LoadBalancerAddress>) -> Self {
        let load_balancer = LoadBalancerStatusView { ingress: addresses };
        ServiceView {
            namespace,
            name,
            status: IngressStatusView { load_balancer },
        }
    }
}

impl IngressView {
    pub fn new(
        namespace: String,
        name: String,
        ingress_class_name: Option<String>,
        owned: bool,
        addresses: Vec<LoadBalancerAddress>,
        diagnostics: Vec<Diagnostic>,
    ) -> Self {
        IngressView {
            namespace,
            name,
            ingress_class_name,
            owned,
            status: IngressStatusView {
                load_balancer: LoadBalancerStatusView { ingress: addresses },
            },
            diagnostics,
        }
    }
}
