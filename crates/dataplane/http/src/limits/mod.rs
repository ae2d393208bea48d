//! Limits against abusive clients, applied where hyper has no setting of its own: the
//! deadlines of an idle or slow connection ([`Activity`] and [`Watched`]), the request body's
//! size and minimum rate ([`ClientBody`]) and the connection caps ([`Caps`]).

mod activity;
mod body;
mod caps;
mod io;

pub(crate) use activity::{Activity, Tracked};
pub(crate) use body::{BodyFault, ClientBody, Fault};
pub(crate) use caps::Caps;
pub(crate) use io::Watched;
