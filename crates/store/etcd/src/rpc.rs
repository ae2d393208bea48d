//! etcd's v3 gRPC API as the rest of the crate speaks it: the messages and clients generated
//! at build time from `proto/etcd.proto` (see build.rs), the channel (endpoints balanced, TLS,
//! HTTP/2 keep-alive), the metadata every request carries (`hasleader`, the auth token), and
//! the few request shapes the crate builds (ops, comparisons, ranges).

use crate::config::{EtcdConfig, TlsFiles};
use crate::error::EtcdError;
use futures::StreamExt as _;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

#[allow(clippy::all, clippy::pedantic, clippy::unwrap_used, missing_docs)]
pub(crate) mod api {
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
}

pub(crate) use api::{
    Compare, DeleteRangeRequest, KeyValue, LeaseGrantRequest, LeaseKeepAliveRequest,
    LeaseRevokeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest,
    WatchRequest, WatchResponse, compare, event, range_request, request_op, response_op,
    watch_create_request, watch_request,
};

type Service = InterceptedService<Channel, Metadata>;
pub(crate) type KvClient = api::kv_client::KvClient<Service>;
pub(crate) type WatchClient = api::watch_client::WatchClient<Service>;
pub(crate) type LeaseClient = api::lease_client::LeaseClient<Service>;
pub(crate) type WatchStream = tonic::Streaming<WatchResponse>;

/// Largest response accepted (a page of big values, a watch response of a big txn).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// What every request carries: `hasleader` (a member cut off from its cluster refuses rather
/// than answering from stale data) and, with credentials, the current auth token.
#[derive(Clone)]
pub(crate) struct Metadata {
    token: Arc<RwLock<Option<AsciiMetadataValue>>>,
}

impl Interceptor for Metadata {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let metadata = request.metadata_mut();
        metadata.insert("hasleader", AsciiMetadataValue::from_static("true"));
        let token = self.token.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(token) = token.as_ref() {
            metadata.insert("token", token.clone());
        }
        Ok(request)
    }
}

/// The channel to the members and the credentials to (re)authenticate with.
#[derive(Clone)]
pub(crate) struct Rpc {
    channel: Channel,
    metadata: Metadata,
    credentials: Option<(String, String)>,
}

impl Rpc {
    /// A channel balanced over the endpoints. Connects lazily: the caller's first request
    /// (bounded by its dial timeout) shows whether a member answers.
    pub(crate) fn new(config: &EtcdConfig) -> Result<Rpc, EtcdError> {
        let tls = config.tls.as_ref().map(tls).transpose()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoints = Vec::new();
        for member in &config.endpoints {
            let url = format!("{scheme}://{member}");
            let invalid = |reason: String| EtcdError::Connect {
                endpoints: config.endpoints.join(","),
                reason,
            };
            let mut endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| invalid(format!("{url}: {e}")))?
                .connect_timeout(config.dial_timeout)
                .http2_keep_alive_interval(config.keep_alive)
                .keep_alive_timeout(config.request_timeout)
                .keep_alive_while_idle(true);
            if let Some(tls) = &tls {
                endpoint = endpoint
                    .tls_config(tls.clone())
                    .map_err(|e| invalid(format!("{url}: {e}")))?;
            }
            endpoints.push(endpoint);
        }
        let credentials = config
            .user
            .clone()
            .map(|user| (user, config.password.clone().unwrap_or_default()));
        Ok(Rpc {
            channel: Channel::balance_list(endpoints.into_iter()),
            metadata: Metadata {
                token: Arc::new(RwLock::new(None)),
            },
            credentials,
        })
    }

    /// Asks etcd for a token with the configured user and password (nothing to do without
    /// them); every later request carries it.
    pub(crate) async fn authenticate(&self) -> Result<(), tonic::Status> {
        let Some((name, password)) = self.credentials.clone() else {
            return Ok(());
        };
        let mut auth = api::auth_client::AuthClient::new(self.channel.clone());
        let answer = auth
            .authenticate(api::AuthenticateRequest { name, password })
            .await?
            .into_inner();
        let token = AsciiMetadataValue::try_from(answer.token)
            .map_err(|_| tonic::Status::internal("etcd gave an auth token that is not ASCII"))?;
        *self
            .metadata
            .token
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(token);
        Ok(())
    }

    /// Whether requests authenticate (and so an expired token can be renewed).
    pub(crate) fn has_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    fn service(&self) -> Service {
        InterceptedService::new(self.channel.clone(), self.metadata.clone())
    }

    pub(crate) fn kv(&self) -> KvClient {
        KvClient::new(self.service()).max_decoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn watch(&self) -> WatchClient {
        WatchClient::new(self.service()).max_decoding_message_size(MAX_MESSAGE)
    }

    pub(crate) fn lease(&self) -> LeaseClient {
        LeaseClient::new(self.service())
    }
}

fn tls(files: &TlsFiles) -> Result<ClientTlsConfig, EtcdError> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(&files.ca)?));
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

/// A txn's put of `value` at `key`, attached to `lease` (0: none).
pub(crate) fn put(key: Vec<u8>, value: impl Into<Vec<u8>>, lease: i64) -> RequestOp {
    op(request_op::Request::RequestPut(PutRequest {
        key,
        value: value.into(),
        lease,
        ..PutRequest::default()
    }))
}

/// A txn's delete of exactly `key`.
pub(crate) fn delete(key: Vec<u8>) -> RequestOp {
    op(request_op::Request::RequestDeleteRange(
        DeleteRangeRequest {
            key,
            ..DeleteRangeRequest::default()
        },
    ))
}

/// A txn's read of exactly `key`.
pub(crate) fn get(key: Vec<u8>) -> RequestOp {
    op(request_op::Request::RequestRange(RangeRequest {
        key,
        ..RangeRequest::default()
    }))
}

fn op(request: request_op::Request) -> RequestOp {
    RequestOp {
        request: Some(request),
    }
}

/// Holds when `key`'s create revision is `revision` (0: the key is absent).
pub(crate) fn created_at(key: Vec<u8>, revision: i64) -> Compare {
    Compare {
        result: compare::CompareResult::Equal.into(),
        target: compare::CompareTarget::Create.into(),
        key,
        target_union: Some(compare::TargetUnion::CreateRevision(revision)),
        range_end: Vec::new(),
    }
}

/// Holds when `key`'s mod revision is `revision` (0: the key is absent).
pub(crate) fn modified_at(key: Vec<u8>, revision: i64) -> Compare {
    Compare {
        result: compare::CompareResult::Equal.into(),
        target: compare::CompareTarget::Mod.into(),
        key,
        target_union: Some(compare::TargetUnion::ModRevision(revision)),
        range_end: Vec::new(),
    }
}

/// A txn: `success` when every comparison holds, else `failure`.
pub(crate) fn txn(
    compare: Vec<Compare>,
    success: Vec<RequestOp>,
    failure: Vec<RequestOp>,
) -> TxnRequest {
    TxnRequest {
        compare,
        success,
        failure,
    }
}

/// The requests of a watch stream: the one that opens it, then none, the stream kept open
/// (etcd ends a watch stream whose client closes its side) until its answers are dropped.
pub(crate) fn watch_stream(
    create: WatchCreateRequest,
) -> impl futures::Stream<Item = WatchRequest> + Send + 'static {
    let open = WatchRequest {
        request_union: Some(watch_request::RequestUnion::CreateRequest(create)),
    };
    futures::stream::iter([open]).chain(futures::stream::pending())
}

/// The revision of a response's header (0 when there is none).
pub(crate) fn revision(header: Option<&api::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}
