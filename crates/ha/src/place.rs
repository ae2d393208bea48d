//! Pure placement: each load balancer on two agents (active and standby) on different nodes.
//!
//! - **Sticky**: a load balancer keeps its agents while they are there and eligible; only a
//!   missing or ineligible one is replaced (a standby left: a new standby; the active left: the
//!   standby becomes active and a new standby is chosen). Any change bumps the epoch, which
//!   fences the old active.
//! - **Eligible**: an agent whose labels include the request's selector.
//! - **Spread**: a new agent is the eligible one with the fewest load balancers, then the one
//!   in a zone the other agent of the pair is not in, then by rendezvous hash of (load
//!   balancer, agent) so that equal agents share load balancers evenly and deterministically.
//! - With one eligible agent there is no standby; with none, no placement.

use portico_model::{LoadBalancerId, Placement};
use std::collections::{BTreeMap, HashMap};

/// An agent as registered in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The node name: one agent per node.
    pub node: String,
    pub zone: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// One load balancer to place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: LoadBalancerId,
    /// Agents must carry these labels.
    pub selector: BTreeMap<String, String>,
    /// Its placement so far, if any.
    pub previous: Option<Placement>,
}

/// Places every request on the agents; requests without an eligible agent are left out.
pub fn place(requests: &[Request], agents: &[Agent]) -> BTreeMap<LoadBalancerId, Placement> {
    let by_node: BTreeMap<&str, &Agent> = agents.iter().map(|a| (a.node.as_str(), a)).collect();
    let mut load: HashMap<&str, usize> = agents.iter().map(|a| (a.node.as_str(), 0)).collect();
    let mut out = BTreeMap::new();
    // Kept agents first, so that the load the new choices see is the load that stays.
    let mut kept = Vec::with_capacity(requests.len());
    for request in requests {
        let eligible = |node: &str| {
            by_node
                .get(node)
                .is_some_and(|a| selected(a, &request.selector))
        };
        let previous = request.previous.as_ref();
        let active = previous.map(|p| p.active.as_str()).filter(|n| eligible(n));
        let standby = previous
            .and_then(|p| p.standby.as_deref())
            .filter(|n| eligible(n));
        for node in active.iter().chain(standby.iter()) {
            if let Some(n) = load.get_mut(*node) {
                *n += 1;
            }
        }
        kept.push((request, active, standby));
    }
    for (request, active, standby) in kept {
        let pick = |load: &HashMap<&str, usize>, other: &str| {
            choose(request, agents, load, Some(other), &by_node)
        };
        let (active, standby) = match (active, standby) {
            (Some(a), Some(s)) => (a.to_owned(), Some(s.to_owned())),
            (Some(a), None) => {
                let s = pick(&load, a);
                bump(&mut load, s.as_deref());
                (a.to_owned(), s)
            }
            // The active left: its standby takes over.
            (None, Some(s)) => {
                let n = pick(&load, s);
                bump(&mut load, n.as_deref());
                (s.to_owned(), n)
            }
            (None, None) => {
                let Some(a) = choose(request, agents, &load, None, &by_node) else {
                    continue;
                };
                bump(&mut load, Some(&a));
                let s = pick(&load, &a);
                bump(&mut load, s.as_deref());
                (a, s)
            }
        };
        let epoch = match &request.previous {
            Some(p) if p.active == active && p.standby == standby => p.epoch,
            Some(p) => p.epoch + 1,
            None => 1,
        };
        out.insert(
            request.id,
            Placement {
                active,
                standby,
                epoch,
            },
        );
    }
    out
}

fn bump(load: &mut HashMap<&str, usize>, node: Option<&str>) {
    if let Some(n) = node.and_then(|node| load.get_mut(node)) {
        *n += 1;
    }
}

fn selected(agent: &Agent, selector: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| agent.labels.get(k) == Some(v))
}

/// The best eligible agent other than `other`: least loaded, then in another zone than
/// `other`'s, then by rendezvous hash.
fn choose(
    request: &Request,
    agents: &[Agent],
    load: &HashMap<&str, usize>,
    other: Option<&str>,
    by_node: &BTreeMap<&str, &Agent>,
) -> Option<String> {
    let other_zone = other
        .and_then(|o| by_node.get(o))
        .and_then(|a| a.zone.as_deref());
    agents
        .iter()
        .filter(|a| Some(a.node.as_str()) != other && selected(a, &request.selector))
        .min_by_key(|a| {
            let same_zone = other_zone.is_some() && a.zone.as_deref() == other_zone;
            let n = load.get(a.node.as_str()).copied().unwrap_or(0);
            (n, same_zone, rendezvous(request.id, &a.node))
        })
        .map(|a| a.node.clone())
}

/// A stable score of (load balancer, node): the first 8 bytes of SHA-1 over both.
fn rendezvous(id: LoadBalancerId, node: &str) -> u64 {
    use sha1::{Digest, Sha1};
    let mut hasher = Sha1::new();
    hasher.update(id.to_string().as_bytes());
    hasher.update([0]);
    hasher.update(node.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests;
