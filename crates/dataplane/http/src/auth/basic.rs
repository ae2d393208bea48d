//! ingress-nginx's basic auth (`auth-type: basic`, nginx's `auth_basic`): the user and
//! password of an `Authorization: Basic` field checked against the htpasswd entries of the
//! Secret the policy names. No user, an unknown user or a wrong password: 401 with the
//! realm's challenge; a Secret this process was not handed (missing or unusable): 503, as
//! ingress-nginx answers for a location whose auth Secret it cannot read.
//!
//! bcrypt, apr1 and crypt(3) are slow by design (bcrypt's cost 10 is ~50 ms of CPU): they
//! run on the blocking pool, never on the executor's threads. Nothing derived from a password
//! is kept between requests (no cache): the Secret's hashes stay the only copy.

use base64::Engine;
use http::HeaderMap;
use http::HeaderValue;
use http::header::AUTHORIZATION;
use portico_model::{BasicAuth, Credentials, Htpasswd, PasswordHash};
use sha1::{Digest, Sha1};
use std::sync::Arc;

/// A route's basic auth, compiled once per route table.
#[derive(Debug)]
pub(crate) struct Basic {
    /// `Basic realm="…"`.
    pub(crate) challenge: HeaderValue,
    /// None: the Secret is not usable here, every request answers 503.
    users: Option<Arc<Htpasswd>>,
}

impl Basic {
    pub(crate) fn compile(auth: &BasicAuth, credentials: &Credentials) -> Self {
        Basic {
            challenge: challenge(&auth.realm),
            users: credentials.get(&auth.secret).cloned(),
        }
    }

    /// Whether `headers` carry a user and password the Secret accepts: `Err(401)` when not,
    /// `Err(503)` when the Secret is not usable.
    pub(crate) async fn check(&self, headers: &HeaderMap) -> Result<(), u16> {
        let users = self.users.clone().ok_or(503u16)?;
        let (user, password) = basic_credentials(headers).ok_or(401u16)?;
        let Some(hash) = users.hash(&user).cloned() else {
            return Err(401);
        };
        let ok = match hash {
            PasswordHash::Sha1(_) => verify(&hash, &password),
            _ => tokio::task::spawn_blocking(move || verify(&hash, &password))
                .await
                .unwrap_or(false),
        };
        if ok { Ok(()) } else { Err(401) }
    }
}

/// `Basic realm="<realm>"` with `\` and `"` escaped as a quoted-string needs; characters a
/// field cannot carry (the translator refuses them) are left out.
pub(crate) fn challenge(realm: &str) -> HeaderValue {
    let mut out = String::with_capacity(realm.len() + 16);
    out.push_str("Basic realm=\"");
    for c in realm.chars().filter(|c| !c.is_control()) {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    HeaderValue::from_str(&out).unwrap_or_else(|_| HeaderValue::from_static("Basic realm=\"\""))
}

/// The user and password of the first `Authorization: Basic` field (scheme case-insensitive,
/// the password may contain `:`); none when absent or malformed.
pub(crate) fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Whether `password` gives `hash` (the hashing crates' own verification; SHA-1 by hand as
/// htpasswd -s defines it: the base64 of the digest).
pub(crate) fn verify(hash: &PasswordHash, password: &str) -> bool {
    match hash {
        PasswordHash::Bcrypt(h) | PasswordHash::Crypt(h) => pwhash::unix::verify(password, h),
        PasswordHash::Apr1(h) => {
            let rest = h.strip_prefix("$apr1$").unwrap_or_default();
            let Some((salt, expected)) = rest.split_once('$') else {
                return false;
            };
            let got = htpasswd_verify::md5::md5_apr1_encode(password, salt);
            constant_eq(got.as_bytes(), expected.as_bytes())
        }
        PasswordHash::Sha1(expected) => {
            let digest = Sha1::digest(password.as_bytes());
            let got = base64::engine::general_purpose::STANDARD.encode(digest);
            constant_eq(got.as_bytes(), expected.as_bytes())
        }
    }
}

/// Equality whose time does not depend on where the first difference is.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes of `password`, one of each kind htpasswd writes.
    const HASHES: [&str; 4] = [
        "$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00",
        "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
        "bGVh02xkuGli2",
        "$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa",
    ];

    #[test]
    fn each_hash_kind_accepts_its_password_only() {
        for hash in HASHES {
            let parsed = PasswordHash::parse(hash).unwrap();
            assert!(verify(&parsed, "password"), "{hash}");
            assert!(!verify(&parsed, "passwore"), "{hash}");
        }
    }

    #[test]
    fn the_challenge_escapes_quotes_and_backslashes() {
        assert_eq!(challenge(r#"a "b" \c"#), r#"Basic realm="a \"b\" \\c""#);
        assert_eq!(challenge(""), r#"Basic realm="""#);
    }

    #[test]
    fn basic_credentials_keep_colons_in_the_password_and_refuse_other_schemes() {
        let mut headers = HeaderMap::new();
        let token = base64::engine::general_purpose::STANDARD.encode("u:p:q");
        headers.insert(AUTHORIZATION, format!("bAsIc {token}").parse().unwrap());
        assert_eq!(
            basic_credentials(&headers),
            Some(("u".to_owned(), "p:q".to_owned()))
        );
        headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        assert_eq!(basic_credentials(&headers), None);
    }
}
