//! What the driver changes and what the light traffic requests, chosen up front (pure) so that
//! no request of the traffic ever targets a route that a change removes on purpose.

use crate::generate::Layout;
use std::collections::BTreeSet;

/// One Ingress change: route `route` of Ingress `ingress` moves to path `new_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressChange {
    pub ingress: usize,
    pub route: usize,
    pub new_path: String,
}

/// One endpoint change: Service `service`, observed through its route `route`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointChange {
    pub service: usize,
    pub route: usize,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub ingress_changes: Vec<IngressChange>,
    pub endpoint_changes: Vec<EndpointChange>,
    /// Routes (indexes) the traffic cycles over.
    pub traffic: Vec<usize>,
}

impl Plan {
    /// `changes` Ingresses and Services spread evenly over the cluster; the traffic requests
    /// the route of every changed Service (so an endpoint switch that drops requests shows)
    /// plus `spread` routes spread evenly, never a route an Ingress change removes.
    pub fn new(layout: &Layout, changes: usize, spread: usize) -> Self {
        let ingress_changes = ingress_changes(layout, changes);
        let removed: BTreeSet<usize> = ingress_changes.iter().map(|c| c.route).collect();
        let endpoint_changes = endpoint_changes(layout, changes, &removed);
        let paths = layout.sizes.paths;
        let mut traffic: Vec<usize> = endpoint_changes.iter().map(|c| c.route).collect();
        let spread = spread.min(paths);
        traffic.extend((0..spread).map(|m| m * paths / spread));
        traffic.retain(|k| !removed.contains(k));
        traffic.sort_unstable();
        traffic.dedup();
        Plan {
            ingress_changes,
            endpoint_changes,
            traffic,
        }
    }
}

fn ingress_changes(layout: &Layout, changes: usize) -> Vec<IngressChange> {
    let ingresses = layout.sizes.ingresses;
    let changes = changes.min(ingresses);
    (0..changes)
        .map(|n| {
            let ingress = n * ingresses / changes;
            IngressChange {
                ingress,
                route: layout.routes_of_ingress(ingress).start,
                new_path: format!("/new{n}"),
            }
        })
        .collect()
}

fn endpoint_changes(
    layout: &Layout,
    changes: usize,
    removed: &BTreeSet<usize>,
) -> Vec<EndpointChange> {
    let services = layout.sizes.services;
    let changes = changes.min(services);
    let usable = |service: usize| {
        let mut routes = (service..layout.sizes.paths).step_by(services);
        let route = routes.find(|k| !removed.contains(k))?;
        Some(EndpointChange { service, route })
    };
    // Within each slot, the first Service that still has a route after the Ingress changes.
    (0..changes)
        .filter_map(|n| (n * services / changes..(n + 1) * services / changes).find_map(usable))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{PortCycle, Sizes};

    fn layout() -> Layout {
        Layout::new(Sizes::FULL, vec![1], PortCycle::default()).unwrap()
    }

    #[test]
    fn traffic_never_requests_a_removed_route() {
        let plan = Plan::new(&layout(), 100, 100);
        let removed: BTreeSet<usize> = plan.ingress_changes.iter().map(|c| c.route).collect();
        assert_eq!(removed.len(), 100);
        assert!(plan.traffic.iter().all(|k| !removed.contains(k)));
    }

    #[test]
    fn every_changed_service_is_probed_through_its_own_route() {
        let layout = layout();
        let plan = Plan::new(&layout, 100, 100);
        assert_eq!(plan.endpoint_changes.len(), 100);
        for c in &plan.endpoint_changes {
            assert_eq!(layout.route(c.route).service, c.service);
            assert!(plan.traffic.contains(&c.route));
        }
    }

    #[test]
    fn changes_are_capped_by_the_cluster_size() {
        let sizes = Sizes {
            ingresses: 3,
            hosts: 1,
            paths: 6,
            services: 2,
            endpoints: 2,
        };
        let plan = Plan::new(
            &Layout::new(sizes, vec![1], PortCycle::default()).unwrap(),
            100,
            100,
        );
        assert_eq!(plan.ingress_changes.len(), 3);
        assert!(plan.endpoint_changes.len() <= 2);
    }
}
