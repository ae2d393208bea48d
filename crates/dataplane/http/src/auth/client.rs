//! The subrequest to the auth service: one HTTP/1.1 client per process (connections pooled
//! per service), a deadline for the whole exchange.

use super::{Auth, Verdict, verdict};
use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::LazyLock;
use std::time::Duration;

static CLIENT: LazyLock<Client<HttpConnector, Empty<Bytes>>> = LazyLock::new(|| {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
});

/// The auth service's verdict on `request`, with its answer's header fields; `Error` when it
/// does not answer within `timeout` or cannot be reached.
pub(crate) async fn ask(
    auth: &Auth,
    request: Request<()>,
    timeout: Duration,
) -> (Verdict, HeaderMap) {
    let request = request.map(|()| Empty::new());
    match tokio::time::timeout(timeout, CLIENT.request(request)).await {
        Ok(Ok(response)) => (
            verdict(response.status().as_u16()),
            response.into_parts().0.headers,
        ),
        Ok(Err(error)) => {
            tracing::warn!(url = %auth.uri, %error, "auth service unreachable: 500");
            (Verdict::Error, HeaderMap::new())
        }
        Err(_) => {
            tracing::warn!(url = %auth.uri, "auth service did not answer in time: 500");
            (Verdict::Error, HeaderMap::new())
        }
    }
}
