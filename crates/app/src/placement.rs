//! The controller's placement of load balancers on agents (svc-monitor's scheduling): the pure
//! `portico_ha::place` over the agents registered in the store, kept sticky from one change to
//! the next, and its epochs never going back (a load balancer that lost every agent continues
//! from its last epoch when it is placed again).

use portico_ha::{Agent, Request};
use portico_model::{LoadBalancerId, Model, Placement};
use portico_store::Feedback;
use portico_translate::Selector;
use std::collections::BTreeMap;

/// The load balancers' placements and what they were computed from.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    placements: BTreeMap<LoadBalancerId, Placement>,
    /// Last epochs of load balancers left without a placement.
    epochs: BTreeMap<LoadBalancerId, u64>,
    /// The registered agents; `None` until the store has been read once.
    agents: Option<Vec<Agent>>,
}

impl Placer {
    pub(crate) fn placements(&self) -> &BTreeMap<LoadBalancerId, Placement> {
        &self.placements
    }

    /// Takes `placements` (read from the store) as the previous ones.
    pub(crate) fn seed(&mut self, placements: BTreeMap<LoadBalancerId, Placement>) {
        self.placements = placements;
    }

    /// The agents registered now (their feedback keys); whether they changed.
    pub(crate) fn set_agents(&mut self, feedback: &BTreeMap<String, Feedback>) -> bool {
        let agents: Vec<Agent> = feedback
            .values()
            .map(|f| Agent {
                node: f.node.clone(),
                zone: f.zone.clone(),
                labels: f.labels.clone(),
            })
            .collect();
        let changed = self.agents.as_ref() != Some(&agents);
        self.agents = Some(agents);
        changed
    }

    /// Places every load balancer of `model` that holds its addresses (provider `l4`'s too:
    /// a Service's VIP fails over as the others'; not the `l4` half of a Gateway, which listens
    /// on its Gateway's addresses wherever it is served) on agents with the labels of its
    /// selector; returns how many placements changed. Nothing happens before
    /// the agents are known.
    pub(crate) fn place(
        &mut self,
        model: &Model,
        selectors: &BTreeMap<LoadBalancerId, Selector>,
    ) -> usize {
        let Some(agents) = &self.agents else {
            return 0;
        };
        let requests: Vec<Request> = (model.load_balancers.iter())
            .filter(|lb| portico_translate::gateway::anchor(lb).is_none())
            .map(|lb| Request {
                id: lb.id,
                selector: selectors.get(&lb.id).cloned().unwrap_or_default(),
                previous: self.placements.get(&lb.id).cloned(),
            })
            .collect();
        let mut placed = portico_ha::place(&requests, agents);
        for (id, p) in &mut placed {
            if !self.placements.contains_key(id)
                && let Some(last) = self.epochs.get(id)
            {
                p.epoch = last + 1;
            }
        }
        for (id, old) in &self.placements {
            if !placed.contains_key(id) {
                self.epochs.insert(*id, old.epoch);
            }
        }
        let ids: std::collections::HashSet<_> = model.load_balancers.iter().map(|l| l.id).collect();
        self.epochs
            .retain(|id, _| ids.contains(id) && !placed.contains_key(id));
        let changed = placed
            .iter()
            .filter(|(id, p)| self.placements.get(id) != Some(p))
            .count()
            + (self.placements.keys())
                .filter(|id| !placed.contains_key(id))
                .count();
        self.placements = placed;
        changed
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use portico_model::LoadBalancer;

    fn model(names: &[&str]) -> Model {
        let lb = |n: &str| LoadBalancer {
            id: LoadBalancerId::derive(n),
            name: n.into(),
            origin: portico_model::ObjectRef::new("Ingress", "ns", n),
            provider: "proxy".into(),
            vip: None,
            floating_ip: None,
            listeners: Default::default(),
            pools: vec![],
        };
        Model {
            load_balancers: names.iter().map(|n| lb(n)).collect(),
        }
    }

    fn none() -> BTreeMap<LoadBalancerId, Selector> {
        BTreeMap::new()
    }

    fn agents(nodes: &[&str]) -> BTreeMap<String, Feedback> {
        let feedback = |n: &str| Feedback {
            node: n.into(),
            labels: if n.ends_with("-ssd") {
                [("disk".to_owned(), "ssd".to_owned())].into()
            } else {
                BTreeMap::new()
            },
            ..Feedback::default()
        };
        nodes
            .iter()
            .map(|n| ((*n).to_owned(), feedback(n)))
            .collect()
    }

    /// A Service's `l4` load balancer is placed; the `l4` half of a Gateway is not (its
    /// addresses are the Gateway's own load balancer's, placed and failed over once).
    #[test]
    fn l4_load_balancers_are_placed_but_a_gateways_l4_half() {
        let mut m = model(&["gateway/ns/gw"]);
        let l4 = |name: &str, kind: &str, origin: &str| {
            let mut lb = m.load_balancers[0].clone();
            lb.id = LoadBalancerId::derive(name);
            lb.name = name.into();
            lb.origin = portico_model::ObjectRef::new(kind, "ns", origin);
            lb.provider = "l4".into();
            lb
        };
        let service = l4("service/ns/svc", "Service", "svc");
        let half = l4("gateway/ns/gw/l4", "Gateway", "gw");
        let (service_id, half_id) = (service.id, half.id);
        m.load_balancers[0].origin = portico_model::ObjectRef::new("Gateway", "ns", "gw");
        m.load_balancers.extend([service, half]);
        let mut placer = Placer::default();
        placer.set_agents(&agents(&["n1", "n2"]));
        placer.place(&m, &none());
        assert!(placer.placements().contains_key(&service_id));
        assert!(!placer.placements().contains_key(&half_id));
        assert_eq!(placer.placements().len(), 2);
    }

    #[test]
    fn nothing_is_placed_before_the_agents_are_known() {
        let mut placer = Placer::default();
        assert_eq!(placer.place(&model(&["a"]), &none()), 0);
        assert!(placer.placements().is_empty());
        assert!(placer.set_agents(&agents(&["n1", "n2"])));
        assert!(!placer.set_agents(&agents(&["n1", "n2"])));
        assert_eq!(placer.place(&model(&["a"]), &none()), 1);
        let p = &placer.placements()[&LoadBalancerId::derive("a")];
        assert_eq!((p.standby.is_some(), p.epoch), (true, 1));
    }

    #[test]
    fn epochs_go_on_after_every_agent_left_and_came_back() {
        let mut placer = Placer::default();
        let m = model(&["a"]);
        placer.set_agents(&agents(&["n1", "n2"]));
        placer.place(&m, &none());
        placer.set_agents(&agents(&["n2"]));
        placer.place(&m, &none());
        let epoch = placer.placements()[&LoadBalancerId::derive("a")].epoch;
        assert_eq!(epoch, 2);
        placer.set_agents(&agents(&[]));
        assert_eq!(placer.place(&m, &none()), 1);
        assert!(placer.placements().is_empty());
        placer.set_agents(&agents(&["n3", "n4"]));
        placer.place(&m, &none());
        assert_eq!(placer.placements()[&LoadBalancerId::derive("a")].epoch, 3);
    }

    #[test]
    fn a_selector_keeps_load_balancers_on_agents_with_its_labels() {
        let mut placer = Placer::default();
        placer.set_agents(&agents(&["n1", "n2", "n3-ssd", "n4-ssd"]));
        let selector: Selector = [("disk".to_owned(), "ssd".to_owned())].into();
        let selectors = BTreeMap::from([(LoadBalancerId::derive("a"), selector)]);
        placer.place(&model(&["a", "b"]), &selectors);
        let a = &placer.placements()[&LoadBalancerId::derive("a")];
        let mut pair = [a.active.as_str(), a.standby.as_deref().unwrap_or_default()];
        pair.sort_unstable();
        assert_eq!(pair, ["n3-ssd", "n4-ssd"]);
        assert!(
            placer
                .placements()
                .contains_key(&LoadBalancerId::derive("b"))
        );
    }
}
