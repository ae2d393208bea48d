//! What Portico reports back to the Kubernetes API: Ingress status, Events for diagnostics, and
//! the Lease that elects the one replica that reports.
//!
//! Every replica serves traffic; only the leader writes. The app computes a [`Report`] per
//! configuration generation with the pure [`report()`] and hands it over a watch channel;
//! [`spawn`] starts two tasks:
//! - the lease loop ([`lease`]) elects the leader with a `coordination.k8s.io/v1` Lease and
//!   publishes leadership on a watch channel ([`Reporter::leader`]);
//! - the writer makes, while leader, each Ingress's `status.loadBalancer.ingress` match the
//!   report ([`status`]), writes our Gateway API objects' status ([`gateway`]) and publishes
//!   each diagnostic once as an Event ([`events`]).
//!
//! With the defaults (lease 10 s, retry 2 s) a new leader takes over at most about 12 s after
//! the leader died (it must see the Lease unchanged for 10 s, and polls every 2 s), and within
//! one retry period after a leader stopped gracefully (it releases the Lease).
//!
//! The pure parts (report, status plan, event dedupe, election) depend on no I/O; only the
//! lease loop and the writer talk to the API server. This crate must not depend on sources,
//! data planes or the app; it only reads what the app gives it.

mod error;
mod events;
mod gateway;
pub mod lease;
mod report;
mod status;
mod writer;

pub use error::Error;
pub use events::{EventLedger, MAX_NOTE_BYTES, Reporting, Stamps, event, event_name, note, reason};
pub use gateway::{
    GatewayKind, GatewayLedger, GatewayPatch, GatewayStatusReport, gateway_patch_body,
    gateway_reports,
};
pub use report::{DiagnosticReport, Report, StatusKind, StatusReport, observed, reference, report};
pub use status::{StatusLedger, StatusPatch, patch_body};
pub use writer::{EVENTS_PER_PASS, IN_FLIGHT};

use k8s_openapi::api::coordination::v1::Lease;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Who this replica is, where the Lease lives, and how fast to elect and report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSettings {
    /// This replica: the Lease's holderIdentity and the Events' reportingInstance. Must be
    /// unique among replicas (the pod name).
    pub identity: String,
    pub lease_namespace: String,
    /// Default `portico-leader`.
    pub lease_name: String,
    /// How long a Lease not renewed stays valid for the others; default 10 s. Written as whole
    /// seconds, rounded up.
    pub lease_duration: Duration,
    /// How often to try to acquire or renew; default 2 s.
    pub retry_period: Duration,
    /// The Events' reportingController; default `portico.dev/ingress-controller`.
    pub controller: String,
    /// Minimum time between two status and Event passes; default 1 s.
    pub status_interval: Duration,
}

impl ReportSettings {
    /// The defaults, for this replica's identity and the Lease's namespace.
    pub fn new(identity: String, lease_namespace: String) -> Self {
        ReportSettings {
            identity,
            lease_namespace,
            lease_name: "portico-leader".to_owned(),
            lease_duration: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            controller: "portico.dev/ingress-controller".to_owned(),
            status_interval: Duration::from_secs(1),
        }
    }
}

/// The running lease loop and writer.
#[derive(Debug)]
pub struct Reporter {
    leader: watch::Receiver<bool>,
    lease: JoinHandle<()>,
    writer: JoinHandle<()>,
}

/// Starts the lease loop and the writer on the current tokio runtime (it must be called
/// within one) and returns at once. They run until `shutdown` turns true, or until its sender
/// is dropped.
pub fn spawn(
    client: kube::Client,
    settings: ReportSettings,
    reports: watch::Receiver<Arc<Report>>,
    shutdown: watch::Receiver<bool>,
) -> Reporter {
    let settings = Arc::new(settings);
    let (leader_tx, leader) = watch::channel(false);
    let leases = kube::Api::<Lease>::namespaced(client.clone(), &settings.lease_namespace);
    let lease = tokio::spawn(lease::run(
        leases,
        settings.clone(),
        leader_tx,
        shutdown.clone(),
    ));
    let writer = tokio::spawn(writer::run(
        client,
        settings,
        reports,
        leader.clone(),
        shutdown,
    ));
    Reporter {
        leader,
        lease,
        writer,
    }
}

impl Reporter {
    /// True while this replica holds the Lease and may write.
    pub fn leader(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// Waits for both tasks to end, which they do once shutdown turned true. The leader stops
    /// writing, then releases the Lease on the way out, so a successor takes over at once.
    pub async fn stopped(self) {
        for task in [self.lease, self.writer] {
            if let Err(e) = task.await
                && e.is_panic()
            {
                tracing::error!(error = %e, "a reporting task panicked");
            }
        }
    }

    /// Ends both tasks at once without releasing the Lease, like a crash: the others take over
    /// only when the Lease expires. For tests and for a process that must stop immediately.
    pub fn abort(self) {
        self.lease.abort();
        self.writer.abort();
    }
}

/// Resolves when shutdown turned true or can no longer be signalled.
pub(crate) async fn shutdown_requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}
