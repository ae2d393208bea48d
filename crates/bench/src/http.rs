//! A pooled HTTP/1.1 client for requests to 127.0.0.1 with a chosen Host, each bounded in time.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

/// What the bench looks at in a response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// `X-Total-Count` (the admin API's lists), when present.
    pub total: Option<usize>,
    pub body: Bytes,
}

impl Reply {
    /// The `pod` an echo backend names in its JSON answer.
    pub fn pod(&self) -> Option<String> {
        let json: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        json["pod"].as_str().map(str::to_owned)
    }
}

#[derive(Debug, Clone)]
pub struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Http {
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }
}

impl Http {
    /// `GET http://{to}{path}` with `Host: {host}`; an error names what failed.
    pub async fn get(&self, to: SocketAddr, host: &str, path: &str) -> Result<Reply, String> {
        let req = http::Request::get(format!("http://{to}{path}"))
            .header(http::header::HOST, host)
            .body(Empty::new())
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let total =
                (resp.headers().get("x-total-count")).and_then(|v| v.to_str().ok()?.parse().ok());
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok(Reply {
                status,
                total,
                body: body.to_bytes(),
            })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err("timed out after 5 s".to_owned()))
    }

    pub async fn status(&self, to: SocketAddr, host: &str, path: &str) -> Option<u16> {
        self.get(to, host, path).await.ok().map(|r| r.status)
    }
}
