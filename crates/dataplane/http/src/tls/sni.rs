//! The SNI map: which certificate a handshake gets for the name the client sent.

use super::MaterialBySecret;
use portico_model::{Model, Protocol};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::Arc;

/// Certificates by exact name and by wildcard suffix, and the default certificate.
///
/// A name gets its exact entry, else the wildcard entry one label above it (`*.foo.com` for
/// `bar.foo.com`, not for `baz.bar.foo.com` nor `foo.com`), else the default. Names compare
/// case-insensitively, without a trailing dot.
#[derive(Debug, Default)]
pub struct SniMap {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// By the suffix after `*.`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl SniMap {
    /// The map of the TERMINATED_HTTPS listeners of the `proxy` load balancers in `model`.
    /// Entries whose Secret has no material are left out (their names get the wildcard or the
    /// default certificate); on a name in two load balancers the first by id wins, and so does
    /// the first default certificate.
    pub fn build(model: &Model, material: &MaterialBySecret) -> Self {
        let mut lbs: Vec<_> = model.load_balancers.iter().collect();
        lbs.sort_by_key(|lb| lb.id);
        let listeners = lbs.into_iter().flat_map(|lb| lb.listeners.iter());
        let tls = listeners
            .filter(|l| l.protocol == Protocol::TerminatedHttps)
            .filter_map(|l| l.tls.as_ref());
        let mut map = SniMap::default();
        for tls in tls {
            let default = tls
                .default_certificate
                .as_ref()
                .and_then(|s| material.get(s));
            if map.default.is_none() {
                map.default = default.map(|m| m.certified_key().clone());
            }
            for entry in &tls.sni {
                if let Some(found) = material.get(&entry.certificate) {
                    map.insert(&entry.host, found.certified_key().clone());
                }
            }
        }
        map
    }

    fn insert(&mut self, host: &str, key: Arc<CertifiedKey>) {
        let host = host.to_ascii_lowercase();
        let table = match host.strip_prefix("*.") {
            Some(suffix) => self.wildcard.entry(suffix.to_owned()),
            None => self.exact.entry(host),
        };
        table.or_insert(key);
    }

    /// The certificate for `server_name` (none: the client sent no SNI); `None` when nothing
    /// fits and there is no configured default.
    pub fn resolve(&self, server_name: Option<&str>) -> Option<&Arc<CertifiedKey>> {
        let Some(name) = server_name else {
            return self.default.as_ref();
        };
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        if let Some(exact) = self.exact.get(&name) {
            return Some(exact);
        }
        let suffix = match name.split_once('.') {
            Some((label, suffix)) if !label.is_empty() => Some(suffix),
            _ => None,
        };
        let wildcard = suffix.and_then(|s| self.wildcard.get(s));
        wildcard.or(self.default.as_ref())
    }
}

#[cfg(test)]
#[path = "sni_tests.rs"]
mod tests;
