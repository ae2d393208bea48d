//! The pure allocator: previous allocations + requests → allocations + diagnostics.
//!
//! - **Sticky**: a load balancer keeps the address it had while its request still allows it
//!   (the same pinned address, or an address of its pool) and nobody fixed it first.
//! - **Fixed** addresses (an IngressClass's `portico.dev/vip`) are never handed out by a pool;
//!   several load balancers may share one (they are served together).
//! - **Pinned** addresses (`portico.dev/external-ip`) go to the first load balancer asking,
//!   after those that held them already; another one asking gets a diagnostic and no address.
//! - **Pools** hand out their lowest free usable address; an exhausted pool is a diagnostic.
//!
//! Nothing else is blocked: a load balancer without an address is still served. An address
//! whose load balancer is gone is free again.

use super::Cidr;
use portico_model::{Diagnostic, LoadBalancerId, ObjectRef};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

/// A load balancer's addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Addresses {
    pub vip: Option<IpAddr>,
    pub floating_ip: Option<IpAddr>,
}

/// Every load balancer's addresses.
pub type Allocations = BTreeMap<LoadBalancerId, Addresses>;

/// How one address of a load balancer is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    None,
    /// Set by the user for this load balancer; shared with others without complaint.
    Fixed(IpAddr),
    /// Set by the user and exclusive; `field` is where (for diagnostics).
    Pinned {
        ip: IpAddr,
        field: String,
    },
    /// From a pool; `field` names where the pool came from (for diagnostics).
    Pool {
        pool: Cidr,
        field: String,
    },
}

/// One load balancer's wishes, in the order requests should be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressRequest {
    pub id: LoadBalancerId,
    /// Where its problems are reported (the Ingress or the IngressClass).
    pub object: ObjectRef,
    pub vip: Want,
    pub floating_ip: Want,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Vip,
    FloatingIp,
}

impl AddressRequest {
    fn want(&self, slot: Slot) -> &Want {
        match slot {
            Slot::Vip => &self.vip,
            Slot::FloatingIp => &self.floating_ip,
        }
    }
}

impl Addresses {
    fn get(&self, slot: Slot) -> Option<IpAddr> {
        match slot {
            Slot::Vip => self.vip,
            Slot::FloatingIp => self.floating_ip,
        }
    }

    fn set(&mut self, slot: Slot, ip: IpAddr) {
        match slot {
            Slot::Vip => self.vip = Some(ip),
            Slot::FloatingIp => self.floating_ip = Some(ip),
        }
    }
}

/// Allocates every request's addresses, keeping `previous` ones where it can.
pub fn allocate(
    previous: &Allocations,
    requests: &[AddressRequest],
) -> (Allocations, Vec<Diagnostic>) {
    let slots = [Slot::Vip, Slot::FloatingIp];
    let fixed: HashSet<IpAddr> = requests
        .iter()
        .flat_map(|r| slots.map(|s| r.want(s).clone()))
        .filter_map(|w| match w {
            Want::Fixed(ip) => Some(ip),
            _ => None,
        })
        .collect();
    let mut out: Allocations = requests
        .iter()
        .map(|r| (r.id, Addresses::default()))
        .collect();
    let mut owner: HashMap<IpAddr, LoadBalancerId> = HashMap::new();
    let mut diagnostics = Vec::new();
    let give = |out: &mut Allocations, id, slot, ip| {
        if let Some(a) = out.get_mut(&id) {
            a.set(slot, ip);
        }
    };
    // Fixed addresses, then what each load balancer held and may keep.
    for r in requests {
        for slot in slots {
            if let Want::Fixed(ip) = r.want(slot) {
                give(&mut out, r.id, slot, *ip);
            }
        }
    }
    for r in requests {
        for slot in slots {
            let Some(held) = previous.get(&r.id).and_then(|a| a.get(slot)) else {
                continue;
            };
            let allowed = match r.want(slot) {
                Want::Pinned { ip, .. } => *ip == held,
                Want::Pool { pool, .. } => pool.usable(held),
                Want::None | Want::Fixed(_) => false,
            };
            if allowed && !fixed.contains(&held) && !owner.contains_key(&held) {
                owner.insert(held, r.id);
                give(&mut out, r.id, slot, held);
            }
        }
    }
    // New pinned addresses, then new pool addresses.
    for r in requests {
        for slot in slots {
            let Want::Pinned { ip, field } = r.want(slot) else {
                continue;
            };
            if out.get(&r.id).and_then(|a| a.get(slot)).is_some() {
                continue;
            }
            let by = owner.get(ip).copied();
            if fixed.contains(ip) || by.is_some() {
                let whom = by.map_or("as a fixed VIP".to_owned(), |id| format!("by {id}"));
                let message = format!("{ip} is already used {whom}: this load balancer gets none");
                diagnostics.push(Diagnostic::error(r.object.clone(), field, message));
                continue;
            }
            owner.insert(*ip, r.id);
            give(&mut out, r.id, slot, *ip);
        }
    }
    for r in requests {
        for slot in slots {
            let Want::Pool { pool, field } = r.want(slot) else {
                continue;
            };
            if out.get(&r.id).and_then(|a| a.get(slot)).is_some() {
                continue;
            }
            match pool.lowest_free(|ip| fixed.contains(&ip) || owner.contains_key(&ip)) {
                Some(ip) => {
                    owner.insert(ip, r.id);
                    give(&mut out, r.id, slot, ip);
                }
                None => {
                    let message = format!(
                        "the pool {pool} is exhausted: this load balancer gets no address from it"
                    );
                    diagnostics.push(Diagnostic::error(r.object.clone(), field, message));
                }
            }
        }
    }
    (out, diagnostics)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
