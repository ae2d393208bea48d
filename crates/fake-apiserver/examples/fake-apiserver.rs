//! The fake API server as a process of its own, for benchmarks that drive a real `portico run
//! --kubernetes` from outside (`portico-bench scale --kubernetes`, bench/scale.sh). Test-only
//! like the library: an example, never a dependency of anything.
//!
//! Usage: `fake-apiserver KUBECONFIG [MANIFEST_DIR]`. It binds 127.0.0.1 on a port the kernel picks,
//! writes a kubeconfig reaching it, applies every `.yaml` file under MANIFEST_DIR (recursively;
//! multi-document files too), prints `ready URL OBJECTS`, then reads commands from stdin, one
//! a line, answering each with one line on stdout:
//! - `apply FILE`: creates or replaces every object of the file; `applied N`.
//! - `delete-all`: deletes every Ingress, Service, EndpointSlice, Secret, GatewayClass, Gateway
//!   and HTTPRoute; `deleted N`.
//! - `route-status`: `routes WITH ALL`, the HTTPRoutes with a status (a parent entry) and in all.
//! - `quit` (or the end of stdin): exits.
//!
//! A bad file or command is answered with `error: ...`; the server keeps running.

use portico_fake_apiserver::FakeApiServer;
use serde_json::Value;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(kubeconfig) = args.next().map(PathBuf::from) else {
        eprintln!("usage: fake-apiserver KUBECONFIG [MANIFEST_DIR]");
        std::process::exit(2);
    };
    let api = FakeApiServer::start().await;
    api.write_kubeconfig(&kubeconfig);
    let mut loaded = 0;
    if let Some(dir) = args.next().map(PathBuf::from) {
        match apply_dir(&api, &dir) {
            Ok(n) => loaded = n,
            Err(e) => {
                eprintln!("fake-apiserver: {e}");
                std::process::exit(1);
            }
        }
    }
    say(&format!("ready {} {loaded}", api.url()));
    // Commands are read on a thread of their own: the runtime keeps serving meanwhile.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let line = line.trim();
        let answer = match line.split_once(' ') {
            Some(("apply", file)) => match apply_file(&api, Path::new(file)) {
                Ok(n) => format!("applied {n}"),
                Err(e) => format!("error: {e}"),
            },
            _ if line == "delete-all" => format!("deleted {}", delete_all(&api)),
            _ if line == "route-status" => route_status(&api),
            _ if line == "quit" => break,
            _ => format!("error: unknown command {line:?}"),
        };
        say(&answer);
    }
}

/// The kinds a generated cluster holds.
const KINDS: [(&str, &str); 7] = [
    ("networking.k8s.io/v1", "Ingress"),
    ("v1", "Service"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("v1", "Secret"),
    (GATEWAY_API, "HTTPRoute"),
    (GATEWAY_API, "Gateway"),
    (GATEWAY_API, "GatewayClass"),
];

const GATEWAY_API: &str = "gateway.networking.k8s.io/v1";

fn route_status(api: &FakeApiServer) -> String {
    let routes = api.list(GATEWAY_API, "HTTPRoute");
    let with = routes.iter().filter(|r| {
        let parents = r["status"]["parents"].as_array();
        parents.is_some_and(|p| !p.is_empty())
    });
    format!("routes {} {}", with.count(), routes.len())
}

fn delete_all(api: &FakeApiServer) -> usize {
    let mut n = 0;
    for (api_version, kind) in KINDS {
        for object in api.list(api_version, kind) {
            let meta = &object["metadata"];
            let (ns, name) = (meta["namespace"].as_str(), meta["name"].as_str());
            if let Some(name) = name
                && api.delete(api_version, kind, ns, name)
            {
                n += 1;
            }
        }
    }
    n
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn apply_dir(api: &FakeApiServer, dir: &Path) -> Result<usize, String> {
    let mut files = Vec::new();
    collect(dir, &mut files).map_err(|e| format!("{}: {e}", dir.display()))?;
    files.sort();
    let mut n = 0;
    for file in files {
        n += apply_file(api, &file)?;
    }
    Ok(n)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    Ok(())
}

/// Applies every document of a YAML file; how many objects.
fn apply_file(api: &FakeApiServer, file: &Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut n = 0;
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        // Secrets keep their stringData (the real API server turns it into data; Portico
        // reads both).
        api.apply(doc);
        n += 1;
    }
    Ok(n)
}
