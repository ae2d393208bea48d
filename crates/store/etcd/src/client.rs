//! The connection: TLS, credentials, require-leader, and the few request shapes the rest uses
//! (bounded requests, paginated ranges at one revision).

use crate::config::EtcdConfig;
use crate::error::{EtcdError, chain};
use crate::keys::{Layout, prefix_end};
use crate::rpc::{KeyValue, KvClient, LeaseClient, RangeRequest, Rpc, WatchClient};
use bytes::Bytes;
use portico_store::kv::{Entry, Key};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// Keys per page of a range read; keeps every response well under gRPC's message limit.
const PAGE: i64 = 500;

/// A connection to etcd under one prefix. Cheap to clone.
#[derive(Clone)]
pub struct Etcd {
    pub(crate) rpc: Rpc,
    pub(crate) layout: Layout,
    pub(crate) config: EtcdConfig,
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Etcd {
    /// Connects, authenticates when a user is configured, and reads once to prove that a member
    /// with a leader answers, all within `dial_timeout`. Every request carries `hasleader`, so a
    /// member cut off from its cluster refuses rather than serving stale data.
    pub async fn connect(config: EtcdConfig) -> Result<Etcd, EtcdError> {
        config.validate()?;
        let rpc = Rpc::new(&config)?;
        let endpoints = config.endpoints.join(",");
        let connect_error = |reason: String| EtcdError::Connect {
            endpoints: endpoints.clone(),
            reason,
        };
        let dial = config.dial_timeout;
        tokio::time::timeout(dial, rpc.authenticate())
            .await
            .map_err(|_| connect_error(format!("no answer within {dial:?}")))?
            .map_err(|e| connect_error(chain(&e)))?;
        let layout = Layout::new(&config.prefix);
        let etcd = Etcd {
            rpc,
            layout,
            config,
        };
        etcd.probe()
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        Ok(etcd)
    }

    async fn probe(&self) -> Result<(), EtcdError> {
        let request = RangeRequest {
            key: self.layout.abs(crate::keys::COMMIT),
            count_only: true,
            ..RangeRequest::default()
        };
        let mut kv = self.kv();
        let timeout = self.config.dial_timeout;
        match tokio::time::timeout(timeout, kv.range(request)).await {
            Err(_) => Err(EtcdError::Timeout {
                what: "the first read",
                timeout,
            }),
            Ok(Err(e)) => Err(EtcdError::request("first read", &e)),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// The configuration this connection was made with.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    pub(crate) fn kv(&self) -> KvClient {
        self.rpc.kv()
    }

    pub(crate) fn watch_client(&self) -> WatchClient {
        self.rpc.watch()
    }

    pub(crate) fn lease(&self) -> LeaseClient {
        self.rpc.lease()
    }

    /// `request` bounded by the request timeout, its error named `what`: its answer.
    pub(crate) async fn bounded<T>(
        &self,
        what: &'static str,
        request: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, EtcdError> {
        let answer = async { request.await.map(tonic::Response::into_inner) };
        self.within(what, answer).await
    }

    /// `step` (a request, a stream's next message) bounded by the request timeout, its error
    /// named `what`. A request refused for an expired or unknown auth token renews the token,
    /// so that trying again succeeds.
    pub(crate) async fn within<T>(
        &self,
        what: &'static str,
        step: impl Future<Output = Result<T, tonic::Status>>,
    ) -> Result<T, EtcdError> {
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, step).await {
            Err(_) => Err(EtcdError::Timeout { what, timeout }),
            Ok(Err(e)) if self.token_refused(&e) => {
                let renewed = tokio::time::timeout(timeout, self.rpc.authenticate()).await;
                if let Ok(Err(again)) = &renewed {
                    tracing::warn!(error = %chain(again), "renewing the etcd auth token failed");
                }
                Err(EtcdError::token_refused(what, &e))
            }
            Ok(Err(e)) => Err(EtcdError::request(what, &e)),
            Ok(Ok(answer)) => Ok(answer),
        }
    }

    /// An UNAUTHENTICATED answer about the token (not about the credentials themselves).
    fn token_refused(&self, status: &tonic::Status) -> bool {
        self.rpc.has_credentials()
            && status.code() == tonic::Code::Unauthenticated
            && status.message().contains("token")
    }

    /// Every key under `subtree` (relative to the prefix) at `revision` (0: the newest), page
    /// by page at one revision, and that revision.
    pub(crate) async fn range(
        &self,
        subtree: &str,
        revision: i64,
    ) -> Result<(i64, Vec<KeyValue>), EtcdError> {
        let start = self.layout.abs(subtree);
        let end = prefix_end(&start);
        let (mut revision, mut from, mut all) = (revision, start, Vec::new());
        loop {
            let request = RangeRequest {
                key: from.clone(),
                range_end: end.clone(),
                limit: PAGE,
                revision,
                ..RangeRequest::default()
            };
            let page = self.page(request).await?;
            if revision == 0 {
                // Later pages read at the revision of the first.
                revision = crate::rpc::revision(page.header.as_ref());
            }
            let more = page.more;
            let kvs = page.kvs;
            let Some(last) = kvs.last() else { break };
            // The next page starts just after the last key of this one.
            from = [last.key.as_slice(), &[0]].concat();
            all.extend(kvs);
            if !more {
                break;
            }
        }
        Ok((revision, all))
    }

    /// One range request, tried again at once when the member is unavailable: with several
    /// endpoints the channel's balancer may pick a member that is down, and a
    /// read is safe to repeat.
    async fn page(
        &self,
        request: RangeRequest,
    ) -> Result<crate::rpc::api::RangeResponse, EtcdError> {
        let tries = 2 * self.config.endpoints.len();
        let mut attempt = 1;
        loop {
            let mut kv = self.kv();
            let got = kv.range(request.clone());
            match self.bounded("range", got).await {
                Err(e) if e.is_unavailable() && attempt < tries => attempt += 1,
                done => return done,
            }
        }
    }
}

impl Etcd {
    /// Listed key-values as entries keyed relative to the prefix.
    pub(crate) fn entries(&self, kvs: Vec<KeyValue>) -> BTreeMap<Key, Entry> {
        // The values are taken, not copied: a listing of 10,000 Ingresses is 24 MiB.
        kvs.into_iter()
            .filter_map(|kv| {
                let key = self.layout.relative(&kv.key)?.to_owned();
                let entry = Entry {
                    value: Bytes::from(kv.value),
                    mod_revision: kv.mod_revision,
                };
                Some((key, entry))
            })
            .collect()
    }
}

/// Doubling pauses between retries, from 100 ms up to a ceiling.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub(crate) fn new(max: Duration) -> Self {
        Backoff {
            next: Duration::from_millis(100),
            max,
        }
    }

    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(self.max);
    }

    pub(crate) fn reset(&mut self) {
        self.next = Duration::from_millis(100);
    }
}
