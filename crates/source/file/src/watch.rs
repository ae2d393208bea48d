//! Watching the manifest files: file-system events → debounced reloads → new `Loaded` values.

use crate::catalog::Catalog;
use crate::read::ReadLimits;
use crate::target::{Target, Touch};
use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, Watcher};
use portico_model::trim;
use portico_translate::Loaded;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long to wait after an event for more before reloading: editors and tools write a file
/// in several steps (temp file, write, rename).
const QUIET: Duration = Duration::from_millis(10);
/// A steady stream of events must not postpone the reload for longer than this.
const MAX_DELAY: Duration = Duration::from_millis(250);
/// How often the waiting reload thread looks whether a collection is owed.
const IDLE_CHECK: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot watch {}: {source}", path.display())]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("cannot start the thread that reloads manifests: {0}")]
    Thread(#[source] std::io::Error),
}

/// The manifest files, watched: every change is published as a new `Loaded`. Dropping this
/// stops the watch.
#[derive(Debug)]
pub struct FileSource {
    updates: watch::Receiver<Arc<Loaded>>,
    retired: mpsc::Sender<Message>,
    _watcher: RecommendedWatcher,
}

/// What the reload thread receives: file-system events, and loads to drop.
enum Message {
    Event(notify::Result<Event>),
    Retired(Arc<Loaded>),
}

impl FileSource {
    /// A receiver whose first value is the initial load; it changes after each reload that
    /// changed something.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Loaded>> {
        self.updates.clone()
    }

    /// The latest load.
    pub fn current(&self) -> Arc<Loaded> {
        self.updates.borrow().clone()
    }

    /// Hands back a load its user is done with, to be dropped on the thread that parsed its
    /// objects. The allocator gives memory back to the OS when the thread that allocated it
    /// frees it; freed from another thread, it waits until that thread allocates again, which
    /// after a mass deletion may be never.
    pub fn retire(&self, loaded: Arc<Loaded>) {
        // The thread is gone only when this source is being dropped; then dropping here is fine.
        let _ = self.retired.send(Message::Retired(loaded));
    }
}

/// Loads `paths` and starts watching them. A directory is watched recursively; a single file
/// through its parent directory, so that an atomic replace (write a temp file, rename it over
/// the old one) or a delete and re-create is seen. Paths may be relative (to the working
/// directory), hold `..` or go through symlinks; files are named as the paths give them.
pub fn watch(paths: Vec<PathBuf>, limits: ReadLimits) -> Result<FileSource, SourceError> {
    let (events_tx, events) = mpsc::channel();
    let retired = events_tx.clone();
    let watch_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SourceError::Watch { path, source }
    };
    let first = paths
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("."));
    let handler = move |event| {
        let _ = events_tx.send(Message::Event(event));
    };
    let mut watcher = notify::recommended_watcher(handler).map_err(watch_error(first))?;
    let mut targets = Vec::with_capacity(paths.len());
    for path in &paths {
        let target = Target::of(path);
        let (dir, mode) = target.watched();
        watcher.watch(dir, mode).map_err(watch_error(path))?;
        targets.push(target);
    }
    let mut catalog = Catalog::with_limits(limits);
    let (updates_tx, updates) = watch::channel(Arc::new(catalog.reload(&paths)));
    let reloader = Reloader {
        catalog,
        paths,
        targets,
        events,
        updates: updates_tx,
    };
    std::thread::Builder::new()
        .name("portico-manifests".to_owned())
        .spawn(move || reloader.run())
        .map_err(SourceError::Thread)?;
    Ok(FileSource {
        updates,
        retired,
        _watcher: watcher,
    })
}

struct Reloader {
    catalog: Catalog,
    paths: Vec<PathBuf>,
    targets: Vec<Target>,
    events: Receiver<Message>,
    updates: watch::Sender<Arc<Loaded>>,
}

/// The paths a burst of events names, as the listing names them; `full` when some event
/// cannot be pinned to paths.
#[derive(Debug, Default)]
struct Dirty {
    paths: HashSet<PathBuf>,
    full: bool,
}

impl Reloader {
    /// Ends when the `FileSource` is dropped (its watcher and itself hold the other ends of
    /// `events`).
    fn run(mut self) {
        let mut dirty = Dirty::default();
        while self.wait_for_change(&mut dirty) {
            self.settle(&mut dirty);
            let started = Instant::now();
            let reloaded = if dirty.full {
                self.catalog.reload_if_changed(&self.paths)
            } else {
                self.catalog.reload_dirty(&self.paths, &dirty.paths)
            };
            dirty = Dirty::default();
            if let Some(loaded) = reloaded {
                let reload_ms = started.elapsed().as_secs_f64() * 1e3;
                tracing::debug!(files = loaded.files.len(), reload_ms, "manifests reloaded");
                self.updates.send_replace(Arc::new(loaded));
            }
        }
    }

    /// Waits for an event that concerns the manifests. While it waits, it collects this
    /// thread's heap once whenever another thread has finished a large change since
    /// (`portico_model::trim`): the objects this thread parsed are freed by the threads that
    /// held them last (the controller dropping a compiled state, the agent a desired state),
    /// and the allocator gives back a page only when the thread that owns it collects.
    fn wait_for_change(&self, dirty: &mut Dirty) -> bool {
        let mut seen = trim::generation();
        loop {
            match self.events.recv_timeout(IDLE_CHECK) {
                Ok(event) => {
                    if self.note(event, dirty) {
                        return true;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    if trim::owed(seen) {
                        seen = trim::generation();
                        trim::trim_this_thread();
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Coalesces a burst of events into one reload.
    fn settle(&self, dirty: &mut Dirty) {
        let deadline = Instant::now() + MAX_DELAY;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(QUIET.min(left)) {
                Ok(event) => {
                    self.note(event, dirty);
                    if left.is_zero() {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Records what `message` changed; true when it concerns the watched manifests. A retired
    /// load is dropped here.
    fn note(&self, message: Message, dirty: &mut Dirty) -> bool {
        let event = match message {
            Message::Retired(loaded) => {
                drop(loaded);
                // This thread then sleeps until the next event: the pages just emptied go
                // back now, and the runtime's workers give back theirs when next idle.
                trim::trim_after_change();
                return false;
            }
            Message::Event(Ok(event)) => event,
            // Events may have been lost: reload everything to be sure.
            Message::Event(Err(err)) => {
                tracing::warn!(error = %err, "watching manifests");
                dirty.full = true;
                return true;
            }
        };
        if !is_change(&event.kind) {
            return false;
        }
        if event.paths.is_empty() || event.need_rescan() {
            dirty.full = true;
            return true;
        }
        let mut relevant = false;
        for path in &event.paths {
            for touch in self.targets.iter().filter_map(|t| t.touched(path)) {
                relevant = true;
                match touch {
                    Touch::Path(path) => {
                        dirty.paths.insert(path);
                    }
                    Touch::Unnamed => dirty.full = true,
                }
            }
        }
        relevant
    }
}

/// Reads (ours included) are not changes; a close after writing is.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    static ON_RELOADER: AtomicU32 = AtomicU32::new(0);

    /// Counts the collections made on the reload thread.
    fn count() {
        if std::thread::current().name() == Some("portico-manifests") {
            ON_RELOADER.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn the_waiting_reload_thread_collects_after_another_threads_change() {
        assert!(trim::set_trim(count), "the only registration");
        let dir = tempfile::tempdir().unwrap();
        let source = watch(vec![dir.path().to_path_buf()], ReadLimits::default()).unwrap();
        std::thread::sleep(IDLE_CHECK + Duration::from_millis(200));
        let before = ON_RELOADER.load(Ordering::Relaxed);
        assert_eq!(before, 0, "no change, no collection");
        // Another thread (the controller, after a compile) finished a large change.
        trim::trim_after_change();
        let deadline = Instant::now() + 3 * IDLE_CHECK;
        while ON_RELOADER.load(Ordering::Relaxed) == before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(ON_RELOADER.load(Ordering::Relaxed), before + 1);
        // Owed once: no collection again until the next change.
        std::thread::sleep(IDLE_CHECK + Duration::from_millis(200));
        assert_eq!(ON_RELOADER.load(Ordering::Relaxed), before + 1);
        drop(source);
    }
}
