//! `portico-bench hyper-floor`: the least a reverse proxy built on hyper can do per request, as
//! the floor of what Portico's proxy can cost on the same library (bench/proxy.sh, proxy
//! `floor`). HTTP/1.1 only, one current-thread runtime: hyper's server connection per client,
//! routes by exact `Host` and first path segment to a pool, round robin over the pool's
//! members, idle upstream connections (hyper's client connection, its own task) kept per member
//! and reused once a response body has ended, `X-Forwarded-For` added. No limits, no health,
//! no logs, no metrics, no TLS: everything Portico does beyond this is Portico's own cost.
//! `--inline`: each upstream connection runs in no task of its own but is polled by the client
//! connection's task that uses it (while sending and while its response body is read); an
//! idle one is polled by no one, and one found closed on its next use is replaced.

use bytes::Bytes;
use http::header::{HOST, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Empty};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Connection, SendRequest};
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

/// An upstream connection: its sender, and its connection future when the floor runs it
/// inline (`None`: spawned, or ended).
struct Upstream {
    sender: SendRequest<Incoming>,
    /// Boxed: the connection is large, and the upstream moves from the idle stack to the
    /// request and its response body and back.
    conn: Option<Box<Connection<TokioIo<TcpStream>, Incoming>>>,
}

impl Upstream {
    /// Polls an inline connection once; drops it once it has ended (failing or giving back
    /// the request it held).
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = self.conn.as_mut()
            && conn.poll_without_shutdown(cx).is_ready()
        {
            self.conn = None;
        }
    }
}

type Idle = Rc<RefCell<Vec<Upstream>>>;

struct Pool {
    members: Vec<(SocketAddr, Idle)>,
    next: Cell<usize>,
}

struct Floor {
    routes: HashMap<(String, String), Rc<Pool>>,
    inline: bool,
}

/// Serves `listen` with `routes` until the process is stopped; `inline`: upstream connections
/// are polled by the tasks using them rather than spawned.
pub fn run(listen: SocketAddr, routes: Vec<Route>, inline: bool) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, serve(listen, routes, inline))
}

/// The routes by host and first path segment; routes that name the same members share one
/// pool, made by `pool` from its members (for `hyper-floor` and `raw-floor` alike).
pub(crate) fn table<P>(
    routes: Vec<Route>,
    pool: impl Fn(&[SocketAddr]) -> P,
) -> HashMap<(String, String), Rc<P>> {
    let mut pools: HashMap<Vec<SocketAddr>, Rc<P>> = HashMap::new();
    let mut table = HashMap::new();
    for route in routes {
        let shared =
            (pools.entry(route.members.clone())).or_insert_with(|| Rc::new(pool(&route.members)));
        table.insert((route.host, route.prefix), shared.clone());
    }
    table
}

async fn serve(listen: SocketAddr, routes: Vec<Route>, inline: bool) -> anyhow::Result<()> {
    let table = table(routes, |members| Pool {
        members: members.iter().map(|m| (*m, Idle::default())).collect(),
        next: Cell::new(0),
    });
    let floor = Rc::new(Floor {
        routes: table,
        inline,
    });
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
            Some(upstream) => ready(upstream).await,
            None => None,
        };
        let mut upstream = match reused {
            Some(upstream) => upstream,
            None => match connect(*addr, self.inline).await {
                Ok(upstream) => upstream,
                Err(_) => return status(StatusCode::BAD_GATEWAY),
            },
        };
        let sent = match send(&mut upstream, req).await {
            Ok(response) => Ok(response),
            // An idle inline connection found closed gives the request back: a new one.
            Err(mut failed) => match failed.take_message() {
                Some(req) if self.inline => match connect(*addr, true).await {
                    Ok(fresh) => {
                        upstream = fresh;
                        send(&mut upstream, req).await
                    }
                    Err(_) => return status(StatusCode::BAD_GATEWAY),
                },
                _ => Err(failed),
            },
        };
        let Ok(response) = sent else {
            return status(StatusCode::BAD_GATEWAY);
        };
        response.map(|body| {
            Either::Left(Returning {
                body,
                upstream: Some(upstream),
                idle: idle.clone(),
            })
        })
    }

    fn route(&self, req: &Request<Incoming>) -> Option<&Rc<Pool>> {
        let host = req.headers().get(HOST)?.to_str().ok()?;
        let host = host.split(':').next().unwrap_or(host);
        let path = req.uri().path().strip_prefix('/')?;
        let prefix = path.split('/').next().unwrap_or(path);
        self.routes.get(&(host.to_owned(), prefix.to_owned()))
    }
}

/// A reused connection once it can take a request; `None` when it has closed.
async fn ready(mut upstream: Upstream) -> Option<Upstream> {
    if upstream.conn.is_none() {
        return upstream.sender.ready().await.is_ok().then_some(upstream);
    }
    std::future::poll_fn(|cx| {
        if !upstream.sender.is_ready() {
            upstream.drive(cx);
        }
        Poll::Ready(())
    })
    .await;
    (upstream.conn.is_some() && upstream.sender.is_ready()).then_some(upstream)
}

/// Sends `req`, polling an inline connection until the response head is there.
async fn send(
    upstream: &mut Upstream,
    req: Request<Incoming>,
) -> Result<Response<Incoming>, hyper::client::conn::TrySendError<Request<Incoming>>> {
    let mut sending = std::pin::pin!(upstream.sender.try_send_request(req));
    std::future::poll_fn(|cx| {
        if upstream.conn.is_none() {
            return sending.as_mut().poll(cx);
        }
        upstream.drive(cx);
        // Only the connection, polled just now, can answer: waking this task for it would
        // only poll it once more for nothing.
        sending.as_mut().poll(&mut quiet())
    })
    .await
}

async fn connect(addr: SocketAddr, inline: bool) -> std::io::Result<Upstream> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    if inline {
        return Ok(Upstream {
            sender,
            conn: Some(Box::new(conn)),
        });
    }
    tokio::task::spawn_local(conn);
    Ok(Upstream { sender, conn: None })
}

/// A context that wakes no one, for what only a connection this task drives can make ready.
fn quiet() -> Context<'static> {
    Context::from_waker(std::task::Waker::noop())
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
    upstream: Option<Upstream>,
    idle: Idle,
}

impl Body for Returning {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let inline = self.upstream.as_ref().is_some_and(|u| u.conn.is_some());
        let polled = if inline {
            // Only the connection, driven here, feeds the body: no wake-up for it.
            let mut polled = Pin::new(&mut self.body).poll_frame(&mut quiet());
            if polled.is_pending()
                && let Some(upstream) = self.upstream.as_mut()
            {
                upstream.drive(cx);
                polled = Pin::new(&mut self.body).poll_frame(&mut quiet());
            }
            polled
        } else {
            Pin::new(&mut self.body).poll_frame(cx)
        };
        let ended = matches!(polled, Poll::Ready(None)) || self.body.is_end_stream();
        if ended && let Some(upstream) = self.upstream.take() {
            self.idle.borrow_mut().push(upstream);
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
