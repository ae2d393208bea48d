//! The heavy lane: the CPU-heavy step of a new connection (a TLS handshake's key exchange and
//! signature, some 100 µs of one core) takes turns with the other heavy steps, and a turn is
//! handed on only after the work that was ready meanwhile has run. Under load, a request on an
//! established connection then waits for at most one handshake per worker, not for every
//! handshake that came in before it: a crowd of new connections (a reconnect storm after a
//! failover, a handshake flood) does not add its handshakes to the latency of the clients
//! already connected. haproxy schedules TLS handshakes the same way, in a class of their own
//! (`TL_HEAVY`) that gets a bounded share of each turn of its loop.
//!
//! The lane is a priority, not a limit: every step still runs, in arrival order. What moves is
//! where the waiting happens when the proxy's core is saturated: before a new connection's
//! handshake rather than in established connections' requests.
//!
//! A proxy makes a lane of its own when its HTTPS listener starts, unless it was given one
//! ([`crate::Proxy::share_heavy_lane`]): the proxies of one runtime (an agent's VIPs) share one,
//! so that handshakes on all of them take turns together.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use tokio::sync::Semaphore;

/// Turns for heavy steps: one per worker thread.
#[derive(Debug)]
pub struct HeavyLane {
    turns: Semaphore,
}

impl HeavyLane {
    /// A lane with `workers` turns (at least one): as many heavy steps at once as there are
    /// threads to run them.
    pub fn new(workers: usize) -> Self {
        HeavyLane {
            turns: Semaphore::new(workers.max(1)),
        }
    }

    /// A lane for the current runtime: one turn per worker thread. Panics outside a tokio
    /// runtime, as `tokio::spawn` does.
    pub fn for_current_runtime() -> Self {
        Self::new(tokio::runtime::Handle::current().metrics().num_workers())
    }

    /// Runs `start` and the first poll of the future it returns in a turn of the lane (the
    /// heavy part, such as processing a ClientHello and writing the server's flight), then lets
    /// the tasks that became ready meanwhile run before it hands the turn on, and awaits the
    /// rest of the future outside the lane.
    pub(crate) async fn run<F: Future>(&self, start: impl FnOnce() -> F) -> F::Output {
        // The semaphore is never closed; were it, the step would run without a turn.
        let turn = self.turns.acquire().await.ok();
        let mut work = pin!(start());
        let early = poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
        // Back of the queue, behind every task that is ready now (tokio wakes a yielded task
        // after it has polled for I/O): they run before the next heavy step does.
        tokio::task::yield_now().await;
        drop(turn);
        match early {
            Poll::Ready(output) => output,
            Poll::Pending => work.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Three heavy steps and, queued behind them, one light task: on one thread, the light task
    /// runs after the first heavy step, not after all three.
    #[test]
    fn a_task_ready_behind_several_heavy_steps_waits_for_one_of_them() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let order = Arc::new(Mutex::new(Vec::new()));
        let lane = Arc::new(HeavyLane::new(1));
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for name in ["heavy 1", "heavy 2", "heavy 3"] {
                let (lane, order) = (lane.clone(), order.clone());
                tasks.push(tokio::spawn(async move {
                    let step = || {
                        order.lock().expect("order").push(name);
                        std::future::ready(())
                    };
                    lane.run(step).await;
                }));
            }
            let light = order.clone();
            tasks.push(tokio::spawn(async move {
                light.lock().expect("order").push("light");
            }));
            for task in tasks {
                task.await.expect("task");
            }
        });
        let order = order.lock().expect("order").clone();
        assert_eq!(order, ["heavy 1", "light", "heavy 2", "heavy 3"]);
    }

    /// The step's future is polled to its end: its output comes back whether its first poll
    /// finished it or it had to wait (here, for a message sent after the turn was handed on).
    #[tokio::test]
    async fn the_step_finishes_outside_its_turn() {
        let lane = HeavyLane::new(1);
        assert_eq!(lane.run(|| std::future::ready(7)).await, 7);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let waiting = lane.run(|| receiver);
        let send = async {
            tokio::task::yield_now().await;
            sender.send(8).expect("receiver");
        };
        let (received, ()) = tokio::join!(waiting, send);
        assert_eq!(received.expect("sender"), 8);
        // The turn was handed back: another step gets it.
        assert_eq!(lane.turns.available_permits(), 1);
    }

    /// A proxy given a lane takes its TLS handshakes through it: while the lane's only turn is
    /// held elsewhere a client's handshake does not finish, and once the turn is free it does.
    #[tokio::test]
    async fn a_proxy_given_a_lane_handshakes_in_its_turns() {
        use prometheus_client::registry::Registry;
        use std::time::Duration;
        use tokio::time::timeout;
        let proxy = crate::Proxy::new(crate::ProxyMetrics::new(&mut Registry::default()));
        proxy.apply(&portico_model::Model::default());
        let lane = Arc::new(HeavyLane::new(1));
        let held = lane.turns.try_acquire().expect("a free turn");
        proxy.share_heavy_lane(lane.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(proxy.clone().serve_https(listener, None, stopped));

        let config = Arc::new(portico_testkit::accept_any_certificate());
        let name = rustls::pki_types::ServerName::try_from("lane.test").unwrap();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let handshake = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
        let mut handshake = pin!(handshake);
        let early = timeout(Duration::from_millis(300), handshake.as_mut()).await;
        assert!(
            early.is_err(),
            "the handshake finished while the turn was held"
        );
        drop(held);
        let done = timeout(Duration::from_secs(10), handshake).await;
        done.expect("the handshake finishes once the turn is free")
            .expect("a TLS connection");
    }
}
