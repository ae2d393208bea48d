//! TLS passthrough: which pool takes the raw TLS stream of a ClientHello's server name, before
//! any certificate is chosen. A name gets its exact entry, else the entry of its longest
//! wildcard suffix (`*.foo.com` matches `bar.foo.com` and `baz.bar.foo.com`, not `foo.com`:
//! the Gateway API's wildcards); names compare case-insensitively, without a trailing dot.

use super::host::{normalize_host, suffixes};
use super::{FxMap, PoolState};
use std::sync::Arc;

/// The passthrough hosts of the TERMINATED_HTTPS listeners, each with its pool.
#[derive(Debug, Default)]
pub struct Passthrough {
    exact: FxMap<Box<str>, Arc<PoolState>>,
    /// By the suffix after `*.`.
    wildcard: FxMap<Box<str>, Arc<PoolState>>,
}

impl Passthrough {
    /// Adds `host` (`name` or `*.suffix`) unless it is there already: the first entry wins.
    pub(crate) fn insert(&mut self, host: &str, pool: Arc<PoolState>) {
        let host = host.to_ascii_lowercase();
        let table = match host.strip_prefix("*.") {
            Some(suffix) => self.wildcard.entry(Box::from(suffix)),
            None => self.exact.entry(Box::from(host.as_str())),
        };
        table.or_insert(pool);
    }

    /// Whether no host passes through (the handshake path then peeks nothing).
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty()
    }

    /// The pool whose members take `server_name`'s TLS stream as it is; `None`: terminate.
    pub fn find(&self, server_name: &str) -> Option<&Arc<PoolState>> {
        let name = normalize_host(server_name);
        if let Some(pool) = self.exact.get(&*name) {
            return Some(pool);
        }
        suffixes(&name).find_map(|suffix| self.wildcard.get(suffix))
    }
}
