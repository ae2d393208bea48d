//! The load-balancer model: LoadBalancer, Listener, L7Policy, L7Rule, Pool and Member, with
//! stable UUIDv5 ids, per-object diagnostics and `diff(old, new)`.
//!
//! This crate is types and pure functions only. It must not depend on tokio, kube, hyper, etcd
//! or any Kubernetes type: every other crate may depend on it.

mod credentials;
mod diagnostic;
mod diff;
pub mod filters;
mod id;
mod limits;
pub mod matching;
mod merge;
mod object;
mod options;
pub mod order;
mod placement;
mod rebuilt;
mod settings;
mod tree;
pub mod trim;

pub use credentials::{Credentials, Htpasswd, HtpasswdError, PasswordHash};
pub use diagnostic::{Diagnostic, Escaped, MAX_OBJECT_DIAGNOSTICS, Severity, cap_per_object};
pub use diff::{Change, ChangeKind, ElementKind, diff};
pub use filters::{HeaderChanges, Mirror, Origin, PathRewrite, Redirect, Timeouts};
pub use id::{L7PolicyId, L7RuleId, ListenerId, LoadBalancerId, MemberId, PoolId, stable_uuid};
pub use limits::{Limits, Tracing};
pub use merge::merge;
pub use object::ObjectRef;
pub use options::{
    BasicAuth, Coding, Compression, Cors, ErrorPages, ExternalAuth, Hsts, PolicyOptions, RateLimit,
    Rewrite,
};
pub use placement::Placement;
pub use rebuilt::{Rebuilt, RebuiltListeners};
pub use settings::{
    ActiveHealth, Cidr, CidrError, CookieAffinity, PassiveHealth, PoolSettings, ProxyProtocol,
    SubjectAltName, UpstreamTls,
};
pub use tree::{
    Algorithm, CompareType, HashKey, L7Policy, L7Rule, Listener, ListenerTls, LoadBalancer, Member,
    Model, PolicyAction, Pool, PoolProtocol, Protocol, RuleType, SniCertificate, SniPassthrough,
    WeightedPool,
};
