//! Pure: several load balancers served on one address become one, as if their listeners'
//! policies had been concatenated in load-balancer order and ordered again: on equal keys the
//! first load balancer wins, and so it does for the default pool and for an SNI host.

use crate::{Listener, LoadBalancer, order};
use std::collections::BTreeSet;
use std::sync::Arc;

/// `lbs` (non-empty, in the order that decides ties) as one load balancer with the first one's
/// id, name, class, provider and VIP.
pub fn merge(lbs: &[&LoadBalancer]) -> Option<LoadBalancer> {
    let (first, rest) = lbs.split_first()?;
    if rest.is_empty() {
        return Some((*first).clone());
    }
    let mut listeners: Vec<Listener> = first.listeners.as_ref().clone();
    for lb in rest {
        for other in lb.listeners.iter() {
            match listeners.iter_mut().find(|l| l.protocol == other.protocol) {
                Some(listener) => absorb(listener, other),
                None => listeners.push(other.clone()),
            }
        }
    }
    for listener in &mut listeners {
        order::sort(&mut listener.policies);
    }
    let mut pools = Vec::new();
    let mut seen = BTreeSet::new();
    for pool in lbs.iter().flat_map(|lb| &lb.pools) {
        if seen.insert(pool.id) {
            pools.push(pool.clone());
        }
    }
    pools.sort_by_key(|p| p.id);
    Some(LoadBalancer {
        listeners: Arc::new(listeners),
        pools,
        ..(*first).clone()
    })
}

/// `other`'s policies after `listener`'s; its default pool and certificates where `listener`
/// has none.
fn absorb(listener: &mut Listener, other: &Listener) {
    listener.policies.extend(other.policies.iter().cloned());
    if listener.default_pool.is_none() {
        listener.default_pool = other.default_pool;
        listener.default_source.clone_from(&other.default_source);
    }
    match (&mut listener.tls, &other.tls) {
        (Some(tls), Some(more)) => {
            if tls.default_certificate.is_none() {
                tls.default_certificate
                    .clone_from(&more.default_certificate);
            }
            for sni in &more.sni {
                if !tls.sni.iter().any(|s| s.host == sni.host) {
                    tls.sni.push(sni.clone());
                }
            }
            tls.sni.sort_by(|a, b| a.host.cmp(&b.host));
            for entry in &more.passthrough {
                if !tls.passthrough.iter().any(|p| p.host == entry.host) {
                    tls.passthrough.push(entry.clone());
                }
            }
            tls.passthrough.sort_by(|a, b| a.host.cmp(&b.host));
            for host in &more.refused {
                if !tls.refused.contains(host) {
                    tls.refused.push(host.clone());
                }
            }
            tls.refused.sort();
            tls.http3_off |= more.http3_off;
        }
        (None, Some(more)) => listener.tls = Some(more.clone()),
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{
        CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, ListenerId, ListenerTls,
        LoadBalancerId, ObjectRef, PolicyAction, PoolId, Protocol, RuleType, SniPassthrough,
    };

    fn policy(lb: &str, host: &str, path: &str, pool: &str) -> L7Policy {
        let id = L7PolicyId::derive(&format!("{lb}/{host}{path}"));
        let rule = |t, c, v: &str| L7Rule {
            id: L7RuleId::derive(&format!("{id}/{v}")),
            rule_type: t,
            compare_type: c,
            key: None,
            value: v.to_owned(),
        };
        L7Policy {
            id,
            action: PolicyAction::RedirectToPool {
                pool: PoolId::derive(pool),
            },
            rules: vec![
                rule(RuleType::HostName, CompareType::EqualTo, host),
                rule(RuleType::Path, CompareType::PathPrefix, path),
            ],
            source: Arc::new(ObjectRef::new("Ingress", "default", lb)),
            precedence: 0,
            options: None,
        }
    }

    fn lb(name: &str, policies: Vec<L7Policy>, default: Option<&str>) -> LoadBalancer {
        LoadBalancer {
            id: LoadBalancerId::derive(name),
            name: name.into(),
            origin: ObjectRef::new("IngressClass", "", name),
            provider: "haproxy".into(),
            vip: None,
            floating_ip: None,
            listeners: Arc::new(vec![Listener {
                id: ListenerId::derive(&format!("{name}/http")),
                name: "HTTP:80".into(),
                protocol: Protocol::Http,
                port: 80,
                policies: policies.into_iter().map(Arc::new).collect(),
                default_pool: default.map(PoolId::derive),
                default_source: None,
                tls: None,
            }]),
            pools: vec![],
        }
    }

    fn routes(lb: &LoadBalancer) -> Vec<(String, u32, String)> {
        lb.listeners[0]
            .policies
            .iter()
            .enumerate()
            .map(|(position, p)| {
                let host = p.rules[0].value.clone();
                let path = p.rules[1].value.clone();
                let position = u32::try_from(position).unwrap();
                (format!("{host}{path}"), position, p.source.name.clone())
            })
            .collect()
    }

    #[test]
    fn merged_listeners_are_in_evaluation_order_and_the_first_wins_ties() {
        let a = lb(
            "a",
            vec![
                policy("a", "x.test", "/", "pa"),
                policy("a", "y.test", "/", "pa"),
            ],
            None,
        );
        let b = lb(
            "b",
            vec![
                policy("b", "a.test", "/api", "pb"),
                policy("b", "x.test", "/", "pb"),
            ],
            Some("pb"),
        );
        let merged = merge(&[&a, &b]).unwrap();
        assert_eq!(merged.id, a.id);
        assert_eq!(
            routes(&merged),
            [
                ("a.test/api".to_owned(), 0, "b".to_owned()),
                ("x.test/".to_owned(), 1, "a".to_owned()),
                ("x.test/".to_owned(), 2, "b".to_owned()),
                ("y.test/".to_owned(), 3, "a".to_owned()),
            ]
        );
        assert_eq!(merged.listeners[0].default_pool, Some(PoolId::derive("pb")));
        assert_eq!(merge(&[&a]).unwrap(), a);
        assert!(merge(&[]).is_none());
    }

    #[test]
    fn merged_passthrough_hosts_are_ordered_and_the_first_load_balancer_keeps_a_shared_host() {
        let with = |name: &str, hosts: &[(&str, &str)]| {
            let mut lb = lb(name, vec![], None);
            let listeners = Arc::make_mut(&mut lb.listeners);
            listeners[0].tls = Some(ListenerTls {
                passthrough: hosts
                    .iter()
                    .map(|(host, pool)| SniPassthrough {
                        host: (*host).into(),
                        pool: PoolId::derive(pool),
                        source: ObjectRef::new("Ingress", "default", name),
                        terminate: false,
                    })
                    .collect(),
                ..ListenerTls::default()
            });
            lb
        };
        let a = with("a", &[("y.test", "pa")]);
        let b = with("b", &[("x.test", "pb"), ("y.test", "pb")]);
        let merged = merge(&[&a, &b]).unwrap();
        let tls = merged.listeners[0].tls.as_ref().unwrap();
        let hosts: Vec<_> = (tls.passthrough.iter())
            .map(|p| (p.host.as_str(), p.source.name.as_str()))
            .collect();
        assert_eq!(hosts, [("x.test", "b"), ("y.test", "a")]);
    }
}
