//! ingress-nginx's basic auth (`auth-type: basic`) on the real binary with provider haproxy:
//! every hash kind haproxy's crypt(3) checks (bcrypt `$2y$`/`$2b$`, SHA-crypt `$5$`/`$6$`,
//! MD5-crypt `$1$`, DES) accepted with its password and refused with another, no credentials
//! → 401 with the realm's challenge, `auth-map` Secrets, a changed Secret taking effect
//! without a restart; `$apr1$` and `{SHA}`, which haproxy cannot check, fail closed (503, a
//! warning naming the hash kind and the provider). Hashes are made by openssl where it can.

use crate::basic_auth::{BCRYPT, DES, NS, get, guarded, openssl_passwd, secret};
use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// The users of the htpasswd file, with their passwords.
const USERS: [(&str, &str); 6] = [
    ("bcrypt", "password"),
    ("bcrypt2b", "password"),
    ("md5", "md5-pw"),
    ("sha256", "sha256-pw"),
    ("sha512", "sha512-pw"),
    ("des", "password"),
];

const REALM: &str = r#"Area "51" \ 100% staff"#;

async fn manifests() -> Manifests {
    let m = Manifests::new();
    let web = echo_pods("web", 1).await;
    m.write("web.yaml", &service(NS, "web", &ready(&web)));
    let file = [
        format!("# made by htpasswd\nbcrypt:{BCRYPT}"),
        format!("bcrypt2b:{}", BCRYPT.replacen("$2y$", "$2b$", 1)),
        format!("md5:{}", openssl_passwd("-1", "md5-pw")),
        format!("sha256:{}", openssl_passwd("-5", "sha256-pw")),
        format!("sha512:{}", openssl_passwd("-6", "sha512-pw")),
        format!("des:{DES}\n"),
    ]
    .join("\n");
    m.write("file.yaml", &secret("file", &[("auth", file)]));
    let map = [("erin", openssl_passwd("-6", "erin-pw"))];
    m.write("map.yaml", &secret("map", &map));
    let apr1 = format!("al:{}\n", openssl_passwd("-apr1", "al-pw"));
    m.write("apr1.yaml", &secret("apache", &[("auth", apr1)]));
    // `htpasswd -nbs sha sha-pw`.
    let sha = "sha:{SHA}O/MvdjOwOQpt8I9HBSVZugThPMw=\n".to_owned();
    m.write("sha.yaml", &secret("sha", &[("auth", sha)]));
    let basic = |secret| vec![("auth-type", "basic"), ("auth-secret", secret)];
    let mut keys = basic("file");
    keys.push(("auth-realm", REALM));
    m.write("f.yaml", &guarded("f", "file.test", &keys));
    let mut keys = basic("map");
    keys.push(("auth-secret-type", "auth-map"));
    m.write("m.yaml", &guarded("m", "map.test", &keys));
    m.write("a.yaml", &guarded("apache", "apr1.test", &basic("apache")));
    m.write("s.yaml", &guarded("sha", "sha.test", &basic("sha")));
    m.write(
        "x.yaml",
        &guarded("missing", "missing.test", &basic("no-such")),
    );
    m.write("p.yaml", &guarded("plain", "plain.test", &[]));
    m
}

#[tokio::test]
async fn basic_auth_on_haproxy_accepts_each_crypt_hash_and_challenges_with_the_realm() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;

    let none = get(&p, "file.test", None).await;
    assert_eq!(none.status, 401, "{none:?}");
    assert_eq!(
        none.headers["www-authenticate"],
        r#"Basic realm="Area \"51\" \\ 100% staff""#
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
    let nobody = get(&p, "file.test", Some(("nobody", "password"))).await;
    assert_eq!(nobody.status, 401);

    // auth-map: one key per user; the default realm is empty.
    let erin = get(&p, "map.test", Some(("erin", "erin-pw"))).await;
    assert_eq!(erin.status, 200, "{erin:?}");
    let denied = get(&p, "map.test", Some(("erin", "md5-pw"))).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.headers["www-authenticate"], r#"Basic realm="""#);

    // What haproxy reads holds hashes, never a password, and only this user may read it.
    let config = p.haproxy_dir().join("haproxy.conf");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("userlist "), "{text}");
    assert!(!text.contains("md5-pw") && !text.contains("erin-pw"));
}

#[tokio::test]
async fn hashes_haproxy_cannot_check_fail_closed_with_a_warning_naming_kind_and_provider() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    for (host, name, user, kind) in [
        ("apr1.test", "apache", ("al", "al-pw"), "$apr1$"),
        ("sha.test", "sha", ("sha", "sha-pw"), "{SHA}"),
    ] {
        // The right password does not open it: never served unchecked.
        let reply = get(&p, host, Some(user)).await;
        assert_eq!(reply.status, 503, "{host}: {reply:?}");
        assert_eq!(reply.service(), "", "{host}");
        assert_eq!(get(&p, host, None).await.status, 503, "{host}");
        // The agent's warning, on the Ingress (the admin API lists agents' problems apart).
        let start = Instant::now();
        loop {
            let all = p.admin_json("/api/v1/diagnostics").await;
            let found = (all.as_array().into_iter().flatten()).any(|d| {
                let message = d["message"].as_str().unwrap_or_default();
                d["object"]["name"] == name
                    && d["object"]["kind"] == "Ingress"
                    && message.contains(kind)
                    && message.contains("provider haproxy")
                    && message.contains("503")
            });
            if found {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(5), "{name}: {all:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // A Secret that does not exist: 503, as the proxy answers.
    assert_eq!(
        get(&p, "missing.test", Some(("des", "password")))
            .await
            .status,
        503
    );
    let all = p.admin_json("/api/v1/diagnostics").await.to_string();
    assert!(
        !all.contains(DES) && !all.contains("O/MvdjOwOQpt") && !all.contains("al-pw"),
        "Secret data in {all}"
    );
}

#[tokio::test]
async fn a_changed_secret_takes_effect_on_haproxy_without_a_restart() {
    let m = manifests().await;
    let p = Portico::start_haproxy(m.path(), &[]).await;
    p.wait_route("plain.test", "/", 200, "web").await;
    assert_eq!(
        get(&p, "map.test", Some(("erin", "erin-pw"))).await.status,
        200
    );
    let pid_file = p.haproxy_dir().join("haproxy.pid");
    let master = std::fs::read_to_string(&pid_file).unwrap_or_default();

    let map = [("erin", openssl_passwd("-6", "new-pw"))];
    m.write("map.yaml", &secret("map", &map));
    let start = Instant::now();
    while get(&p, "map.test", Some(("erin", "new-pw"))).await.status != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the new password never worked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        get(&p, "map.test", Some(("erin", "erin-pw"))).await.status,
        401
    );
    // The same Portico and the same haproxy master: a reload, not a restart.
    assert!(p.pid().is_some());
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap_or_default(),
        master
    );
}

/// `portico render` prints no password hash (the userlist's are `*`), and what it prints
/// still passes `haproxy -c`.
#[tokio::test]
async fn render_prints_userlists_without_their_hashes() {
    let m = manifests().await;
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["render", "--provider", "haproxy", "-f"])
        .arg(m.path())
        .arg("--state-dir")
        .arg(state.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("userlist portico_auth_"), "{text}");
    assert!(text.contains(r#"    user "des" password "*""#), "{text}");
    assert!(
        !text.contains("bGVh02") && !text.contains(r"\x242y\x24"),
        "{text}"
    );
    let printed = state.path().join("printed.cfg");
    std::fs::write(&printed, &text).unwrap();
    let check = Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(&printed)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
}
