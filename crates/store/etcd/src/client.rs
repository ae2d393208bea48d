//! The connection: TLS, credentials, require-leader, and the few request shapes the rest uses
//! (bounded requests, paginated ranges at one revision).

use crate::config::{EtcdConfig, TlsFiles};
use crate::error::{EtcdError, chain};
use crate::keys::{Layout, prefix_end};
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, GetResponse, Identity, KeyValue, KvClient,
    LeaseClient, TlsOptions, WatchClient,
};
use portico_store::kv::{Entry, Key};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

/// Keys per page of a range read; keeps every response well under gRPC's message limit.
const PAGE: i64 = 500;
/// Largest response accepted (a page of big values, a watch response of a big txn).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// A connection to etcd under one prefix. Cheap to clone.
#[derive(Clone)]
pub struct Etcd {
    pub(crate) client: Client,
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
        let options = options(&config)?;
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let urls: Vec<String> = config
            .endpoints
            .iter()
            .map(|e| format!("{scheme}://{e}"))
            .collect();
        let endpoints = config.endpoints.join(",");
        let connect_error = |reason: String| EtcdError::Connect {
            endpoints: endpoints.clone(),
            reason,
        };
        let connecting = Client::connect(&urls, Some(options));
        let client = tokio::time::timeout(config.dial_timeout, connecting)
            .await
            .map_err(|_| connect_error(format!("no answer within {:?}", config.dial_timeout)))?
            .map_err(|e| connect_error(chain(&e)))?;
        let layout = Layout::new(&config.prefix);
        let etcd = Etcd {
            client,
            layout,
            config,
        };
        etcd.probe()
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        Ok(etcd)
    }

    async fn probe(&self) -> Result<(), EtcdError> {
        let key = self.layout.abs(crate::keys::COMMIT);
        let options = GetOptions::new().with_count_only();
        let mut kv = self.kv();
        let timeout = self.config.dial_timeout;
        match tokio::time::timeout(timeout, kv.get(key, Some(options))).await {
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
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn watch_client(&self) -> WatchClient {
        self.client
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn lease(&self) -> LeaseClient {
        self.client.lease_client()
    }

    /// `request` bounded by the request timeout, its error named `what`.
    pub(crate) async fn bounded<T>(
        &self,
        what: &'static str,
        request: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, EtcdError> {
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, request).await {
            Err(_) => Err(EtcdError::Timeout { what, timeout }),
            Ok(Err(e)) => Err(EtcdError::request(what, &e)),
            Ok(Ok(value)) => Ok(value),
        }
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
            let options = GetOptions::new()
                .with_range(end.clone())
                .with_limit(PAGE)
                .with_revision(revision);
            let mut page = self.page(&from, options).await?;
            if revision == 0 {
                // Later pages read at the revision of the first.
                revision = page.header().map_or(0, |h| h.revision());
            }
            let more = page.more();
            let kvs = page.take_kvs();
            let Some(last) = kvs.last() else { break };
            // The next page starts just after the last key of this one.
            from = [last.key(), &[0]].concat();
            all.extend(kvs);
            if !more {
                break;
            }
        }
        Ok((revision, all))
    }

    /// One range request, tried again at once when the member is unavailable: with several
    /// endpoints the client's balancer may pick a dead member (etcd-client issue #39) and a
    /// read is safe to repeat.
    async fn page(&self, from: &[u8], options: GetOptions) -> Result<GetResponse, EtcdError> {
        let tries = 2 * self.config.endpoints.len();
        let mut attempt = 1;
        loop {
            let mut kv = self.kv();
            let got = kv.get(from.to_vec(), Some(options.clone()));
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
        kvs.iter()
            .filter_map(|kv| {
                let key = self.layout.relative(kv.key())?.to_owned();
                let entry = Entry {
                    value: Bytes::copy_from_slice(kv.value()),
                    mod_revision: kv.mod_revision(),
                };
                Some((key, entry))
            })
            .collect()
    }
}

fn options(config: &EtcdConfig) -> Result<ConnectOptions, EtcdError> {
    let mut options = ConnectOptions::new()
        .with_require_leader(true)
        .with_connect_timeout(config.dial_timeout)
        .with_keep_alive(config.keep_alive, config.request_timeout)
        .with_keep_alive_while_idle(true)
        .with_auto_token_refresh(true);
    if let Some(user) = &config.user {
        let password = config.password.clone().unwrap_or_default();
        options = options.with_user(user.clone(), password);
    }
    if let Some(files) = &config.tls {
        options = options.with_tls(tls(files)?);
    }
    Ok(options)
}

fn tls(files: &TlsFiles) -> Result<TlsOptions, EtcdError> {
    let ca = Certificate::from_pem(read(&files.ca)?);
    let mut tls = TlsOptions::new().ca_certificate(ca);
    if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
        tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    Ok(tls)
}

fn read(path: &Path) -> Result<Vec<u8>, EtcdError> {
    std::fs::read(path).map_err(|source| EtcdError::TlsFile {
        path: path.to_owned(),
        source,
    })
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
