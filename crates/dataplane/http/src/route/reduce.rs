//! Reducing a policy's rules to one host and one path comparison: the model's
//! [`portico_model::matching::reduce`], shared with every other provider.

pub(crate) use portico_model::matching::{HostMatch, reduce};
