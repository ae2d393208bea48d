//! The one place where a failed request becomes an HTTP response (linkerd's "rescue").

use super::ProxyBody;
use crate::limits::BodyFault;
use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{Either, Full};
use portico_model::PoolId;

/// Why a request was not forwarded, or failed upstream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("request has no usable host")]
    MissingHost,
    #[error("request target is not an absolute path")]
    BadTarget,
    #[error(
        "request names more than one host (Host and authority differ, two Host fields or a list)"
    )]
    AmbiguousHost,
    #[error("request declares both Content-Length and Transfer-Encoding")]
    AmbiguousLength,
    #[error("request path has a dot segment")]
    DotSegment,
    #[error("request declares a body larger than the limit")]
    TooLarge,
    #[error("request body failed: {0}")]
    Body(#[from] crate::limits::BodyFault),
    #[error("upstream {upstream} of pool {pool} sent no response head in time")]
    UpstreamTimeout {
        pool: PoolId,
        upstream: std::net::SocketAddr,
    },
    #[error("the route's request timeout ran out before pool {pool} answered")]
    RequestTimeout { pool: PoolId },
    #[error("the client's address is not among the allowed sources of pool {pool}")]
    SourceNotAllowed { pool: PoolId },
    #[error("the client is over a rate or connection limit of its route")]
    Limited(u16),
    #[error("the auth service answers {0} for the request")]
    Auth(u16),
    #[error("no route matches the request")]
    NoRoute,
    #[error("a policy rejects the request with status {0}")]
    Rejected(u16),
    #[error("pool {pool} has no ready member")]
    NoReadyMember { pool: PoolId },
    #[error("pool {pool} speaks h2c: upgrades are forwarded over HTTP/1.1 only")]
    UpgradeToH2c { pool: PoolId },
    #[error("upstream {upstream} of pool {pool} failed: {source}")]
    Upstream {
        pool: PoolId,
        upstream: std::net::SocketAddr,
        #[source]
        source: crate::upstream::UpstreamError,
    },
}

impl ProxyError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ProxyError::MissingHost
            | ProxyError::BadTarget
            | ProxyError::AmbiguousHost
            | ProxyError::AmbiguousLength
            | ProxyError::DotSegment
            | ProxyError::Body(BodyFault::Malformed) => StatusCode::BAD_REQUEST,
            ProxyError::TooLarge | ProxyError::Body(BodyFault::TooLarge) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ProxyError::Body(BodyFault::TooSlow) => StatusCode::REQUEST_TIMEOUT,
            ProxyError::UpstreamTimeout { .. } | ProxyError::RequestTimeout { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            ProxyError::Upstream { source, .. } if source.is_timeout() => {
                StatusCode::GATEWAY_TIMEOUT
            }
            ProxyError::SourceNotAllowed { .. } => StatusCode::FORBIDDEN,
            ProxyError::NoRoute => StatusCode::NOT_FOUND,
            ProxyError::Rejected(status)
            | ProxyError::Limited(status)
            | ProxyError::Auth(status) => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::FORBIDDEN)
            }
            ProxyError::NoReadyMember { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::Upstream { .. } => StatusCode::BAD_GATEWAY,
            ProxyError::UpgradeToH2c { .. } => StatusCode::NOT_IMPLEMENTED,
        }
    }

    /// A short plain-text response naming the status, e.g. `404 Not Found\n`.
    pub(crate) fn response(&self) -> Response<ProxyBody> {
        let status = self.status();
        let mut response = Response::new(Either::Right(Full::new(body(status))));
        *response.status_mut() = status;
        let plain = HeaderValue::from_static("text/plain; charset=utf-8");
        response.headers_mut().insert(CONTENT_TYPE, plain);
        // After a bad or abusive request, the connection is not worth keeping (nginx and
        // haproxy close it too); on HTTP/2 hyper drops this connection-specific field.
        if status.is_client_error() && status != StatusCode::NOT_FOUND && !self.is_policy() {
            let close = HeaderValue::from_static("close");
            response.headers_mut().insert(CONNECTION, close);
        }
        response
    }

    /// Logs the failure: a member's at `warn`, the request's own at `debug`.
    pub(crate) fn log(&self) {
        match self {
            ProxyError::Upstream { .. } => tracing::warn!(error = %self, "upstream request failed"),
            _ => tracing::debug!(error = %self, "request not forwarded"),
        }
    }

    /// A policy's own answer, not a fault of the request.
    fn is_policy(&self) -> bool {
        matches!(
            self,
            ProxyError::Rejected(_)
                | ProxyError::Limited(_)
                | ProxyError::Auth(_)
                | ProxyError::SourceNotAllowed { .. }
        )
    }
}

pub(super) fn body(status: StatusCode) -> Bytes {
    match status {
        StatusCode::BAD_REQUEST => Bytes::from_static(b"400 Bad Request\n"),
        StatusCode::NOT_FOUND => Bytes::from_static(b"404 Not Found\n"),
        StatusCode::BAD_GATEWAY => Bytes::from_static(b"502 Bad Gateway\n"),
        StatusCode::SERVICE_UNAVAILABLE => Bytes::from_static(b"503 Service Unavailable\n"),
        other => {
            let reason = other.canonical_reason().unwrap_or("");
            Bytes::from(format!("{} {reason}\n", other.as_str()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn text(e: ProxyError) -> (u16, String) {
        let response = e.response();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn each_error_maps_to_its_status_and_a_short_text_body() {
        let pool = PoolId::derive("p");
        assert_eq!(
            text(ProxyError::NoRoute).await,
            (404, "404 Not Found\n".into())
        );
        assert_eq!(
            text(ProxyError::MissingHost).await,
            (400, "400 Bad Request\n".into())
        );
        let down = ProxyError::NoReadyMember { pool };
        assert_eq!(text(down).await, (503, "503 Service Unavailable\n".into()));
        assert_eq!(
            text(ProxyError::Rejected(403)).await,
            (403, "403 Forbidden\n".into())
        );
    }

    #[test]
    fn rejection_with_an_impossible_status_becomes_forbidden() {
        assert_eq!(ProxyError::Rejected(42).status(), StatusCode::FORBIDDEN);
    }
}
