//! `auth-type: basic` and its settings (`auth-secret`, `auth-secret-type`, `auth-realm`).
//! The Secret must be in the Ingress's namespace; its entries are read with the TLS Secrets
//! (`crate::certificates`), never into the model. A setting that cannot be served is a
//! warning and the Ingress's paths answer 503, as ingress-nginx denies such a location: a
//! request is never let through unchecked.

use super::{Reader, parse};
use crate::KeptIngress;
use portico_model::{BasicAuth, ObjectRef};

/// How the Secret holds its users (`auth-secret-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SecretType {
    /// `auth-file` (the default): the data key `auth` holds an htpasswd file.
    File,
    /// `auth-map`: one data key per user, its value the hash.
    Map,
}

/// The basic auth of an Ingress: none when `auth-type` is unset, `Err(())` when it is set
/// and cannot be served (its paths then refuse every request, and one warning names the first
/// annotation at fault).
pub(super) fn basic_auth(r: &mut Reader<'_>) -> Option<Result<BasicAuth, ()>> {
    let (type_name, _) = r.get("auth-type")?;
    let namespace = r.object.namespace.clone();
    let read = |r: &Reader<'_>, key: &str, parse: &dyn Fn(&str) -> Result<(), String>| {
        let (name, raw) = r.get(key)?;
        let why = parse(raw).err()?;
        Some((name, format!("invalid value {raw:?}: {why}")))
    };
    let problem = read(r, "auth-type", &|v| kind(v))
        .or_else(|| {
            read(r, "auth-secret", &|v| {
                parse::secret_ref(v, &namespace).map(drop)
            })
        })
        .or_else(|| read(r, "auth-secret-type", &|v| secret_type(v).map(drop)))
        .or_else(|| read(r, "auth-realm", &|v| realm(v).map(drop)));
    let secret = r.get("auth-secret");
    let problem = problem.or_else(|| {
        secret.is_none().then(|| {
            let why = "auth-type: basic needs auth-secret, a Secret of this namespace";
            (type_name, why.to_owned())
        })
    });
    if let Some((name, why)) = problem {
        r.warn(
            &name,
            format!("{why}; every request of this Ingress is refused (503) until it is valid"),
        );
        return Some(Err(()));
    }
    let secret = parse::secret_ref(secret?.1, &namespace).ok()?;
    Some(Ok(BasicAuth {
        secret,
        realm: r
            .get("auth-realm")
            .map(|(_, v)| v.to_owned())
            .unwrap_or_default(),
    }))
}

fn kind(v: &str) -> Result<(), String> {
    match v {
        "basic" => Ok(()),
        "digest" => Err("digest authentication is not served; use basic".to_owned()),
        _ => Err("must be basic".to_owned()),
    }
}

fn secret_type(v: &str) -> Result<SecretType, String> {
    match v {
        "auth-file" => Ok(SecretType::File),
        "auth-map" => Ok(SecretType::Map),
        _ => Err("must be auth-file or auth-map".to_owned()),
    }
}

/// Visible text for a quoted-string: no control characters, at most 1024 bytes.
fn realm(v: &str) -> Result<String, String> {
    if v.len() <= 1024 && !v.chars().any(char::is_control) {
        Ok(v.to_owned())
    } else {
        Err("must be text without control characters, at most 1024 bytes".to_owned())
    }
}

/// The basic-auth Secret `ingress` names, with the full name of the annotation naming it and
/// how it holds its users; none when basic auth is off or the reference is invalid (the
/// translation warns about that).
pub(crate) fn basic_secret(
    ingress: &KeptIngress,
    namespace: &str,
) -> Option<(String, ObjectRef, SecretType)> {
    let annotations = ingress.metadata.annotations.as_ref()?;
    let (_, kind) = super::get(annotations, "auth-type")?;
    if kind != "basic" {
        return None;
    }
    let (name, raw) = super::get(annotations, "auth-secret")?;
    let secret = parse::secret_ref(raw, namespace).ok()?;
    let kind = super::get(annotations, "auth-secret-type")
        .map_or(Ok(SecretType::File), |(_, v)| secret_type(v));
    Some((name, secret, kind.ok()?))
}
