//! Hostile manifest files dropped into a watched directory of the real binary: each costs
//! bounded memory and time, is reported naming the file, and blocks nothing — an unrelated
//! Ingress stays served and a later change to it is applied.

use crate::{backends, support::*};
use std::path::Path;
use std::time::{Duration, Instant};

/// Peak and current resident memory of `pid`, in MiB (`VmHWM`, `VmRSS`).
fn memory_mib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib / 1024
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn alias_bomb() -> Vec<u8> {
    let mut y = String::from(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 9].join(",");
        y.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    y.into_bytes()
}

fn huge_list(bytes: usize) -> Vec<u8> {
    let mut y = String::from("apiVersion: v1\nkind: List\nitems:\n");
    while y.len() < bytes {
        y.push_str("- {a: 1}\n");
    }
    y.into_bytes()
}

fn large_ignored_kind(bytes: usize) -> Vec<u8> {
    let mut y =
        String::from("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: big}\ndata:\n");
    let mut i = 0;
    while y.len() < bytes {
        y.push_str(&format!("  k{i}: \"{}\"\n", "v".repeat(100)));
        i += 1;
    }
    y.into_bytes()
}

/// Each case: a name, what it writes into the directory, and a piece of the diagnostic it
/// must raise (none for the ignored kind: it is not an error).
type Case = (&'static str, Box<dyn Fn(&Path)>, Option<&'static str>);

fn cases() -> Vec<Case> {
    let file = |name: &'static str, bytes: Vec<u8>| {
        Box::new(move |dir: &Path| std::fs::write(dir.join(name), &bytes).unwrap())
            as Box<dyn Fn(&Path)>
    };
    vec![
        (
            "alias bomb",
            file("bomb.yaml", alias_bomb()),
            Some("bomb.yaml"),
        ),
        (
            "deep nesting",
            file("deep.yaml", "[".repeat(100_000).into_bytes()),
            Some("deep.yaml"),
        ),
        (
            "a 50 MB file",
            file("big.yaml", vec![b'#'; 50 << 20]),
            Some("over the limit"),
        ),
        (
            "a huge list",
            file("list.yaml", huge_list(1 << 20)),
            Some("more problems"),
        ),
        (
            "a large ignored kind",
            file("cm.yaml", large_ignored_kind(7 << 20)),
            None,
        ),
        (
            "a FIFO",
            Box::new(|dir: &Path| {
                let made = std::process::Command::new("mkfifo")
                    .arg(dir.join("fifo.yaml"))
                    .status();
                assert!(made.unwrap().success());
            }),
            Some("a FIFO"),
        ),
        (
            "a /dev/zero symlink",
            Box::new(|dir: &Path| {
                std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
            }),
            Some("character device"),
        ),
        (
            "invalid UTF-8",
            file("bad-utf8.yaml", vec![0xff, 0xfe, b'a', 0x80]),
            Some("not UTF-8"),
        ),
        (
            "control characters",
            file(
                "ctl.yaml",
                ingress(
                    "hostile",
                    "ctl\u{1b}[31m",
                    "2026-01-01T00:00:00Z",
                    &[("a\u{7}.test", "/", "Prefix", "web", "80")],
                )
                .into_bytes(),
            ),
            Some("ctl"),
        ),
    ]
}

fn good(hosts: &[String]) -> String {
    let rules: Vec<(&str, &str, &str, &str, &str)> = hosts
        .iter()
        .map(|h| (h.as_str(), "/", "Prefix", "web", "80"))
        .collect();
    ingress("hostile", "good", "2026-01-01T00:00:00Z", &rules)
}

#[tokio::test]
async fn hostile_files_cost_bounded_memory_and_time_and_block_nothing_else() {
    let m = backends("hostile", &[("web", 1)]).await;
    let mut hosts = vec!["good.test".to_owned()];
    m.write("good.yaml", &good(&hosts));
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("good.test", "/", 200, "web").await;
    let pid = p.pid().unwrap();
    let (_, idle) = memory_mib(pid);
    let mut report = Vec::new();
    for (i, (name, write, expect)) in cases().into_iter().enumerate() {
        let start = Instant::now();
        write(m.path());
        // A later change to the unrelated Ingress is applied.
        hosts.push(format!("good{i}.test"));
        m.write("good.yaml", &good(&hosts));
        loop {
            let r = p.get(&hosts[i + 1], "/").await;
            if r.status == 200 && r.service() == "web" {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name}: the change was not applied"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = start.elapsed();
        assert_eq!(p.get("good.test", "/").await.service(), "web", "{name}");
        if let Some(expect) = expect {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let diagnostics = p.admin_json("/api/v1/diagnostics").await.to_string();
                if diagnostics.contains(expect) {
                    assert!(
                        diagnostics.len() < 256 * 1024,
                        "{name}: {} bytes",
                        diagnostics.len()
                    );
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{name}: no diagnostic with {expect:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let (peak, now) = memory_mib(pid);
        report.push(format!("{name}: {took:?}, RSS {now} MiB, peak {peak} MiB"));
        assert!(
            peak < 400,
            "{name}: peak RSS {peak} MiB\n{}",
            report.join("\n")
        );
    }
    println!("{}", report.join("\n"));
    // Memory returns once the bad files are gone.
    for entry in std::fs::read_dir(m.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name != "good.yaml" && name != "backends.yaml" {
            std::fs::remove_file(&path).unwrap();
        }
    }
    hosts.push("after.test".to_owned());
    m.write("good.yaml", &good(&hosts));
    p.wait_route("after.test", "/", 200, "web").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, after) = memory_mib(pid);
    println!("RSS idle {idle} MiB, after the bad files are removed {after} MiB");
    assert!(
        after < idle + 40,
        "RSS {after} MiB after removal, {idle} MiB before"
    );
}

/// `portico validate` on each hostile file ends, in bounded time, with the problem named.
#[test]
fn validate_ends_on_every_hostile_file() {
    for (name, write, expect) in cases() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path());
        let start = Instant::now();
        let out = std::process::Command::new(BIN)
            .args(["validate", "-f"])
            .arg(dir.path())
            .output()
            .unwrap();
        let took = start.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(took < Duration::from_secs(60), "{name}: {took:?}");
        assert!(
            !stdout.chars().any(|c| c.is_control() && c != '\n'),
            "{name}: {stdout:?}"
        );
        if let Some(expect) = expect {
            assert!(stdout.contains(expect), "{name}: {stdout}");
        }
    }
}
