//! The access log: one JSON line per request. The request path copies what the line says into
//! a record ([`record`]) and leaves it in its thread's buffer; a dedicated writer thread
//! ([`writer`]) formats the records and writes the lines, so that the request path neither
//! waits on log I/O nor spends its core on formatting. Values from the client (host, path, request id) are JSON-escaped ([`json`]);
//! no header other than `Host` and `X-Request-Id` is logged (never `Authorization` or
//! `Cookie`).

mod entry;
mod json;
mod record;
mod request_id;
mod time;
mod writer;

pub(crate) use entry::{Asked, Client, Entry, Logged, RequestId};
pub(crate) use request_id::{X_REQUEST_ID, ensure_request_id};
pub(crate) use request_id::{new_id_bits, uuid_text};
pub(crate) use time::http_date_now;
pub use writer::{AccessLog, Destination};
