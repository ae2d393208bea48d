//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod client;
pub mod echo;
pub mod model;
pub mod tls;
