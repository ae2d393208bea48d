//! A policy's rules (a logical AND) reduced to one host and one path comparison: the model's
//! [`portico_model::matching::reduce`], which the built-in proxy uses too, so both providers
//! agree on every odd combination.

pub(super) use portico_model::matching::reduce;
