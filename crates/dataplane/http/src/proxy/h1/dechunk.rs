//! A chunked request body (RFC 9112 §7.1), decoded and coded again for the member, pure.
//!
//! The member gets chunks framed by the proxy (`{size:x}\r\n`, the data, `\r\n`, then
//! `0\r\n\r\n`), never the client's size lines, extensions or trailers: whatever the client
//! wrote, the member reads the body this decoder read, so no byte can be framed two ways
//! (request smuggling). It is as strict as hyper's decoder, whose path serves the chunked
//! bodies the own path does not: hex sizes without overflow, whitespace only before an
//! extension or the line's end, extensions up to CRLF without a bare LF (16 KiB in all), CRLF
//! after each chunk's data, trailer lines (16 KiB in all, dropped as hyper's path drops them)
//! up to the empty line (a bare LF inside them passing, as in hyper's). The data's size counts against the body limit.

use crate::limits::BodyFault;

/// Extension bytes a body may carry in all (hyper's limit).
const MAX_EXTENSIONS: u64 = 16 * 1024;
/// Trailer bytes a body may carry in all.
const MAX_TRAILERS: u64 = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a chunk size's hex digits (`digits` so far).
    Size {
        digits: u8,
    },
    /// Whitespace after the size.
    SizeSpace,
    /// In a chunk extension, up to its CR.
    Extension,
    /// After the size line's CR.
    SizeLf,
    /// Inside a chunk's data, `left` bytes to go.
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

/// How far one [`Dechunk::feed`] went.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Fed {
    /// Bytes of the input that belong to the body (the rest is the next request's).
    pub(super) consumed: usize,
    /// The body ended within them.
    pub(super) ended: bool,
}

/// Whether `input` starts with a whole chunked body, well-formed and of at most `max` data
/// bytes (0: no limit).
pub(super) fn is_whole(input: &[u8], max: u64) -> bool {
    let mut coded = Vec::new();
    let fed = Dechunk::new(max).feed(input, &mut coded);
    matches!(fed, Ok(Fed { ended: true, .. }))
}

#[derive(Debug)]
pub(super) struct Dechunk {
    state: State,
    /// The current chunk's size, read so far or left to copy.
    size: u64,
    /// Data bytes so far, against `max` (0: no limit).
    data: u64,
    max: u64,
    extensions: u64,
    trailers: u64,
}

impl Dechunk {
    /// A decoder for a body of at most `max` data bytes (0: no limit).
    pub(super) fn new(max: u64) -> Dechunk {
        Dechunk {
            state: State::Size { digits: 0 },
            size: 0,
            data: 0,
            max,
            extensions: 0,
            trailers: 0,
        }
    }

    /// Data bytes decoded so far.
    pub(super) fn data(&self) -> u64 {
        self.data
    }

    /// Decodes `input`, the next bytes from the client, appending the body's data coded
    /// again to `out` (and the last chunk once the body ends).
    pub(super) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<Fed, BodyFault> {
        let mut at = 0;
        while at < input.len() {
            if self.state == State::Done {
                break;
            }
            if self.state == State::Data {
                let take = usize::try_from(self.size)
                    .map_or(input.len() - at, |size| size.min(input.len() - at));
                self.data += take as u64;
                if self.max > 0 && self.data > self.max {
                    return Err(BodyFault::TooLarge);
                }
                out.extend_from_slice(format!("{take:x}\r\n").as_bytes());
                out.extend_from_slice(&input[at..at + take]);
                out.extend_from_slice(b"\r\n");
                at += take;
                self.size -= take as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            let byte = input[at];
            at += 1;
            self.state = self.step(byte).ok_or(BodyFault::Malformed)?;
            if self.state == State::Done {
                out.extend_from_slice(b"0\r\n\r\n");
            }
        }
        Ok(Fed {
            consumed: at,
            ended: self.state == State::Done,
        })
    }

    /// The state after `byte`; `None`: not chunked coding as hyper reads it.
    fn step(&mut self, byte: u8) -> Option<State> {
        Some(match (self.state, byte) {
            (State::Size { digits }, b) if b.is_ascii_hexdigit() => {
                let digit = u64::from(char::from(b).to_digit(16)?);
                self.size = self.size.checked_mul(16)?.checked_add(digit)?;
                State::Size {
                    digits: digits.saturating_add(1),
                }
            }
            (State::Size { digits }, b' ' | b'\t') if digits > 0 => State::SizeSpace,
            (State::SizeSpace, b' ' | b'\t') => State::SizeSpace,
            (State::Size { digits }, b';') if digits > 0 => State::Extension,
            (State::SizeSpace, b';') => State::Extension,
            (State::Size { digits }, b'\r') if digits > 0 => State::SizeLf,
            (State::SizeSpace | State::Extension, b'\r') => State::SizeLf,
            (State::Extension, b'\n') => return None,
            (State::Extension, _) => {
                self.extensions += 1;
                (self.extensions < MAX_EXTENSIONS).then_some(State::Extension)?
            }
            (State::SizeLf, b'\n') if self.size == 0 => State::TrailerStart,
            (State::SizeLf, b'\n') => State::Data,
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => {
                self.size = 0;
                State::Size { digits: 0 }
            }
            (State::TrailerStart, b'\r') => State::EndLf,
            (State::Trailer, b'\r') => State::TrailerLf,
            (State::TrailerStart | State::Trailer, _) => {
                self.trailers += 1;
                (self.trailers < MAX_TRAILERS).then_some(State::Trailer)?
            }
            (State::TrailerLf, b'\n') => State::TrailerStart,
            (State::EndLf, b'\n') => State::Done,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `body` in pieces of `step` bytes: what the member gets and where the body
    /// ended, or the fault.
    fn decode(body: &[u8], step: usize, max: u64) -> Result<(String, Option<usize>), BodyFault> {
        let mut dechunk = Dechunk::new(max);
        let mut out = Vec::new();
        let mut offset = 0;
        for piece in body.chunks(step) {
            let fed = dechunk.feed(piece, &mut out)?;
            if fed.ended {
                let text = String::from_utf8_lossy(&out).into_owned();
                return Ok((text, Some(offset + fed.consumed)));
            }
            assert_eq!(fed.consumed, piece.len());
            offset += piece.len();
        }
        Ok((String::from_utf8_lossy(&out).into_owned(), None))
    }

    #[test]
    fn the_member_gets_the_data_in_the_proxys_framing_whatever_the_clients() {
        let cases: [(&[u8], &str); 5] = [
            (b"5\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"),
            (b"005\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"),
            (b"5;a=b\r\nhello\r\n0;c\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"),
            (
                b"5 \t;ext\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
                "5\r\nhello\r\n0\r\n\r\n",
            ),
            (
                b"A\r\n0123456789\r\n0\r\n\r\n",
                "a\r\n0123456789\r\n0\r\n\r\n",
            ),
        ];
        for (body, want) in cases {
            let (got, end) = decode(body, body.len(), 0).unwrap();
            assert_eq!((got.as_str(), end), (want, Some(body.len())), "{body:?}");
            // Byte by byte, the same data in one-byte chunks.
            let (_, end) = decode(body, 1, 0).unwrap();
            assert_eq!(end, Some(body.len()), "{body:?}");
        }
    }

    #[test]
    fn only_a_whole_well_formed_body_within_the_limit_is_whole() {
        assert!(is_whole(b"3\r\nabc\r\n0\r\n\r\nGET", 0));
        assert!(is_whole(b"3\r\nabc\r\n0\r\n\r\n", 3));
        assert!(!is_whole(b"3\r\nabc\r\n0\r\n\r\n", 2));
        assert!(!is_whole(b"3\r\nabc\r\n0\r\n", 0));
        assert!(!is_whole(b"3\r\nab", 0));
        assert!(!is_whole(b"zz\r\n", 0));
        assert!(!is_whole(b"", 0));
    }

    #[test]
    fn what_follows_the_body_is_left_for_the_next_request() {
        let mut dechunk = Dechunk::new(0);
        let mut out = Vec::new();
        let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        let fed = dechunk.feed(input, &mut out).unwrap();
        assert_eq!(
            fed,
            Fed {
                consumed: 13,
                ended: true
            }
        );
        assert_eq!(dechunk.data(), 3);
    }

    #[test]
    fn malformed_chunked_coding_is_refused_as_hyper_refuses_it() {
        let malformed: [&[u8]; 12] = [
            b"5\r\nhello\r\r\n0\r\n\r\n",
            b"5;\r\r\nhello\r\n0\r\n\r\n",
            b"zz\r\nhello\r\n0\r\n\r\n",
            b"\r\nhello\r\n0\r\n\r\n",
            b"-5\r\nhello\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"5 x\r\nhello\r\n0\r\n\r\n",
            b"5;a\nhello\r\n0\r\n\r\n",
            b"10000000000000000\r\n",
            b"0x5\r\nhello\r\n0\r\n\r\n",
        ];
        for body in malformed {
            for step in [1, body.len()] {
                assert_eq!(decode(body, step, 0), Err(BodyFault::Malformed), "{body:?}");
            }
        }
    }

    #[test]
    fn data_over_the_limit_is_too_large_and_framing_does_not_count() {
        let body = b"4\r\nabcd\r\n4\r\nefgh\r\n0\r\n\r\n";
        assert!(decode(body, 3, 8).is_ok());
        assert_eq!(decode(body, 3, 7), Err(BodyFault::TooLarge));
        assert_eq!(decode(b"ffffffff\r\nab", 100, 1), Err(BodyFault::TooLarge));
    }

    #[test]
    fn extensions_and_trailers_are_bounded() {
        let long = [b"1;".as_slice(), &[b'e'; 17 * 1024], b"\r\n"].concat();
        assert_eq!(decode(&long, 4096, 0), Err(BodyFault::Malformed));
        let trailer = [b"0\r\nX: ".as_slice(), &[b't'; 17 * 1024], b"\r\n\r\n"].concat();
        assert_eq!(decode(&trailer, 4096, 0), Err(BodyFault::Malformed));
    }
}
