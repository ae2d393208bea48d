//! Certificate material for TLS termination: PEM parsing of certificate chains and private keys
//! (PKCS#1, PKCS#8, SEC1), the check that a key matches its certificate, the self-signed
//! certificate served when nothing else fits, and the rustls crypto provider every Portico TLS
//! endpoint uses (ring; TLS 1.2 and 1.3 only).
//!
//! This crate knows neither Kubernetes types nor the model's routing: the translator turns
//! Secrets into [`Material`] with it, and data planes (the built-in proxy, later the haproxy
//! provider) serve that material. It does no I/O. Key bytes never reach a `Debug` output or an
//! error message.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod accept_any;
mod ca;
pub mod generate;
mod material;
mod provider;
mod san;
mod self_signed;
mod sni;

pub use accept_any::AcceptAnyServerCertificate;
pub use ca::{CaBundle, CaBundleError};
pub use material::{Material, MaterialError};
pub use provider::{PROTOCOL_VERSIONS, provider};
pub use san::{SubjectAltName, SubjectAltNameVerifier};
pub use self_signed::{SELF_SIGNED_SUBJECT, SelfSignedError, self_signed};
pub use sni::{Sni, peek_sni};
