//! Headless Chromium driven over the DevTools protocol: a minimal WebSocket client (RFC 6455
//! text frames, masked as a client must) on a loopback TCP connection, commands by id, events
//! kept for the test to inspect (console messages, exceptions, log entries).

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// Debian's `chromium` (scripts/test.sh installs it).
pub fn chromium_path() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("chromium is not installed (scripts/test.sh installs Debian's chromium)");
}

/// A headless Chromium with its own profile directory; on drop its process group is killed
/// and waited for before the profile is removed (a dying renderer still writes into it, and
/// the directory was left behind).
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    /// The browser's DevTools port on 127.0.0.1.
    pub port: u16,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let Some(pid) = self.child.id() else { return };
        let group = format!("-{pid}");
        let kill = |signal: &str| {
            std::process::Command::new("kill")
                .args([signal, "--", &group])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        kill("-KILL");
        // Reap the browser, then wait (bounded) until no process of its group is left.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let reaped = self.child.try_wait().is_ok_and(|s| s.is_some());
            if reaped && !kill("-0") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Browser {
    pub async fn start() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(chromium_path())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1280,900",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group: the helpers it forks are killed with it.
            .process_group(0)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
                if let Some(rest) = line.split("ws://127.0.0.1:").nth(1) {
                    return rest.split('/').next().unwrap().parse::<u16>().unwrap();
                }
            }
            panic!("chromium ended without a DevTools address");
        })
        .await
        .expect("chromium printed its DevTools address in time");
        // Keep draining stderr so that chromium never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Browser {
            child,
            _profile: profile,
            port,
        }
    }

    /// Connects to the first page target (the `about:blank` tab it started with).
    pub async fn page(&self) -> Page {
        let list = http_get(self.port, "/json/list").await;
        let targets: Value = serde_json::from_str(&list).unwrap();
        let ws = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_owned();
        let path = ws.splitn(4, '/').nth(3).unwrap();
        let mut page = Page::connect(self.port, &format!("/{path}")).await;
        for domain in ["Page", "Runtime", "Log", "Network"] {
            page.call(&format!("{domain}.enable"), json!({})).await;
        }
        page
    }
}

async fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    // Chromium may keep the connection open: read the head, then Content-Length bytes.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(s.read_u8().await.unwrap());
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.unwrap();
    String::from_utf8_lossy(&body).into_owned()
}

/// One page's DevTools session.
pub struct Page {
    stream: TcpStream,
    next_id: u64,
    /// Every event received so far, in order.
    pub events: Vec<Value>,
}

impl Page {
    async fn connect(port: u16, path: &str) -> Page {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: cG9ydGljby1kYXNoYm9hcmQ=\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.unwrap());
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        Page {
            stream,
            next_id: 0,
            events: Vec::new(),
        }
    }

    /// Sends a command and returns its `result`; panics on a protocol error.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.send(msg.as_bytes()).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let text = tokio::time::timeout(left, self.recv())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let v: Value = serde_json::from_slice(&text).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Evaluates `expr` in the page and returns its value (awaiting a promise).
    pub async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r["exceptionDetails"].is_null(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// The page's visible text.
    pub async fn text(&mut self) -> String {
        let v = self
            .eval("document.body ? document.body.innerText : \"\"")
            .await;
        v.as_str().unwrap_or_default().to_owned()
    }

    /// Polls until the visible text contains every one of `needles`; returns the text.
    pub async fn wait_text(&mut self, needles: &[&str], within: Duration) -> String {
        let start = Instant::now();
        loop {
            let text = self.text().await;
            if needles.iter().all(|n| text.contains(n)) {
                return text;
            }
            if start.elapsed() > within {
                let missing: Vec<_> = needles.iter().filter(|n| !text.contains(**n)).collect();
                panic!("the page never showed {missing:?}; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url })).await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&mut self) -> Vec<u8> {
        let r = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": false}),
            )
            .await;
        decode_base64(r["data"].as_str().unwrap())
    }

    /// Console errors and warnings, uncaught exceptions and error log entries seen so far.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in &self.events {
            let p = &e["params"];
            match e["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled" if p["type"] == "error" || p["type"] == "warning" => {
                    out.push(format!("console.{}: {}", p["type"], p["args"]))
                }
                "Runtime.exceptionThrown" => {
                    out.push(format!("exception: {}", p["exceptionDetails"]))
                }
                "Log.entryAdded"
                    if p["entry"]["level"] == "error" || p["entry"]["level"] == "warning" =>
                {
                    out.push(format!("log: {}", p["entry"]))
                }
                _ => {}
            }
        }
        out
    }

    /// Reads events that arrived while nothing was asked.
    pub async fn drain(&mut self, during: Duration) {
        let deadline = Instant::now() + during;
        while let Ok(text) = tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            self.recv(),
        )
        .await
        {
            if let Ok(v) = serde_json::from_slice::<Value>(&text)
                && v.get("method").is_some()
            {
                self.events.push(v);
            }
        }
    }

    async fn send(&mut self, payload: &[u8]) {
        let mut frame = vec![0x81u8]; // FIN, text
        let len = payload.len();
        if len < 126 {
            frame.push(0x80 | len as u8);
        } else if len <= 0xffff {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let mask = [0x5a, 0x13, 0xc7, 0x2e];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.unwrap();
    }

    /// The next whole message (continuation frames joined; control frames skipped).
    async fn recv(&mut self) -> Vec<u8> {
        let mut message = Vec::new();
        loop {
            let b0 = self.stream.read_u8().await.unwrap();
            let b1 = self.stream.read_u8().await.unwrap();
            let mut len = u64::from(b1 & 0x7f);
            if len == 126 {
                len = u64::from(self.stream.read_u16().await.unwrap());
            } else if len == 127 {
                len = self.stream.read_u64().await.unwrap();
            }
            let mask = if b1 & 0x80 != 0 {
                let mut m = [0u8; 4];
                self.stream.read_exact(&mut m).await.unwrap();
                Some(m)
            } else {
                None
            };
            let mut payload = vec![0u8; usize::try_from(len).unwrap()];
            self.stream.read_exact(&mut payload).await.unwrap();
            if let Some(m) = mask {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= m[i % 4];
                }
            }
            let opcode = b0 & 0x0f;
            if opcode == 0x8 {
                panic!("chromium closed the DevTools connection");
            }
            if opcode >= 0x8 {
                continue; // ping/pong
            }
            message.extend_from_slice(&payload);
            if b0 & 0x80 != 0 {
                return message;
            }
        }
    }
}

fn decode_base64(s: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for v in s.bytes().filter_map(value) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
