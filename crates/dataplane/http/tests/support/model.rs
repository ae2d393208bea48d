//! Building models by hand: one `proxy` LoadBalancer with one HTTP listener.

use portico_model::{
    Algorithm, CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId,
    LoadBalancer, LoadBalancerId, Member, MemberId, Model, ObjectRef, PolicyAction, Pool, PoolId,
    Protocol, RuleType,
};
use std::net::SocketAddr;

fn rule(rule_type: RuleType, compare_type: CompareType, value: &str) -> L7Rule {
    let id = L7RuleId::derive(&format!("{rule_type:?}/{compare_type:?}/{value}"));
    L7Rule {
        id,
        rule_type,
        compare_type,
        value: value.to_owned(),
    }
}

/// A host rule: `*.foo.com` becomes a wildcard rule on `foo.com`, anything else an exact one.
pub fn host(value: &str) -> L7Rule {
    match value.strip_prefix("*.") {
        Some(suffix) => rule(RuleType::HostName, CompareType::WildcardLabel, suffix),
        None => rule(RuleType::HostName, CompareType::EqualTo, value),
    }
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
    default_pool: Option<PoolId>,
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
            members,
        };
        self.pools.push(pool);
        id
    }

    pub fn policy(&mut self, rules: Vec<L7Rule>, pool: PoolId) -> &mut Self {
        self.action(rules, PolicyAction::RedirectToPool { pool })
    }

    pub fn action(&mut self, rules: Vec<L7Rule>, action: PolicyAction) -> &mut Self {
        let position = self.policies.len() as u32;
        let id = L7PolicyId::derive(&format!("{}/{position}", self.name));
        let source = ObjectRef::new("Ingress", "default", &self.name);
        self.policies.push(L7Policy {
            id,
            position,
            action,
            rules,
            source,
        });
        self
    }

    pub fn default_pool(&mut self, pool: PoolId) -> &mut Self {
        self.default_pool = Some(pool);
        self
    }

    pub fn load_balancer(&self) -> LoadBalancer {
        let listener = Listener {
            id: ListenerId::derive(&format!("{}/http", self.name)),
            name: "http".into(),
            protocol: Protocol::Http,
            port: 80,
            policies: self.policies.clone(),
            default_pool: self.default_pool,
            default_source: None,
        };
        LoadBalancer {
            id: LoadBalancerId::derive(&self.name),
            name: self.name.clone(),
            ingress_class: "portico".into(),
            provider: "proxy".into(),
            vip: None,
            listeners: vec![listener],
            pools: self.pools.clone(),
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
