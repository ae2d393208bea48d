//! A request body on the own path: its `Content-Length` bytes, or its chunks decoded and coded
//! again ([`Dechunk`]), go to the member as the client sends them, never gathered whole; the
//! bytes that came with the head go in the same write as the upstream head. The client's pace
//! is held to hyper's path's rule ([`Pace`]).
//!
//! The body is read before the response head is awaited: a member that answers early is
//! read once the body is sent, and one that stops reading fails the write (502, the client's
//! connection closed since the rest of its body is unread), as on hyper's path.

use super::dechunk::Dechunk;
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
pub(super) async fn send_length<IO: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut TcpStream,
    client: &mut Client<IO>,
    limits: &Limits,
    received: &Fault,
) -> Result<(), Failed> {
    let first = client.body_room(client.input.len());
    client.unread -= first as u64;
    let written = write_two(stream, &client.out, &client.input[..first]).await;
    client.input.drain(..first);
    received.count(first as u64);
    written.map_err(broken)?;
    let mut pace = Paced::new(limits);
    while client.unread > 0 {
        let room = client.body_room(BODY_READ);
        let n = pace.read(client, room).await?;
        client.unread -= n as u64;
        received.count(n as u64);
        let written = stream.write_all(&client.input[..n]).await;
        client.input.clear();
        written.map_err(broken)?;
    }
    Ok(())
}

/// Writes the upstream head in `client.out`, then the chunked body that starts in
/// `client.input` as it comes, decoded and coded again ([`Dechunk`]), to `stream`, up to its
/// end: what follows it stays in `client.input`. Its data bytes count against `max` (0: no
/// limit) and in `received`.
pub(super) async fn send_chunked<IO: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut TcpStream,
    client: &mut Client<IO>,
    (limits, max): (&Limits, u64),
    received: &Fault,
) -> Result<(), Failed> {
    let mut dechunk = Dechunk::new(max);
    let mut pace = Paced::new(limits);
    let mut head_sent = false;
    // It holds what the last response left; the coded chunks go there.
    client.upstream.clear();
    loop {
        let before = dechunk.data();
        let fed = dechunk.feed(&client.input, &mut client.upstream);
        let fed = fed.map_err(Failed::Body)?;
        client.input.drain(..fed.consumed);
        received.count(dechunk.data() - before);
        if fed.ended {
            client.unread = 0;
        }
        if !head_sent || !client.upstream.is_empty() {
            let head: &[u8] = if head_sent { &[] } else { &client.out };
            let written = write_two(stream, head, &client.upstream).await;
            client.upstream.clear();
            written.map_err(broken)?;
            head_sent = true;
        }
        if fed.ended {
            return Ok(());
        }
        pace.read(client, BODY_READ).await?;
    }
}

fn broken(error: std::io::Error) -> Failed {
    Failed::Error {
        error: UpstreamError::Io(error),
        unsent: false,
    }
}

/// Reads of a body from the client under its [`Pace`].
struct Paced {
    pace: Pace,
    window: std::time::Duration,
    window_end: Instant,
}

impl Paced {
    fn new(limits: &Limits) -> Paced {
        Paced {
            pace: Pace::new(limits),
            window: limits.body_timeout,
            window_end: Instant::now() + limits.body_timeout,
        }
    }

    /// Reads up to `room` more body bytes from the client into the empty `client.input`: how
    /// many; a fault when the client closed or failed (the body was cut) or a window closed
    /// with too few bytes.
    async fn read<IO: AsyncRead + Unpin>(
        &mut self,
        client: &mut Client<IO>,
        room: usize,
    ) -> Result<usize, Failed> {
        use bytes::BufMut;
        let Client {
            io, input, watch, ..
        } = client;
        input.reserve(room);
        loop {
            let mut limited = (&mut *input).limit(room);
            match watch
                .within(self.window_end, io.read_buf(&mut limited))
                .await
            {
                Some(Ok(n)) if n > 0 => {
                    self.pace.read(n);
                    return Ok(n);
                }
                Some(_) => return Err(Failed::Body(BodyFault::Malformed)),
                None => {
                    self.pace.window_closed().map_err(Failed::Body)?;
                    self.window_end = Instant::now() + self.window;
                }
            }
        }
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
