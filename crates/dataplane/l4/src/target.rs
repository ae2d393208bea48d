//! What a listener balances over: the ready members, their Maglev table, affinity and the
//! allowed sources; built from a model pool.

use portico_balance::hash::hash64;
use portico_balance::maglev::Maglev;
use portico_model::{Algorithm, Cidr, HashKey, Pool, ProxyProtocol};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seed of member keys in the Maglev table.
const MEMBER_SEED: u64 = 0x4c34;
/// Seed of flow keys.
const FLOW_SEED: u64 = 0x666c;

/// One listener's balancing state, swapped whole on every change.
#[derive(Debug)]
pub struct Target {
    members: Vec<SocketAddr>,
    /// Slot `members.len()` of the table, when there: the flows of a share that refuses them
    /// (a Gateway route's backendRef that does not resolve or has no ready member).
    table: Maglev,
    /// ClientIP affinity: its timeout; `None` hashes the client's address and port.
    affinity: Option<Duration>,
    allow: Vec<Cidr>,
    /// Send members a PROXY protocol v2 header first (TCP).
    proxy_protocol: bool,
}

impl Target {
    /// The ready members of `pool` (none: every flow is refused).
    pub fn from_pool(pool: Option<&Pool>) -> Self {
        let Some(pool) = pool else {
            return Target::new(Vec::new(), None, Vec::new());
        };
        let members = (pool.members.iter())
            .filter(|m| m.ready)
            .map(|m| SocketAddr::new(m.address, m.port))
            .collect();
        let affinity = match pool.algorithm {
            Algorithm::Hash(HashKey::ClientAddress) => Some(Duration::from_secs(
                pool.settings.client_affinity_timeout_s.unwrap_or(10_800),
            )),
            _ => None,
        };
        let mut target = Target::new(members, affinity, pool.settings.allow_sources.clone());
        target.proxy_protocol = pool.settings.proxy_protocol == Some(ProxyProtocol::V2);
        target
    }

    /// The ready members of weighted pools (a Gateway route's backendRefs): each share gets
    /// its weight's part of the flows, spread evenly over its pool's ready members; the part
    /// of a share without a pool or without a ready member is refused, so that the others get
    /// no more than their weights say. Weight 0 gets nothing. Affinity, source ranges and the
    /// PROXY header: none.
    pub fn from_shares(shares: &[(Option<&Pool>, u32)]) -> Self {
        let ready = |pool: Option<&Pool>| -> Vec<SocketAddr> {
            let members = pool.map_or(&[][..], |p| &p.members[..]);
            let ready = members.iter().filter(|m| m.ready);
            ready.map(|m| SocketAddr::new(m.address, m.port)).collect()
        };
        // Each share's weight split over its members in whole numbers: scaled by the least
        // common multiple of the member counts (bounded; beyond it, rounded).
        let counts = shares.iter().map(|(p, _)| ready(*p).len().max(1) as u64);
        let scale = counts.fold(1u64, |l, n| (l / gcd(l, n) * n).min(SCALE_BOUND));
        let mut weighted: HashMap<SocketAddr, u64> = HashMap::new();
        let mut refused = 0u64;
        for (pool, weight) in shares.iter().filter(|(_, w)| *w > 0) {
            let members = ready(*pool);
            let total = u64::from(*weight) * scale;
            if members.is_empty() {
                refused += total;
                continue;
            }
            let each = (total / members.len() as u64).max(1);
            for member in members {
                *weighted.entry(member).or_default() += each;
            }
        }
        let mut members: Vec<(SocketAddr, u64)> = weighted.into_iter().collect();
        members.sort();
        let mut weights: Vec<u64> = members.iter().map(|(_, w)| *w).collect();
        let mut target = Target::new(
            members.into_iter().map(|(m, _)| m).collect(),
            None,
            Vec::new(),
        );
        let mut keys: Vec<u64> = target.members.iter().map(member_key).collect();
        if refused > 0 && !keys.is_empty() {
            keys.push(hash64(MEMBER_SEED, b"refused"));
            weights.push(refused);
        }
        // Maglev takes u32 weights: the largest is brought under its bound, keeping ratios.
        let top = weights.iter().copied().max().unwrap_or(1);
        let divisor = top.div_ceil(u64::from(u32::MAX)).max(1);
        let weights: Vec<u32> = (weights.iter())
            .map(|w| u32::try_from((w / divisor).max(1)).unwrap_or(u32::MAX))
            .collect();
        target.table = Maglev::new(&keys, &weights);
        target
    }

    /// `members` in any order (they are sorted), ClientIP affinity, allowed sources (empty:
    /// all).
    pub fn new(mut members: Vec<SocketAddr>, affinity: Option<Duration>, allow: Vec<Cidr>) -> Self {
        members.sort();
        members.dedup();
        let keys: Vec<u64> = members.iter().map(member_key).collect();
        let table = Maglev::new(&keys, &vec![1; keys.len()]);
        Target {
            members,
            table,
            affinity,
            allow,
            proxy_protocol: false,
        }
    }

    /// Whether members get a PROXY protocol v2 header before the client's bytes.
    pub fn proxy_protocol(&self) -> bool {
        self.proxy_protocol
    }

    pub fn members(&self) -> &[SocketAddr] {
        &self.members
    }

    pub(crate) fn has_member(&self, member: SocketAddr) -> bool {
        self.members.binary_search(&member).is_ok()
    }

    /// Whether a client at `ip` may use the listener.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|c| c.contains(ip))
    }

    /// The flow hash of a client.
    fn flow_hash(&self, client: SocketAddr) -> u64 {
        let mut key = match client.ip().to_canonical() {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        if self.affinity.is_none() {
            key.extend_from_slice(&client.port().to_be_bytes());
        }
        hash64(FLOW_SEED, &key)
    }

    /// The members to try for a new flow of `client`, best first, at most `tries`: the member
    /// the client's affinity remembers (while it is still in the pool), then the Maglev choice,
    /// then other members by the same hash.
    pub fn choose(&self, client: SocketAddr, affinity: &Affinity, tries: usize) -> Vec<SocketAddr> {
        let mut order: Vec<SocketAddr> = Vec::with_capacity(tries);
        if let Some(timeout) = self.affinity
            && let Some(member) = affinity.get(client.ip(), timeout)
            && self.has_member(member)
        {
            order.push(member);
        }
        let hash = self.flow_hash(client);
        if order.is_empty() && self.table.get(hash) == Some(self.members.len()) {
            // The flow falls in a refused share.
            return order;
        }
        while order.len() < tries.max(1) {
            let eligible = |i: usize| self.members.get(i).is_some_and(|m| !order.contains(m));
            match self.table.pick(hash, eligible) {
                Some(i) => order.push(self.members[i]),
                None => break,
            }
        }
        order
    }

    pub(crate) fn affinity_timeout(&self) -> Option<Duration> {
        self.affinity
    }
}

/// The bound of the scale that splits shares' weights over their members.
const SCALE_BOUND: u64 = 1 << 16;

fn member_key(member: &SocketAddr) -> u64 {
    hash64(MEMBER_SEED, member.to_string().as_bytes())
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// ClientIP affinity: each client address's last member and when its last flow was seen. Kept
/// by the listener across target changes.
#[derive(Debug, Default)]
pub struct Affinity {
    entries: Mutex<HashMap<IpAddr, (SocketAddr, Instant)>>,
}

impl Affinity {
    fn get(&self, ip: IpAddr, timeout: Duration) -> Option<SocketAddr> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (member, seen) = entries.get(&ip)?;
        (seen.elapsed() < timeout).then_some(*member)
    }

    /// Records `member` as `ip`'s, now; forgets expired entries now and then.
    pub(crate) fn touch(&self, ip: IpAddr, member: SocketAddr, timeout: Duration) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= 4096 && entries.len().is_power_of_two() {
            entries.retain(|_, (_, seen)| seen.elapsed() < timeout);
        }
        entries.insert(ip, (member, Instant::now()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn members(n: u8) -> Vec<SocketAddr> {
        (1..=n)
            .map(|i| SocketAddr::from(([10, 0, 0, i], 80)))
            .collect()
    }

    fn client(i: u32) -> SocketAddr {
        let [a, b, c, d] = i.to_be_bytes();
        SocketAddr::from(([a.wrapping_add(11), b, c, d], (i % 50_000) as u16 + 1024))
    }

    fn spread(target: &Target, flows: u32) -> HashMap<SocketAddr, u32> {
        let affinity = Affinity::default();
        let mut counts = HashMap::new();
        for i in 0..flows {
            let member = target.choose(client(i), &affinity, 1)[0];
            *counts.entry(member).or_default() += 1;
        }
        counts
    }

    /// Slots are shared within 1 % of the fair share for the pool sizes a Service has, and
    /// flows follow the slots.
    #[test]
    fn maglev_is_balanced_within_one_percent() {
        for n in [2u8, 3, 5, 10, 40] {
            let target = Target::new(members(n), None, Vec::new());
            let mut slots = HashMap::new();
            for slot in 0..target.table.size() as u64 {
                *slots
                    .entry(target.table.get(slot).unwrap())
                    .or_insert(0usize) += 1;
            }
            let fair = target.table.size() as f64 / f64::from(n);
            for (_, count) in slots {
                assert!(
                    (count as f64 - fair).abs() <= fair * 0.01,
                    "{n} members: {count} slots, fair {fair}"
                );
            }
            let flows = 200_000;
            let fair = f64::from(flows) / f64::from(n);
            for (_, count) in spread(&target, flows) {
                assert!(
                    (f64::from(count) - fair).abs() <= fair * 0.05,
                    "{n}: {count}"
                );
            }
        }
    }

    /// Removing one of N members moves that member's flows and close to none of the others.
    #[test]
    fn removing_a_member_moves_its_flows_only() {
        for n in [3u8, 5, 10, 20] {
            let all = members(n);
            let before = Target::new(all.clone(), None, Vec::new());
            let gone = all[usize::from(n) / 2];
            let after = Target::new(
                all.iter().copied().filter(|m| *m != gone).collect(),
                None,
                Vec::new(),
            );
            let affinity = Affinity::default();
            let (mut others, mut moved) = (0u32, 0u32);
            for i in 0..100_000 {
                let old = before.choose(client(i), &affinity, 1)[0];
                let new = after.choose(client(i), &affinity, 1)[0];
                assert_ne!(new, gone);
                if old != gone {
                    others += 1;
                    moved += u32::from(old != new);
                }
            }
            let fraction = f64::from(moved) / f64::from(others);
            assert!(
                fraction < 0.03,
                "{n} members: {fraction} of the others moved"
            );
        }
    }

    #[test]
    fn affinity_hashes_the_address_only_and_remembers_the_member() {
        let t = Target::new(members(5), Some(Duration::from_secs(60)), Vec::new());
        let affinity = Affinity::default();
        let a = SocketAddr::from(([192, 0, 2, 1], 1000));
        let b = SocketAddr::from(([192, 0, 2, 1], 2000));
        assert_eq!(t.choose(a, &affinity, 3), t.choose(b, &affinity, 3));
        let remembered = t.choose(a, &affinity, 3)[2];
        affinity.touch(a.ip(), remembered, Duration::from_secs(60));
        assert_eq!(t.choose(b, &affinity, 1), [remembered]);
    }

    #[test]
    fn source_ranges_and_tries() {
        let allow = vec!["10.1.0.0/16".parse().unwrap()];
        let t = Target::new(members(3), None, allow);
        assert!(t.allows("10.1.2.3".parse().unwrap()));
        assert!(!t.allows("10.2.0.1".parse().unwrap()));
        let order = t.choose(client(7), &Affinity::default(), 5);
        assert_eq!(order.len(), 3);
        let empty = Target::new(Vec::new(), None, Vec::new());
        assert!(empty.choose(client(1), &Affinity::default(), 3).is_empty());
    }

    fn pool(name: &str, members: &[SocketAddr], ready: bool) -> Pool {
        use portico_model::{MemberId, ObjectRef, PoolId};
        Pool {
            id: PoolId::derive(name),
            name: name.to_owned(),
            service: ObjectRef::new("Service", "apps", name),
            service_port: "80".to_owned(),
            algorithm: Algorithm::default(),
            protocol: Default::default(),
            settings: Default::default(),
            members: (members.iter())
                .map(|m| portico_model::Member {
                    id: MemberId::derive(&m.to_string()),
                    address: m.ip(),
                    port: m.port(),
                    weight: 1,
                    ready,
                })
                .collect(),
        }
    }

    /// Shares of flows per member (refused flows under `None`).
    fn shares_of(target: &Target, flows: u32) -> HashMap<Option<SocketAddr>, f64> {
        let affinity = Affinity::default();
        let mut counts: HashMap<Option<SocketAddr>, f64> = HashMap::new();
        for i in 0..flows {
            let first = target.choose(client(i), &affinity, 3).first().copied();
            *counts.entry(first).or_default() += 1.0 / f64::from(flows);
        }
        counts
    }

    fn near(share: Option<&f64>, expected: f64) -> bool {
        (share.copied().unwrap_or(0.0) - expected).abs() < 0.02
    }

    #[test]
    fn shares_follow_their_weights_whatever_their_member_counts() {
        let all = members(4);
        let (a, b) = (pool("a", &all[..3], true), pool("b", &all[3..], true));
        let t = Target::from_shares(&[(Some(&a), 3), (Some(&b), 1)]);
        let got = shares_of(&t, 100_000);
        for m in &all[..3] {
            assert!(near(got.get(&Some(*m)), 0.25), "{got:?}");
        }
        assert!(near(got.get(&Some(all[3])), 0.25), "{got:?}");
        let t = Target::from_shares(&[(Some(&a), 1), (Some(&b), 1)]);
        assert!(near(shares_of(&t, 100_000).get(&Some(all[3])), 0.5));
    }

    #[test]
    fn weight_zero_gets_nothing() {
        let all = members(2);
        let (a, b) = (pool("a", &all[..1], true), pool("b", &all[1..], true));
        let t = Target::from_shares(&[(Some(&a), 1), (Some(&b), 0)]);
        let got = shares_of(&t, 20_000);
        assert_eq!(got.get(&Some(all[1])), None, "{got:?}");
        assert!(near(got.get(&Some(all[0])), 1.0));
    }

    #[test]
    fn a_share_without_pool_or_ready_member_refuses_its_flows() {
        let all = members(2);
        let (a, b) = (pool("a", &all[..1], true), pool("b", &all[1..], false));
        for refused in [None, Some(&b)] {
            let t = Target::from_shares(&[(Some(&a), 1), (refused, 3)]);
            let got = shares_of(&t, 100_000);
            assert!(near(got.get(&None), 0.75), "{got:?}");
            assert!(near(got.get(&Some(all[0])), 0.25), "{got:?}");
        }
        // A retry never lands on the refused share.
        let t = Target::from_shares(&[(Some(&a), 1), (None, 1)]);
        for i in 0..1000 {
            let order = t.choose(client(i), &Affinity::default(), 3);
            assert!(order.is_empty() || order == [all[0]], "{order:?}");
        }
        let none = Target::from_shares(&[(None, 1)]);
        assert!(none.choose(client(1), &Affinity::default(), 3).is_empty());
    }
}
