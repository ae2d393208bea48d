//! SNI-routed TLS streams: which pool takes the TLS stream of a ClientHello's server name,
//! before any certificate is chosen, and whether it takes it raw (passthrough: the member
//! answers the handshake) or decrypted (terminated here with the SNI certificates, then
//! spliced: a TLSRoute on a listener of `tls.mode: Terminate`), or is refused (a name a
//! Terminate listener covers that no route takes). A name gets its exact entry,
//! else the entry of its longest wildcard suffix (`*.foo.com` matches `bar.foo.com` and
//! `baz.bar.foo.com`, not `foo.com`: the Gateway API's wildcards); names compare
//! case-insensitively, without a trailing dot.

use super::host::{normalize_host, suffixes};
use super::{FxMap, PoolState};
use std::sync::Arc;

/// Where the TLS stream of a server name goes.
#[derive(Debug, Clone)]
pub enum SniTarget {
    /// The raw stream, to a member of the pool.
    Pass(Arc<PoolState>),
    /// Terminated here, the decrypted stream to a member of the pool.
    Terminate(Arc<PoolState>),
    /// Nowhere: the connection is closed before any handshake.
    Refuse,
}

/// The SNI-routed hosts of the TERMINATED_HTTPS listeners, each with its pool.
#[derive(Debug, Default)]
pub struct Passthrough {
    exact: FxMap<Box<str>, SniTarget>,
    /// By the suffix after `*.`.
    wildcard: FxMap<Box<str>, SniTarget>,
}

impl Passthrough {
    /// Adds `host` (`name` or `*.suffix`) unless it is there already: the first entry wins.
    pub(crate) fn insert(&mut self, host: &str, target: SniTarget) {
        let host = host.to_ascii_lowercase();
        let table = match host.strip_prefix("*.") {
            Some(suffix) => self.wildcard.entry(Box::from(suffix)),
            None => self.exact.entry(Box::from(host.as_str())),
        };
        table.or_insert(target);
    }

    /// Whether no host is routed by SNI (the handshake path then peeks nothing).
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty()
    }

    /// Where `server_name`'s TLS stream goes; `None`: terminate it and serve HTTPS.
    pub fn find(&self, server_name: &str) -> Option<&SniTarget> {
        let name = normalize_host(server_name);
        if let Some(target) = self.exact.get(&*name) {
            return Some(target);
        }
        suffixes(&name).find_map(|suffix| self.wildcard.get(suffix))
    }
}
