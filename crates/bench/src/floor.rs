//! `portico-bench hyper-floor`: the least a reverse proxy built on hyper can do per request, as
//! the floor of what Portico's proxy can cost on the same library (bench/proxy.sh, proxy
//! `floor`). HTTP/1.1 only, one current-thread runtime: hyper's server connection per client,
//! routes by exact `Host` and first path segment to a pool, round robin over the pool's
//! members, idle upstream connections (hyper's client connection, its own task) kept per member
//! and reused once a response body has ended, `X-Forwarded-For` added. No limits, no health,
//! no logs, no metrics, no TLS: everything Portico does beyond this is Portico's own cost.

use bytes::Bytes;
use http::header::{HOST, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Empty};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::net::{TcpListener, TcpStream};

/// One route: `host`, the first path segment `prefix` (without slashes), and its members.
#[derive(Debug, Clone)]
pub struct Route {
    pub host: String,
    pub prefix: String,
    pub members: Vec<SocketAddr>,
}

impl std::str::FromStr for Route {
    type Err = String;

    /// `HOST/PREFIX=ADDR,ADDR…`
    fn from_str(s: &str) -> Result<Self, String> {
        let (route, members) = s.split_once('=').ok_or("expected HOST/PREFIX=ADDR,…")?;
        let (host, prefix) = route.split_once('/').ok_or("expected HOST/PREFIX")?;
        let members = members
            .split(',')
            .map(|m| m.parse().map_err(|e| format!("{m}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if members.is_empty() {
            return Err("a route needs a member".into());
        }
        Ok(Route {
            host: host.to_owned(),
            prefix: prefix.to_owned(),
            members,
        })
    }
}

type Idle = Rc<RefCell<Vec<SendRequest<Incoming>>>>;

struct Pool {
    members: Vec<(SocketAddr, Idle)>,
    next: Cell<usize>,
}

struct Floor {
    routes: HashMap<(String, String), Rc<Pool>>,
}

/// Serves `listen` with `routes` until the process is stopped.
pub fn run(listen: SocketAddr, routes: Vec<Route>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, serve(listen, routes))
}

async fn serve(listen: SocketAddr, routes: Vec<Route>) -> anyhow::Result<()> {
    let mut pools: HashMap<Vec<SocketAddr>, Rc<Pool>> = HashMap::new();
    let mut table = HashMap::new();
    for route in routes {
        let pool = pools.entry(route.members.clone()).or_insert_with(|| {
            Rc::new(Pool {
                members: (route.members.iter())
                    .map(|m| (*m, Idle::default()))
                    .collect(),
                next: Cell::new(0),
            })
        });
        table.insert((route.host, route.prefix), pool.clone());
    }
    let floor = Rc::new(Floor { routes: table });
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let floor = floor.clone();
        tokio::task::spawn_local(async move {
            let client = HeaderValue::from_str(&peer.ip().to_string()).expect("an address");
            let service = service_fn(move |req| {
                let (floor, client) = (floor.clone(), client.clone());
                async move { Ok::<_, std::convert::Infallible>(floor.forward(req, client).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let _ = conn.await;
        });
    }
}

type FloorBody = Either<Returning, Empty<Bytes>>;

impl Floor {
    async fn forward(
        &self,
        mut req: Request<Incoming>,
        client: HeaderValue,
    ) -> Response<FloorBody> {
        let Some(pool) = self.route(&req) else {
            return status(StatusCode::NOT_FOUND);
        };
        let at = pool.next.get();
        pool.next.set((at + 1) % pool.members.len());
        let (addr, idle) = &pool.members[at];
        req.headers_mut().append("x-forwarded-for", client);
        let popped = idle.borrow_mut().pop();
        let reused = match popped {
            Some(mut sender) => sender.ready().await.is_ok().then_some(sender),
            None => None,
        };
        let mut sender = match reused {
            Some(sender) => sender,
            None => match connect(*addr).await {
                Ok(sender) => sender,
                Err(_) => return status(StatusCode::BAD_GATEWAY),
            },
        };
        match sender.send_request(req).await {
            Ok(response) => response.map(|body| {
                Either::Left(Returning {
                    body,
                    sender: Some(sender),
                    idle: idle.clone(),
                })
            }),
            Err(_) => status(StatusCode::BAD_GATEWAY),
        }
    }

    fn route(&self, req: &Request<Incoming>) -> Option<&Rc<Pool>> {
        let host = req.headers().get(HOST)?.to_str().ok()?;
        let host = host.split(':').next().unwrap_or(host);
        let path = req.uri().path().strip_prefix('/')?;
        let prefix = path.split('/').next().unwrap_or(path);
        self.routes.get(&(host.to_owned(), prefix.to_owned()))
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<SendRequest<Incoming>> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::task::spawn_local(conn);
    Ok(sender)
}

fn status(status: StatusCode) -> Response<FloorBody> {
    let mut response = Response::new(Either::Right(Empty::new()));
    *response.status_mut() = status;
    response
}

/// An upstream response body that gives its connection back to the member's idle stack when
/// it ends.
struct Returning {
    body: Incoming,
    sender: Option<SendRequest<Incoming>>,
    idle: Idle,
}

impl Body for Returning {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        let ended = matches!(polled, Poll::Ready(None)) || self.body.is_end_stream();
        if ended && let Some(sender) = self.sender.take() {
            self.idle.borrow_mut().push(sender);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
