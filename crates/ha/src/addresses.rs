//! Which addresses an agent may have on its interface: the VIP and floating IP of each load
//! balancer whose claim it holds, and no other. An agent killed with SIGKILL leaves its
//! addresses there; when it starts again, those of any load balancer it knows (placed on it or
//! not: its load balancers may have been placed elsewhere meanwhile) are strays, removed
//! before it holds anything.

use portico_model::{LoadBalancer, LoadBalancerId};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The addresses the active agent of `lb` holds: its VIP and floating IP, sorted.
pub fn of(lb: &LoadBalancer) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = lb.vip.into_iter().chain(lb.floating_ip).collect();
    out.sort();
    out.dedup();
    out
}

/// The addresses of `present` (on the interface now) to remove: each that is an address of
/// one of `load_balancers` and of none of those in `held`. An address no load balancer names
/// is not the agent's to remove (the node's own, or another program's).
pub fn strays<'a>(
    load_balancers: impl IntoIterator<Item = &'a LoadBalancer>,
    held: &BTreeSet<LoadBalancerId>,
    present: &[IpAddr],
) -> Vec<IpAddr> {
    let mut known = BTreeSet::new();
    let mut kept = BTreeSet::new();
    for lb in load_balancers {
        let into = if held.contains(&lb.id) {
            &mut kept
        } else {
            &mut known
        };
        into.extend(of(lb));
    }
    let mut out: Vec<IpAddr> = (present.iter())
        .filter(|a| known.contains(*a) && !kept.contains(*a))
        .copied()
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn lb(name: &str, vip: &str, fip: Option<&str>) -> LoadBalancer {
        LoadBalancer {
            id: LoadBalancerId::derive(name),
            name: name.into(),
            origin: portico_model::ObjectRef::new("Ingress", "default", name),
            provider: "proxy".into(),
            vip: Some(vip.parse().unwrap()),
            floating_ip: fip.map(|f| f.parse().unwrap()),
            listeners: Default::default(),
            pools: vec![],
        }
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn every_known_address_not_held_is_a_stray() {
        let lbs = [
            lb("a", "198.18.0.1", Some("198.19.0.1")),
            lb("b", "198.18.0.2", Some("198.19.0.2")),
        ];
        let present = ips(&["10.0.0.5", "198.18.0.1", "198.19.0.1", "198.18.0.2"]);
        assert_eq!(
            strays(&lbs, &BTreeSet::new(), &present),
            ips(&["198.18.0.1", "198.18.0.2", "198.19.0.1"]),
            "nothing held: every load balancer's address goes, the node's own stays"
        );
        let held = BTreeSet::from([LoadBalancerId::derive("a")]);
        assert_eq!(strays(&lbs, &held, &present), ips(&["198.18.0.2"]));
    }

    #[test]
    fn an_address_shared_with_a_held_load_balancer_stays() {
        let lbs = [
            lb("a", "198.18.0.1", None),
            lb("b", "198.18.0.1", Some("198.19.0.2")),
        ];
        let present = ips(&["198.18.0.1", "198.19.0.2"]);
        let held = BTreeSet::from([LoadBalancerId::derive("a")]);
        assert_eq!(strays(&lbs, &held, &present), ips(&["198.19.0.2"]));
    }

    #[test]
    fn addresses_not_on_the_interface_are_not_strays() {
        let lbs = [lb("a", "fd00::1", Some("198.19.0.1"))];
        assert!(strays(&lbs, &BTreeSet::new(), &[]).is_empty());
        assert_eq!(
            strays(&lbs, &BTreeSet::new(), &ips(&["fd00::1"])),
            ips(&["fd00::1"])
        );
    }
}
