//! ingress-nginx's per-client limits of one Ingress (`limit-rps`, `limit-rpm`,
//! `limit-connections`, `limit-whitelist`): a [`Limiter`] per Ingress and settings, kept
//! across route-table changes while its settings stand, shared by the Ingress's routes.
//! Counted per process, as ingress-nginx counts per replica. The arithmetic is
//! [`bucket`]'s, a pure function of time.

mod bucket;

use bucket::{Bucket, Rate};
use portico_model::RateLimit;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// The most clients one limiter tracks, as nginx's zone has a size: beyond it, clients whose
/// excess drained are forgotten, and when none has, a new client is refused (nginx answers
/// the same when its zone is full).
const MAX_CLIENTS: usize = 65_536;

/// The limits of one Ingress.
#[derive(Debug)]
pub(crate) struct Limiter {
    settings: RateLimit,
    rates: Vec<Rate>,
    clients: Mutex<HashMap<IpAddr, Vec<Bucket>>>,
    in_progress: Mutex<HashMap<IpAddr, u32>>,
}

/// A request counted by `limit-connections` while it is held.
#[derive(Debug)]
pub(crate) struct InProgress {
    limiter: Arc<Limiter>,
    client: IpAddr,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut counts = (self.limiter.in_progress.lock()).unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

impl Limiter {
    pub(crate) fn new(settings: &RateLimit) -> Self {
        let m = settings.burst_multiplier;
        let per_s = settings.rps.map(|n| Rate::per_second(n, m));
        let per_min = settings.rpm.map(|n| Rate::per_minute(n, m));
        Limiter {
            settings: settings.clone(),
            rates: per_s.into_iter().chain(per_min).collect(),
            clients: Mutex::default(),
            in_progress: Mutex::default(),
        }
    }

    /// The settings this limiter was made with.
    pub(crate) fn settings(&self) -> &RateLimit {
        &self.settings
    }

    /// Whether a request of `client` at `now` passes: `Err(())` when a limit refuses it;
    /// `Ok(Some(_))` holds its place among the requests in progress until dropped.
    pub(crate) fn admit(
        self: &Arc<Self>,
        client: IpAddr,
        now: Instant,
    ) -> Result<Option<InProgress>, ()> {
        if self.settings.allow.iter().any(|c| c.contains(client)) {
            return Ok(None);
        }
        if !self.rates.is_empty() && !self.take(client, now) {
            return Err(());
        }
        let Some(max) = self.settings.connections else {
            return Ok(None);
        };
        let mut counts = self
            .in_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry(client).or_insert(0);
        if *n >= max {
            return Err(());
        }
        *n += 1;
        Ok(Some(InProgress {
            limiter: self.clone(),
            client,
        }))
    }

    /// One request of `client` against every rate: all must admit it, or none changes.
    fn take(&self, client: IpAddr, now: Instant) -> bool {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(buckets) = clients.get_mut(&client) {
            let next: Option<Vec<Bucket>> = (buckets.iter().zip(&self.rates))
                .map(|(b, rate)| b.admit(*rate, now))
                .collect();
            return next.map(|next| *buckets = next).is_some();
        }
        if clients.len() >= MAX_CLIENTS {
            let rates = &self.rates;
            clients.retain(|_, b| !b.iter().zip(rates).all(|(b, r)| b.is_empty(*r, now)));
            if clients.len() >= MAX_CLIENTS {
                return false;
            }
        }
        clients.insert(client, vec![Bucket::first(now); self.rates.len()]);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rps: Option<u32>, connections: Option<u32>, allow: &[&str]) -> Arc<Limiter> {
        Arc::new(Limiter::new(&RateLimit {
            zone: "ns/ing".into(),
            rps,
            rpm: None,
            connections,
            burst_multiplier: 1,
            allow: allow.iter().map(|c| c.parse().unwrap()).collect(),
        }))
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[tokio::test(start_paused = true)]
    async fn each_client_has_its_own_rate_and_allowed_ranges_have_none() {
        let now = tokio::time::Instant::now().into_std();
        let l = limiter(Some(1), None, &["10.0.0.2/32"]);
        assert!(l.admit(A, now).is_ok());
        assert!(l.admit(A, now).is_ok(), "the burst of one");
        assert!(l.admit(A, now).is_err());
        for _ in 0..10 {
            assert!(l.admit(B, now).is_ok());
        }
        let later = now + std::time::Duration::from_secs(1);
        assert!(l.admit(A, later).is_ok());
    }

    #[test]
    fn requests_in_progress_are_counted_until_dropped() {
        let now = Instant::now();
        let l = limiter(None, Some(2), &[]);
        let first = l.admit(A, now).unwrap();
        let second = l.admit(A, now).unwrap();
        assert!(l.admit(A, now).is_err());
        assert!(l.admit(B, now).is_ok());
        drop(first);
        let third = l.admit(A, now).unwrap();
        drop((second, third));
        assert!(l.in_progress.lock().unwrap().is_empty());
    }

    #[test]
    fn a_request_the_rate_refuses_takes_no_connection() {
        let now = Instant::now();
        let l = limiter(Some(1), Some(5), &[]);
        let held: Vec<_> = (0..2).map(|_| l.admit(A, now).unwrap()).collect();
        assert!(l.admit(A, now).is_err());
        assert_eq!(l.in_progress.lock().unwrap()[&A], 2);
        drop(held);
    }
}
