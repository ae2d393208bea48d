//! A request of a route with `auth-url` asks the auth service before it is forwarded
//! (`crate::auth` builds the subrequest and reads the answer).

use super::ProxyBody;
use super::conn::{Conn, host_value, redirect_response, request_host, rescue};
use super::error::ProxyError;
use super::tries::read_timeout;
use crate::auth::{Auth, Original, Verdict, client, signin_location, subrequest};
use crate::route::PoolState;
use http::header::{HeaderValue, WWW_AUTHENTICATE};
use http::{Request, Response};

impl Conn {
    /// Lets `req` through with the auth service's `auth-response-headers`, or answers for
    /// it: the service's 401 (or the sign-in redirect) or 403, else 500.
    pub(super) async fn authorize<B>(
        &self,
        auth: Option<&Auth>,
        pool: &PoolState,
        req: &mut Request<B>,
    ) -> Result<(), Response<ProxyBody>> {
        let fail = |status| rescue(&pool.metrics, &ProxyError::Auth(status));
        let Some(auth) = auth else {
            return Err(fail(500));
        };
        let host = request_host(req).unwrap_or_default().to_owned();
        let target = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut headers = req.headers().clone();
        let host_field = host_value(req).unwrap_or_else(|| HeaderValue::from_static(""));
        self.forwarded.apply(&mut headers, host_field);
        let scheme = self.forwarded.scheme.as_str();
        let original = Original {
            method: req.method(),
            target: &target,
            scheme,
            host: &host,
            headers,
            client: &self.forwarded.client,
        };
        let Some(sub) = subrequest(auth, original) else {
            return Err(fail(500));
        };
        let (verdict, answer) =
            client::ask(auth, sub, read_timeout(pool, &self.proxy.limits)).await;
        match verdict {
            Verdict::Allow => {
                let fields = req.headers_mut();
                for name in &auth.response_headers {
                    fields.remove(name);
                    for value in answer.get_all(name) {
                        fields.append(name.clone(), value.clone());
                    }
                }
                Ok(())
            }
            Verdict::Deny(401) => {
                let signin = signin_location(auth, scheme, &host, &target);
                let location = signin.and_then(|l| HeaderValue::from_str(&l).ok());
                if let Some(location) = location {
                    return Err(redirect_response(&pool.metrics, 302, location));
                }
                let mut response = fail(401);
                for value in answer.get_all(WWW_AUTHENTICATE) {
                    response
                        .headers_mut()
                        .append(WWW_AUTHENTICATE, value.clone());
                }
                Err(response)
            }
            Verdict::Deny(status) => Err(fail(status)),
            Verdict::Error => Err(fail(500)),
        }
    }
}
