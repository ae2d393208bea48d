//! Per-pool settings: what an Ingress's annotations ask of the pools its backends become
//! (timeouts, body size, tries, affinity, allowed sources, upstream TLS, health checks).
//!
//! Every field's default is "not set": the data plane's own default applies (the `Limits`
//! flags for timeouts and body size, passive health on, three tries). Both providers serve the
//! same settings; docs/annotations.md lists them.

use crate::ObjectRef;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

/// Settings of one pool. Pools of one Service port with different settings are different
/// pools (the settings are part of the pool's id).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoolSettings {
    /// Establishing a connection to a member (`proxy-connect-timeout`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<u64>,
    /// Waiting for the member's response head, and between two reads of its response
    /// (`proxy-read-timeout`), in milliseconds; 504 when it expires before the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_timeout_ms: Option<u64>,
    /// Between two writes of the request to the member (`proxy-send-timeout`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_timeout_ms: Option<u64>,
    /// Largest request body (`proxy-body-size`), in bytes; 0 means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// Most members one request is tried on, the first try included
    /// (`proxy-next-upstream-tries`); 0 means as many as there are members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tries: Option<u32>,
    /// Retries allowed, as a percentage of the pool's requests over the last 10 s (plus three
    /// per second whatever the traffic): a failing pool is not hammered by retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_budget_percent: Option<u32>,
    /// Cookie session affinity: a client that has the cookie keeps its member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<CookieAffinity>,
    /// Client addresses allowed to reach the pool (`allowlist-source-range`); empty: all.
    /// Others get 403.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_sources: Vec<Cidr>,
    /// Client addresses refused (`denylist-source-range`), checked before `allow_sources`: a
    /// client in both is refused. They get 403.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_sources: Vec<Cidr>,
    /// L4 pools with `sessionAffinity: ClientIP`: how long, in seconds, a client address keeps
    /// its member after its last flow ended (the Service's `timeoutSeconds`, default 10800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_affinity_timeout_s: Option<u64>,
    /// L4 pools: a PROXY protocol header sent to the member before the client's first byte
    /// (the Service's `portico.dev/proxy-protocol`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<ProxyProtocol>,
    /// TLS towards the members, when the protocol is `Https` or `H2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_tls: Option<UpstreamTls>,
    /// Passive health (ejection after failures in a row).
    #[serde(default, skip_serializing_if = "PassiveHealth::is_default")]
    pub passive: PassiveHealth,
    /// Active HTTP health checks; none unless a path is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<ActiveHealth>,
}

impl PoolSettings {
    pub fn is_default(&self) -> bool {
        *self == PoolSettings::default()
    }

    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout_ms.map(Duration::from_millis)
    }

    pub fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout_ms.map(Duration::from_millis)
    }

    pub fn send_timeout(&self) -> Option<Duration> {
        self.send_timeout_ms.map(Duration::from_millis)
    }

    /// Tries per request; the default is 3 (nginx's `proxy_next_upstream_tries` in
    /// ingress-nginx).
    pub fn tries(&self) -> u32 {
        self.tries.unwrap_or(PoolSettings::DEFAULT_TRIES)
    }

    pub fn retry_budget_percent(&self) -> u32 {
        self.retry_budget_percent
            .unwrap_or(PoolSettings::DEFAULT_RETRY_BUDGET_PERCENT)
    }

    pub const DEFAULT_TRIES: u32 = 3;
    pub const DEFAULT_RETRY_BUDGET_PERCENT: u32 = 20;
    /// Default connect timeout when neither the pool nor a flag sets one (nginx's 5 s in
    /// ingress-nginx).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
}

/// The version of the PROXY protocol sent towards members (haproxy's proxy-protocol.txt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyProtocol {
    /// The binary header (version 2, command PROXY).
    V2,
}

/// Cookie session affinity (`affinity: cookie`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CookieAffinity {
    /// The cookie's name (`session-cookie-name`, default `INGRESSCOOKIE`).
    pub name: String,
    /// `Max-Age` of the cookie, in seconds; none: a session cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_s: Option<u64>,
    /// `Path` of the cookie; none: `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl CookieAffinity {
    pub const DEFAULT_NAME: &'static str = "INGRESSCOOKIE";
}

/// TLS towards a pool's members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UpstreamTls {
    /// Verify the member's certificate against `ca` (`proxy-ssl-verify`); off by default, as
    /// in ingress-nginx.
    pub verify: bool,
    /// Secret holding the trusted CA certificates under `ca.crt` (`proxy-ssl-secret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<ObjectRef>,
    /// Name checked against the member's certificate and, with `sni`, sent as SNI
    /// (`proxy-ssl-name`); none: the Service's cluster name `service.namespace.svc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Send SNI (`proxy-ssl-server-name`).
    pub sni: bool,
    /// When not empty, the member's certificate must carry one of these names instead of
    /// `server_name` (still sent as SNI): a BackendTLSPolicy's `subjectAltNames`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// A subject alternative name an upstream certificate may be required to carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SubjectAltName {
    /// A DNS name, matched as a server name is (the certificate's wildcards included).
    Hostname(String),
    /// A URI, compared exactly (a SPIFFE ID, for instance).
    Uri(String),
}

/// Passive health: a member that fails `failures` times in a row (a refused or timed-out
/// connection, a reset before the response, a 5xx answer) is ejected for `ejection_ms`,
/// doubled at each ejection in a row up to 300 s. The last healthy member is never ejected.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PassiveHealth {
    /// 0 turns passive health off.
    pub failures: u32,
    pub ejection_ms: u64,
}

impl Default for PassiveHealth {
    fn default() -> Self {
        PassiveHealth {
            failures: 5,
            ejection_ms: 10_000,
        }
    }
}

impl PassiveHealth {
    pub fn is_default(&self) -> bool {
        *self == PassiveHealth::default()
    }

    pub fn ejection(&self) -> Duration {
        Duration::from_millis(self.ejection_ms)
    }

    /// The longest ejection, whatever the number of ejections in a row.
    pub const MAX_EJECTION: Duration = Duration::from_secs(300);
}

/// Active HTTP health checks: `GET path` to each member every `interval_ms`; a 2xx or 3xx
/// answer within `timeout_ms` is a success. `unhealthy` failures in a row take a member out,
/// `healthy` successes in a row bring it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ActiveHealth {
    pub path: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub healthy: u32,
    pub unhealthy: u32,
}

impl ActiveHealth {
    pub const DEFAULT_INTERVAL_MS: u64 = 5_000;
    pub const DEFAULT_TIMEOUT_MS: u64 = 1_000;
    pub const DEFAULT_HEALTHY: u32 = 2;
    pub const DEFAULT_UNHEALTHY: u32 = 3;

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// An address range: an address and a prefix length, host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an address range (e.g. 10.0.0.0/8, 192.168.1.7, 2001:db8::/32)")]
pub struct CidrError(pub String);

impl Cidr {
    /// The range of `addr/prefix` with the host bits cleared; `None` when the prefix is too long.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= bits).then(|| Cidr {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is in the range; an IPv4-mapped IPv6 address counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((bits & m).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((bits & m).into())
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || CidrError(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| err())?;
        let prefix = match prefix {
            None => {
                if addr.is_ipv4() {
                    32
                } else {
                    128
                }
            }
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 3 => {
                p.parse().map_err(|_| err())?
            }
            Some(_) => return Err(err()),
        };
        Cidr::new(addr, prefix).ok_or_else(err)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parses_masks_and_contains() {
        let c: Cidr = "10.1.2.3/8".parse().unwrap();
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert!(c.contains("10.255.0.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one: Cidr = "192.168.1.7".parse().unwrap();
        assert_eq!(one.to_string(), "192.168.1.7/32");
        assert!(!one.contains("192.168.1.8".parse().unwrap()));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("1.2.3.4".parse().unwrap()));
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.0/",
            "x/8",
            "10.0.0.0/+8",
            "::/129",
            "10.0.0.0/8/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn default_settings_serialize_to_nothing() {
        let json = serde_json::to_string(&PoolSettings::default()).unwrap();
        assert_eq!(json, "{}");
        let back: PoolSettings = serde_json::from_str("{}").unwrap();
        assert!(back.is_default());
    }
}
