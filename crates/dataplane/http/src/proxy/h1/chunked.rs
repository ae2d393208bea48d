//! Follows a chunked response body (RFC 9112 §7.1) as its bytes pass through unchanged, to
//! know where it ends: the own HTTP/1.1 path forwards the chunks as they are and reuses the
//! upstream connection only after the last chunk and the trailer section.

/// Where the scanner is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a chunk size's hex digits (`digits` so far).
    Size {
        digits: u8,
    },
    /// In a chunk extension, up to its CR.
    Extension,
    /// After the size line's CR.
    SizeLf,
    /// Inside a chunk's data.
    Data,
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer line, up to its CR.
    Trailer,
    TrailerLf,
    /// After the final empty line's CR.
    EndLf,
    Done,
}

/// The body is not valid chunked coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid chunked body")]
pub(crate) struct Malformed;

/// A chunk size this large is refused (no body is 2^60 bytes long).
const MAX_DIGITS: u8 = 15;

#[derive(Debug)]
pub(crate) struct Chunked {
    state: State,
    /// Bytes left in the current chunk (while `Data`), or the size read so far.
    size: u64,
}

impl Chunked {
    pub(crate) fn new() -> Self {
        Chunked {
            state: State::Size { digits: 0 },
            size: 0,
        }
    }

    /// Follows `bytes`, the next part of the body: `Some(n)` when the body ends after the
    /// first `n` of them, `None` when it goes on past them.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Option<usize>, Malformed> {
        let mut at = 0;
        while at < bytes.len() {
            if self.state == State::Data {
                let take = usize::try_from(self.size)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len() - at);
                at += take;
                self.size -= take as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            let byte = bytes[at];
            at += 1;
            self.state = match (self.state, byte) {
                (State::Size { digits }, b) if b.is_ascii_hexdigit() => {
                    if digits == MAX_DIGITS {
                        return Err(Malformed);
                    }
                    let digit = char::from(b).to_digit(16).unwrap_or(0);
                    self.size = self.size * 16 + u64::from(digit);
                    State::Size { digits: digits + 1 }
                }
                (State::Size { digits }, b';' | b' ' | b'\t') if digits > 0 => State::Extension,
                (State::Size { digits }, b'\r') if digits > 0 => State::SizeLf,
                (State::Extension, b'\r') => State::SizeLf,
                (State::Extension, b'\n') => return Err(Malformed),
                (State::Extension, _) => State::Extension,
                (State::SizeLf, b'\n') if self.size == 0 => State::TrailerStart,
                (State::SizeLf, b'\n') => State::Data,
                (State::DataCr, b'\r') => State::DataLf,
                (State::DataLf, b'\n') => {
                    self.size = 0;
                    State::Size { digits: 0 }
                }
                (State::TrailerStart, b'\r') => State::EndLf,
                (State::Trailer, b'\r') => State::TrailerLf,
                (State::TrailerStart | State::Trailer, b'\n') => return Err(Malformed),
                (State::TrailerStart | State::Trailer, _) => State::Trailer,
                (State::TrailerLf, b'\n') => State::TrailerStart,
                (State::EndLf, b'\n') => {
                    self.state = State::Done;
                    return Ok(Some(at));
                }
                _ => return Err(Malformed),
            };
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `body` in pieces of `step` bytes; where the body ended, counted from its start.
    fn end(body: &[u8], step: usize) -> Result<Option<usize>, Malformed> {
        let mut scanner = Chunked::new();
        let mut offset = 0;
        for piece in body.chunks(step) {
            if let Some(n) = scanner.feed(piece)? {
                return Ok(Some(offset + n));
            }
            offset += piece.len();
        }
        Ok(None)
    }

    #[test]
    fn the_end_is_found_after_the_last_chunk_and_the_trailers_however_the_bytes_arrive() {
        let bodies: [&[u8]; 4] = [
            b"5\r\nhello\r\n0\r\n\r\n",
            b"5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n",
            b"3\r\nabc\r\n0\r\nExpires: never\r\nX-Trace: 1\r\n\r\n",
            b"0\r\n\r\n",
        ];
        for body in bodies {
            for step in [1, 2, 3, 7, body.len()] {
                let mut with_more = body.to_vec();
                with_more.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
                assert_eq!(
                    end(&with_more, step),
                    Ok(Some(body.len())),
                    "{body:?} {step}"
                );
            }
        }
    }

    #[test]
    fn an_unfinished_body_asks_for_more() {
        for body in [
            &b"5\r\nhel"[..],
            b"5\r\nhello\r\n",
            b"0\r\nX: 1\r\n",
            b"0\r\n\r",
        ] {
            assert_eq!(end(body, 1), Ok(None), "{body:?}");
        }
    }

    #[test]
    fn invalid_coding_is_refused() {
        let bad: [&[u8]; 6] = [
            b"x\r\n",
            b"\r\n",
            b"5\r\nhelloX\r\n",
            b"5\nhello",
            b"1234567890abcdef0\r\n",
            b"0\r\nX: 1\n\r\n",
        ];
        for body in bad {
            assert_eq!(end(body, 1), Err(Malformed), "{body:?}");
        }
    }
}
