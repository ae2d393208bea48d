//! An Ingress's upstream annotations → the settings of the pools its backends become.
//!
//! Every key is read under Portico's prefix (`portico.dev/`) and, where ingress-nginx's key has
//! the same meaning, under ingress-nginx's (`nginx.ingress.kubernetes.io/`); Portico's wins when
//! both are set. A bad value is a warning naming the annotation and the default applies; the
//! Ingress is served either way. Snippets are refused. docs/annotations.md lists every key.

mod auth;
mod basic;
mod canary;
mod cors;
mod location;
mod parse;
mod ratelimit;
pub mod table;
#[cfg(test)]
mod tests;

use crate::KeptIngress;
pub(crate) use basic::{SecretType, basic_secret};

/// Status codes as `custom-http-errors` takes them (`404,503`: 400 to 599), sorted; for
/// `--custom-http-errors`.
pub fn error_codes(value: &str) -> Result<Vec<u16>, String> {
    parse::error_codes(value)
}
pub(crate) use canary::{Canary, HeaderMatch};
pub(crate) use location::{Location, location};
use parse::{bool_value, duration_ms, hash_key, percent, size_bytes, u32_value};
use portico_model::{
    ActiveHealth, Algorithm, Cidr, CookieAffinity, Diagnostic, ObjectRef, PassiveHealth,
    PoolProtocol, PoolSettings, UpstreamTls, stable_uuid,
};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock};

pub(crate) use table::{NGINX, PORTICO};

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

/// The annotations of one Ingress, looked up by key under both prefixes.
struct Reader<'a> {
    object: &'a ObjectRef,
    annotations: &'a BTreeMap<String, String>,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl Reader<'_> {
    /// The value of `key` and its full annotation name: Portico's when set, else nginx's
    /// (under the prefixes [`table::ANNOTATIONS`] gives it).
    fn get(&self, key: &str) -> Option<(String, &str)> {
        get(self.annotations, key)
    }

    fn warn(&mut self, annotation: &str, message: impl Into<String>) {
        let field = format!("metadata.annotations[{annotation}]");
        let d = Diagnostic::warning(self.object.clone(), field, message);
        self.diagnostics.push(d);
    }

    /// Parses `key` with `parse`; a bad value is a warning ending with what applies instead.
    fn value<T>(&mut self, key: &str, parse: impl FnOnce(&str) -> Result<T, String>) -> Option<T> {
        let (name, raw) = self.get(key)?;
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
    s.connect_timeout_ms = r.value("proxy-connect-timeout", duration_ms);
    s.read_timeout_ms = r.value("proxy-read-timeout", duration_ms);
    s.send_timeout_ms = r.value("proxy-send-timeout", duration_ms);
    s.max_body_bytes = r.value("proxy-body-size", size_bytes);
    s.tries = r.value("proxy-next-upstream-tries", u32_value);
    s.retry_budget_percent = r.value("retry-budget", percent);
    if let Some(algorithm) = r.value("load-balance", parse::algorithm) {
        u.algorithm = algorithm;
    }
    if let Some(key) = r.value("upstream-hash-by", hash_key) {
        u.algorithm = Algorithm::Hash(key);
    }
    s.affinity = affinity(&mut r);
    s.allow_sources = sources(&mut r).unwrap_or_default();
    s.deny_sources = denied(&mut r);
    u.protocol = r.value("backend-protocol", parse::backend_protocol);
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
    let (name, raw) = r.get("proxy-ssl-secret")?;
    let secret = parse::secret_ref(raw, namespace).ok()?;
    Some((name, secret))
}

/// The value of annotation `key` and its full name: Portico's when set, else nginx's, under
/// the prefixes the table gives the key (an unlisted key: Portico's only).
pub(crate) fn get<'a>(
    annotations: &'a BTreeMap<String, String>,
    key: &str,
) -> Option<(String, &'a str)> {
    let entry = table::lookup(key);
    let portico = format!("{PORTICO}{key}");
    if let Some(v) = annotations
        .get(&portico)
        .filter(|_| entry.is_none_or(|a| a.portico))
    {
        return Some((portico, v.as_str()));
    }
    let alias = format!("{NGINX}{key}");
    entry
        .filter(|a| a.nginx)
        .and_then(|_| annotations.get(&alias))
        .map(|v| (alias, v.as_str()))
}

/// Warns about each key the built-in proxy does not serve, as the table says: snippets
/// (refused, naming what replaces them), unknown `portico.dev/` keys (a typo would otherwise
/// go unnoticed) and ingress-nginx keys Portico does not serve. What another provider does
/// not serve is [`provider_warnings`]'s.
fn refuse_unknown(r: &mut Reader<'_>) {
    let keys: Vec<String> = r.annotations.keys().cloned().collect();
    for name in keys {
        match table::classify(&name, "proxy") {
            Some(table::Outcome::Refused(instead)) => r.warn(
                &name,
                format!("snippets are refused by design; instead: {instead}"),
            ),
            Some(table::Outcome::Ignored(why)) => {
                r.warn(&name, format!("not supported by Portico; ignored: {why}"));
            }
            _ => {}
        }
    }
}

/// The warnings of an Ingress served by `provider` about the keys the built-in proxy serves
/// and that provider does not (the proxy's own gaps are [`refuse_unknown`]'s).
pub(crate) fn provider_warnings(
    object: &ObjectRef,
    ingress: &KeptIngress,
    provider: &str,
) -> Vec<Diagnostic> {
    let annotations = ingress.metadata.annotations.iter().flatten();
    let gaps = annotations.filter_map(|(name, _)| {
        let on_proxy = table::classify(name, "proxy")?;
        match table::classify(name, provider)? {
            table::Outcome::Ignored(why) if on_proxy.is_served() => Some((name, why)),
            _ => None,
        }
    });
    gaps.map(|(name, why)| {
        let field = format!("metadata.annotations[{name}]");
        let message = format!("ignored by the {provider} provider: {why}");
        Diagnostic::warning(object.clone(), field, message)
    })
    .collect()
}

fn affinity(r: &mut Reader<'_>) -> Option<CookieAffinity> {
    let kind = r.value("affinity", |v| match v {
        "cookie" => Ok(()),
        _ => Err("the only affinity is \"cookie\"".to_owned()),
    });
    let name = r.value("session-cookie-name", parse::cookie_name);
    let max_age_s = r.value("session-cookie-max-age", parse::u64_value);
    let path = r.value("session-cookie-path", parse::cookie_path);
    kind.map(|()| CookieAffinity {
        name: name.unwrap_or_else(|| CookieAffinity::DEFAULT_NAME.to_owned()),
        max_age_s,
        path,
    })
}

/// The valid ranges of annotation `name` (`raw`), with a warning naming the bad ones (or that
/// none is left: every client is then refused, by the caller).
fn read_ranges(r: &mut Reader<'_>, name: &str, raw: &str) -> Vec<Cidr> {
    let (out, bad) = ranges(raw);
    if !bad.is_empty() || out.is_empty() {
        let applies = if out.is_empty() {
            "no valid range is left, so every client is refused (403)"
        } else {
            "the valid ranges apply"
        };
        r.warn(name, invalid_ranges(&bad, applies));
    }
    out
}

/// The allowed client ranges. A bad entry is reported and left out; when no entry is valid
/// the pool allows nobody rather than everybody: a typo in an allowlist must not open it.
fn sources(r: &mut Reader<'_>) -> Option<Vec<Cidr>> {
    let (name, raw) = r
        .get("allowlist-source-range")
        .or_else(|| r.get("whitelist-source-range"))?;
    let raw = raw.to_owned();
    let mut out = read_ranges(r, &name, &raw);
    if out.is_empty() {
        // 0.0.0.0/32 matches no client: every request is refused.
        out.push(Cidr::new([0, 0, 0, 0].into(), 32).expect("a valid range"));
    }
    Some(out)
}

/// The refused client ranges (`denylist-source-range`). A bad entry is reported and left out;
/// when no entry is valid every client is refused, as a typo in an allowlist refuses them:
/// a denylist that cannot be read must not let through the clients it was written for.
fn denied(r: &mut Reader<'_>) -> Vec<Cidr> {
    let Some((name, raw)) = r.get("denylist-source-range") else {
        return Vec::new();
    };
    let raw = raw.to_owned();
    let mut out = read_ranges(r, &name, &raw);
    if out.is_empty() {
        // 0.0.0.0/0 and ::/0 match every client: every request is refused.
        out.push(Cidr::new([0, 0, 0, 0].into(), 0).expect("a valid range"));
        out.push(Cidr::new([0u16; 8].into(), 0).expect("a valid range"));
    }
    out
}

/// The ranges of a comma-separated list, sorted and without duplicates, and its bad entries.
fn ranges(raw: &str) -> (Vec<Cidr>, Vec<&str>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.parse::<Cidr>() {
            Ok(c) => out.push(c),
            Err(_) => bad.push(entry),
        }
    }
    out.sort();
    out.dedup();
    (out, bad)
}

fn invalid_ranges(bad: &[&str], applies: &str) -> String {
    format!(
        "invalid address ranges {bad:?} (e.g. 10.0.0.0/8, 192.168.1.7, 2001:db8::/32); {applies}"
    )
}

fn upstream_tls(r: &mut Reader<'_>, protocol: Option<PoolProtocol>) -> Option<UpstreamTls> {
    let verify = r.value("proxy-ssl-verify", bool_value);
    let namespace = r.object.namespace.clone();
    let ca = r.value("proxy-ssl-secret", |v| parse::secret_ref(v, &namespace));
    let server_name = r.value("proxy-ssl-name", parse::dns_name);
    let sni = r.value("proxy-ssl-server-name", bool_value);
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
            .find_map(|k| r.get(k))
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
        let name = r.get("proxy-ssl-verify").map(|(n, _)| n);
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
        subject_alt_names: vec![],
    })
}

fn passive(r: &mut Reader<'_>) -> PassiveHealth {
    let mut p = PassiveHealth::default();
    if let Some(n) = r.value("passive-health-failures", u32_value) {
        p.failures = n;
    }
    if let Some(ms) = r.value("passive-health-ejection", duration_ms) {
        p.ejection_ms = ms;
    }
    p
}

fn active(r: &mut Reader<'_>) -> Option<ActiveHealth> {
    let path = r.value("health-check-path", parse::check_path);
    let interval = r.value("health-check-interval", duration_ms);
    let timeout = r.value("health-check-timeout", duration_ms);
    let healthy = r.value("health-check-healthy-threshold", parse::threshold);
    let unhealthy = r.value("health-check-unhealthy-threshold", parse::threshold);
    let path = path?;
    Some(ActiveHealth {
        path,
        interval_ms: interval.unwrap_or(ActiveHealth::DEFAULT_INTERVAL_MS),
        timeout_ms: timeout.unwrap_or(ActiveHealth::DEFAULT_TIMEOUT_MS),
        healthy: healthy.unwrap_or(ActiveHealth::DEFAULT_HEALTHY),
        unhealthy: unhealthy.unwrap_or(ActiveHealth::DEFAULT_UNHEALTHY),
    })
}
