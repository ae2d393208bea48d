//! Connection caps: in all, and per client address. A connection over either cap is closed
//! at once, so it holds a descriptor for no longer than the accept.

use portico_model::Limits;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections, in all and by client address.
#[derive(Debug)]
pub(crate) struct Caps {
    total: usize,
    per_client: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

impl Caps {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(Caps {
            total: limits.max_connections,
            per_client: limits.max_connections_per_client,
            open: Mutex::new(Open::default()),
        })
    }

    /// A place for one more connection from `client`, or `None` when a cap is reached.
    pub(crate) fn admit(self: &Arc<Self>, client: IpAddr) -> Option<Admitted> {
        let client = client.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = open.by_client.get(&client).copied().unwrap_or(0);
        if open.total >= self.total || mine >= self.per_client {
            return None;
        }
        open.total += 1;
        open.by_client.insert(client, mine + 1);
        Some(Admitted {
            caps: self.clone(),
            client,
        })
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct Admitted {
    caps: Arc<Caps>,
    client: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self
            .caps
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.by_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(total: usize, per_client: usize) -> Arc<Caps> {
        Caps::new(&Limits {
            max_connections: total,
            max_connections_per_client: per_client,
            ..Limits::default()
        })
    }

    #[test]
    fn a_client_over_its_cap_is_refused_while_another_client_is_admitted() {
        let caps = caps(10, 2);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let held = [caps.admit(a), caps.admit(a)];
        assert!(held.iter().all(Option::is_some));
        assert!(caps.admit(a).is_none());
        assert!(caps.admit(b).is_some());
        drop(held);
        assert!(
            caps.admit(a).is_some(),
            "closed connections free their place"
        );
    }

    #[test]
    fn the_total_cap_holds_across_clients() {
        let caps = caps(2, 5);
        let held: Vec<_> = (1..=2u8)
            .map(|i| caps.admit([10, 0, 0, i].into()))
            .collect();
        assert!(held.iter().all(Option::is_some));
        assert!(caps.admit([10, 0, 0, 3].into()).is_none());
    }
}
