//! What the controller is told about itself: its controller name, class and defaults.

use crate::ObjectKey;
use crate::address::Cidr;

/// The `spec.controller` of IngressClasses this controller serves.
pub const CONTROLLER_NAME: &str = "portico.dev/ingress-controller";
/// The default `spec.controllerName` of GatewayClasses this controller serves
/// (`--gateway-controller-name`).
pub const GATEWAY_CONTROLLER_NAME: &str = "portico.dev/gateway-controller";
/// IngressClass annotation marking the class assigned to Ingresses that name none.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// Deprecated Ingress annotation naming its class; honoured when `spec.ingressClassName` is unset.
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// IngressClass annotation choosing the provider type of its load balancer.
pub const PROVIDER_ANNOTATION: &str = "portico.dev/provider";
/// IngressClass annotation: `shared` (one load balancer for the class, the default) or
/// `dedicated` (one load balancer per Ingress, named `ingress/<namespace>/<name>`).
pub const TOPOLOGY_ANNOTATION: &str = "portico.dev/topology";
/// Ingress annotation: `"false"` keeps its TLS hosts' HTTP requests on HTTP (default `"true"`:
/// they are redirected to HTTPS with a 308).
pub const SSL_REDIRECT_ANNOTATION: &str = "portico.dev/ssl-redirect";

/// The `spec.loadBalancerClass` of Services Portico's `l4` provider serves.
pub const L4_CLASS: &str = "portico.dev/l4";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// IngressClasses whose `spec.controller` equals this are ours.
    pub controller: String,
    /// A class served even when no IngressClass object names it (`--ingress-class`).
    pub ingress_class: String,
    /// GatewayClasses whose `spec.controllerName` equals this are ours
    /// (`--gateway-controller-name`).
    pub gateway_controller: String,
    /// Provider of load balancers whose IngressClass has no `portico.dev/provider` annotation.
    pub default_provider: String,
    /// Port of every load balancer's HTTP listener.
    pub http_port: u16,
    /// Port of every load balancer's TERMINATED_HTTPS listener.
    pub https_port: u16,
    /// The Secret whose certificate TLS handshakes get when no SNI entry matches
    /// (`--default-certificate`); none: the data plane's generated self-signed one.
    pub default_certificate: Option<ObjectKey>,
    /// Where load balancers without a `portico.dev/vip` get their VIP (`--vip-pool`).
    pub vip_pool: Option<Cidr>,
    /// Where load balancers get their floating IP unless it is pinned (`--fip-pool`).
    pub fip_pool: Option<Cidr>,
    /// Services of type LoadBalancer without `spec.loadBalancerClass` become `l4` load
    /// balancers too (`--l4-all-services`); those of class [`L4_CLASS`] always do.
    pub l4_all_services: bool,
    /// The Service that answers requests no rule matches, in place of the data plane's own
    /// 404, and serves the `custom-http-errors` pages of Ingresses without a
    /// `default-backend` (`--default-backend-service`).
    pub default_backend: Option<ObjectKey>,
    /// The codes whose answers the controller-wide default backend replaces with its page for
    /// every Ingress without a `custom-http-errors` of its own (`--custom-http-errors`, the
    /// ingress-nginx ConfigMap key of that name); empty: none.
    pub custom_errors: Vec<u16>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            controller: CONTROLLER_NAME.to_owned(),
            ingress_class: "portico".to_owned(),
            gateway_controller: GATEWAY_CONTROLLER_NAME.to_owned(),
            default_provider: "proxy".to_owned(),
            http_port: 80,
            https_port: 443,
            default_certificate: None,
            vip_pool: None,
            fip_pool: None,
            l4_all_services: false,
            default_backend: None,
            custom_errors: Vec::new(),
        }
    }
}
