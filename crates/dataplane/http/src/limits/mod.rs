//! Limits against abusive clients, applied where hyper has no setting of its own: the
//! deadlines of an idle or slow connection ([`Activity`] and [`Watched`]), the request body's
//! size and minimum rate ([`ClientBody`]), the connection caps ([`Caps`]), and requests
//! declaring both `Content-Length` and `Transfer-Encoding` ([`Framing`]).

mod activity;
mod body;
mod caps;
mod framing;
mod io;

pub(crate) use activity::{Activity, Tracked};
pub(crate) use body::{BodyFault, ClientBody, Fault, H3Body, Inbound};
pub(crate) use caps::Caps;
pub(crate) use framing::{Ambiguous, Framing};
pub(crate) use io::Watched;
