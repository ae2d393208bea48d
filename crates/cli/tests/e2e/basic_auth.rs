//! ingress-nginx's basic auth (`auth-type: basic`) on the real binary with the built-in
//! proxy: every hash kind htpasswd writes accepted with its password and refused with another,
//! no credentials → 401 with the realm's challenge, `auth-map` Secrets, and a Secret that is
//! missing, lacks `auth` or lives in another namespace answering 503 with a warning naming
//! the Ingress and the annotation (ingress-nginx's `test/e2e/annotations/auth.go` cases).
//! Hashes are made by openssl where it can (apr1, MD5-crypt, SHA-512-crypt, SHA-1), the rest
//! are fixed vectors of `password`.

use crate::support::*;
use base64::Engine;
use std::process::Command;

const NGINX: &str = "nginx.ingress.kubernetes.io";
const CREATED: &str = "2026-01-01T00:00:00Z";
pub(crate) const NS: &str = "auth";
/// `htpasswd -nbB` and `htpasswd -nbd` of `password`.
pub(crate) const BCRYPT: &str = "$2y$05$nC6nErr9XZJuMJ57WyCob.EuZEjylDt2KaHfbfOtyb.EgL1I2jCVa";
pub(crate) const DES: &str = "bGVh02xkuGli2";

pub(crate) fn openssl_passwd(kind: &str, password: &str) -> String {
    let out = Command::new("openssl")
        .args(["passwd", kind, password])
        .output()
        .unwrap();
    assert!(out.status.success(), "openssl passwd {kind}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn sha1_entry(password: &str) -> String {
    let mut child = Command::new("openssl")
        .args(["sha1", "-binary"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(password.as_bytes())
        .unwrap();
    let digest = child.wait_with_output().unwrap().stdout;
    format!(
        "{{SHA}}{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// A Secret `name` of the test namespace with `data` as stringData.
pub(crate) fn secret(name: &str, data: &[(&str, String)]) -> String {
    let mut doc = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {NS}\nstringData:\n"
    );
    for (key, value) in data {
        let value = serde_json::to_string(value).unwrap();
        doc.push_str(&format!("  {key}: {value}\n"));
    }
    doc
}

/// An Ingress `name` of the test namespace routing `host` to `web`, with ingress-nginx's
/// annotations `keys` (names without the prefix).
pub(crate) fn guarded(name: &str, host: &str, keys: &[(&str, &str)]) -> String {
    let rules = [(host, "/", "Prefix", "web", "80")];
    nginx_annotated(&ingress(NS, name, CREATED, &rules), keys)
}

/// The users of the htpasswd file, with their passwords.
const USERS: [(&str, &str); 6] = [
    ("bcrypt", "password"),
    ("apr1", "apr1-pw"),
    ("md5", "md5-pw"),
    ("sha512", "sha512-pw"),
    ("sha", "sha-pw"),
    ("des", "password"),
];

async fn manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service(NS, "web", &ready(&web)));
    let file = [
        format!("# made by htpasswd\nbcrypt:{BCRYPT}"),
        format!("apr1:{}", openssl_passwd("-apr1", "apr1-pw")),
        format!("md5:{}", openssl_passwd("-1", "md5-pw")),
        format!("sha512:{}", openssl_passwd("-6", "sha512-pw")),
        format!("sha:{}", sha1_entry("sha-pw")),
        format!("des:{DES}\n"),
    ]
    .join("\n");
    m.write("file.yaml", &secret("file", &[("auth", file)]));
    let map = [("erin", openssl_passwd("-apr1", "erin-pw"))];
    m.write("map.yaml", &secret("map", &map));
    m.write(
        "nokey.yaml",
        &secret("nokey", &[("htpasswd", DES.to_owned())]),
    );
    let realm = r#"Area "51" \ staff"#;
    let basic = |secret| vec![("auth-type", "basic"), ("auth-secret", secret)];
    let mut keys = basic("file");
    keys.push(("auth-realm", realm));
    m.write("f.yaml", &guarded("f", "file.test", &keys));
    let mut keys = basic("map");
    keys.push(("auth-secret-type", "auth-map"));
    m.write("m.yaml", &guarded("m", "map.test", &keys));
    m.write(
        "x.yaml",
        &guarded("missing", "missing.test", &basic("no-such")),
    );
    m.write("k.yaml", &guarded("nokey", "nokey.test", &basic("nokey")));
    m.write(
        "o.yaml",
        &guarded("other", "other.test", &basic("kube-system/file")),
    );
    m.write("p.yaml", &guarded("plain", "plain.test", &[]));
    m
}

/// `GET host/` with basic auth as `user` (name, password), or none.
pub(crate) async fn get(p: &Portico, host: &str, user: Option<(&str, &str)>) -> Reply {
    let token = user.map(|(u, pw)| {
        let pair = format!("{u}:{pw}");
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    });
    let headers: Vec<(&str, &str)> = token
        .iter()
        .map(|t| ("authorization", t.as_str()))
        .collect();
    p.request(p.http, "GET", host, "/", &headers, "")
        .await
        .unwrap()
}

#[tokio::test]
async fn basic_auth_accepts_each_hash_kind_and_challenges_with_the_realm() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;

    let none = get(&p, "file.test", None).await;
    assert_eq!(none.status, 401, "{none:?}");
    assert_eq!(
        none.headers["www-authenticate"],
        r#"Basic realm="Area \"51\" \\ staff""#
    );
    assert_eq!(none.service(), "");
    for (user, password) in USERS {
        let ok = get(&p, "file.test", Some((user, password))).await;
        assert_eq!(ok.status, 200, "{user}: {ok:?}");
        assert_eq!(ok.service(), "web", "{user}");
        let wrong = get(&p, "file.test", Some((user, "wrong"))).await;
        assert_eq!(wrong.status, 401, "{user}");
        assert!(wrong.headers.contains_key("www-authenticate"), "{user}");
    }
    assert_eq!(
        get(&p, "file.test", Some(("nobody", "password")))
            .await
            .status,
        401
    );

    // auth-map: one key per user; the default realm is empty.
    let erin = get(&p, "map.test", Some(("erin", "erin-pw"))).await;
    assert_eq!(erin.status, 200, "{erin:?}");
    let denied = get(&p, "map.test", Some(("erin", "apr1-pw"))).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.headers["www-authenticate"], r#"Basic realm="""#);
}

#[tokio::test]
async fn an_unusable_basic_auth_secret_answers_503_and_names_the_ingress() {
    let m = manifests().await;
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    for (host, name, says) in [
        (
            "missing.test",
            "missing",
            "secret \"auth/no-such\" not found",
        ),
        ("nokey.test", "nokey", "no data key \"auth\""),
        ("other.test", "other", "own namespace"),
    ] {
        let reply = get(&p, host, Some(("des", "password"))).await;
        assert_eq!(reply.status, 503, "{host}: {reply:?}");
        let ingress = p.ingress(NS, name).await;
        let found: Vec<_> = (ingress["diagnostics"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d["field"] == format!("metadata.annotations[{NGINX}/auth-secret]"))
            .collect();
        assert_eq!(found.len(), 1, "{ingress:#}");
        let message = found[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(says) && message.contains("503"),
            "{message}"
        );
    }
    let all = p.admin_json("/api/v1/diagnostics").await.to_string();
    assert!(
        !all.contains(DES) && !all.contains("$apr1$"),
        "Secret data in {all}"
    );
}
