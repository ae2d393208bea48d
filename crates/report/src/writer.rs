//! The writer: while this replica is leader, makes the API agree with the newest [`Report`].
//!
//! A pass plans the status patches ([`StatusLedger`]) and the Events ([`EventLedger`]) and sends
//! them with at most [`IN_FLIGHT`] requests in flight, at most [`EVENTS_PER_PASS`] Events per
//! pass. Passes are at least `status_interval` apart; reports arriving meanwhile coalesce (the
//! watch channel keeps only the newest). After a pass with failures, or with Events left over,
//! the next pass comes after `status_interval` even without a new report. A failed request is
//! logged and planned again on the next pass. One the API server rejects for good (404: the
//! object or namespace is gone; 422: invalid) is not retried by itself: a status patch is
//! planned again only with the next report, an Event counts as published.
//!
//! On becoming leader the writer starts from scratch: empty ledgers, so desired and observed
//! status are compared afresh and current diagnostics are published again. On losing
//! leadership (or at shutdown) the pass in progress is dropped, requests in flight included.

use crate::error::Error;
use crate::events::{EventLedger, Reporting, Stamps, event};
use crate::gateway::{GatewayLedger, GatewayStatusReport, gateway_patch_body};
use crate::report::{DiagnosticReport, Report, StatusKind};
use crate::status::{StatusLedger, StatusPatch, patch_body};
use crate::{ReportSettings, shutdown_requested};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::watch;

/// Requests in flight at once, status patches and Events alike.
pub const IN_FLIGHT: usize = 8;
/// Events created per pass at most.
pub const EVENTS_PER_PASS: usize = 50;

/// Runs until shutdown: writes while `leader` is true, idles otherwise.
pub(crate) async fn run(
    client: Client,
    settings: Arc<ReportSettings>,
    mut reports: watch::Receiver<Arc<Report>>,
    mut leader: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => return,
            became = leader.wait_for(|l| *l) => if became.is_err() { return },
        }
        let mut writer = Writer::new(client.clone(), settings.clone());
        tokio::select! {
            () = shutdown_requested(&mut shutdown) => return,
            lost = leader.wait_for(|l| !*l) => if lost.is_err() { return },
            () = writer.lead(&mut reports) => {}
        }
    }
}

struct Writer {
    client: Client,
    settings: Arc<ReportSettings>,
    status: StatusLedger,
    gateway_api: GatewayLedger,
    events: EventLedger,
    stamps: Stamps,
}

/// What became of one request.
enum Outcome {
    Done,
    /// Rejected for good; do not retry for the same report.
    GivenUp,
    Failed,
}

impl Writer {
    fn new(client: Client, settings: Arc<ReportSettings>) -> Self {
        Writer {
            client,
            settings,
            status: StatusLedger::default(),
            gateway_api: GatewayLedger::default(),
            events: EventLedger::default(),
            stamps: Stamps::default(),
        }
    }

    /// Passes over the newest report; never returns while the report channel is open.
    async fn lead(&mut self, reports: &mut watch::Receiver<Arc<Report>>) {
        loop {
            let report = reports.borrow_and_update().clone();
            let again = self.pass(&report).await;
            tokio::time::sleep(self.settings.status_interval).await;
            if !again && reports.changed().await.is_err() {
                // No more reports will come: nothing left to do but wait to be cancelled.
                std::future::pending::<()>().await;
            }
        }
    }

    /// One pass; true when something is left to do without a new report.
    async fn pass(&mut self, report: &Arc<Report>) -> bool {
        let patches = self.status.plan(report);
        let (diagnostics, more) = self.events.plan(report, EVENTS_PER_PASS);
        let diagnostics: Vec<DiagnosticReport> = diagnostics.into_iter().cloned().collect();
        if !patches.is_empty() || !diagnostics.is_empty() {
            tracing::debug!(
                status = patches.len(),
                events = diagnostics.len(),
                "reporting"
            );
        }
        let status_failed = self.write_status(patches).await;
        let gateway_failed = self.write_gateway_api(report).await;
        let events_failed = self.write_events(diagnostics).await;
        status_failed || gateway_failed || events_failed || more
    }

    /// Writes the Gateway API objects' status the ledger does not hold written; true if one
    /// failed in a way worth retrying (a 409: another writer came first, and the source will
    /// show what it wrote).
    async fn write_gateway_api(&mut self, report: &Arc<Report>) -> bool {
        let planned = self.gateway_api.plan(&report.gateway_api);
        let sends = planned.into_iter().map(|i| {
            let (client, report) = (self.client.clone(), report.clone());
            async move {
                let outcome = write_gateway_status(client, &report.gateway_api[i]).await;
                (i, outcome)
            }
        });
        let mut results = std::pin::pin!(stream::iter(sends).buffer_unordered(IN_FLIGHT));
        let mut retry = false;
        while let Some((i, outcome)) = results.next().await {
            match outcome {
                Outcome::Done => self.gateway_api.written(&report.gateway_api[i]),
                Outcome::GivenUp => {}
                Outcome::Failed => retry = true,
            }
        }
        retry
    }

    /// Sends the patches; true if one failed in a way worth retrying.
    async fn write_status(&mut self, patches: Vec<StatusPatch>) -> bool {
        let client = &self.client;
        let sends = patches.into_iter().map(|p| {
            let client = client.clone();
            async move {
                let body = patch_body(p.uid.as_deref(), &p.addresses);
                let ns = Some(p.key.namespace.as_str());
                let path = match p.kind {
                    StatusKind::Ingress => Ingress::url_path(&(), ns),
                    StatusKind::Service => Service::url_path(&(), ns),
                };
                let result = patch_status(&client, path, &p.key.name, &body).await;
                let outcome = outcome(result.map_err(|source| Error::Status {
                    kind: p.kind,
                    key: p.key.clone(),
                    source: Box::new(source),
                }));
                (p, outcome)
            }
        });
        // Each outcome is recorded as it comes: collected first, 10,000 of them were a few
        // megabytes held until the last write was answered.
        let mut results = std::pin::pin!(stream::iter(sends).buffer_unordered(IN_FLIGHT));
        let mut retry = false;
        while let Some((patch, outcome)) = results.next().await {
            match outcome {
                Outcome::Done => self.status.written(patch),
                Outcome::GivenUp => {}
                Outcome::Failed => retry = true,
            }
        }
        retry
    }

    /// Creates the Events; true if one failed in a way worth retrying.
    async fn write_events(&mut self, diagnostics: Vec<DiagnosticReport>) -> bool {
        let reporting = Reporting {
            controller: &self.settings.controller,
            instance: &self.settings.identity,
        };
        let sends: Vec<_> = diagnostics
            .into_iter()
            .map(|d| {
                let now = Timestamp::now();
                let e = event(&d, reporting, now, self.stamps.next(now));
                (d, e)
            })
            .collect();
        let client = &self.client;
        let sends = sends.into_iter().map(|(d, e)| async move {
            let namespace = e.metadata.namespace.as_deref().unwrap_or("default");
            let api = Api::<Event>::namespaced(client.clone(), namespace);
            let result = api.create(&PostParams::default(), &e).await;
            let outcome = outcome(result.map(drop).map_err(|source| Error::Event {
                object: d.diagnostic.object.clone(),
                source: Box::new(source),
            }));
            (d, outcome)
        });
        let results: Vec<_> = stream::iter(sends)
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut retry = false;
        for (d, outcome) in results {
            match outcome {
                Outcome::Done | Outcome::GivenUp => self.events.published(&d),
                Outcome::Failed => retry = true,
            }
        }
        retry
    }
}

/// One Gateway API object's status write, in the version it was read in.
async fn write_gateway_status(client: Client, r: &GatewayStatusReport) -> Outcome {
    let (group, version) = r.api_version.split_once('/').unwrap_or(("", "v1"));
    let (kind, plural) = r.kind.names();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let ns = Some(r.key.namespace.as_str()).filter(|ns| !ns.is_empty());
    let path = DynamicObject::url_path(&resource, ns);
    let result = patch_status(&client, path, &r.key.name, &gateway_patch_body(r)).await;
    outcome(result.map_err(|source| Error::GatewayStatus {
        kind,
        key: r.key.clone(),
        source: Box::new(source),
    }))
}

/// A merge patch of object `name`'s status subresource under `path` (the kind's collection).
/// The object the API server answers with is not decoded: nothing reads it (the watch brings
/// the object again), and at 10,000 routes decoding each answer was a share of the writes' cost.
async fn patch_status<P: Serialize>(
    client: &Client,
    path: String,
    name: &str,
    body: &P,
) -> Result<(), kube::Error> {
    let patch = Patch::Merge(body);
    let request = kube::core::Request::new(path)
        .patch_subresource("status", name, &PatchParams::default(), &patch)
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

fn outcome(result: Result<(), Error>) -> Outcome {
    let Err(e) = result else {
        return Outcome::Done;
    };
    if matches!(e.code(), Some(404 | 422)) {
        tracing::warn!(error = %e, "rejected; not retried");
        Outcome::GivenUp
    } else {
        tracing::warn!(error = %e, "failed; retried on the next pass");
        Outcome::Failed
    }
}
