//! An Ingress's upstream annotations → the settings of the pools its backends become.
//!
//! Every key is read under Portico's prefix (`portico.dev/`) and, where ingress-nginx's key has
//! the same meaning, under ingress-nginx's (`nginx.ingress.kubernetes.io/`); Portico's wins when
//! both are set. A bad value is a warning naming the annotation and the default applies; the
//! Ingress is served either way. Snippets are refused. docs/annotations.md lists every key.

mod parse;
#[cfg(test)]
mod tests;

use crate::KeptIngress;
use parse::{bool_value, duration_ms, hash_key, percent, size_bytes, u32_value};
use portico_model::{
    ActiveHealth, Algorithm, Cidr, CookieAffinity, Diagnostic, ObjectRef, PassiveHealth,
    PoolProtocol, PoolSettings, UpstreamTls, stable_uuid,
};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock};

pub(crate) const PORTICO: &str = "portico.dev/";
pub(crate) const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// What the annotations of one Ingress ask of its pools. Compared, ordered and hashed by
/// `digest` only (equal settings, equal digests).
#[derive(Debug, Clone, Default)]
pub(crate) struct Upstream {
    pub algorithm: Algorithm,
    /// The protocol `backend-protocol` forces; none: from the Service port's `appProtocol`.
    pub protocol: Option<PoolProtocol>,
    /// Shared by the pools the Ingress's backends become.
    pub settings: Arc<PoolSettings>,
    /// Identifies non-default settings (part of the pool id and name); none for the default.
    pub digest: Option<String>,
}

impl PartialEq for Upstream {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Upstream {}

impl PartialOrd for Upstream {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Upstream {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.digest.cmp(&other.digest)
    }
}

impl Hash for Upstream {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.digest.hash(state);
    }
}

impl Upstream {
    /// The settings of an Ingress without upstream annotations, shared.
    pub(crate) fn default_arc() -> Arc<Upstream> {
        static DEFAULT: LazyLock<Arc<Upstream>> = LazyLock::new(Arc::default);
        DEFAULT.clone()
    }
}

/// Annotation keys (after the prefix) that both prefixes accept.
const SHARED_KEYS: &[&str] = &[
    "proxy-connect-timeout",
    "proxy-read-timeout",
    "proxy-send-timeout",
    "proxy-body-size",
    "load-balance",
    "upstream-hash-by",
    "affinity",
    "session-cookie-name",
    "session-cookie-max-age",
    "session-cookie-path",
    "proxy-next-upstream-tries",
    "whitelist-source-range",
    "allowlist-source-range",
    "backend-protocol",
    "proxy-ssl-verify",
    "proxy-ssl-secret",
    "proxy-ssl-name",
    "proxy-ssl-server-name",
    "ssl-redirect",
];

/// Keys only under `portico.dev/`, on an Ingress (the upstream ones here, and those other
/// modules read).
const PORTICO_KEYS: &[&str] = &[
    "health-check-path",
    "health-check-interval",
    "health-check-timeout",
    "health-check-healthy-threshold",
    "health-check-unhealthy-threshold",
    "passive-health-failures",
    "passive-health-ejection",
    "retry-budget",
    "external-ip",
];

/// The annotations of one Ingress, looked up by key under both prefixes.
struct Reader<'a> {
    object: &'a ObjectRef,
    annotations: &'a BTreeMap<String, String>,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl Reader<'_> {
    /// The value of `key` and its full annotation name: Portico's when set, else nginx's
    /// (when `nginx` allows it).
    fn get(&self, key: &str, nginx: bool) -> Option<(String, &str)> {
        let portico = format!("{PORTICO}{key}");
        if let Some(v) = self.annotations.get(&portico) {
            return Some((portico, v.as_str()));
        }
        let alias = format!("{NGINX}{key}");
        nginx
            .then(|| self.annotations.get(&alias))
            .flatten()
            .map(|v| (alias, v.as_str()))
    }

    fn warn(&mut self, annotation: &str, message: impl Into<String>) {
        let field = format!("metadata.annotations[{annotation}]");
        let d = Diagnostic::warning(self.object.clone(), field, message);
        self.diagnostics.push(d);
    }

    /// Parses `key` with `parse`; a bad value is a warning ending with what applies instead.
    fn value<T>(
        &mut self,
        key: &str,
        nginx: bool,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let (name, raw) = self.get(key, nginx)?;
        match parse(raw) {
            Ok(v) => Some(v),
            Err(why) => {
                self.warn(
                    &name,
                    format!("invalid value {raw:?}: {why}; the default applies"),
                );
                None
            }
        }
    }
}

/// The upstream settings of `ingress`'s pools, with a warning for each bad or refused
/// annotation.
pub(crate) fn upstream(
    object: &ObjectRef,
    ingress: &KeptIngress,
    diagnostics: &mut Vec<Diagnostic>,
) -> Arc<Upstream> {
    let Some(annotations) = ingress.metadata.annotations.as_ref() else {
        return Upstream::default_arc();
    };
    let mut r = Reader {
        object,
        annotations,
        diagnostics,
    };
    refuse_unknown(&mut r);
    let mut u = Upstream::default();
    let mut settings = PoolSettings::default();
    let s = &mut settings;
    s.connect_timeout_ms = r.value("proxy-connect-timeout", true, duration_ms);
    s.read_timeout_ms = r.value("proxy-read-timeout", true, duration_ms);
    s.send_timeout_ms = r.value("proxy-send-timeout", true, duration_ms);
    s.max_body_bytes = r.value("proxy-body-size", true, size_bytes);
    s.tries = r.value("proxy-next-upstream-tries", true, u32_value);
    s.retry_budget_percent = r.value("retry-budget", false, percent);
    if let Some(algorithm) = r.value("load-balance", true, parse::algorithm) {
        u.algorithm = algorithm;
    }
    if let Some(key) = r.value("upstream-hash-by", true, hash_key) {
        u.algorithm = Algorithm::Hash(key);
    }
    s.affinity = affinity(&mut r);
    s.allow_sources = sources(&mut r).unwrap_or_default();
    u.protocol = r.value("backend-protocol", true, parse::backend_protocol);
    s.upstream_tls = upstream_tls(&mut r, u.protocol);
    s.passive = passive(&mut r);
    s.active = active(&mut r);
    u.settings = Arc::new(settings);
    if u.algorithm == Algorithm::default() && u.protocol.is_none() && u.settings.is_default() {
        return Upstream::default_arc();
    }
    let canonical = serde_json::json!([u.algorithm, u.protocol, u.settings]).to_string();
    u.digest = Some(stable_uuid(&canonical).simple().to_string());
    Arc::new(u)
}

/// The Secret `ingress` names for its upstream CA certificates (`proxy-ssl-secret`), with the
/// full annotation name that names it; none when unset or invalid (the translation warns about
/// an invalid one).
pub(crate) fn ca_secret(ingress: &KeptIngress, namespace: &str) -> Option<(String, ObjectRef)> {
    let annotations = ingress.metadata.annotations.as_ref()?;
    let object = ObjectRef::new("Ingress", namespace, "");
    let mut diagnostics = Vec::new();
    let r = Reader {
        object: &object,
        annotations,
        diagnostics: &mut diagnostics,
    };
    let (name, raw) = r.get("proxy-ssl-secret", true)?;
    let secret = parse::secret_ref(raw, namespace).ok()?;
    Some((name, secret))
}

/// Warns about snippets (refused), unknown `portico.dev/` keys (a typo would otherwise go
/// unnoticed) and ingress-nginx keys Portico does not serve.
fn refuse_unknown(r: &mut Reader<'_>) {
    let keys: Vec<String> = r.annotations.keys().cloned().collect();
    for name in keys {
        let (prefix, key) = if let Some(k) = name.strip_prefix(PORTICO) {
            (PORTICO, k)
        } else if let Some(k) = name.strip_prefix(NGINX) {
            (NGINX, k)
        } else {
            continue;
        };
        if key.ends_with("snippet") || key.ends_with("snippets") {
            r.warn(
                &name,
                "snippets are refused by design: raw configuration text would bypass \
                 validation, escaping and the isolation of one Ingress from the others; the \
                 typed annotations of docs/annotations.md cover what snippets were used for",
            );
        } else if SHARED_KEYS.contains(&key) || (prefix == PORTICO && PORTICO_KEYS.contains(&key)) {
        } else if prefix == PORTICO {
            r.warn(
                &name,
                "unknown annotation; ignored (see docs/annotations.md)",
            );
        } else {
            r.warn(
                &name,
                "not supported by Portico; ignored (see docs/annotations.md)",
            );
        }
    }
}

fn affinity(r: &mut Reader<'_>) -> Option<CookieAffinity> {
    let kind = r.value("affinity", true, |v| match v {
        "cookie" => Ok(()),
        _ => Err("the only affinity is \"cookie\"".to_owned()),
    });
    let name = r.value("session-cookie-name", true, parse::cookie_name);
    let max_age_s = r.value("session-cookie-max-age", true, parse::u64_value);
    let path = r.value("session-cookie-path", true, parse::cookie_path);
    kind.map(|()| CookieAffinity {
        name: name.unwrap_or_else(|| CookieAffinity::DEFAULT_NAME.to_owned()),
        max_age_s,
        path,
    })
}

/// The allowed client ranges. A bad entry is reported and left out; when no entry is valid
/// the pool allows nobody rather than everybody: a typo in an allowlist must not open it.
fn sources(r: &mut Reader<'_>) -> Option<Vec<Cidr>> {
    let (name, raw) = r
        .get("allowlist-source-range", true)
        .or_else(|| r.get("whitelist-source-range", true))?;
    let raw = raw.to_owned();
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.parse::<Cidr>() {
            Ok(c) => out.push(c),
            Err(_) => bad.push(entry),
        }
    }
    if !bad.is_empty() || out.is_empty() {
        let applies = if out.is_empty() {
            "no valid range is left, so every client is refused (403)"
        } else {
            "the valid ranges apply"
        };
        let message = format!(
            "invalid address ranges {bad:?} (e.g. 10.0.0.0/8, 192.168.1.7, 2001:db8::/32); \
             {applies}"
        );
        r.warn(&name, message);
    }
    if out.is_empty() {
        // 0.0.0.0/32 matches no client: every request is refused.
        out.push(Cidr::new([0, 0, 0, 0].into(), 32).expect("a valid range"));
    }
    out.sort();
    out.dedup();
    Some(out)
}

fn upstream_tls(r: &mut Reader<'_>, protocol: Option<PoolProtocol>) -> Option<UpstreamTls> {
    let verify = r.value("proxy-ssl-verify", true, bool_value);
    let namespace = r.object.namespace.clone();
    let ca = r.value("proxy-ssl-secret", true, |v| {
        parse::secret_ref(v, &namespace)
    });
    let server_name = r.value("proxy-ssl-name", true, parse::dns_name);
    let sni = r.value("proxy-ssl-server-name", true, bool_value);
    let tls = protocol.is_some_and(PoolProtocol::is_tls);
    let any = verify.is_some() || ca.is_some() || server_name.is_some() || sni.is_some();
    if !tls {
        if any
            && let Some((name, _)) = [
                "proxy-ssl-verify",
                "proxy-ssl-secret",
                "proxy-ssl-name",
                "proxy-ssl-server-name",
            ]
            .iter()
            .find_map(|k| r.get(k, true))
        {
            r.warn(
                &name,
                "has no effect: the backend protocol is not HTTPS or GRPCS \
                 (backend-protocol)",
            );
        }
        return None;
    }
    let verify = verify.unwrap_or(false);
    if verify && ca.is_none() {
        let name = r.get("proxy-ssl-verify", true).map(|(n, _)| n);
        r.warn(
            &name.unwrap_or_default(),
            "verification needs the CA certificates: name a Secret with ca.crt in \
             proxy-ssl-secret; until then every connection fails verification (502)",
        );
    }
    Some(UpstreamTls {
        verify,
        ca,
        server_name,
        sni: sni.unwrap_or(false),
    })
}

fn passive(r: &mut Reader<'_>) -> PassiveHealth {
    let mut p = PassiveHealth::default();
    if let Some(n) = r.value("passive-health-failures", false, u32_value) {
        p.failures = n;
    }
    if let Some(ms) = r.value("passive-health-ejection", false, duration_ms) {
        p.ejection_ms = ms;
    }
    p
}

fn active(r: &mut Reader<'_>) -> Option<ActiveHealth> {
    let path = r.value("health-check-path", false, parse::check_path);
    let interval = r.value("health-check-interval", false, duration_ms);
    let timeout = r.value("health-check-timeout", false, duration_ms);
    let healthy = r.value("health-check-healthy-threshold", false, parse::threshold);
    let unhealthy = r.value("health-check-unhealthy-threshold", false, parse::threshold);
    let path = path?;
    Some(ActiveHealth {
        path,
        interval_ms: interval.unwrap_or(ActiveHealth::DEFAULT_INTERVAL_MS),
        timeout_ms: timeout.unwrap_or(ActiveHealth::DEFAULT_TIMEOUT_MS),
        healthy: healthy.unwrap_or(ActiveHealth::DEFAULT_HEALTHY),
        unhealthy: unhealthy.unwrap_or(ActiveHealth::DEFAULT_UNHEALTHY),
    })
}
