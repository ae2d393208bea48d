//! The controller loop, one for every store: each load of the source is compiled and, while
//! this controller leads, written to the store; the agents' feedback (and, with agents apart,
//! their claims) is published to the admin API and, with Kubernetes, to status. `portico run`
//! runs it over the memory store, `portico controller` over etcd.

use crate::controller::Controller;
use crate::metrics::AppMetrics;
use crate::snapshot::status_addresses;
use crate::source::Source;
use portico_admin::{Admin, LoadBalancerAddress};
use portico_store::{ControllerStore, Feedback, Stored};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Pause before writing again after a failed write.
const RETRY: Duration = Duration::from_millis(250);

/// How long after the first change not yet collected the loop collects its thread's heap: the
/// changes of a burst (endpoint churn, a directory being rewritten) share one collection, and
/// it comes after a change's own steps (compile, the agent's apply, the publication), not
/// between them, unless those take longer than this.
const TRIM_AFTER: Duration = Duration::from_millis(200);

/// When the loop next collects its thread's heap: [`TRIM_AFTER`] after the first change
/// since its last collection.
#[derive(Debug, Default, Clone, Copy)]
struct TrimSchedule {
    due: Option<Instant>,
}

impl TrimSchedule {
    /// The loop compiled or published at `now`: a collection is owed, at the latest
    /// [`TRIM_AFTER`] after the first change it covers.
    fn changed(&mut self, now: Instant) {
        self.due.get_or_insert(now + TRIM_AFTER);
    }

    /// When the owed collection is due; `None` when none is owed.
    fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The collection was made.
    fn done(&mut self) {
        self.due = None;
    }
}

pub(crate) struct ControllerLoop<'a, S> {
    pub(crate) controller: Controller,
    pub(crate) store: S,
    pub(crate) admin: &'a Admin,
    pub(crate) metrics: &'a AppMetrics,
    /// The status addresses unless the source follows `--publish-service`.
    pub(crate) fixed_publish: Vec<LoadBalancerAddress>,
}

impl<S: ControllerStore> ControllerLoop<'_, S> {
    /// Runs until `shutdown` or the source ends; then gives up leadership.
    pub(crate) async fn run(mut self, source: &mut Source, mut shutdown: watch::Receiver<bool>) {
        let mut updates = source.subscribe();
        let mut agents = self.store.agents();
        let mut claims = self.store.claims();
        let mut leadership = self.store.leadership();
        let apart = self.store.agents_apart();
        let follows = self.store.feedback_follows_writes();
        // The Kubernetes source publishes its first snapshot once every kind is listed.
        let mut first = matches!(source, Source::Kube { .. });
        let mut compile = !first;
        let mut dirty = false;
        let mut revision = 0;
        let mut leading = *leadership.borrow_and_update();
        let mut trim = TrimSchedule::default();
        // Whether the loop woke only to collect its heap: nothing to publish.
        let mut collected = false;
        // Whether this leader took over the stored addresses and placements (in one process
        // there are none to take over).
        let mut seeded = !apart;
        if apart {
            // Addresses and placements as the last leader left them, so that this controller's
            // view agrees with the store's until it leads (then it reads them again).
            match self.store.stored().await {
                Ok(stored) => self.seed(stored),
                Err(e) => tracing::warn!("cannot read the stored state: {e}"),
            }
        }
        loop {
            let woke_to_collect = std::mem::take(&mut collected);
            let listed = agents.borrow_and_update().clone();
            // Placement waits for the first listing of the agents: before it, none is known.
            if apart && listed.listed && self.controller.set_agents(&listed.feedback, self.metrics)
            {
                dirty = true;
            }
            let mut worked = compile;
            if compile {
                compile = false;
                dirty = true;
                tracing::debug!("load seen");
                let loaded = updates.borrow_and_update().clone();
                if let Some(retired) = self.controller.compile(loaded, self.metrics) {
                    source.retire(retired);
                }
            }
            // With one agent in the process, a new revision is published once the agent
            // reports it (its feedback names the revision it serves, so every write is
            // followed by a feedback change): building the snapshot right after the compile
            // too would cost the CPU twice, beside the agent's apply.
            let mut written = false;
            if dirty && leading {
                let started = std::time::Instant::now();
                let wrote = self.write(&mut seeded).await;
                let took = crate::compile::ms(started.elapsed());
                tracing::debug!(write_ms = took, "desired state written");
                match wrote {
                    Ok(r) => {
                        dirty = false;
                        written = r.is_some();
                        revision = r.unwrap_or(0);
                    }
                    Err(e) => tracing::warn!("cannot write the desired state: {e}"),
                }
            }
            // Not before the first load; not right after a write the agent will answer; not
            // after a wake-up only to collect.
            if !(first || (follows && written) || woke_to_collect) {
                if apart {
                    let claims = claims.borrow_and_update();
                    let holders = crate::failover::holders(&claims, self.controller.placed());
                    drop(claims);
                    self.controller.set_holders(holders);
                } else {
                    // The one agent of this process: placements show in the admin API only.
                    self.controller.set_agents(&listed.feedback, self.metrics);
                }
                let served = listed.feedback.values().map(|f| f.revision).max();
                let revision = revision.max(served.unwrap_or(0));
                let started = std::time::Instant::now();
                self.publish(source, revision, &listed.feedback);
                let took = crate::compile::ms(started.elapsed());
                tracing::debug!(revision, publish_ms = took, "published");
                worked = true;
            }
            // This loop runs on the thread that called `block_on`, not on a runtime worker
            // (those collect their heap when they park): after a compile or a publish it gives
            // back the pages that the states it replaced emptied, and asks the other threads
            // to give back theirs (it freed objects they made). Without it they stay resident
            // for as long as nothing changes (after every object is deleted: for good). Not at
            // once: once per burst of changes, `TRIM_AFTER` after its first.
            if worked {
                trim.changed(Instant::now());
            }
            let trim_due = trim.due();
            let trim_due = async move {
                match trim_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            let published = async {
                match source.published() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = updates.changed() => {
                    if changed.is_err() { break }
                    first = false;
                    compile = true;
                }
                // An agent's feedback changed (serving, a rejected configuration): publish it.
                changed = agents.changed() => if changed.is_err() { break },
                changed = claims.changed() => if changed.is_err() { break },
                changed = leadership.changed() => {
                    if changed.is_err() { break }
                    leading = *leadership.borrow_and_update();
                    // Any change while leading is a new leadership (a loss may have passed
                    // unseen): take the stored state over again.
                    if leading {
                        seeded = !apart;
                        dirty = true;
                    }
                }
                // `--publish-service` has new addresses: status changes.
                true = published => {}
                () = tokio::time::sleep(RETRY), if dirty && leading => {}
                () = trim_due => {
                    trim.done();
                    collect();
                    collected = true;
                }
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        self.store.resign().await;
    }

    /// Writes the compiled state; a new leader first takes over the stored addresses and
    /// placements (once per leadership, not again after a failed write).
    async fn write(&mut self, seeded: &mut bool) -> Result<Option<u64>, S::Error> {
        if self.controller.compiled().is_none() {
            return Ok(None);
        }
        if !*seeded {
            let stored = self.store.stored().await?;
            self.seed(stored);
            *seeded = true;
        }
        let Some(compiled) = self.controller.compiled() else {
            return Ok(None);
        };
        self.store.write(&compiled.desired).await
    }

    /// Takes the addresses and placements of a stored state as the previous ones.
    fn seed(&mut self, stored: Stored) {
        let allocations = stored
            .addresses
            .into_iter()
            .map(|(id, (vip, floating_ip))| {
                let addresses = portico_translate::address::Addresses { vip, floating_ip };
                (id, addresses)
            });
        (self.controller).seed(allocations.collect(), stored.placements, self.metrics);
    }

    /// The admin snapshot and, with Kubernetes, the report.
    fn publish(&self, source: &mut Source, revision: u64, feedback: &BTreeMap<String, Feedback>) {
        let publish = match source.published() {
            Some(rx) => status_addresses_of(&rx.borrow_and_update()),
            None => self.fixed_publish.clone(),
        };
        (self.controller).publish(source, self.admin, revision, feedback, &publish);
    }
}

/// Collects this thread's heap and asks the other threads to collect theirs
/// ([`crate::trim::trim_after_change`]); logs how long this thread's collection took.
fn collect() {
    let started = std::time::Instant::now();
    crate::trim::trim_after_change();
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    tracing::debug!(micros, "collected the controller thread's heap");
}

/// Status entries for `--publish-service`'s addresses.
fn status_addresses_of(addresses: &[String]) -> Vec<LoadBalancerAddress> {
    addresses
        .iter()
        .flat_map(|a| status_addresses(Some(a)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_store::MemoryStore;
    use prometheus_client::registry::Registry;
    use std::cell::Cell;
    use std::sync::Arc;

    thread_local! {
        /// Collections asked for on this thread.
        static COLLECTED: Cell<u32> = const { Cell::new(0) };
    }

    fn count() {
        COLLECTED.set(COLLECTED.get() + 1);
    }

    const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: portico
  rules:
  - host: a.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
";

    /// The loop runs on `block_on`'s thread, which no runtime hook collects: it collects its
    /// own heap after it compiled (and after it published).
    #[tokio::test]
    async fn the_loop_collects_its_threads_heap_after_a_compile() {
        assert!(crate::trim::set_trim(count), "the only registration");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ingress.yaml"), INGRESS).unwrap();
        let limits = portico_source_file::ReadLimits::default();
        let files = portico_source_file::watch(vec![dir.path().to_path_buf()], limits).unwrap();
        let mut source = Source::Files(files);
        let metrics = AppMetrics::new(&mut Registry::default());
        let admin = portico_admin::Admin::new(Arc::new(Registry::default()));
        let controller = ControllerLoop {
            controller: crate::controller::Controller::new(portico_translate::Config::default()),
            store: MemoryStore::default(),
            admin: &admin,
            metrics: &metrics,
            fixed_publish: Vec::new(),
        };
        let (stop, shutdown) = watch::channel(false);
        let before = COLLECTED.get();
        let watched = async {
            // The loop and this future take turns on this thread.
            for _ in 0..500 {
                if COLLECTED.get() > before {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let first = COLLECTED.get();
            // Nothing changed since: no more collections (waking up to collect is no change).
            tokio::time::sleep(5 * TRIM_AFTER).await;
            stop.send_replace(true);
            first
        };
        let ((), first) = tokio::join!(controller.run(&mut source, shutdown), watched);
        assert!(
            first > before,
            "no collection on the loop's thread after its first compile"
        );
        assert_eq!(COLLECTED.get(), first, "collections without a change");
    }

    #[test]
    fn a_burst_of_changes_owes_one_collection_due_after_its_first() {
        let start = Instant::now();
        let mut schedule = TrimSchedule::default();
        assert_eq!(schedule.due(), None, "nothing changed, nothing owed");
        schedule.changed(start);
        schedule.changed(start + TRIM_AFTER / 2);
        assert_eq!(schedule.due(), Some(start + TRIM_AFTER));
        schedule.done();
        assert_eq!(schedule.due(), None);
        let later = start + 3 * TRIM_AFTER;
        schedule.changed(later);
        assert_eq!(schedule.due(), Some(later + TRIM_AFTER));
    }
}
