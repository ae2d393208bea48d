//! The lease loop: the [`Elector`] driven by reads and writes of the Lease.

use super::decide::{Action, Elector};
use super::spec::{Claim, claimed, record, released};
use crate::error::{Error, code};
use crate::{ReportSettings, shutdown_requested};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout};

/// Runs until `shutdown` turns true (or its sender is gone), publishing leadership on `leader`.
pub(crate) async fn run(
    api: Api<Lease>,
    settings: Arc<ReportSettings>,
    leader: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut lease = LeaseLoop {
        api,
        elector: Elector::new(
            settings.identity.clone(),
            settings.lease_duration,
            settings.retry_period,
        ),
        settings,
        last: None,
    };
    loop {
        let started = Instant::now();
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => break,
            () = lease.attempt() => {}
        }
        lease.publish(&leader);
        let next = started + lease.settings.retry_period;
        // Wake at the renew deadline too, to step down on time while requests fail fast.
        let wake = match lease.elector.leader_until() {
            Some(until) if until > Instant::now() => until.min(next),
            _ => next,
        };
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => break,
            () = sleep_until(wake) => {}
        }
        lease.publish(&leader);
    }
    leader.send_replace(false);
    lease.release().await;
}

struct LeaseLoop {
    api: Api<Lease>,
    settings: Arc<ReportSettings>,
    elector: Elector,
    /// The Lease as last read or written.
    last: Option<Lease>,
}

impl LeaseLoop {
    fn publish(&self, leader: &watch::Sender<bool>) {
        let now = self.elector.is_leader(Instant::now());
        let was = leader.send_replace(now);
        if now != was {
            let identity = self.elector.identity();
            if now {
                tracing::info!(%identity, "became leader: reporting status and events");
            } else {
                tracing::warn!(%identity, "no longer leader: stopped reporting");
            }
        }
    }

    /// One read-decide-write round, bounded in time so leadership can end on schedule.
    async fn attempt(&mut self) {
        let now = Instant::now();
        let limit = match self.elector.leader_until() {
            Some(until) if until > now => until - now,
            _ => self.settings.lease_duration,
        };
        let result = match timeout(limit, self.round()).await {
            Ok(result) => result,
            Err(_) => Err(self.timeout_error(limit)),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "leader election: will retry");
        }
    }

    async fn round(&mut self) -> Result<(), Error> {
        let current = if self.elector.is_leader(Instant::now()) && self.last.is_some() {
            self.last.clone()
        } else {
            let read = self.api.get_opt(&self.settings.lease_name).await;
            read.map_err(|e| self.error(e))?
        };
        let action = self
            .elector
            .decide(current.as_ref().map(record).as_ref(), Instant::now());
        if action == Action::Wait {
            self.last = current;
            return Ok(());
        }
        let sent = Instant::now();
        let wanted = claimed(current.as_ref(), action, self.claim());
        let written = match action {
            Action::Create => self.api.create(&PostParams::default(), &wanted).await,
            _ => {
                let name = &self.settings.lease_name;
                self.api
                    .replace(name, &PostParams::default(), &wanted)
                    .await
            }
        };
        self.written(action, sent, written)
    }

    fn written(
        &mut self,
        action: Action,
        sent: Instant,
        written: Result<Lease, kube::Error>,
    ) -> Result<(), Error> {
        match written {
            Ok(lease) => {
                if action != Action::Renew {
                    tracing::debug!(?action, "lease acquired");
                }
                self.elector.acquired(sent);
                self.last = Some(lease);
                Ok(())
            }
            // Someone else wrote the Lease since it was read: they won.
            Err(e) if code(&e) == Some(409) => {
                tracing::info!(?action, "lease written by another replica meanwhile");
                self.elector.lost();
                self.last = None;
                Ok(())
            }
            Err(e) => Err(self.error(e)),
        }
    }

    /// Hands the Lease over if this replica may hold it; best effort, bounded in time.
    async fn release(&mut self) {
        let Some(current) = self.last.take().filter(|_| self.elector.holds()) else {
            return;
        };
        let limit = self.settings.retry_period.max(Duration::from_secs(1));
        match timeout(limit, self.release_from(current)).await {
            Ok(Ok(true)) => tracing::info!("lease released"),
            Ok(Ok(false)) => tracing::debug!("lease held by another replica: nothing to release"),
            Ok(Err(e)) => tracing::warn!(error = %e, "lease not released"),
            Err(_) => tracing::warn!(error = %self.timeout_error(limit), "lease not released"),
        }
    }

    /// Writes the released Lease over `current`. On a conflict (a renewal cut short by the
    /// shutdown may have changed the resourceVersion) it reads the Lease once more and releases
    /// it if it still names this replica. Whether it released.
    async fn release_from(&self, current: Lease) -> Result<bool, Error> {
        let name = &self.settings.lease_name;
        let params = PostParams::default();
        let first = self
            .api
            .replace(name, &params, &released(&current, Timestamp::now()))
            .await;
        match first {
            Ok(_) => return Ok(true),
            Err(e) if code(&e) == Some(409) => {}
            Err(e) => return Err(self.error(e)),
        }
        let read = self.api.get_opt(name).await.map_err(|e| self.error(e))?;
        let Some(lease) =
            read.filter(|l| record(l).holder.as_deref() == Some(self.elector.identity()))
        else {
            return Ok(false);
        };
        let again = self
            .api
            .replace(name, &params, &released(&lease, Timestamp::now()))
            .await;
        again.map(|_| true).map_err(|e| self.error(e))
    }

    fn claim(&self) -> Claim<'_> {
        Claim {
            namespace: &self.settings.lease_namespace,
            name: &self.settings.lease_name,
            identity: &self.settings.identity,
            duration: self.settings.lease_duration,
            now: Timestamp::now(),
        }
    }

    fn error(&self, source: kube::Error) -> Error {
        Error::Lease {
            namespace: self.settings.lease_namespace.clone(),
            name: self.settings.lease_name.clone(),
            source: Box::new(source),
        }
    }

    fn timeout_error(&self, after: Duration) -> Error {
        Error::LeaseTimeout {
            namespace: self.settings.lease_namespace.clone(),
            name: self.settings.lease_name.clone(),
            after,
        }
    }
}
