//! `portico-bench raw-floor`: the least a reverse proxy with an HTTP/1.1 path of its own can do
//! per request on tokio (bench/proxy.sh, proxy `raw`), beside `hyper-floor`, the least one on
//! hyper can do. One current-thread runtime; each client connection is one task that parses a
//! request head with httparse, routes it by exact `Host` and first path segment, picks a member
//! round robin, writes the head (hop-by-hop fields dropped, `X-Forwarded-For` appended) on an
//! idle upstream connection of that member (or a new one), parses the response head and copies
//! the response back by its `Content-Length`. No chunked bodies, no request bodies, no
//! upgrades, no limits, health, logs, metrics or TLS: it answers how low a proxy of its own can
//! go on the same sockets and runtime, not how to serve real traffic.

use crate::floor::Route;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const MAX_HEADERS: usize = 64;

struct Pool {
    members: Vec<(SocketAddr, RefCell<Vec<TcpStream>>)>,
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
    let table = crate::floor::table(routes, |members| Pool {
        members: members.iter().map(|m| (*m, RefCell::default())).collect(),
        next: Cell::new(0),
    });
    let floor = Rc::new(Floor { routes: table });
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let floor = floor.clone();
        tokio::task::spawn_local(async move {
            let _ = floor.connection(stream, peer).await;
        });
    }
}

/// A parsed head's framing: where its fields end and how long its body is.
struct Head {
    len: usize,
    body: usize,
    close: bool,
}

impl Floor {
    async fn connection(&self, mut client: TcpStream, peer: SocketAddr) -> std::io::Result<()> {
        let forwarded = format!("X-Forwarded-For: {}\r\n", peer.ip());
        let mut input = Vec::with_capacity(4096);
        let mut output = Vec::with_capacity(4096);
        // Room for a 16 KiB body in one read.
        let mut upstream_input = Vec::with_capacity(32 * 1024);
        loop {
            let Some(request) = read_request(&mut client, &mut input).await? else {
                return Ok(());
            };
            output.clear();
            let Some((pool, close)) = self.head(&input[..request], &forwarded, &mut output) else {
                client
                    .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    .await?;
                input.drain(..request);
                continue;
            };
            input.drain(..request);
            let at = pool.next.get();
            pool.next.set((at + 1) % pool.members.len());
            let (addr, idle) = &pool.members[at];
            let popped = idle.borrow_mut().pop();
            let mut upstream = match popped {
                Some(upstream) => upstream,
                None => connect(*addr).await?,
            };
            if upstream.write_all(&output).await.is_err() {
                // A stale idle connection: one new try.
                upstream = connect(*addr).await?;
                upstream.write_all(&output).await?;
            }
            upstream_input.clear();
            let response = loop {
                if upstream.read_buf(&mut upstream_input).await? == 0 {
                    return Ok(());
                }
                if let Some(head) = response_head(&upstream_input)? {
                    break head;
                }
            };
            output.clear();
            copy_head(&upstream_input[..response.len], close, &mut output)?;
            // The body: what came with the head, then the rest by its length.
            let have = (upstream_input.len() - response.len).min(response.body);
            output.extend_from_slice(&upstream_input[response.len..response.len + have]);
            client.write_all(&output).await?;
            let mut left = response.body - have;
            while left > 0 {
                upstream_input.clear();
                let n = upstream.read_buf(&mut upstream_input).await?;
                if n == 0 {
                    return Ok(());
                }
                let n = n.min(left);
                client.write_all(&upstream_input[..n]).await?;
                left -= n;
            }
            if !response.close {
                idle.borrow_mut().push(upstream);
            }
            if close {
                return Ok(());
            }
        }
    }

    /// Routes the request head `raw` and writes it for the upstream into `out`: its pool,
    /// and whether the client asked to close.
    fn head(&self, raw: &[u8], forwarded: &str, out: &mut Vec<u8>) -> Option<(Rc<Pool>, bool)> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        req.parse(raw).ok()?;
        let (method, path) = (req.method?, req.path?);
        let host = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"));
        let host = std::str::from_utf8(host?.value).ok()?;
        let host = host.split(':').next().unwrap_or(host);
        let prefix = path.strip_prefix('/')?;
        let prefix = prefix.split(['/', '?']).next().unwrap_or(prefix);
        let pool = self.routes.get(&(host.to_owned(), prefix.to_owned()))?;
        let mut close = false;
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                close = h.value.eq_ignore_ascii_case(b"close");
                continue;
            }
            if is_hop_by_hop(h.name) {
                continue;
            }
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(h.value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(forwarded.as_bytes());
        out.extend_from_slice(b"\r\n");
        Some((pool.clone(), close))
    }
}

/// Reads until `input` holds a whole request head; its length (`None`: the client closed).
async fn read_request(
    client: &mut TcpStream,
    input: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    loop {
        if !input.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(input) {
                Ok(httparse::Status::Complete(len)) => return Ok(Some(len)),
                Ok(httparse::Status::Partial) => {}
                Err(error) => return Err(std::io::Error::other(error)),
            }
        }
        if client.read_buf(input).await? == 0 {
            return Ok(None);
        }
    }
}

/// The response head in `input`, once it is whole.
fn response_head(input: &[u8]) -> std::io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(input) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(std::io::Error::other(error)),
    };
    let mut head = Head {
        len,
        body: 0,
        close: response.version == Some(0),
    };
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(h.value).ok();
            head.body = value.and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        } else if h.name.eq_ignore_ascii_case("connection") {
            head.close = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    Ok(Some(head))
}

/// The response head `raw` as the client gets it: hop-by-hop fields dropped, `Connection:
/// close` when the client asked for it.
fn copy_head(raw: &[u8], close: bool, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    response.parse(raw).map_err(std::io::Error::other)?;
    let code = response.code.unwrap_or(502);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(code.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(response.reason.unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") || is_hop_by_hop(h.name) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

fn is_hop_by_hop(name: &str) -> bool {
    ["keep-alive", "proxy-connection", "te", "trailer", "upgrade"]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
