//! Pure: what the runtime API can change without a reload. Two renders of a load balancer
//! whose configurations differ only in their servers' runtime state (address, weight,
//! readiness) and whose route maps have the same files are applied by commands on the stats
//! socket; anything else needs a reload.

use crate::render::{Rendered, Server, routes};

/// The runtime API exchanges that turn the running `old` into `new`, or `None` when only a
/// reload can (the configuration's structure, the crt-list or the set of map files changed).
pub(crate) fn commands(old: &Rendered, new: &Rendered) -> Option<Vec<String>> {
    if old.crt_list != new.crt_list
        || old.servers.len() != new.servers.len()
        || old.shape() != new.shape()
    {
        return None;
    }
    let mut out = routes::map_commands(&old.maps, &new.maps)?;
    let servers: Vec<String> = old
        .servers
        .iter()
        .zip(&new.servers)
        .flat_map(|(a, b)| changes(a, b))
        .collect();
    out.extend(joined(servers));
    Some(out)
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

/// The runtime API commands that turn server `a` into `b` (same backend and name).
fn changes(a: &Server, b: &Server) -> Vec<String> {
    let target = format!("{}/{}", b.backend, b.name);
    let mut out = Vec::new();
    if (a.address, a.port) != (b.address, b.port) {
        out.push(format!(
            "set server {target} addr {} port {}",
            b.address, b.port
        ));
    }
    if a.weight != b.weight {
        out.push(format!("set weight {target} {}", b.weight));
    }
    if a.ready != b.ready {
        let state = if b.ready { "ready" } else { "maint" };
        out.push(format!("set server {target} state {state}"));
    }
    out
}
