//! The per-file cache behind `load` and `watch`: a reload re-parses only the files that changed.

use crate::admission::admit;
use crate::assemble::{KindSet, Previous, assemble};
use crate::decode::FILE_KIND;
use crate::object::Object;
use crate::parse::{Documents, Parsed, parse_reusing};
use crate::read::{ReadLimits, read_bounded};
use crate::walk::{has_manifest_extension, is_hidden, list_files};
use portico_model::{Diagnostic, ObjectRef};
use portico_translate::Loaded;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::hash::{DefaultHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Reads the manifest files once: no cache is kept.
pub fn load(paths: &[PathBuf], limits: ReadLimits) -> Loaded {
    Catalog::with_limits(limits).reload(paths)
}

/// A file modified this recently before it was read may change again without its length or
/// modification time changing (timestamps are coarse): such a file is re-read and hashed.
const RACY_WINDOW: Duration = Duration::from_secs(1);

/// From this many listed files on, they are read and parsed on several threads.
const PARALLEL_FILES: usize = 256;

/// What reading a file found.
enum Examined {
    /// Its stamp is the cached entry's: not read.
    Unchanged,
    /// Read, and its bytes are the cached entry's.
    SameContent { stamp: Stamp, read_at: SystemTime },
    /// Read and parsed: new content.
    Parsed(Box<Fresh>),
}

/// A file's new content, parsed.
struct Fresh {
    stamp: Stamp,
    read_at: SystemTime,
    hash: u64,
    parsed: Parsed,
    documents: Documents,
    count: usize,
}

/// The parsed documents of every file, kept between reloads.
#[derive(Debug, Default)]
pub struct Catalog {
    /// The files, in listing order once a listing is done: `entries[i]` is `order[i]`'s, so
    /// an assembly walks them without a lookup.
    entries: Vec<FileEntry>,
    /// Each file's place in `entries`, by path spelled as the listing spells it (the watcher
    /// names changed files the same way; a path spelled otherwise takes a full listing).
    /// Keyed by the path's bytes: hashing a `Path` walks its components.
    index: HashMap<OsString, usize>,
    /// The listed files in listing order, shared with every `Loaded`.
    order: Arc<Vec<PathBuf>>,
    path_diagnostics: Vec<Diagnostic>,
    parses: u64,
    /// Documents parsed (a document unchanged in a re-read file is not).
    documents_parsed: u64,
    loaded_once: bool,
    limits: ReadLimits,
    /// The kinds whose objects changed since the last assembly.
    dirty: KindSet,
    /// The last assembly, whose maps the next one reuses for the kinds not in `dirty`.
    previous: Previous,
}

#[derive(Debug)]
struct FileEntry {
    stamp: Stamp,
    read_at: SystemTime,
    hash: u64,
    diagnostics: Vec<Diagnostic>,
    /// The objects served from this file: the last parse, plus the last good version of
    /// objects that the last parse could not read.
    served: Vec<Object>,
    /// The objects of its documents by their text, for the next parse to reuse.
    documents: Documents,
}

/// What the file system says about a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Catalog {
    pub fn new() -> Self {
        Catalog::default()
    }

    pub fn with_limits(limits: ReadLimits) -> Self {
        Catalog {
            limits,
            ..Catalog::default()
        }
    }

    /// Lists, re-reads what changed, and assembles the objects of all files.
    pub fn reload(&mut self, paths: &[PathBuf]) -> Loaded {
        self.refresh(paths);
        self.assemble()
    }

    /// Like `reload`, but `None` when no file and no error changed since the last reload.
    pub fn reload_if_changed(&mut self, paths: &[PathBuf]) -> Option<Loaded> {
        let changed = self.refresh(paths);
        (changed || !self.loaded_once).then(|| self.assemble())
    }

    /// Like `reload_if_changed`, but re-reads only `dirty`, the paths the file system reported
    /// as changed, when each is a file already known (or one no listing would include: a hidden
    /// or non-manifest file, such as an editor's temp file). Anything else (a new file, a
    /// directory, a deleted or unreadable path) takes a full listing. With thousands of files,
    /// this is what keeps one changed file from costing a stat of every other.
    pub fn reload_dirty(&mut self, paths: &[PathBuf], dirty: &HashSet<PathBuf>) -> Option<Loaded> {
        let known = |p: &PathBuf| self.index.contains_key(p.as_os_str()) || is_ignorable(p);
        if !self.loaded_once || !dirty.iter().all(known) {
            return self.reload_if_changed(paths);
        }
        let mut changed = false;
        let files: Vec<PathBuf> = (dirty.iter())
            .filter(|p| self.index.contains_key(p.as_os_str()))
            .cloned()
            .collect();
        for path in &files {
            match self.refresh_file(path) {
                Ok(file_changed) => changed |= file_changed,
                // Gone or unreadable: the listing decides (a path named on the command line
                // that disappears is an error, one found in a directory is not), and it
                // re-checks the rest of the files too.
                Err(_) => {
                    changed |= self.refresh(paths);
                    break;
                }
            }
        }
        changed.then(|| self.assemble())
    }

    /// How many times a file was parsed since this catalog was made.
    pub fn parse_count(&self) -> u64 {
        self.parses
    }

    /// How many YAML documents were parsed since this catalog was made: a re-read file's
    /// documents whose text did not change are not parsed again (their objects are reused).
    pub fn document_parse_count(&self) -> u64 {
        self.documents_parsed
    }

    fn refresh(&mut self, paths: &[PathBuf]) -> bool {
        let listing = list_files(paths);
        let mut diagnostics = listing.diagnostics;
        let mut changed = false;
        let mut order = Vec::with_capacity(listing.files.len());
        let examined = self.examine_all(&listing.files);
        for (path, looked) in listing.files.into_iter().zip(examined) {
            match looked.map(|looked| self.apply(&path, looked)) {
                Ok(file_changed) => changed |= file_changed,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => diagnostics.push(read_error(&path, &err)),
            }
            if self.index.contains_key(path.as_os_str()) {
                order.push(path);
            }
        }
        // The entries in the listing's order (those no longer listed go), unless they are in
        // it already: the same listing, and no file added.
        let before = self.entries.len();
        let reordered = order != *self.order;
        if reordered || before != order.len() {
            let mut old: Vec<Option<FileEntry>> = self.entries.drain(..).map(Some).collect();
            for path in &order {
                let entry =
                    (self.index.get(path.as_os_str())).and_then(|&i| old.get_mut(i)?.take());
                self.entries.extend(entry);
            }
            for gone in old.into_iter().flatten() {
                self.dirty.union(KindSet::of(&gone.served));
            }
        }
        let removed = self.entries.len() != before;
        // Deleting most files gives their memory back.
        if self.entries.capacity() > 4 * self.entries.len().max(64) {
            self.entries.shrink_to_fit();
        }
        if reordered {
            // The later file wins a duplicate: another order may change any kind's map.
            self.dirty = KindSet::ALL;
        }
        if reordered || removed {
            self.index = (order.iter().enumerate())
                .map(|(i, path)| (path.as_os_str().to_owned(), i))
                .collect();
            self.order = Arc::new(order);
        }
        changed |= removed || reordered;
        changed |= diagnostics != self.path_diagnostics;
        self.path_diagnostics = diagnostics;
        changed
    }

    /// Re-reads a file whose stamp changed (or that was written just before the last read), and
    /// re-parses it when its content changed. True when the content changed.
    fn refresh_file(&mut self, path: &Path) -> io::Result<bool> {
        let looked = self.examine(path)?;
        Ok(self.apply(path, looked))
    }

    /// What reading `path` finds against the cached entry, without changing the catalog (so
    /// that many files can be examined at once, see [`Catalog::examine_all`]).
    fn examine(&self, path: &Path) -> io::Result<Examined> {
        let stamp = Stamp::of(&fs::metadata(path)?);
        let cached = (self.index.get(path.as_os_str())).and_then(|&i| self.entries.get(i));
        if cached.is_some_and(|e| e.stamp == stamp && e.is_settled()) {
            return Ok(Examined::Unchanged);
        }
        let read_at = SystemTime::now();
        let bytes = read_bounded(path, self.limits)?;
        let hash = hash(&bytes);
        if cached.is_some_and(|e| e.hash == hash) {
            return Ok(Examined::SameContent { stamp, read_at });
        }
        let empty = Documents::default();
        let previous = cached.map_or(&empty, |e| &e.documents);
        let (parsed, documents, count) = parse_bytes(path, &bytes, previous);
        Ok(Examined::Parsed(Box::new(Fresh {
            stamp,
            read_at,
            hash,
            parsed,
            documents,
            count,
        })))
    }

    /// [`Catalog::examine`] of every path, on a few threads when there are many: the first
    /// load of thousands of files is mostly reading and parsing them.
    fn examine_all(&self, paths: &[PathBuf]) -> Vec<io::Result<Examined>> {
        // The parallelism is asked for (it reads the cgroup's limits) only for many files.
        let threads = match paths.len() {
            n if n < PARALLEL_FILES => 1,
            _ => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
        };
        if threads < 2 {
            return paths.iter().map(|p| self.examine(p)).collect();
        }
        let chunk = paths.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (paths.chunks(chunk))
                .map(|part| scope.spawn(move || part.iter().map(|p| self.examine(p)).collect()))
                .collect();
            let joined = workers.into_iter().map(|w| w.join());
            let parts: Vec<Vec<_>> = joined
                .map(|part| part.unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect();
            parts.into_iter().flatten().collect()
        })
    }

    /// Takes what [`Catalog::examine`] found for `path` into the catalog. True when the
    /// content changed.
    fn apply(&mut self, path: &Path, looked: Examined) -> bool {
        let slot = self.index.get(path.as_os_str()).copied();
        let cached = slot.and_then(|i| self.entries.get_mut(i));
        let fresh = match looked {
            Examined::Unchanged => return false,
            Examined::SameContent { stamp, read_at } => {
                if let Some(entry) = cached {
                    (entry.stamp, entry.read_at) = (stamp, read_at);
                }
                return false;
            }
            Examined::Parsed(fresh) => *fresh,
        };
        let before = cached
            .map(|e| std::mem::take(&mut e.served))
            .unwrap_or_default();
        self.parses += 1;
        self.documents_parsed += fresh.count as u64;
        let served = keep_last_good(&before, &fresh.parsed);
        self.dirty.union(KindSet::changed(&before, &served));
        let entry = FileEntry {
            stamp: fresh.stamp,
            read_at: fresh.read_at,
            hash: fresh.hash,
            diagnostics: fresh.parsed.diagnostics,
            served,
            documents: fresh.documents,
        };
        match slot.and_then(|i| self.entries.get_mut(i)) {
            Some(slot) => *slot = entry,
            // A new file goes last until the listing puts it in its place.
            None => {
                self.index
                    .insert(path.as_os_str().to_owned(), self.entries.len());
                self.entries.push(entry);
            }
        }
        true
    }

    fn assemble(&mut self) -> Loaded {
        if !self.loaded_once {
            self.dirty = KindSet::ALL;
        }
        self.loaded_once = true;
        let entries: Vec<(&Path, &FileEntry)> = (self.order.iter())
            .map(PathBuf::as_path)
            .zip(&self.entries)
            .collect();
        let files: Vec<(&Path, &[Object])> = entries
            .iter()
            .map(|(path, e)| (*path, &e.served[..]))
            .collect();
        let (mut objects, duplicates, duplicated) = assemble(&files, &self.previous, self.dirty);
        let mut diagnostics = self.path_diagnostics.clone();
        diagnostics.extend(
            entries
                .iter()
                .flat_map(|(_, e)| e.diagnostics.iter().cloned()),
        );
        diagnostics.extend(duplicates);
        diagnostics.extend(admit(&mut objects));
        self.dirty = KindSet::default();
        self.previous = Previous {
            objects: objects.clone(),
            duplicated,
        };
        Loaded {
            objects,
            diagnostics,
            files: self.order.clone(),
        }
    }
}

/// A path a directory listing would skip whatever it is: a hidden name, or a file (not a
/// directory) without a manifest extension. Not the kubelet's `..data` and `..<timestamp>`
/// entries: swapping them changes the visible files of a mounted ConfigMap without an event
/// on those files.
fn is_ignorable(path: &Path) -> bool {
    let kubelet = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(".."));
    !kubelet
        && (is_hidden(path)
            || (path.extension().is_some() && !has_manifest_extension(path) && !path.is_dir()))
}

impl FileEntry {
    fn is_settled(&self) -> bool {
        self.stamp
            .modified
            .is_some_and(|m| m + RACY_WINDOW <= self.read_at)
    }
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: inode(meta),
        }
    }
}

#[cfg(unix)]
fn inode(meta: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_: &Metadata) -> u64 {
    0
}

fn hash(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// The file's objects, the documents to reuse next time and how many documents were parsed.
fn parse_bytes(path: &Path, bytes: &[u8], previous: &Documents) -> (Parsed, Documents, usize) {
    let origin = path.display().to_string();
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_reusing(&origin, text, previous),
        Err(err) => {
            let file = ObjectRef::new(FILE_KIND, "", &origin);
            let message = format!("the file is not UTF-8 text: {err}");
            let parsed = Parsed {
                objects: Vec::new(),
                diagnostics: vec![Diagnostic::error(file, "", message)],
            };
            (parsed, Documents::default(), 0)
        }
    }
}

fn read_error(path: &Path, err: &io::Error) -> Diagnostic {
    let file = ObjectRef::new(FILE_KIND, "", &path.display().to_string());
    Diagnostic::error(file, "", format!("cannot read: {err}"))
}

/// Like the API server rejecting a bad update: an object whose new version cannot be read
/// keeps its last good version, and so does every object of a file with a document that
/// does not parse (which objects that document held is unknown).
fn keep_last_good(previous: &[Object], parsed: &Parsed) -> Vec<Object> {
    let errors = || parsed.diagnostics.iter().filter(|d| d.is_error());
    let file_broken = errors().any(|d| d.object.kind == FILE_KIND);
    let failed: BTreeSet<&ObjectRef> = errors().map(|d| &d.object).collect();
    let present: BTreeSet<ObjectRef> = parsed.objects.iter().map(Object::object_ref).collect();
    let mut served = parsed.objects.clone();
    for old in previous {
        let old_ref = old.object_ref();
        if !present.contains(&old_ref) && (file_broken || failed.contains(&old_ref)) {
            served.push(old.clone());
        }
    }
    served
}
