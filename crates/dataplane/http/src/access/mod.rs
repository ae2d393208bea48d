//! The access log: one JSON line per request, formatted into a buffer owned by the request and
//! handed to a dedicated writer thread ([`writer`]), so that the request path never waits on
//! log I/O. Values from the client (host, path, request id) are JSON-escaped ([`json`]);
//! no header other than `Host` and `X-Request-Id` is logged (never `Authorization` or
//! `Cookie`).

mod entry;
mod json;
mod request_id;
mod time;
mod writer;

pub(crate) use entry::{Asked, Entry, Logged};
pub(crate) use request_id::new_id_text;
pub(crate) use request_id::{X_REQUEST_ID, ensure_request_id};
pub(crate) use time::http_date_now;
pub use writer::{AccessLog, Destination};
