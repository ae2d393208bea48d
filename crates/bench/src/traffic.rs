//! Continuous light traffic: a fixed rate of GETs round-robin over a fixed list of routes, each
//! one counted as failed unless it is answered 200.

use crate::http::Http;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

/// More requests than this still waiting means the target is stuck; ticks wait for one.
const MAX_IN_FLIGHT: usize = 1_000;
const KEPT_FAILURES: usize = 5;

/// What the traffic saw: requests sent, how many failed, the first few failures.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub sent: u64,
    pub failed: u64,
    pub samples: Vec<String>,
}

#[derive(Debug, Default)]
struct Counts {
    sent: AtomicU64,
    failed: AtomicU64,
    samples: Mutex<Vec<String>>,
}

impl Counts {
    fn record(&self, route: &(String, String), outcome: Result<u16, String>) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let what = match outcome {
            Ok(200) => return,
            Ok(status) => format!("{status}"),
            Err(e) => e,
        };
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() < KEPT_FAILURES {
            samples.push(format!("{}{}: {what}", route.0, route.1));
        }
    }
}

/// The running traffic; [`Traffic::stop`] ends it and returns the tally.
#[derive(Debug)]
pub struct Traffic {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    counts: Arc<Counts>,
}

/// Starts `rate` requests per second to `to`, cycling over (host, path) `routes`.
pub fn start(http: Http, to: SocketAddr, routes: Vec<(String, String)>, rate: u32) -> Traffic {
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let task = tokio::spawn(send(http, to, routes, rate, stop.clone(), counts.clone()));
    Traffic { stop, task, counts }
}

impl Traffic {
    /// Stops sending, waits for the requests in flight (each bounded by the client timeout).
    pub async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let samples = self.counts.samples.lock().map(|s| s.clone());
        Tally {
            sent: self.counts.sent.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
            samples: samples.unwrap_or_default(),
        }
    }
}

async fn send(
    http: Http,
    to: SocketAddr,
    routes: Vec<(String, String)>,
    rate: u32,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) {
    let routes = Arc::new(routes);
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    for n in (0..routes.len()).cycle() {
        tick.tick().await;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        while in_flight.try_join_next().is_some() {}
        if in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.join_next().await;
        }
        let (http, routes, counts) = (http.clone(), routes.clone(), counts.clone());
        in_flight.spawn(async move {
            let route = &routes[n];
            let outcome = http.get(to, &route.0, &route.1).await.map(|r| r.status);
            counts.record(route, outcome);
        });
    }
    in_flight.join_all().await;
}
