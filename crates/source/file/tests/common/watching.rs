//! Watching helpers: start a watch, wait for what it publishes, change files as editors do.

use portico_source_file::{FileSource, Loaded, ReadLimits, watch};
use portico_translate::ObjectKey;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch::Receiver;

pub const SECOND: Duration = Duration::from_secs(1);

/// Waits (5 s at most) until the published value satisfies `ready`; returns how long it took.
pub async fn wait_for(
    updates: &mut Receiver<Arc<Loaded>>,
    ready: impl Fn(&Loaded) -> bool,
) -> Duration {
    let start = Instant::now();
    let wait = async {
        while !ready(&updates.borrow_and_update()) {
            updates.changed().await.expect("the source is alive");
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the change was published");
    start.elapsed()
}

pub fn has_service(name: &str) -> impl Fn(&Loaded) -> bool {
    let key = ObjectKey::new("default", name);
    move |loaded| loaded.objects.services.contains_key(&key)
}

pub fn port_is(name: &str, port: i32) -> impl Fn(&Loaded) -> bool {
    let key = ObjectKey::new("default", name);
    move |loaded| {
        let service = loaded.objects.services.get(&key);
        service.is_some_and(|s| s.spec.ports[0].port == port)
    }
}

/// Writes a temp file beside the target and renames it over the target, as editors do.
pub fn replace_atomically(path: &Path, text: &str) {
    let name = path.file_name().unwrap().to_str().unwrap();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

pub fn start(paths: Vec<PathBuf>) -> (FileSource, Receiver<Arc<Loaded>>) {
    let source = watch(paths, ReadLimits::default()).unwrap();
    let updates = source.subscribe();
    (source, updates)
}

/// Asserts that a value satisfying `ready` is published within a second; `what` names the
/// change in the failure.
pub async fn assert_published(
    updates: &mut Receiver<Arc<Loaded>>,
    ready: impl Fn(&Loaded) -> bool,
    what: &str,
) {
    let start = Instant::now();
    let wait = async {
        while !ready(&updates.borrow_and_update()) {
            updates.changed().await.expect("the source is alive");
        }
    };
    let published = tokio::time::timeout(Duration::from_secs(5), wait).await;
    assert!(published.is_ok(), "{what}: not published within 5 s");
    let took = start.elapsed();
    assert!(took < SECOND, "{what}: published after {took:?}");
}
