//! The model tree, in the seed's vocabulary (Neutron LBaaS / Contrail load-balancer objects).

use crate::{
    L7PolicyId, L7RuleId, ListenerId, LoadBalancerId, MemberId, ObjectRef, PolicyOptions, PoolId,
    PoolSettings,
};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::sync::Arc;

/// Everything Portico serves: one entry per LoadBalancer, ordered by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub load_balancers: Vec<LoadBalancer>,
}

/// One load balancer: in the shared-router topology, one per IngressClass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer {
    pub id: LoadBalancerId,
    /// Readable name, e.g. `ingressclass/portico`.
    pub name: String,
    /// What this load balancer was made for: an IngressClass (shared topology), an Ingress
    /// (dedicated topology) or a Service (L4). Its problems are reported there.
    pub origin: ObjectRef,
    /// Provider type that serves it (`proxy`, `haproxy`, `l4`).
    pub provider: String,
    /// Internal virtual IP, where one is assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<IpAddr>,
    /// External floating IP (from a pool or pinned), where one is assigned: the address
    /// clients outside reach; the active agent of the pair holds it with the VIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floating_ip: Option<IpAddr>,
    /// Shared: the endpoint fast path gives a load balancer new pools without copying its
    /// listeners and their policies.
    pub listeners: Arc<Vec<Listener>>,
    /// Pools referenced by this load balancer's listeners, ordered by id. Shared: a new model
    /// keeps the previous one's pools that did not change (the endpoint fast path copies
    /// pointers, not 5,000 pools).
    pub pools: Vec<Arc<Pool>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Protocol {
    Http,
    TerminatedHttps,
    Tcp,
    Udp,
}

/// A listening port of a load balancer with its L7 policies in evaluation order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    pub id: ListenerId,
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
    /// Policies in evaluation order: the first policy whose rules all match decides; a
    /// policy's position is its index here (serialized as each policy's `position`). Shared:
    /// the translation's memos, the model, the store's decoder and the data planes hold one
    /// copy of each policy, and assembling a listener copies pointers.
    #[serde(serialize_with = "positioned")]
    pub policies: Vec<Arc<L7Policy>>,
    /// Where a request goes when no policy matches (the Ingress defaultBackend); none means 404.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_pool: Option<PoolId>,
    /// The Ingress whose defaultBackend became `default_pool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_source: Option<ObjectRef>,
    /// TERMINATED_HTTPS listeners: which certificate each TLS handshake gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
}

/// The certificates of a TERMINATED_HTTPS listener, as references to Secrets: key material
/// never enters the model (the admin API serves it as JSON); data planes get it apart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListenerTls {
    /// For handshakes that no SNI entry matches (no SNI, or an unknown name); none means the
    /// data plane's own self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_certificate: Option<ObjectRef>,
    /// One entry per SNI host, ordered by host. A handshake gets the entry of its exact name,
    /// else that of the wildcard one label above it, else the default certificate; so does an
    /// entry whose Secret has no usable certificate.
    pub sni: Vec<SniCertificate>,
    /// SNI hosts whose TLS is not terminated here: the raw stream goes to a member of the
    /// pool, which holds the certificate. Ordered by host; checked before `sni`, with the same
    /// matching (exact, else the wildcard one label above), plus `*.suffix` entries of the
    /// Gateway API matching any number of labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passthrough: Vec<SniPassthrough>,
    /// SNI hosts (`name`, or `*.suffix` matching any number of labels) of TLS listeners of
    /// `tls.mode: Terminate`: a handshake for a name they cover that no `passthrough` entry
    /// takes (a host no TLSRoute serves) is refused, its connection closed, rather than served
    /// as HTTPS. Ordered, lower-cased.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// HTTP/3 is not served beside this listener (its IngressClass's `portico.dev/http3:
    /// "false"`); on an address shared by several load balancers, one that says so turns it
    /// off for the address.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http3_off: bool,
}

/// An SNI host and the Secret (`kubernetes.io/tls`) that holds its certificate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SniCertificate {
    /// Lower-cased host name, or `*.suffix` for a wildcard that matches one label.
    pub host: String,
    pub certificate: ObjectRef,
    /// The Ingress whose `spec.tls` named it.
    pub source: ObjectRef,
}

/// An SNI host whose TLS connections go, as a byte stream, to a pool's members: unterminated
/// (the member holds the certificate), or with `terminate`, decrypted here first (the
/// listener's SNI certificates answer the handshake, as for HTTPS) and the plain stream sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SniPassthrough {
    /// Lower-cased host name, or `*.suffix` for a wildcard.
    pub host: String,
    pub pool: PoolId,
    /// The Ingress (`ssl-passthrough`) or TLSRoute that asked for it.
    pub source: ObjectRef,
    /// TLS is terminated here and the decrypted stream goes to the pool (a TLSRoute on a TLS
    /// listener of `tls.mode: Terminate`); otherwise the raw TLS stream does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminate: bool,
}

/// What a matching policy does with the request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PolicyAction {
    RedirectToPool {
        pool: PoolId,
    },
    Reject {
        status: u16,
    },
    /// Answer `status` (a redirect code) with `Location` set to the same host, path and query
    /// on the load balancer's TERMINATED_HTTPS listener.
    RedirectToHttps {
        status: u16,
    },
    /// Answer `status` (a redirect code) with `Location: url`; a `url` that starts with `/` is
    /// on the request's own scheme and host (`app-root`).
    RedirectToUrl {
        status: u16,
        url: String,
    },
    /// Forward each request to one of several pools, drawn in proportion to their weights (a
    /// Gateway API rule's backendRefs). A share without a pool (a backend that does not
    /// resolve) answers 500; shares of weight 0 get nothing, and when every weight is 0 the
    /// answer is 500.
    RedirectToPools {
        pools: Vec<WeightedPool>,
    },
    /// Answer with a redirect whose `Location` is made from the request (a Gateway API
    /// RequestRedirect filter).
    RequestRedirect(crate::Redirect),
}

/// One share of a [`PolicyAction::RedirectToPools`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WeightedPool {
    /// None: this share answers 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolId>,
    pub weight: u32,
    /// The options of the requests this share forwards, instead of the policy's (a Gateway
    /// API backendRef's filters, with its rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Arc<PolicyOptions>>,
}

impl L7Policy {
    /// Every pool the policy may send a request to, its mirrors' and error pages' included.
    pub fn pools(&self) -> impl Iterator<Item = PoolId> + '_ {
        let shares = match &self.action {
            PolicyAction::RedirectToPools { pools } => &pools[..],
            _ => &[][..],
        };
        let options = (self.options.iter()).chain(shares.iter().filter_map(|s| s.options.as_ref()));
        let mirrors = options.flat_map(|o| {
            let errors = o.errors.as_ref().map(|e| e.pool);
            o.mirrors.iter().map(|m| m.pool).chain(errors)
        });
        self.action.pools().chain(mirrors)
    }
}

impl PolicyAction {
    /// Every pool the action may send a request to.
    pub fn pools(&self) -> impl Iterator<Item = PoolId> + '_ {
        let (one, many) = match self {
            PolicyAction::RedirectToPool { pool } => (Some(*pool), &[][..]),
            PolicyAction::RedirectToPools { pools } => (None, &pools[..]),
            _ => (None, &[][..]),
        };
        one.into_iter().chain(many.iter().filter_map(|w| w.pool))
    }
}

/// An ordered routing decision: all rules must match (logical AND).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct L7Policy {
    pub id: L7PolicyId,
    pub action: PolicyAction,
    pub rules: Vec<L7Rule>,
    /// The Ingress (or HTTPRoute) this policy comes from. Shared: every policy of an Ingress,
    /// on both listeners, points at one reference (serialized as the reference itself).
    pub source: Arc<ObjectRef>,
    /// What it changes in the requests it forwards (and CORS); none for most policies.
    /// Shared by the policies of one Ingress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Arc<PolicyOptions>>,
    /// Among policies whose rules tie in [`crate::order::key`] (same host, path and number of
    /// header rules), the lower goes first: the Gateway API's order of routes (oldest first,
    /// then by namespace and name) and of their rules and matches. 0 for Ingresses, whose
    /// policies never tie.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub precedence: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// A listener's policies as JSON: each with its zero-based `position` in the evaluation order
/// after its id (read back, the position is ignored: the index is the position).
fn positioned<S: serde::Serializer>(
    policies: &[Arc<L7Policy>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::{SerializeSeq, SerializeStruct};
    struct At<'p>(usize, &'p L7Policy);
    impl Serialize for At<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let At(position, p) = *self;
            let mut out = serializer.serialize_struct("L7Policy", 7)?;
            out.serialize_field("id", &p.id)?;
            out.serialize_field("position", &u32::try_from(position).unwrap_or(u32::MAX))?;
            out.serialize_field("action", &p.action)?;
            out.serialize_field("rules", &p.rules)?;
            out.serialize_field("source", &p.source)?;
            match &p.options {
                Some(options) => out.serialize_field("options", options)?,
                None => out.skip_field("options")?,
            }
            if is_zero(&p.precedence) {
                out.skip_field("precedence")?;
            } else {
                out.serialize_field("precedence", &p.precedence)?;
            }
            out.end()
        }
    }
    let mut seq = serializer.serialize_seq(Some(policies.len()))?;
    for (position, policy) in policies.iter().enumerate() {
        seq.serialize_element(&At(position, policy))?;
    }
    seq.end()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RuleType {
    /// Compares the request host, lower-cased and without port.
    HostName,
    /// Compares the request path, without query.
    Path,
    /// Compares the value of the request header that [`L7Rule::key`] names (case-insensitive
    /// name); the rule matches when any field of that name has the value (`EQUAL_TO`) or
    /// matches the expression (`REGEX`, see [`CompareType::Regex`]).
    Header,
    /// Compares the value of the query parameter that [`L7Rule::key`] names (case-sensitive
    /// name, as written in the query without decoding); the first parameter of that name counts.
    Query,
    /// Compares the request method (`EQUAL_TO` only), case-sensitive.
    Method,
    /// Compares the value of the request cookie that [`L7Rule::key`] names (case-sensitive);
    /// `EQUAL_TO` only.
    Cookie,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompareType {
    /// Whole value, case-sensitive for paths, lower-cased for hosts.
    EqualTo,
    /// Element-wise path prefix on `/`; the value is stored without trailing slash (`/` for root).
    PathPrefix,
    /// Host wildcard: the value is the suffix after `*.` and exactly one extra label must precede it.
    WildcardLabel,
    /// Host wildcard of the Gateway API: the value is the suffix after `*.` and one or more
    /// labels must precede it (`*.foo.com` matches `a.foo.com` and `a.b.foo.com`, not `foo.com`).
    WildcardSuffix,
    /// Regular expression (the `regex` crate's syntax), case-insensitive and anchored at the
    /// value's start only, as ingress-nginx's `use-regex` locations (`~* "^value"`); for paths,
    /// and for header and query values. A translator that wants a whole, case-sensitive match
    /// writes it so (`(?-i:pattern)$`).
    Regex,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct L7Rule {
    pub id: L7RuleId,
    #[serde(rename = "type")]
    pub rule_type: RuleType,
    pub compare_type: CompareType,
    /// The header name of a `HEADER` rule (lower-case), the parameter name of a `QUERY` rule
    /// or the cookie name of a `COOKIE` rule; none for the other types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub value: String,
}

/// How a pool picks the member of each request.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Algorithm {
    /// Smooth weighted round robin over the members' weights (equal weights: plain rotation).
    #[default]
    RoundRobin,
    /// Least request: of two members drawn at random, the one with the lower latency EWMA
    /// times (requests in flight + 1).
    LeastRequest,
    /// Consistent hashing of a request key: a key keeps its member while that member stays,
    /// and a change of members moves as few keys as possible.
    Hash(HashKey),
}

/// What [`Algorithm::Hash`] hashes. A request without the key (no such header or cookie)
/// falls back to round robin.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HashKey {
    /// A request header's value; the name is lower-case.
    Header(String),
    /// A request cookie's value.
    Cookie(String),
    /// The client's address (the TCP peer; without port).
    ClientAddress,
    /// The request target as received: path and query.
    RequestUri,
}

/// The protocol between the data plane and a pool's members.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PoolProtocol {
    /// HTTP/1.1.
    #[default]
    Http,
    /// HTTP/2 over cleartext with prior knowledge (the Service port's `appProtocol` is
    /// `kubernetes.io/h2c` or `h2c`); what gRPC backends speak.
    H2c,
    /// HTTP/1.1 over TLS (`backend-protocol: HTTPS`); see [`PoolSettings::upstream_tls`].
    Https,
    /// HTTP/2 over TLS, negotiated by ALPN `h2` (`backend-protocol: GRPCS`).
    H2,
}

impl PoolProtocol {
    /// Whether connections to the members use TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, PoolProtocol::Https | PoolProtocol::H2)
    }

    /// Whether requests to the members use HTTP/2.
    pub fn is_h2(self) -> bool {
        matches!(self, PoolProtocol::H2c | PoolProtocol::H2)
    }
}

/// The endpoints of one Service port, named `namespace_service_port` as in the seeds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pool {
    pub id: PoolId,
    pub name: String,
    pub service: ObjectRef,
    /// The Service port as the Ingress named it (a number or a port name).
    pub service_port: String,
    pub algorithm: Algorithm,
    /// How the data plane talks to the members.
    #[serde(default)]
    pub protocol: PoolProtocol,
    /// Per-pool settings from the Ingress's annotations; the default is the data plane's own
    /// (the `Limits` flags, passive health on, three tries). Shared: the pools of one
    /// Ingress's annotations, and every pool with the default settings, point at one copy,
    /// and so does the proxy's state of the pool (5,000 copies of 360 bytes cost megabytes).
    #[serde(default, skip_serializing_if = "default_settings")]
    pub settings: Arc<PoolSettings>,
    /// Members ordered by (address, port).
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Member {
    pub id: MemberId,
    pub address: IpAddr,
    pub port: u16,
    pub weight: u32,
    pub ready: bool,
}

fn default_settings(settings: &Arc<PoolSettings>) -> bool {
    settings.is_default()
}

impl Model {
    pub fn load_balancer(&self, id: LoadBalancerId) -> Option<&LoadBalancer> {
        self.load_balancers.iter().find(|lb| lb.id == id)
    }
}

impl LoadBalancer {
    /// The IngressClass it serves, when it was made for one.
    pub fn ingress_class(&self) -> Option<&str> {
        (self.origin.kind == "IngressClass").then_some(self.origin.name.as_str())
    }

    pub fn pool(&self, id: PoolId) -> Option<&Pool> {
        self.pools.iter().find(|p| p.id == id).map(|p| &**p)
    }
}
