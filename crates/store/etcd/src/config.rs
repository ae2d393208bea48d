//! What it takes to reach etcd: endpoints, the key prefix, TLS files, credentials and timeouts;
//! and the parser of the command-line form `etcd://HOST:PORT[,HOST:PORT…]` (`etcds://` when
//! TLS is required).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The prefix every Portico key lives under unless configured otherwise.
pub const DEFAULT_PREFIX: &str = "/portico/";

/// How to reach etcd. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// `host:port` of each member (`[v6]:port` for IPv6 addresses).
    pub endpoints: Vec<String>,
    /// Every key is under it; ends with `/`.
    pub prefix: String,
    /// Set by `etcds://`: connecting without [`EtcdConfig::tls`] is an error.
    pub tls_required: bool,
    pub tls: Option<TlsFiles>,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Bound on connecting (and authenticating) at start.
    pub dial_timeout: Duration,
    /// Bound on each request; a stream (watch, keep-alive) is bounded by HTTP/2 keep-alive.
    pub request_timeout: Duration,
    /// HTTP/2 ping interval; etcd refuses pings more often than every 5 s by default.
    pub keep_alive: Duration,
    /// Ops per txn; etcd's `--max-txn-ops` (default 128).
    pub max_txn_ops: usize,
    /// Bytes of keys and values per txn; below etcd's `--max-request-bytes` (default 1.5 MiB).
    pub max_txn_bytes: usize,
}

/// PEM files for TLS: the authority that signed the members' certificates, and the client's
/// certificate and key when the members ask for one (both or neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            endpoints: Vec::new(),
            prefix: DEFAULT_PREFIX.to_owned(),
            tls_required: false,
            tls: None,
            user: None,
            password: None,
            dial_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            keep_alive: Duration::from_secs(10),
            max_txn_ops: 128,
            max_txn_bytes: 1024 * 1024,
        }
    }
}

impl fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("tls_required", &self.tls_required)
            .field("tls", &self.tls)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("dial_timeout", &self.dial_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("max_txn_ops", &self.max_txn_ops)
            .field("max_txn_bytes", &self.max_txn_bytes)
            .finish()
    }
}

/// One thing wrong with an etcd setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("`{url}` does not start with etcd:// or etcds://")]
    Scheme { url: String },
    #[error("`{url}` names no endpoint")]
    NoEndpoints { url: String },
    #[error("`{url}` carries credentials; give the user and password as their own settings")]
    Credentials { url: String },
    #[error("endpoint `{endpoint}`: {reason}")]
    Endpoint {
        endpoint: String,
        reason: &'static str,
    },
    #[error("prefix `{prefix}` must start and end with `/`")]
    Prefix { prefix: String },
    #[error("etcds:// requires TLS files (at least the CA)")]
    TlsMissing,
    #[error("TLS client certificate and key go together; only the {given} is given")]
    TlsHalfIdentity { given: &'static str },
    #[error("a password without a user")]
    PasswordWithoutUser,
    #[error("max_txn_ops must leave room for the commit marker (at least 3), not {0}")]
    TxnOps(usize),
}

/// Every problem of one configuration, reported at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad etcd store setting: {}", join(.problems))]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

fn join(problems: &[Problem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

impl EtcdConfig {
    /// The configuration of `etcd://HOST:PORT[,HOST:PORT…]` or `etcds://…`, with defaults for
    /// everything else.
    pub fn parse(url: &str) -> Result<EtcdConfig, ConfigError> {
        let fail = |p| ConfigError { problems: vec![p] };
        let (rest, tls_required) = if let Some(rest) = url.strip_prefix("etcd://") {
            (rest, false)
        } else if let Some(rest) = url.strip_prefix("etcds://") {
            (rest, true)
        } else {
            return Err(fail(Problem::Scheme { url: url.into() }));
        };
        if rest.contains('@') {
            // The URL shows up in process listings and logs: no secrets in it.
            return Err(fail(Problem::Credentials {
                url: "<redacted>".into(),
            }));
        }
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() {
            return Err(fail(Problem::NoEndpoints { url: url.into() }));
        }
        let endpoints: Vec<String> = rest.split(',').map(str::to_owned).collect();
        let problems: Vec<Problem> = endpoints
            .iter()
            .filter_map(|e| endpoint_problem(e))
            .collect();
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        Ok(EtcdConfig {
            endpoints,
            tls_required,
            ..EtcdConfig::default()
        })
    }

    /// Every problem of this configuration (endpoints, prefix, TLS, credentials, limits).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems: Vec<Problem> = self
            .endpoints
            .iter()
            .filter_map(|e| endpoint_problem(e))
            .collect();
        if self.endpoints.is_empty() {
            problems.push(Problem::NoEndpoints { url: String::new() });
        }
        if !self.prefix.starts_with('/') || !self.prefix.ends_with('/') {
            problems.push(Problem::Prefix {
                prefix: self.prefix.clone(),
            });
        }
        problems.extend(self.tls_problem());
        if self.password.is_some() && self.user.is_none() {
            problems.push(Problem::PasswordWithoutUser);
        }
        if self.max_txn_ops < 3 {
            problems.push(Problem::TxnOps(self.max_txn_ops));
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(ConfigError { problems }),
        }
    }

    fn tls_problem(&self) -> Option<Problem> {
        match &self.tls {
            None if self.tls_required => Some(Problem::TlsMissing),
            Some(TlsFiles {
                cert: Some(_),
                key: None,
                ..
            }) => Some(Problem::TlsHalfIdentity {
                given: "certificate",
            }),
            Some(TlsFiles {
                cert: None,
                key: Some(_),
                ..
            }) => Some(Problem::TlsHalfIdentity { given: "key" }),
            _ => None,
        }
    }
}

/// What is wrong with one `host:port`, if anything.
fn endpoint_problem(endpoint: &str) -> Option<Problem> {
    let bad = |reason| {
        Some(Problem::Endpoint {
            endpoint: endpoint.to_owned(),
            reason,
        })
    };
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return bad("expected HOST:PORT");
    };
    if host.is_empty() || host.contains('/') {
        return bad("the host is empty or not a host");
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return bad("an IPv6 address goes in brackets: [ADDR]:PORT");
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => bad("the port is not a number from 1 to 65535"),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_endpoints_and_the_tls_scheme() {
        let c = EtcdConfig::parse("etcd://10.0.0.1:2379,etcd-1:2379").expect("valid");
        assert_eq!(c.endpoints, ["10.0.0.1:2379", "etcd-1:2379"]);
        assert!(!c.tls_required);
        assert_eq!(c.prefix, "/portico/");
        let c = EtcdConfig::parse("etcds://[::1]:2379/").expect("valid");
        assert_eq!(c.endpoints, ["[::1]:2379"]);
        assert!(c.tls_required);
    }

    #[test]
    fn parse_reports_every_bad_endpoint() {
        let err = EtcdConfig::parse("etcd://a:1,b,c:0,::1:5").expect_err("invalid");
        assert_eq!(err.problems.len(), 3, "{err}");
        assert!(err.to_string().contains("`b`"), "{err}");
        assert!(err.to_string().contains("`c:0`"), "{err}");
    }

    #[test]
    fn parse_refuses_other_schemes_empty_lists_and_credentials() {
        assert!(matches!(
            EtcdConfig::parse("http://a:1").map_err(|e| e.problems),
            Err(p) if matches!(p[..], [Problem::Scheme { .. }])
        ));
        assert!(EtcdConfig::parse("etcd://").is_err());
        let err = EtcdConfig::parse("etcd://root:hunter2@a:1").expect_err("credentials");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn validate_wants_tls_files_for_etcds_and_whole_identities() {
        let mut c = EtcdConfig::parse("etcds://a:1").expect("valid");
        assert_eq!(
            c.validate().map_err(|e| e.problems),
            Err(vec![Problem::TlsMissing])
        );
        c.tls = Some(TlsFiles {
            ca: "ca.pem".into(),
            cert: Some("c.pem".into()),
            key: None,
        });
        c.prefix = "portico".into();
        let problems = c.validate().expect_err("two problems").problems;
        assert_eq!(problems.len(), 2);
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = EtcdConfig {
            user: Some("root".into()),
            password: Some("hunter2".into()),
            ..EtcdConfig::default()
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("redacted"),
            "{shown}"
        );
    }
}
