//! Key material for TLS: the Secrets named by served Ingresses' `spec.tls`, by our Gateways'
//! HTTPS listeners and by `--default-certificate`, parsed and checked, with a warning for each one that cannot be
//! used (its hosts are then served with the default certificate; nothing else is affected).
//! Also the CA bundles (`ca.crt`) of the Secrets that verifying pools name in
//! `proxy-ssl-secret`, and of the ConfigMaps and Secrets BackendTLSPolicies name in
//! `caCertificateRefs`: one that cannot be used is a warning on the Ingress or the policy, and
//! its pools' verification fails closed (502). And the htpasswd entries of the Secrets that basic auth
//! names (`auth-secret`): one that cannot be used is a warning on the Ingress, and its paths
//! answer 503.
//!
//! Apart from [`crate::translate`] because parsing keys costs far more than translating: a
//! Secret whose content did not change keeps the material of the previous call.

use crate::KeptIngress;
use crate::annotations::SecretType;
use crate::translate::Translation;
use crate::{Config, ObjectKey, Objects};
use k8s_openapi::api::core::v1::Secret;
use portico_model::{Diagnostic, Htpasswd, HtpasswdError, ObjectRef};
use portico_tls::{CaBundle, CaBundleError, Material, MaterialError};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The data keys of a `kubernetes.io/tls` Secret.
const CERT_KEY: &str = "tls.crt";
const KEY_KEY: &str = "tls.key";
/// The data key of the CA certificates in a `proxy-ssl-secret` (as ingress-nginx reads it).
const CA_KEY: &str = "ca.crt";
/// The data key of the htpasswd file of an `auth-file` Secret (as ingress-nginx reads it).
const AUTH_KEY: &str = "auth";

/// Usable material by Secret, and the warnings about the Secrets that are not usable.
#[derive(Clone, Default)]
pub struct Certificates {
    /// By Secret reference (kind `Secret`), as the model's listeners name them.
    pub material: BTreeMap<ObjectRef, Arc<Material>>,
    /// Usable CA bundles by Secret reference (kind `Secret`), as pools' `upstream_tls.ca`
    /// name them.
    pub ca: BTreeMap<ObjectRef, Arc<CaBundle>>,
    /// Usable basic-auth entries by Secret reference (kind `Secret`), as policies'
    /// `basic_auth.secret` name them.
    pub credentials: portico_model::Credentials,
    /// Sorted: warnings on Ingresses (`spec.tls[i].secretName`) and on the default
    /// certificate's Secret.
    pub diagnostics: Vec<Diagnostic>,
    /// Each Secret looked at, with what it gave, for the next call.
    loaded: BTreeMap<ObjectKey, Loaded>,
    /// Each CA Secret looked at, with what it gave, for the next call.
    loaded_ca: BTreeMap<ObjectKey, LoadedCa>,
    /// Each basic-auth Secret looked at, as the type it was read as, for the next call.
    loaded_auth: BTreeMap<(ObjectKey, SecretType), LoadedAuth>,
}

/// Counts only: material prints redacted anyway, but there is no need to list it.
impl fmt::Debug for Certificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificates")
            .field("material", &self.material.len())
            .field("ca", &self.ca.len())
            .field("credentials", &self.credentials.len())
            .field("diagnostics", &self.diagnostics)
            .finish()
    }
}

#[derive(Clone)]
struct Loaded {
    secret: Option<Arc<Secret>>,
    result: Result<Arc<Material>, SecretError>,
}

#[derive(Clone)]
struct LoadedAuth {
    secret: Option<Arc<Secret>>,
    result: Result<Arc<Htpasswd>, SecretError>,
}

#[derive(Clone)]
struct LoadedCa {
    secret: Option<Arc<Secret>>,
    result: Result<Arc<CaBundle>, SecretError>,
}

/// Why a Secret gives no certificate. Never quotes Secret data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("secret \"{0}\" not found")]
    NotFound(ObjectKey),
    #[error("secret \"{0}\" has no data key \"{1}\"")]
    MissingKey(ObjectKey, &'static str),
    #[error("secret \"{0}\": {1}")]
    Material(ObjectKey, MaterialError),
    #[error("secret \"{0}\": {1}")]
    CaBundle(ObjectKey, CaBundleError),
    #[error("secret \"{0}\": {1}")]
    Htpasswd(ObjectKey, HtpasswdError),
    #[error("secret \"{0}\": data key {1:?} is not UTF-8 text")]
    NotText(ObjectKey, String),
}

/// Loads the certificates that `translation`'s served Ingresses and `config` name, reusing
/// from `previous` what an unchanged Secret gave.
pub fn certificates(
    objects: &Objects,
    translation: &Translation,
    config: &Config,
    previous: &Certificates,
) -> Certificates {
    let mut out = Certificates::default();
    // Both in key order, one state per Ingress: walked in step rather than looked up.
    let mut all = objects.ingresses.iter().peekable();
    for state in translation.ingresses.iter().filter(|s| s.served) {
        while all.next_if(|(key, _)| **key < state.key).is_some() {}
        if let Some((key, ingress)) = all.next_if(|(key, _)| **key == state.key) {
            out.ingress(objects, key, ingress, previous);
        }
    }
    out.gateways(objects, translation, previous);
    if let Some(key) = &config.default_certificate
        && let Err(error) = out.load(objects, key, previous)
    {
        let object = ObjectRef::new("Secret", &key.namespace, &key.name);
        let message = format!(
            "{error}; --default-certificate names it, the generated self-signed certificate \
             is served instead"
        );
        out.diagnostics
            .push(Diagnostic::warning(object, "", message));
    }
    out.upstream_cas(objects, translation, previous);
    out.basic_auths(objects, translation, previous);
    out.diagnostics.sort();
    out.diagnostics.dedup();
    out
}

impl Certificates {
    fn ingress(
        &mut self,
        objects: &Objects,
        key: &ObjectKey,
        ingress: &KeptIngress,
        previous: &Self,
    ) {
        for (i, entry) in ingress.spec.tls.iter().enumerate() {
            let Some(name) = entry.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                continue;
            };
            let secret = ObjectKey::new(&key.namespace, name);
            if let Err(error) = self.load(objects, &secret, previous) {
                let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
                let field = format!("spec.tls[{i}].secretName");
                let message = format!("{error}; its hosts are served with the default certificate");
                self.diagnostics
                    .push(Diagnostic::warning(object, field, message));
            }
        }
    }

    /// The certificates of Gateways' HTTPS listeners (the translation resolved the
    /// references; a Secret whose content is not usable is a warning on the Gateway).
    fn gateways(&mut self, objects: &Objects, translation: &Translation, previous: &Self) {
        let lbs = translation.model.load_balancers.iter();
        for lb in lbs.filter(|lb| lb.origin.kind == "Gateway") {
            let tls = lb.listeners.iter().filter_map(|l| l.tls.as_ref());
            let named = tls.flat_map(|t| {
                let sni = t.sni.iter().map(|s| &s.certificate);
                t.default_certificate.iter().chain(sni)
            });
            for secret in named {
                let key = ObjectKey::new(&secret.namespace, &secret.name);
                if let Err(error) = self.load(objects, &key, previous) {
                    let message = format!("{error}; the data plane's own certificate is served");
                    let field = "spec.listeners[].tls.certificateRefs";
                    self.diagnostics
                        .push(Diagnostic::warning(lb.origin.clone(), field, message));
                }
            }
        }
    }

    /// The material of Secret `key`, parsed once per call and only when it changed since
    /// `previous`.
    fn load(
        &mut self,
        objects: &Objects,
        key: &ObjectKey,
        previous: &Self,
    ) -> Result<Arc<Material>, SecretError> {
        if let Some(done) = self.loaded.get(key) {
            return done.result.clone();
        }
        let secret = objects.secrets.get(key);
        let reused = previous
            .loaded
            .get(key)
            .filter(|p| same(p.secret.as_ref(), secret));
        let result = match reused {
            Some(p) => p.result.clone(),
            None => parse(key, secret.map(Arc::as_ref)),
        };
        if let Ok(material) = &result {
            let object = ObjectRef::new("Secret", &key.namespace, &key.name);
            self.material.insert(object, material.clone());
        }
        let secret = secret.cloned();
        let loaded = Loaded {
            secret,
            result: result.clone(),
        };
        self.loaded.insert(key.clone(), loaded);
        result
    }
}

impl Certificates {
    /// The CA bundles of the pools that verify their members, with a warning on each served
    /// Ingress whose `proxy-ssl-secret` names one that cannot be used.
    fn upstream_cas(&mut self, objects: &Objects, translation: &Translation, previous: &Self) {
        let pools = translation
            .model
            .load_balancers
            .iter()
            .flat_map(|lb| &lb.pools);
        let wanted: std::collections::BTreeSet<&ObjectRef> = pools
            .filter(|p| p.protocol.is_tls())
            .filter_map(|p| p.settings.upstream_tls.as_ref())
            .filter(|t| t.verify)
            .filter_map(|t| t.ca.as_ref())
            .collect();
        if wanted.is_empty() {
            return;
        }
        self.policy_cas(objects, &wanted, previous);
        for state in translation.ingresses.iter().filter(|s| s.served) {
            let key = &state.key;
            let Some(ingress) = objects.ingresses.get(key) else {
                continue;
            };
            let Some((annotation, ca)) = crate::annotations::ca_secret(ingress, &key.namespace)
            else {
                continue;
            };
            if !wanted.contains(&ca) {
                continue;
            }
            let secret = ObjectKey::new(&ca.namespace, &ca.name);
            if let Err(error) = self.load_ca(objects, &secret, previous) {
                let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
                let field = format!("metadata.annotations[{annotation}]");
                let message = format!(
                    "{error}; the upstream certificates cannot be verified: every connection \
                     to its backends fails (502) until the Secret holds the CA certificates \
                     under ca.crt"
                );
                self.diagnostics
                    .push(Diagnostic::warning(object, field, message));
            }
        }
    }

    /// The CA bundles BackendTLSPolicies name that verifying pools use (`wanted`), with a
    /// warning on each policy whose CA cannot be used.
    fn policy_cas(
        &mut self,
        objects: &Objects,
        wanted: &std::collections::BTreeSet<&ObjectRef>,
        previous: &Self,
    ) {
        for ca in crate::gateway::backend_tls_ca_refs(objects) {
            if !wanted.contains(&ca.1) || self.ca.contains_key(&ca.1) {
                continue;
            }
            let key = ObjectKey::new(&ca.1.namespace, &ca.1.name);
            let result = match ca.1.kind.as_str() {
                "ConfigMap" => self.load_config_map_ca(objects, &key),
                _ => (self.load_ca(objects, &key, previous).map(|_| ())).map_err(|e| e.to_string()),
            };
            if let Err(error) = result {
                let object = ObjectRef::new("BackendTLSPolicy", &ca.0.namespace, &ca.0.name);
                let message = format!(
                    "{error}; the backends' certificates cannot be verified: every connection \
                     to them fails (502) until it holds the CA certificates under ca.crt"
                );
                let field = "spec.validation.caCertificateRefs[0]";
                (self.diagnostics).push(Diagnostic::warning(object, field, message));
            }
        }
    }

    /// The CA bundle of ConfigMap `key` (`data` or `binaryData` `ca.crt`). Parsed on every
    /// call: only the few ConfigMaps policies name are read.
    fn load_config_map_ca(&mut self, objects: &Objects, key: &ObjectKey) -> Result<(), String> {
        let config_map = (objects.config_maps.get(key))
            .ok_or_else(|| format!("configmap \"{key}\" not found"))?;
        let text = config_map.data.as_ref().and_then(|d| d.get(CA_KEY));
        let binary = config_map.binary_data.as_ref().and_then(|d| d.get(CA_KEY));
        let pem = (text.map(String::as_bytes))
            .or(binary.map(|b| &b.0[..]))
            .ok_or_else(|| format!("configmap \"{key}\" has no data key \"{CA_KEY}\""))?;
        let bundle = CaBundle::from_pem(pem).map_err(|e| format!("configmap \"{key}\": {e}"))?;
        let object = ObjectRef::new("ConfigMap", &key.namespace, &key.name);
        self.ca.insert(object, Arc::new(bundle));
        Ok(())
    }

    /// The CA bundle of Secret `key`, parsed once per call and only when it changed since
    /// `previous`.
    fn load_ca(
        &mut self,
        objects: &Objects,
        key: &ObjectKey,
        previous: &Self,
    ) -> Result<Arc<CaBundle>, SecretError> {
        if let Some(done) = self.loaded_ca.get(key) {
            return done.result.clone();
        }
        let secret = objects.secrets.get(key);
        let reused = previous
            .loaded_ca
            .get(key)
            .filter(|p| same(p.secret.as_ref(), secret));
        let result = match reused {
            Some(p) => p.result.clone(),
            None => parse_ca(key, secret.map(Arc::as_ref)),
        };
        if let Ok(bundle) = &result {
            let object = ObjectRef::new("Secret", &key.namespace, &key.name);
            self.ca.insert(object, bundle.clone());
        }
        let loaded = LoadedCa {
            secret: secret.cloned(),
            result: result.clone(),
        };
        self.loaded_ca.insert(key.clone(), loaded);
        result
    }
}

/// The kind of the first entry of `users` that is not a crypt(3) hash (`$apr1$`, `{SHA}`):
/// what provider haproxy cannot check.
fn not_crypt(users: &Htpasswd) -> Option<&'static str> {
    (users.entries()).find_map(|(user, _)| match users.hash(user) {
        Some(portico_model::PasswordHash::Apr1(_)) => Some("$apr1$ (Apache MD5) hashes"),
        Some(portico_model::PasswordHash::Sha1(_)) => Some("{SHA} hashes"),
        _ => None,
    })
}

impl Certificates {
    /// The entries of the basic-auth Secrets served Ingresses name, with a warning on each
    /// Ingress whose Secret cannot be used (its paths answer 503).
    fn basic_auths(&mut self, objects: &Objects, translation: &Translation, previous: &Self) {
        // The provider of each Ingress, found once and only when one has basic auth.
        let mut providers: Option<BTreeMap<ObjectKey, String>> = None;
        for state in translation.ingresses.iter().filter(|s| s.served) {
            let key = &state.key;
            let Some(ingress) = objects.ingresses.get(key) else {
                continue;
            };
            let named = crate::annotations::basic_secret(ingress, &key.namespace);
            let Some((annotation, secret, kind)) = named else {
                continue;
            };
            let secret = ObjectKey::new(&secret.namespace, &secret.name);
            let loaded = self.load_auth(objects, &secret, kind, previous);
            if let Ok(users) = &loaded
                && let Some(why) = not_crypt(users)
            {
                let providers =
                    providers.get_or_insert_with(|| crate::migrate::providers(translation));
                if providers.get(key).is_some_and(|p| p == "haproxy") {
                    let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
                    let field = format!("metadata.annotations[{annotation}]");
                    let message = format!(
                        "Secret {}/{} holds {why}, which provider haproxy cannot check (its \
                         crypt(3) does not): every request of this Ingress is refused (503) \
                         there; re-hash those users with bcrypt (htpasswd -B) or SHA-512 crypt, \
                         or use provider proxy",
                        secret.namespace, secret.name
                    );
                    self.diagnostics
                        .push(Diagnostic::warning(object, field, message));
                }
            }
            if let Err(error) = loaded {
                let object = ObjectRef::new("Ingress", &key.namespace, &key.name);
                let field = format!("metadata.annotations[{annotation}]");
                let held = match kind {
                    SecretType::File => "an htpasswd file under the data key auth",
                    SecretType::Map => "one data key per user, its value the password hash",
                };
                let message = format!(
                    "{error}; every request of this Ingress is refused (503) until the Secret \
                     holds {held}"
                );
                self.diagnostics
                    .push(Diagnostic::warning(object, field, message));
            }
        }
    }

    /// The entries of Secret `key` read as `kind`, parsed once per call and only when it
    /// changed since `previous`.
    fn load_auth(
        &mut self,
        objects: &Objects,
        key: &ObjectKey,
        kind: SecretType,
        previous: &Self,
    ) -> Result<Arc<Htpasswd>, SecretError> {
        let at = (key.clone(), kind);
        if let Some(done) = self.loaded_auth.get(&at) {
            return done.result.clone();
        }
        let secret = objects.secrets.get(key);
        let reused = (previous.loaded_auth.get(&at)).filter(|p| same(p.secret.as_ref(), secret));
        let result = match reused {
            Some(p) => p.result.clone(),
            None => parse_auth(key, kind, secret.map(Arc::as_ref)),
        };
        if let Ok(users) = &result {
            let object = ObjectRef::new("Secret", &key.namespace, &key.name);
            self.credentials.insert(object, users.clone());
        }
        let loaded = LoadedAuth {
            secret: secret.cloned(),
            result: result.clone(),
        };
        self.loaded_auth.insert(at, loaded);
        result
    }
}

fn parse_auth(
    key: &ObjectKey,
    kind: SecretType,
    secret: Option<&Secret>,
) -> Result<Arc<Htpasswd>, SecretError> {
    let secret = secret.ok_or_else(|| SecretError::NotFound(key.clone()))?;
    let text = |name: &str, bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| SecretError::NotText(key.clone(), name.to_owned()))
    };
    let users = match kind {
        SecretType::File => {
            let file =
                value(secret, AUTH_KEY).ok_or(SecretError::MissingKey(key.clone(), AUTH_KEY))?;
            Htpasswd::from_file(&text(AUTH_KEY, file)?)
        }
        SecretType::Map => {
            let data = secret
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k, v.0.as_slice()));
            let strings = secret
                .string_data
                .iter()
                .flatten()
                .map(|(k, v)| (k, v.as_bytes()));
            let mut entries = BTreeMap::new();
            for (user, hash) in data.chain(strings) {
                entries.insert(user.clone(), text(user, hash)?);
            }
            Htpasswd::from_map(entries.iter().map(|(u, h)| (u.as_str(), h.as_str())))
        }
    };
    users
        .map(Arc::new)
        .map_err(|e| SecretError::Htpasswd(key.clone(), e))
}

fn parse_ca(key: &ObjectKey, secret: Option<&Secret>) -> Result<Arc<CaBundle>, SecretError> {
    let secret = secret.ok_or_else(|| SecretError::NotFound(key.clone()))?;
    let pem = value(secret, CA_KEY).ok_or(SecretError::MissingKey(key.clone(), CA_KEY))?;
    let bundle = CaBundle::from_pem(pem).map_err(|e| SecretError::CaBundle(key.clone(), e))?;
    Ok(Arc::new(bundle))
}

fn same(a: Option<&Arc<Secret>>, b: Option<&Arc<Secret>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        _ => false,
    }
}

fn parse(key: &ObjectKey, secret: Option<&Secret>) -> Result<Arc<Material>, SecretError> {
    let secret = secret.ok_or_else(|| SecretError::NotFound(key.clone()))?;
    let cert = value(secret, CERT_KEY).ok_or(SecretError::MissingKey(key.clone(), CERT_KEY))?;
    let private = value(secret, KEY_KEY).ok_or(SecretError::MissingKey(key.clone(), KEY_KEY))?;
    let material = Material::from_pem(cert, private);
    let material = material.map_err(|e| SecretError::Material(key.clone(), e))?;
    Ok(Arc::new(material))
}

/// A data value, with `stringData` overriding `data` as the API server merges them on write
/// (manifest files may use either).
fn value<'a>(secret: &'a Secret, name: &str) -> Option<&'a [u8]> {
    let string = secret.string_data.as_ref().and_then(|d| d.get(name));
    let data = secret.data.as_ref().and_then(|d| d.get(name));
    string
        .map(String::as_bytes)
        .or(data.map(|b| b.0.as_slice()))
}
