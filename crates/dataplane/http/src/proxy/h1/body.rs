//! A request body on the own path: its `Content-Length` bytes go to the member as the client
//! sends them, never gathered whole; the bytes that came with the head go in the same write
//! as the upstream head. The client's pace is held to hyper's path's rule ([`Pace`]).
//!
//! The body is read before the response head is awaited: a member that answers early is
//! read once the body is sent, and one that stops reading fails the write (502, the client's
//! connection closed since the rest of its body is unread), as on hyper's path.

use super::{Client, Failed, write_two};
use crate::limits::{BodyFault, Fault};
use crate::upstream::UpstreamError;
use portico_model::Limits;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The most body bytes read from the client for one write to the member (nginx's
/// `client_body_buffer_size` on 64-bit systems; under [`super::KEPT_ROOM`], so that the
/// buffer is kept between requests).
const BODY_READ: usize = 16 * 1024;

/// The client body's pace: at least `--client-body-min-rate` bytes a second over each
/// `--client-body-timeout` window (hyper's path's [`crate::limits::ClientBody`] rule), pure.
#[derive(Debug)]
pub(super) struct Pace {
    per_window: u64,
    this_window: u64,
}

impl Pace {
    pub(super) fn new(limits: &Limits) -> Pace {
        Pace {
            per_window: limits.body_bytes_per_window(),
            this_window: 0,
        }
    }

    pub(super) fn read(&mut self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.this_window = self.this_window.saturating_add(bytes);
    }

    /// A window closed: too slow if it brought fewer bytes than the rate asks; else the next
    /// window begins.
    pub(super) fn window_closed(&mut self) -> Result<(), BodyFault> {
        if self.this_window < self.per_window {
            return Err(BodyFault::TooSlow);
        }
        self.this_window = 0;
        Ok(())
    }
}

/// Writes the upstream head in `client.out` with the body bytes already read, then the rest of
/// the body (`client.unread` bytes) as it comes, to `stream`; counts them in `received`.
/// Every body byte read from the client is consumed from `client.input`, whatever fails.
pub(super) async fn send_with_body<IO: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut TcpStream,
    client: &mut Client<IO>,
    limits: &Limits,
    received: &Fault,
) -> Result<(), Failed> {
    let broken = |error: std::io::Error| Failed::Error {
        error: UpstreamError::Io(error),
        unsent: false,
    };
    let first = client.body_room(client.input.len());
    client.unread -= first as u64;
    let written = write_two(stream, &client.out, &client.input[..first]).await;
    client.input.drain(..first);
    received.count(first as u64);
    written.map_err(broken)?;
    let mut pace = Pace::new(limits);
    let mut window_end = Instant::now() + limits.body_timeout;
    while client.unread > 0 {
        let n = match read_body(client, window_end).await {
            Some(Ok(n)) => n,
            Some(Err(fault)) => return Err(Failed::Body(fault)),
            None => {
                pace.window_closed().map_err(Failed::Body)?;
                window_end = Instant::now() + limits.body_timeout;
                continue;
            }
        };
        pace.read(n);
        received.count(n as u64);
        let written = stream.write_all(&client.input[..n]).await;
        client.input.clear();
        written.map_err(broken)?;
    }
    Ok(())
}

/// Reads the next body bytes (no more than the body has left) into the empty `client.input`:
/// how many, a fault (the client closed or failed: the body was cut), or `None` when
/// `window_end` passed first.
async fn read_body<IO: AsyncRead + Unpin>(
    client: &mut Client<IO>,
    window_end: Instant,
) -> Option<Result<usize, BodyFault>> {
    use bytes::BufMut;
    let room = client.body_room(BODY_READ);
    let Client {
        io,
        input,
        watch,
        unread,
        ..
    } = client;
    input.reserve(room);
    let mut limited = input.limit(room);
    match watch.within(window_end, io.read_buf(&mut limited)).await? {
        Ok(n) if n > 0 => {
            *unread -= n as u64;
            Some(Ok(n))
        }
        Ok(_) | Err(_) => Some(Err(BodyFault::Malformed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(rate: u64) -> Limits {
        Limits {
            body_timeout: Duration::from_secs(10),
            body_min_rate: rate,
            ..Limits::default()
        }
    }

    #[test]
    fn a_window_with_fewer_bytes_than_the_rate_asks_is_too_slow() {
        let mut pace = Pace::new(&limits(100));
        pace.read(999);
        assert_eq!(pace.window_closed(), Err(BodyFault::TooSlow));
        let mut pace = Pace::new(&limits(100));
        pace.read(600);
        pace.read(400);
        assert_eq!(pace.window_closed(), Ok(()));
        // Each window counts on its own.
        pace.read(10);
        assert_eq!(pace.window_closed(), Err(BodyFault::TooSlow));
    }

    #[test]
    fn without_a_minimum_rate_a_window_still_needs_a_byte() {
        let mut pace = Pace::new(&limits(0));
        pace.read(1);
        assert_eq!(pace.window_closed(), Ok(()));
        assert_eq!(pace.window_closed(), Err(BodyFault::TooSlow));
    }
}
