//! Pure: what the runtime API can change without a reload. Two renders of a load balancer
//! with the same structure ([`Rendered::shape`]: everything but the members), the same
//! crt-list and the same map files are applied by commands on the stats socket: route map
//! entries (`add map`, `set map`, `del map`) and members. A member keeps its server slot
//! (named by its id) while it stays: its address, weight and readiness are set in place; a
//! member that goes puts its slot in maintenance; a new member takes its own slot again, else a
//! spare slot (`portico-spare-<n>`, [`crate::render::SPARE_SLOTS`] per pool), else a slot a
//! gone member freed (a replaced endpoint needs no spare). When no slot is free, or anything
//! else changed, only a reload can apply the change; the reload starts from the files, which
//! name every member by its id, so both agree.

use crate::render::{Rendered, Server, routes};
use portico_model::{MemberId, PoolId};
use std::collections::BTreeMap;

/// Which server slot of the running haproxy holds which member, per backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Live(BTreeMap<PoolId, Vec<Slot>>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    /// The server's name in haproxy.
    name: String,
    /// The member the slot was configured for; `None` for a spare.
    own: Option<MemberId>,
    /// The member it serves now, as haproxy has it; `None`: free (in maintenance).
    holds: Option<Server>,
}

impl Live {
    /// What a haproxy that loaded `rendered` has: every member in its own slot, spares free.
    pub(crate) fn of(rendered: &Rendered) -> Live {
        let mut backends: BTreeMap<PoolId, Vec<Slot>> = BTreeMap::new();
        for server in &rendered.servers {
            backends.entry(server.backend).or_default().push(Slot {
                name: server.name.to_string(),
                own: Some(server.name),
                holds: Some(*server),
            });
        }
        for (pool, spares) in &rendered.spares {
            let slots = backends.entry(*pool).or_default();
            slots.extend(spares.iter().map(|name| Slot {
                name: name.clone(),
                own: None,
                holds: None,
            }));
        }
        Live(backends)
    }
}

/// The runtime API exchanges that turn the running haproxy (`old` loaded, its slots `live`)
/// into `new`, and the slots after them; `None` when only a reload can.
pub(crate) fn commands(old: &Rendered, new: &Rendered, live: &Live) -> Option<(Vec<String>, Live)> {
    if old.crt_list != new.crt_list || old.shape() != new.shape() {
        return None;
    }
    let mut out = routes::map_commands(&old.maps, &new.maps)?;
    let (servers, live) = members(live, &new.servers)?;
    out.extend(joined(servers));
    Some((out, live))
}

/// Endpoints only: the runtime API exchanges that put `servers` (each pool's members, every
/// other setting unchanged) into the slots of those pools the running haproxy has (pools it
/// lacks belong to another load balancer and are left out), and those pools' slots after them
/// (see [`Live::merge`]); `None` when a pool has no free slot for a new member (a reload).
pub(crate) fn pool_commands(
    live: &Live,
    servers: &BTreeMap<PoolId, Vec<Server>>,
) -> Option<(Vec<String>, Live)> {
    let part: BTreeMap<PoolId, Vec<Slot>> = (servers.keys())
        .filter_map(|pool| Some((*pool, live.0.get(pool)?.clone())))
        .collect();
    let desired: Vec<Server> = (part.keys())
        .flat_map(|pool| servers[pool].iter().copied())
        .collect();
    let (commands, part) = members(&Live(part), &desired)?;
    Some((joined(commands), part))
}

impl Live {
    /// Takes the slots of the pools `part` has (from [`pool_commands`]).
    pub(crate) fn merge(&mut self, part: Live) {
        self.0.extend(part.0);
    }
}

/// The commands that put `desired` into the slots of `live`, and the slots after them.
fn members(live: &Live, desired: &[Server]) -> Option<(Vec<String>, Live)> {
    let mut wanted: BTreeMap<PoolId, BTreeMap<MemberId, Server>> = BTreeMap::new();
    for server in desired {
        wanted
            .entry(server.backend)
            .or_default()
            .insert(server.name, *server);
    }
    if wanted.keys().any(|pool| !live.0.contains_key(pool)) {
        return None;
    }
    let mut commands = Vec::new();
    let mut next = live.clone();
    for (pool, slots) in &mut next.0 {
        let mut wanted = wanted.remove(pool).unwrap_or_default();
        for slot in slots.iter_mut() {
            let Some(held) = slot.holds else { continue };
            let target = format!("{pool}/{}", slot.name);
            match wanted.remove(&held.name) {
                Some(server) => {
                    commands.extend(changes(&target, Some(&held), &server));
                    slot.holds = Some(server);
                }
                None => {
                    if held.ready {
                        commands.push(format!("set server {target} state maint"));
                    }
                    slot.holds = None;
                }
            }
        }
        for (member, server) in wanted {
            // Its own slot, else a spare, else any slot a gone member freed.
            let free = |want: &dyn Fn(&Slot) -> bool| {
                slots.iter().position(|s| s.holds.is_none() && want(s))
            };
            let index = free(&|s| s.own == Some(member))
                .or_else(|| free(&|s| s.own.is_none()))
                .or_else(|| free(&|_| true))?;
            let slot = &mut slots[index];
            let target = format!("{pool}/{}", slot.name);
            commands.extend(changes(&target, None, &server));
            slot.holds = Some(server);
        }
    }
    Some((commands, next))
}

/// Commands joined by `;` into lines under 8 KiB (haproxy reads one buffer per line).
fn joined(commands: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for command in commands {
        if !line.is_empty() && line.len() + command.len() + 1 > 8 * 1024 {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(';');
        }
        line.push_str(&command);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

/// The commands that make slot `target`, holding `a` (`None`: a free slot, in maintenance),
/// serve `b`.
fn changes(target: &str, a: Option<&Server>, b: &Server) -> Vec<String> {
    let mut out = Vec::new();
    if a.is_none_or(|a| (a.address, a.port) != (b.address, b.port)) {
        out.push(format!(
            "set server {target} addr {} port {}",
            b.address, b.port
        ));
    }
    if a.is_none_or(|a| a.weight != b.weight) {
        out.push(format!("set weight {target} {}", b.weight));
    }
    if a.map(|a| a.ready) != Some(b.ready) && (a.is_some() || b.ready) {
        let state = if b.ready { "ready" } else { "maint" };
        out.push(format!("set server {target} state {state}"));
    }
    out
}

/// Whether an answer of the runtime API reports a failure: anything but blank lines and the
/// confirmations of `set server ... addr`.
pub(crate) fn failed(answer: &str) -> bool {
    answer.lines().map(str::trim).any(|line| {
        !line.is_empty()
            && !line.starts_with("IP changed from")
            && !line.starts_with("no need to change")
            && !line.starts_with("port changed from")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(pool: &str, member: &str, last: u8, ready: bool) -> Server {
        Server {
            backend: PoolId::derive(pool),
            name: MemberId::derive(member),
            address: [10, 0, 0, last].into(),
            port: 80,
            weight: 1,
            ready,
        }
    }

    fn rendered(servers: Vec<Server>) -> Rendered {
        let pool = PoolId::derive("p");
        Rendered {
            servers,
            spares: BTreeMap::from([(
                pool,
                vec!["portico-spare-1".into(), "portico-spare-2".into()],
            )]),
            ..Rendered::default()
        }
    }

    #[test]
    fn a_new_member_takes_a_spare_and_a_gone_one_goes_to_maintenance() {
        let pool = PoolId::derive("p");
        let live = Live::of(&rendered(vec![server("p", "a", 1, true)]));
        let (commands, live) = members(
            &live,
            &[server("p", "b", 2, true), server("p", "c", 3, false)],
        )
        .unwrap();
        let a = MemberId::derive("a");
        // The members take the spares in member id order; a member not ready stays in
        // maintenance.
        let (first, second) = if MemberId::derive("b") < MemberId::derive("c") {
            (("2", true), ("3", false))
        } else {
            (("3", false), ("2", true))
        };
        let mut expected = vec![format!("set server {pool}/{a} state maint")];
        for (n, (last, ready)) in [(1, first), (2, second)] {
            let slot = format!("{pool}/portico-spare-{n}");
            expected.push(format!("set server {slot} addr 10.0.0.{last} port 80"));
            expected.push(format!("set weight {slot} 1"));
            if ready {
                expected.push(format!("set server {slot} state ready"));
            }
        }
        assert_eq!(commands, expected);
        // A gone member's slot serves a new one (a replaced endpoint needs no spare).
        let three = [
            server("p", "b", 2, true),
            server("p", "c", 3, false),
            server("p", "d", 4, true),
        ];
        let (commands, _) = members(&live, &three).unwrap();
        assert_eq!(
            commands,
            [
                format!("set server {pool}/{a} addr 10.0.0.4 port 80"),
                format!("set weight {pool}/{a} 1"),
                format!("set server {pool}/{a} state ready"),
            ]
        );
        // No free slot left: the next new member needs a reload.
        let four = [three.as_slice(), &[server("p", "e", 5, true)]].concat();
        assert!(members(&live, &four).is_none());
    }

    #[test]
    fn a_staying_member_changes_in_place_and_nothing_is_sent_when_nothing_changed() {
        let pool = PoolId::derive("p");
        let before = vec![server("p", "a", 1, true)];
        let live = Live::of(&rendered(before.clone()));
        assert_eq!(members(&live, &before).unwrap(), (vec![], live.clone()));
        let mut after = server("p", "a", 1, false);
        after.weight = 5;
        let (commands, _) = members(&live, &[after]).unwrap();
        let a = MemberId::derive("a");
        assert_eq!(
            commands,
            [
                format!("set weight {pool}/{a} 5"),
                format!("set server {pool}/{a} state maint"),
            ]
        );
        // A pool the running haproxy does not have: a reload.
        assert!(members(&live, &[server("other", "x", 9, true)]).is_none());
    }

    #[test]
    fn endpoints_only_plans_the_touched_pools_alone() {
        let (p, q) = (PoolId::derive("p"), PoolId::derive("q"));
        let mut before = rendered(vec![server("p", "a", 1, true), server("q", "b", 2, true)]);
        before.spares.insert(q, vec!["portico-spare-1".into()]);
        let mut live = Live::of(&before);
        // Pool p's member moves to a new endpoint; q is not touched, "other" is not this
        // haproxy's.
        let servers = BTreeMap::from([
            (p, vec![server("p", "c", 3, true)]),
            (PoolId::derive("other"), vec![server("other", "x", 9, true)]),
        ]);
        let (commands, part) = pool_commands(&live, &servers).unwrap();
        let a = MemberId::derive("a");
        let spare = format!("{p}/portico-spare-1");
        assert_eq!(
            commands,
            [[
                format!("set server {p}/{a} state maint"),
                format!("set server {spare} addr 10.0.0.3 port 80"),
                format!("set weight {spare} 1"),
                format!("set server {spare} state ready"),
            ]
            .join(";")]
        );
        assert_eq!(part.0.keys().collect::<Vec<_>>(), [&p]);
        live.merge(part);
        // The slots now are those of a full plan of the same members.
        let after = [server("p", "c", 3, true), server("q", "b", 2, true)];
        let (full, _) = members(&Live::of(&before), &after).unwrap();
        assert_eq!(full.join(";"), commands[0]);
        assert_eq!(members(&live, &after).unwrap().0, Vec::<String>::new());
        // Three slots (a's and two spares) but four new members: a reload.
        let four = ["d", "e", "f", "g"]
            .map(|m| server("p", m, 4, true))
            .to_vec();
        assert!(pool_commands(&live, &BTreeMap::from([(p, four)])).is_none());
    }

    #[test]
    fn confirmations_are_not_failures() {
        assert!(!failed("\n\n"));
        assert!(!failed(
            "IP changed from '0.0.0.0' to '127.0.0.1', port changed from '+0' to '80' by 'stats socket command'\n\n"
        ));
        assert!(failed("No such server.\n"));
    }
}
