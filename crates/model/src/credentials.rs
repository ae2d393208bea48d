//! The users and password hashes of a basic-auth Secret (`auth-secret`), checked when read:
//! key material beside the model, never in it (policies name the Secret only). Verifying a
//! password is the data plane's; here only which kind of hash each entry is.
//!
//! Debug prints counts only, and errors name the entry's line or key, never its content.

use crate::ObjectRef;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The usable basic-auth Secrets by reference (kind `Secret`), as policies'
/// [`crate::BasicAuth::secret`] name them.
pub type Credentials = BTreeMap<ObjectRef, Arc<Htpasswd>>;

/// One user's password hash, by the kind htpasswd and crypt(3) write.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum PasswordHash {
    /// `$2a$`, `$2b$` or `$2y$` (htpasswd -B).
    Bcrypt(String),
    /// `$apr1$salt$hash`: Apache's MD5 (htpasswd's default, -m).
    Apr1(String),
    /// `{SHA}` and the base64 of the password's SHA-1 (htpasswd -s).
    Sha1(String),
    /// crypt(3): `$1$` (MD5), `$5$`/`$6$` (SHA-256/512) or 13 characters of DES (htpasswd -d).
    Crypt(String),
}

/// The kind only: hashes are secrets too.
impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PasswordHash::Bcrypt(_) => "Bcrypt",
            PasswordHash::Apr1(_) => "Apr1",
            PasswordHash::Sha1(_) => "Sha1",
            PasswordHash::Crypt(_) => "Crypt",
        })
    }
}

impl PasswordHash {
    /// The hash as htpasswd writes it (what [`PasswordHash::parse`] reads).
    pub fn to_written(&self) -> String {
        match self {
            PasswordHash::Sha1(h) => format!("{{SHA}}{h}"),
            PasswordHash::Bcrypt(h) | PasswordHash::Apr1(h) | PasswordHash::Crypt(h) => h.clone(),
        }
    }

    /// The kind of `hash`, or why it is none that the data plane verifies.
    pub fn parse(hash: &str) -> Result<PasswordHash, &'static str> {
        let b64 = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'/'))
        };
        let owned = hash.to_owned();
        if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
            let ok = hash.len() == 60 && hash.as_bytes()[4..6].iter().all(u8::is_ascii_digit);
            return ok
                .then_some(PasswordHash::Bcrypt(owned))
                .ok_or("a malformed bcrypt hash");
        }
        if let Some(rest) = hash.strip_prefix("$apr1$") {
            let ok = rest
                .split_once('$')
                .is_some_and(|(salt, h)| salt.len() <= 8 && h.len() == 22 && b64(salt) && b64(h));
            return ok
                .then_some(PasswordHash::Apr1(owned))
                .ok_or("a malformed $apr1$ hash");
        }
        if let Some(rest) = hash.strip_prefix("{SHA}") {
            let ok = rest.len() == 28
                && (rest.bytes()).all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
            return ok
                .then(|| PasswordHash::Sha1(rest.to_owned()))
                .ok_or("a malformed {SHA} hash");
        }
        let modular = ["$1$", "$5$", "$6$"].iter().any(|p| hash.starts_with(p));
        let des = hash.len() == 13 && b64(hash);
        if modular
            && hash.len() > 4
            && hash[3..]
                .split('$')
                .all(|part| b64(part) || part.starts_with("rounds="))
            || des
        {
            return Ok(PasswordHash::Crypt(owned));
        }
        Err("not a hash the proxy verifies (bcrypt, $apr1$, {SHA}, or crypt: $1$, $5$, $6$, DES)")
    }
}

/// Why a Secret's entries cannot be used. Names the entry, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HtpasswdError {
    #[error("line {0} is not user:hash")]
    Line(usize),
    #[error("line {0}: {1}")]
    LineHash(usize, &'static str),
    #[error("key {0:?}: {1}")]
    KeyHash(String, &'static str),
    #[error("no user")]
    Empty,
}

/// The users of one basic-auth Secret and their hashes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Htpasswd {
    users: BTreeMap<String, PasswordHash>,
}

/// Counts only: hashes are secrets too.
impl fmt::Debug for Htpasswd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Htpasswd")
            .field("users", &self.users.len())
            .finish()
    }
}

impl Htpasswd {
    /// An htpasswd file (`auth-file`: one `user:hash` a line; blank lines and `#` comments
    /// skipped; of two lines for one user the first counts, as nginx reads the file top down
    /// and stops at the first).
    pub fn from_file(text: &str) -> Result<Htpasswd, HtpasswdError> {
        let mut users = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (user, hash) = line.split_once(':').ok_or(HtpasswdError::Line(i + 1))?;
            // Apache's htpasswd may append `:comment`; the hash ends there.
            let hash = hash.split(':').next().unwrap_or_default();
            let hash = PasswordHash::parse(hash).map_err(|e| HtpasswdError::LineHash(i + 1, e))?;
            users.entry(user.to_owned()).or_insert(hash);
        }
        Self::checked(users)
    }

    /// One key per user, its value the hash (`auth-map`).
    pub fn from_map<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Htpasswd, HtpasswdError> {
        let mut users = BTreeMap::new();
        for (user, hash) in entries {
            let hash = PasswordHash::parse(hash.trim_end_matches(['\n', '\r']))
                .map_err(|e| HtpasswdError::KeyHash(user.to_owned(), e))?;
            users.insert(user.to_owned(), hash);
        }
        Self::checked(users)
    }

    fn checked(users: BTreeMap<String, PasswordHash>) -> Result<Htpasswd, HtpasswdError> {
        if users.is_empty() {
            return Err(HtpasswdError::Empty);
        }
        Ok(Htpasswd { users })
    }

    /// Each user with its hash as written, in user order (what [`Htpasswd::from_map`] reads).
    pub fn entries(&self) -> impl Iterator<Item = (&str, String)> {
        (self.users.iter()).map(|(user, hash)| (user.as_str(), hash.to_written()))
    }

    /// The hash of `user`, if the Secret has that user.
    pub fn hash(&self, user: &str) -> Option<&PasswordHash> {
        self.users.get(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hash_kind_is_recognised_and_a_bad_one_names_its_line_only() {
        let file = "# comment\n\
            b:$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa\n\
            m:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n\
            s:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n\
            d:bGVh02xkuGli2\n\
            x:$6$salt$abc\n";
        let h = Htpasswd::from_file(file).unwrap();
        assert!(matches!(h.hash("b"), Some(PasswordHash::Bcrypt(_))));
        assert!(matches!(h.hash("m"), Some(PasswordHash::Apr1(_))));
        assert!(matches!(h.hash("s"), Some(PasswordHash::Sha1(_))));
        assert!(matches!(h.hash("d"), Some(PasswordHash::Crypt(_))));
        assert!(matches!(h.hash("x"), Some(PasswordHash::Crypt(_))));
        let bad = Htpasswd::from_file("ok:bGVh02xkuGli2\nme:plaintext-secret\n").unwrap_err();
        assert_eq!(bad, HtpasswdError::LineHash(2, bad_kind()));
        assert!(!bad.to_string().contains("plaintext-secret"));
        assert_eq!(Htpasswd::from_file("\n").unwrap_err(), HtpasswdError::Empty);
        assert_eq!(
            Htpasswd::from_file("nocolon").unwrap_err(),
            HtpasswdError::Line(1)
        );
        assert!(!format!("{h:?}").contains("$apr1$"));
    }

    fn bad_kind() -> &'static str {
        PasswordHash::parse("plaintext-secret").unwrap_err()
    }
}
