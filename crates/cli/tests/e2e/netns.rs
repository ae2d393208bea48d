//! A lab of Linux network namespaces for the active-standby tests (root only): a bridge in
//! the root namespace with 198.18.N.1/24 (etcd, the controller's backends and the test reach
//! the namespaces through it), and namespaces, each with one veth `eth0` on the bridge at
//! 198.18.N.H/24. N is unique per lab; everything is removed on drop, also when a test fails.
//! Probes run inside a namespace as small Python scripts (HTTP every few milliseconds; ARP
//! requests whose every reply is recorded).

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};
use tokio::process::Child;

static NEXT: AtomicU8 = AtomicU8::new(0);

/// A bridge and namespaces; removed on drop.
pub struct Lab {
    pub n: u8,
    bridge: String,
    namespaces: Vec<String>,
}

/// Runs `ip` with `args`; panics with its stderr on failure.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command inside namespace `ns`; its stdout.
pub fn exec(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .expect("run ip netns exec");
    assert!(
        out.status.success(),
        "in {ns}: {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether this process may create namespaces (root with iproute2); tests skip otherwise.
pub fn available() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n");
    let ip = Command::new("ip").arg("-V").stdout(Stdio::null()).status();
    root.unwrap_or(false) && ip.is_ok_and(|s| s.success())
}

impl Lab {
    pub fn new() -> Lab {
        // Unique within this process and, by the pid, apart from other runs.
        let n = (std::process::id() as u8)
            .wrapping_mul(37)
            .wrapping_add(NEXT.fetch_add(1, Ordering::SeqCst))
            % 250
            + 2;
        let bridge = format!("ptb{n}");
        let lab = Lab {
            n,
            bridge: bridge.clone(),
            namespaces: vec![],
        };
        let _ = Command::new("ip").args(["link", "del", &bridge]).output();
        ip(&[
            "link",
            "add",
            "name",
            &bridge,
            "type",
            "bridge",
            "forward_delay",
            "0",
        ]);
        let cidr = format!("{}/24", lab.addr(1));
        ip(&["address", "add", &cidr, "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        lab
    }

    /// 198.18.N.host.
    pub fn addr(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, self.n, host)
    }

    /// A namespace `pt<N>-<tag>` with `eth0` at 198.18.N.host on the bridge; its name.
    pub fn namespace(&mut self, tag: &str, host: u8) -> String {
        let ns = format!("pt{}-{tag}", self.n);
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        ip(&["netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        let (outer, inner) = (format!("pt{}{tag}o", self.n), format!("pt{}{tag}i", self.n));
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &outer, "master", &self.bridge, "up"]);
        ip(&["link", "set", &inner, "netns", &ns]);
        exec(&ns, &["ip", "link", "set", &inner, "name", "eth0"]);
        let cidr = format!("{}/24", self.addr(host));
        exec(&ns, &["ip", "address", "add", &cidr, "dev", "eth0"]);
        exec(&ns, &["ip", "link", "set", "eth0", "up"]);
        exec(&ns, &["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// The MAC address of `eth0` in `ns`.
    pub fn mac(&self, ns: &str) -> String {
        exec(ns, &["cat", "/sys/class/net/eth0/address"])
            .trim()
            .to_owned()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end, and so the pair.
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

/// The probe scripts (Python 3, standard library only).
const PROBE: &str = r#"
import socket, struct, sys, time, json
mode = sys.argv[1]
start = time.monotonic()
def now_ms(): return int((time.monotonic() - start) * 1000)
if mode == "http":
    # Open loop: a request on a new connection every `every`, each in its own thread, so that
    # one that hangs (a SYN to a node that no longer holds the address) does not delay the
    # next. An answer slower than 100 ms is reported "slow", not "ok".
    import threading
    ip, port, host, seconds, every = sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), float(sys.argv[6]) / 1000
    lock = threading.Lock()
    def one(t):
        began = time.monotonic()
        try:
            s = socket.create_connection((ip, port), timeout=1)
            s.settimeout(1)
            s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            s.close()
            body = data.split(b"\r\n\r\n", 1)[1]
            status = data.split(b" ", 2)[1].decode()
            service = json.loads(body).get("service", "?") if status == "200" else status
            fast = time.monotonic() - began <= 0.1
            line = "%d %s %s" % (t, "ok" if fast else "slow", service)
        except Exception as e:
            line = "%d err %s" % (t, type(e).__name__)
        with lock:
            print(line, flush=True)
    threads = []
    n = 0
    while time.monotonic() - start < seconds:
        t = now_ms()
        th = threading.Thread(target=one, args=(t,))
        th.start()
        threads.append(th)
        n += 1
        time.sleep(max(0, start + n * every - time.monotonic()))
    for th in threads:
        th.join()
elif mode == "arp":
    iface, target, seconds, every = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]) / 1000
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    s.bind((iface, 0))
    mac = open("/sys/class/net/%s/address" % iface).read().strip()
    me = bytes.fromhex(mac.replace(":", ""))
    src = socket.inet_aton(sys.argv[6])
    tip = socket.inet_aton(target)
    request = b"\xff" * 6 + me + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + me + src + b"\x00" * 6 + tip
    s.settimeout(0.005)
    while time.monotonic() - start < seconds:
        t = now_ms()
        s.send(request)
        seen = set()
        deadline = time.monotonic() + every
        while time.monotonic() < deadline:
            try:
                frame = s.recv(2048)
            except socket.timeout:
                continue
            if len(frame) >= 42 and frame[20:22] == b"\x00\x02" and frame[28:32] == tip:
                seen.add(frame[22:28].hex(":"))
        print(t, ",".join(sorted(seen)) or "-", flush=True)
"#;

/// A probe running in a namespace; its lines are read when it ends.
pub struct Probe {
    child: Child,
}

impl Probe {
    /// HTTP GET `host` at `ip:port` every `every_ms` for `seconds`, a new connection each.
    pub fn http(
        ns: &str,
        ip: Ipv4Addr,
        port: u16,
        host: &str,
        seconds: f64,
        every_ms: u64,
    ) -> Probe {
        let args = [
            "http".to_owned(),
            ip.to_string(),
            port.to_string(),
            host.to_owned(),
            seconds.to_string(),
            every_ms.to_string(),
        ];
        Probe::spawn(ns, &args)
    }

    /// An ARP request for `target` every `every_ms` from `source`; each line lists the MACs
    /// that answered it.
    pub fn arp(ns: &str, target: Ipv4Addr, source: Ipv4Addr, seconds: f64, every_ms: u64) -> Probe {
        let args = [
            "arp".to_owned(),
            "eth0".to_owned(),
            target.to_string(),
            seconds.to_string(),
            every_ms.to_string(),
            source.to_string(),
        ];
        Probe::spawn(ns, &args)
    }

    fn spawn(ns: &str, args: &[String]) -> Probe {
        let child = tokio::process::Command::new("ip")
            .args(["netns", "exec", ns, "python3", "-c", PROBE])
            .args(args)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the probe");
        Probe { child }
    }

    /// Waits for the end; `(ms since start, rest of line)`.
    pub async fn lines(self) -> Vec<(u64, String)> {
        let out = tokio::time::timeout(Duration::from_secs(120), self.child.wait_with_output())
            .await
            .expect("the probe ended")
            .expect("probe output");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let (t, rest) = l.split_once(' ')?;
                Some((t.parse().ok()?, rest.to_owned()))
            })
            .collect()
    }
}

/// Polls `f` until it holds or `limit` passes.
pub async fn eventually(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f().await {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
