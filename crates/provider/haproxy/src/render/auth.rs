//! ingress-nginx's basic auth (`auth-type: basic`) on haproxy: a `userlist` per Secret, its
//! users with their hashes, and per policy a `return` of 401 with the realm's challenge
//! unless `http_auth` accepts the request's user and password.
//!
//! haproxy checks a userlist's passwords with the system's crypt(3): bcrypt (`$2a$`, `$2b$`,
//! `$2y$`), SHA-crypt (`$5$`, `$6$`), MD5-crypt (`$1$`) and DES. Apache's `$apr1$` and `{SHA}`
//! are not crypt(3) hashes: a Secret holding one fails closed (its policies answer 503, a
//! warning names the hash kind and the provider), never served unchecked. So does a Secret the
//! provider was not handed (missing, unusable: the translation warns about those).
//!
//! User names and hashes reach haproxy.conf (written 0600) as quoted words ([`crate::quote`]);
//! a user name haproxy cannot hold (empty, a control character) fails closed too. Diagnostics
//! never name a user or a hash.

use crate::quote;
use portico_model::{
    BasicAuth, Credentials, Diagnostic, Htpasswd, L7Policy, LoadBalancer, ObjectRef, PasswordHash,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const PLAIN: &str = "content-type \"text/plain; charset=utf-8\"";
/// The longest user name and realm written: quoted (up to four bytes each), they stay within
/// the 2048 bytes of a haproxy configuration line.
const MAX_FIELD: usize = 256;

/// The userlist of a Secret: a name of Portico's own making.
fn userlist_name(secret: &ObjectRef) -> String {
    let key = format!("secret/{}/{}", secret.namespace, secret.name);
    format!("portico_auth_{}", portico_model::stable_uuid(&key).simple())
}

/// Why a Secret's users cannot be checked by haproxy: the first hash kind its crypt(3) does
/// not verify, or a user name it cannot hold.
fn unservable(htpasswd: &Htpasswd) -> Option<String> {
    for (user, _) in htpasswd.entries() {
        if user.is_empty() || user.len() > MAX_FIELD || user.bytes().any(|b| b.is_ascii_control()) {
            return Some(format!(
                "a user name that is empty, longer than {MAX_FIELD} bytes or holds a control \
                 character, which haproxy's userlist cannot hold"
            ));
        }
        match htpasswd.hash(user) {
            Some(PasswordHash::Apr1(_)) => {
                return Some(
                    "$apr1$ (Apache MD5) hashes, which haproxy's crypt(3) does not check".into(),
                );
            }
            Some(PasswordHash::Sha1(_)) => {
                return Some("{SHA} hashes, which are not crypt(3) hashes haproxy checks".into());
            }
            _ => {}
        }
    }
    None
}

/// The userlist section of one Secret.
fn userlist(secret: &ObjectRef, htpasswd: &Htpasswd) -> Option<String> {
    let mut s = format!("\nuserlist {}\n", userlist_name(secret));
    for (user, hash) in htpasswd.entries() {
        let (user, hash) = (quote::word(user).ok()?, quote::word(&hash).ok()?);
        let _ = writeln!(s, "    user {user} password {hash}");
    }
    Some(s)
}

/// Every basic auth of `lb`'s policies.
fn each(lb: &LoadBalancer) -> impl Iterator<Item = &BasicAuth> {
    let policies = lb.listeners.iter().flat_map(|l| &l.policies);
    policies.filter_map(|p| p.options.as_ref()?.basic_auth.as_ref())
}

/// The userlists of the Secrets `lb`'s policies name, of those haproxy can check.
pub(super) fn userlists(lb: &LoadBalancer, credentials: &Credentials) -> String {
    let mut secrets = BTreeMap::new();
    for auth in each(lb) {
        if let Some(htpasswd) = credentials.get(&auth.secret) {
            secrets.insert(&auth.secret, htpasswd);
        }
    }
    (secrets.into_iter())
        .filter(|(_, h)| unservable(h).is_none())
        .filter_map(|(secret, h)| userlist(secret, h))
        .collect()
}

/// `WWW-Authenticate: Basic realm="…"` as a `return`'s `hdr` value: the realm's `"` and `\`
/// escaped as in a quoted-string, `%` doubled (haproxy reads the value as a log-format
/// string), the whole one quoted word; none for a realm with a control character.
fn challenge(realm: &str) -> Option<String> {
    if realm.len() > MAX_FIELD || realm.bytes().any(|b| b.is_ascii_control()) {
        return None;
    }
    let mut value = String::from("Basic realm=\"");
    for c in realm.chars() {
        match c {
            '"' | '\\' => {
                value.push('\\');
                value.push(c);
            }
            '%' => value.push_str("%%"),
            c => value.push(c),
        }
    }
    value.push('"');
    quote::word(&value).ok()
}

/// The basic-auth line of `policy` (its lines test `when`: its id in `txn.policy`): 401 with
/// the challenge unless the Secret's userlist accepts the request, or 503 when the Secret
/// cannot be checked here (with a warning when that is haproxy's doing). Empty without basic
/// auth.
pub(super) fn lines(
    policy: &L7Policy,
    when: &str,
    credentials: &Credentials,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    let Some(auth) = policy.options.as_ref().and_then(|o| o.basic_auth.as_ref()) else {
        return String::new();
    };
    if redirects(policy) {
        return String::new();
    }
    let closed = format!(
        "    http-request return status 503 {PLAIN} string \"503 Service Unavailable\\n\" {when}\n"
    );
    // Not handed: the translation warned on the Ingress (missing, unusable Secret).
    let Some(htpasswd) = credentials.get(&auth.secret) else {
        return closed;
    };
    let why = unservable(htpasswd).or_else(|| {
        challenge(&auth.realm).is_none().then(|| {
            format!(
                "an auth-realm longer than {MAX_FIELD} bytes or with a control character, which \
                 haproxy's WWW-Authenticate answer cannot hold"
            )
        })
    });
    if let Some(why) = why {
        let message = format!(
            "basic auth of policy {}: Secret {}/{} holds {why}; provider haproxy answers these \
             paths 503 rather than serve them unchecked (use bcrypt, SHA-256/512 or MD5 crypt \
             hashes, or provider proxy)",
            policy.id, auth.secret.namespace, auth.secret.name
        );
        diagnostics.push(Diagnostic::warning(
            ObjectRef::clone(&policy.source),
            "metadata.annotations",
            message,
        ));
        return closed;
    }
    let challenge = challenge(&auth.realm).unwrap_or_default();
    format!(
        "    http-request return status 401 {PLAIN} string \"401 Unauthorized\\n\" hdr WWW-Authenticate {challenge} {when} !{{ http_auth({}) }}\n",
        userlist_name(&auth.secret)
    )
}

/// Whether `policy` answers with a redirect (the HTTP → HTTPS one of a TLS host,
/// `permanent-redirect`, …): nginx redirects in its rewrite phase, before the limits and the
/// auth check, so neither applies to it.
pub(super) fn redirects(policy: &L7Policy) -> bool {
    use portico_model::PolicyAction;
    matches!(
        policy.action,
        PolicyAction::RedirectToHttps { .. }
            | PolicyAction::RequestRedirect(_)
            | PolicyAction::RedirectToUrl { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_escapes_quotes_backslashes_and_percent_signs() {
        assert_eq!(
            challenge(r#"a "b" \ 5%"#).unwrap(),
            r#""Basic\x20realm\x3d\x22a\x20\x5c\x22b\x5c\x22\x20\x5c\x5c\x205\x25\x25\x22""#
        );
        assert_eq!(challenge("a\r\nb"), None);
        assert_eq!(challenge(&"r".repeat(MAX_FIELD + 1)), None);
    }

    #[test]
    fn apr1_and_sha_hashes_and_odd_user_names_are_not_served() {
        let ok =
            Htpasswd::from_file("a:$1$salt$abcdefghijklmnopqrstuv\nb:bGVh02xkuGli2\n").unwrap();
        assert_eq!(unservable(&ok), None);
        let apr1 = Htpasswd::from_file("a:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n").unwrap();
        assert!(unservable(&apr1).unwrap().contains("$apr1$"));
        let sha = Htpasswd::from_file("a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n").unwrap();
        assert!(unservable(&sha).unwrap().contains("{SHA}"));
        let odd = Htpasswd::from_map([("a\tb", "bGVh02xkuGli2")]).unwrap();
        assert!(unservable(&odd).unwrap().contains("control character"));
        let long = "u".repeat(MAX_FIELD + 1);
        let long = Htpasswd::from_map([(long.as_str(), "bGVh02xkuGli2")]).unwrap();
        assert!(unservable(&long).unwrap().contains("longer than 256"));
    }
}
