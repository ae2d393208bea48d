#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

fn agent(node: &str, zone: &str) -> Agent {
    Agent {
        node: node.into(),
        zone: Some(zone.into()),
        labels: BTreeMap::new(),
    }
}

fn request(name: &str, previous: Option<Placement>) -> Request {
    Request {
        id: LoadBalancerId::derive(name),
        selector: BTreeMap::new(),
        previous,
    }
}

fn pair(p: &Placement) -> (String, Option<String>) {
    (p.active.clone(), p.standby.clone())
}

#[test]
fn each_load_balancer_gets_two_agents_on_different_nodes_spread_evenly() {
    let agents: Vec<Agent> = (0..4).map(|i| agent(&format!("n{i}"), "z")).collect();
    let requests: Vec<Request> = (0..8).map(|i| request(&format!("lb{i}"), None)).collect();
    let placed = place(&requests, &agents);
    assert_eq!(placed.len(), 8);
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for p in placed.values() {
        let standby = p.standby.clone().unwrap();
        assert_ne!(p.active, standby);
        assert_eq!(p.epoch, 1);
        *load.entry(p.active.clone()).or_default() += 1;
        *load.entry(standby).or_default() += 1;
    }
    assert_eq!(
        load.values().copied().collect::<Vec<_>>(),
        [4, 4, 4, 4],
        "{load:?}"
    );
    // The same input, the same answer.
    assert_eq!(place(&requests, &agents), placed);
}

#[test]
fn a_pair_prefers_two_zones() {
    let agents = [agent("a1", "a"), agent("a2", "a"), agent("b1", "b")];
    let placed = place(&[request("lb", None)], &agents);
    let p = &placed[&LoadBalancerId::derive("lb")];
    let zone = |n: &str| n.chars().next().unwrap();
    assert_ne!(
        zone(&p.active),
        zone(p.standby.as_deref().unwrap()),
        "{p:?}"
    );
}

#[test]
fn placements_stay_while_their_agents_stay_and_the_epoch_with_them() {
    let agents: Vec<Agent> = (0..3).map(|i| agent(&format!("n{i}"), "z")).collect();
    let first = place(&[request("lb", None)], &agents);
    let p = first[&LoadBalancerId::derive("lb")].clone();
    // A new agent joins: nothing moves.
    let mut more = agents.clone();
    more.push(agent("n9", "z"));
    let again = place(&[request("lb", Some(p.clone()))], &more);
    assert_eq!(again[&LoadBalancerId::derive("lb")], p);
}

#[test]
fn when_the_active_leaves_the_standby_takes_over_with_a_new_epoch() {
    let agents: Vec<Agent> = (0..3).map(|i| agent(&format!("n{i}"), "z")).collect();
    let p = place(&[request("lb", None)], &agents)[&LoadBalancerId::derive("lb")].clone();
    let left: Vec<Agent> = agents.into_iter().filter(|a| a.node != p.active).collect();
    let next = place(&[request("lb", Some(p.clone()))], &left);
    let q = &next[&LoadBalancerId::derive("lb")];
    assert_eq!(Some(q.active.clone()), p.standby);
    assert!(q.standby.is_some() && q.standby != Some(p.active.clone()));
    assert_eq!(q.epoch, p.epoch + 1);
}

#[test]
fn a_selector_limits_the_agents_and_one_agent_means_no_standby() {
    let mut edge = agent("edge", "z");
    edge.labels.insert("role".into(), "edge".into());
    let agents = [agent("n1", "z"), edge];
    let mut r = request("lb", None);
    r.selector.insert("role".into(), "edge".into());
    let placed = place(&[r.clone()], &agents);
    assert_eq!(pair(&placed[&r.id]), ("edge".into(), None));
    assert!(
        place(&[r], &agents[..1]).is_empty(),
        "no eligible agent: not placed"
    );
}

proptest! {
    /// Whatever the agents and the history: two distinct eligible agents when there are two,
    /// and a pair that changes always has a newer epoch.
    #[test]
    fn placements_are_valid_and_changes_bump_the_epoch(
        nodes in proptest::collection::btree_set(0u8..12, 0..8),
        lbs in 1usize..12,
        later in proptest::collection::btree_set(0u8..12, 0..8),
    ) {
        let agents = |set: &std::collections::BTreeSet<u8>| -> Vec<Agent> {
            set.iter().map(|n| agent(&format!("n{n}"), if n % 2 == 0 { "a" } else { "b" })).collect()
        };
        let first_agents = agents(&nodes);
        let requests: Vec<Request> = (0..lbs).map(|i| request(&format!("lb{i}"), None)).collect();
        let first = place(&requests, &first_agents);
        let second_agents = agents(&later);
        let follow: Vec<Request> = requests
            .iter()
            .map(|r| Request { previous: first.get(&r.id).cloned(), ..r.clone() })
            .collect();
        let second = place(&follow, &second_agents);
        for (placed, agents) in [(&first, &first_agents), (&second, &second_agents)] {
            for p in placed.values() {
                prop_assert!(agents.iter().any(|a| a.node == p.active));
                match &p.standby {
                    Some(s) => {
                        prop_assert_ne!(s, &p.active);
                        prop_assert!(agents.iter().any(|a| &a.node == s));
                    }
                    None => prop_assert!(agents.len() < 2),
                }
            }
            prop_assert_eq!(placed.len(), if agents.is_empty() { 0 } else { lbs });
        }
        for r in &follow {
            if let (Some(before), Some(after)) = (&r.previous, second.get(&r.id)) {
                if pair(before) == pair(after) {
                    prop_assert_eq!(before.epoch, after.epoch);
                } else {
                    prop_assert!(after.epoch > before.epoch);
                }
            }
        }
    }
}
