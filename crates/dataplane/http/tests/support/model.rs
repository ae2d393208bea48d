//! Building models by hand: one `proxy` LoadBalancer with one HTTP listener.

use portico_model::{
    Algorithm, CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId,
    ListenerTls, LoadBalancer, LoadBalancerId, Member, MemberId, Model, ObjectRef, PolicyAction,
    Pool, PoolId, PoolProtocol, Protocol, RuleType, SniCertificate, SniPassthrough,
};
use std::net::SocketAddr;

fn rule(rule_type: RuleType, compare_type: CompareType, value: &str) -> L7Rule {
    let id = L7RuleId::derive(&format!("{rule_type:?}/{compare_type:?}/{value}"));
    L7Rule {
        id,
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    }
}

/// A host rule: `*.foo.com` becomes a wildcard rule on `foo.com` (one label), `**.foo.com` a
/// Gateway API suffix wildcard on `foo.com` (one or more labels), anything else an exact one.
pub fn host(value: &str) -> L7Rule {
    if let Some(suffix) = value.strip_prefix("**.") {
        return rule(RuleType::HostName, CompareType::WildcardSuffix, suffix);
    }
    match value.strip_prefix("*.") {
        Some(suffix) => rule(RuleType::HostName, CompareType::WildcardLabel, suffix),
        None => rule(RuleType::HostName, CompareType::EqualTo, value),
    }
}

/// A header rule: the field `name` (lower-case) has exactly `value`.
#[allow(dead_code)]
pub fn header(name: &str, value: &str) -> L7Rule {
    let mut rule = rule(RuleType::Header, CompareType::EqualTo, value);
    rule.id = L7RuleId::derive(&format!("header/{name}/{value}"));
    rule.key = Some(name.to_owned());
    rule
}

/// A query parameter condition.
pub fn query(name: &str, value: &str) -> L7Rule {
    let mut rule = rule(RuleType::Query, CompareType::EqualTo, value);
    rule.id = L7RuleId::derive(&format!("query/{name}/{value}"));
    rule.key = Some(name.to_owned());
    rule
}

/// A method condition.
pub fn method(value: &str) -> L7Rule {
    let mut rule = rule(RuleType::Method, CompareType::EqualTo, value);
    rule.id = L7RuleId::derive(&format!("method/{value}"));
    rule
}

pub fn exact(path: &str) -> L7Rule {
    rule(RuleType::Path, CompareType::EqualTo, path)
}

pub fn prefix(path: &str) -> L7Rule {
    rule(RuleType::Path, CompareType::PathPrefix, path)
}

/// Builds the model of one load balancer; policies keep the order they are added in.
#[derive(Debug, Default)]
pub struct ModelBuilder {
    name: String,
    pools: Vec<Pool>,
    policies: Vec<L7Policy>,
    /// Policies of the HTTP listener only, evaluated before the shared ones.
    http_only: Vec<L7Policy>,
    default_pool: Option<PoolId>,
    /// When set, a TERMINATED_HTTPS listener with the shared policies and these certificates.
    tls: Option<ListenerTls>,
}

impl ModelBuilder {
    pub fn new(name: &str) -> Self {
        ModelBuilder {
            name: name.to_owned(),
            ..Default::default()
        }
    }

    /// A pool whose members are all ready.
    pub fn pool(&mut self, name: &str, members: &[SocketAddr]) -> PoolId {
        let members: Vec<_> = members.iter().map(|m| (*m, true)).collect();
        self.pool_with(name, &members)
    }

    /// A pool whose members speak h2c.
    pub fn pool_h2c(&mut self, name: &str, members: &[SocketAddr]) -> PoolId {
        let id = self.pool(name, members);
        if let Some(pool) = self.pools.last_mut() {
            pool.protocol = PoolProtocol::H2c;
        }
        id
    }

    pub fn pool_with(&mut self, name: &str, members: &[(SocketAddr, bool)]) -> PoolId {
        let id = PoolId::derive(&format!("{}/{name}", self.name));
        let members = members
            .iter()
            .map(|&(addr, ready)| member(addr, ready))
            .collect();
        let service = ObjectRef::new("Service", "default", name);
        let pool = Pool {
            id,
            name: name.to_owned(),
            service,
            service_port: "80".into(),
            algorithm: Algorithm::RoundRobin,
            settings: Default::default(),
            protocol: PoolProtocol::Http,
            members,
        };
        self.pools.push(pool);
        id
    }

    pub fn policy(&mut self, rules: Vec<L7Rule>, pool: PoolId) -> &mut Self {
        self.action(rules, PolicyAction::RedirectToPool { pool })
    }

    pub fn action(&mut self, rules: Vec<L7Rule>, action: PolicyAction) -> &mut Self {
        let policy = self.new_policy(rules, action);
        self.policies.push(policy);
        self
    }

    /// A policy of the HTTP listener alone (e.g. a redirect to HTTPS).
    pub fn http_only(&mut self, rules: Vec<L7Rule>, action: PolicyAction) -> &mut Self {
        let policy = self.new_policy(rules, action);
        self.http_only.push(policy);
        self
    }

    fn new_policy(&self, rules: Vec<L7Rule>, action: PolicyAction) -> L7Policy {
        let position = (self.policies.len() + self.http_only.len()) as u32;
        let id = L7PolicyId::derive(&format!("{}/{position}", self.name));
        let source = std::sync::Arc::new(ObjectRef::new("Ingress", "default", &self.name));
        L7Policy {
            id,
            action,
            rules,
            source,
            precedence: 0,
            options: None,
        }
    }

    /// Adds a TERMINATED_HTTPS listener: SNI `(host, secret name)` entries, and the default
    /// certificate's secret name (Secrets in namespace `default`).
    pub fn tls(&mut self, sni: &[(&str, &str)], default: Option<&str>) -> &mut Self {
        let secret = |name: &str| ObjectRef::new("Secret", "default", name);
        let sni = sni.iter().map(|(host, name)| SniCertificate {
            host: (*host).to_owned(),
            certificate: secret(name),
            source: ObjectRef::new("Ingress", "default", &self.name),
        });
        self.tls = Some(ListenerTls {
            default_certificate: default.map(secret),
            sni: sni.collect(),
            passthrough: Vec::new(),
            refused: Vec::new(),
            http3_off: false,
        });
        self
    }

    /// Adds passthrough `(host, pool)` entries to the TERMINATED_HTTPS listener (made by
    /// [`ModelBuilder::tls`]).
    pub fn passthrough(&mut self, entries: &[(&str, PoolId)]) -> &mut Self {
        let source = ObjectRef::new("Ingress", "default", &self.name);
        let tls = self.tls.get_or_insert_with(ListenerTls::default);
        tls.passthrough
            .extend(entries.iter().map(|(host, pool)| SniPassthrough {
                host: (*host).to_owned(),
                pool: *pool,
                source: source.clone(),
                terminate: false,
            }));
        self
    }

    /// Adds `(host, pool)` entries whose TLS is terminated and whose stream goes to the pool,
    /// and `refused` hosts, to the TERMINATED_HTTPS listener.
    pub fn terminated(&mut self, entries: &[(&str, PoolId)], refused: &[&str]) -> &mut Self {
        let source = ObjectRef::new("TLSRoute", "default", &self.name);
        let tls = self.tls.get_or_insert_with(ListenerTls::default);
        tls.passthrough
            .extend(entries.iter().map(|(host, pool)| SniPassthrough {
                host: (*host).to_owned(),
                pool: *pool,
                source: source.clone(),
                terminate: true,
            }));
        tls.refused.extend(refused.iter().map(|h| (*h).to_owned()));
        self
    }

    pub fn default_pool(&mut self, pool: PoolId) -> &mut Self {
        self.default_pool = Some(pool);
        self
    }

    pub fn load_balancer(&self) -> LoadBalancer {
        let shared = |p: &L7Policy| std::sync::Arc::new(p.clone());
        let mut policies: Vec<_> = self.http_only.iter().map(shared).collect();
        policies.extend(self.policies.iter().map(shared));
        let listener = Listener {
            id: ListenerId::derive(&format!("{}/http", self.name)),
            name: "http".into(),
            protocol: Protocol::Http,
            port: 80,
            policies,
            default_pool: self.default_pool,
            default_source: None,
            tls: None,
        };
        let https = self.tls.as_ref().map(|tls| Listener {
            id: ListenerId::derive(&format!("{}/https", self.name)),
            name: "https".into(),
            protocol: Protocol::TerminatedHttps,
            port: 443,
            policies: self.policies.iter().map(shared).collect(),
            default_pool: self.default_pool,
            default_source: None,
            tls: Some(tls.clone()),
        });
        LoadBalancer {
            id: LoadBalancerId::derive(&self.name),
            name: self.name.clone(),
            origin: portico_model::ObjectRef::new("IngressClass", "", "portico"),
            provider: "proxy".into(),
            vip: None,
            floating_ip: None,
            listeners: std::sync::Arc::new(std::iter::once(listener).chain(https).collect()),
            pools: self
                .pools
                .iter()
                .cloned()
                .map(std::sync::Arc::new)
                .collect(),
        }
    }

    pub fn build(&self) -> Model {
        Model {
            load_balancers: vec![self.load_balancer()],
        }
    }
}

fn member(addr: SocketAddr, ready: bool) -> Member {
    let id = MemberId::derive(&addr.to_string());
    Member {
        id,
        address: addr.ip(),
        port: addr.port(),
        weight: 1,
        ready,
    }
}

/// A member address nobody serves on (routing tests never connect to it).
pub fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 8080))
}
