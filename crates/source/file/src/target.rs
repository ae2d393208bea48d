//! One path given to the watch, resolved once: what to ask the file system to watch, and which
//! of its events concern which listed file.
//!
//! notify makes the path it watches absolute and joins entry names onto it, so events name
//! absolute paths, while users give paths like `./manifests`, `../x/manifests` or a symlink.
//! So the watch is set on the resolved path (absolute, canonical), and an event's path is
//! turned back into the path the listing uses: built from the given one, which is how files
//! are named to users and what the per-file cache is keyed by.

use std::fs;
use std::path::{Path, PathBuf};

use notify::RecursiveMode;

#[derive(Debug)]
pub(crate) struct Target {
    /// As given: the prefix of every path the listing yields for this target.
    given: PathBuf,
    /// Absolute, canonical where it exists: what is watched and what events start with.
    real: PathBuf,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A directory, watched recursively (symlinked subdirectories included, as listed).
    Dir,
    /// A single file, watched through its parent directory so that an atomic replace (a temp
    /// file renamed over it) or a delete and re-create is seen. `real` is the resolved parent
    /// joined with the file's own name: the file is not resolved, as a symlinked file is
    /// replaced by replacing the link.
    File { parent: PathBuf },
}

/// What an event on one path means for one target.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Touch {
    /// The listed file or directory at this path (as the listing names it) changed.
    Path(PathBuf),
    /// Files changed without events of their own: a mounted ConfigMap's `..data` swap.
    Unnamed,
}

impl Target {
    pub(crate) fn of(path: &Path) -> Target {
        let given = path.to_path_buf();
        if path.is_dir() {
            let real = resolve(path);
            return Target {
                given,
                real,
                kind: Kind::Dir,
            };
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = resolve(parent);
        let real = match path.file_name() {
            Some(name) => parent.join(name),
            None => resolve(path),
        };
        Target {
            given,
            real,
            kind: Kind::File { parent },
        }
    }

    /// The directory to ask the file system to watch, and how.
    pub(crate) fn watched(&self) -> (&Path, RecursiveMode) {
        match &self.kind {
            Kind::Dir => (&self.real, RecursiveMode::Recursive),
            Kind::File { parent } => (parent, RecursiveMode::NonRecursive),
        }
    }

    /// What an event on `path` (absolute, as the file system reports it) means for this
    /// target; `None` when it does not concern it.
    pub(crate) fn touched(&self, path: &Path) -> Option<Touch> {
        match &self.kind {
            Kind::Dir => {
                let rest = path.strip_prefix(&self.real).ok()?;
                Some(Touch::Path(self.given_path(rest)))
            }
            Kind::File { .. } if path == self.real => Some(Touch::Path(self.given.clone())),
            // A file of a mounted ConfigMap is a symlink through `..data`, which the kubelet
            // swaps atomically: the file itself sees no event.
            Kind::File { parent } if path == parent.join("..data") => Some(Touch::Unnamed),
            Kind::File { .. } => None,
        }
    }

    /// `rest`, relative to the watched directory, as the listing names it.
    fn given_path(&self, rest: &Path) -> PathBuf {
        // Joining an empty path would add a trailing separator.
        if rest.as_os_str().is_empty() {
            self.given.clone()
        } else {
            self.given.join(rest)
        }
    }
}

/// `path` made absolute against the working directory, with `..` and symlinks resolved where
/// it exists. A symlinked directory is resolved once, here: like inotify itself, the watch
/// stays on the directory the link named at start.
fn resolve(path: &Path) -> PathBuf {
    fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_symlinked_directory_is_watched_resolved_and_named_as_given() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("link")).unwrap();
        let given = dir.path().join("link");
        let target = Target::of(&given);
        let real = fs::canonicalize(dir.path().join("real")).unwrap();
        assert_eq!(target.watched(), (real.as_path(), RecursiveMode::Recursive));
        assert_eq!(
            target.touched(&real.join("sub/a.yaml")),
            Some(Touch::Path(given.join("sub/a.yaml")))
        );
        assert_eq!(target.touched(&real), Some(Touch::Path(given)));
        assert_eq!(target.touched(Path::new("/elsewhere/a.yaml")), None);
    }

    #[test]
    fn a_directory_through_dot_dot_is_watched_resolved_and_named_as_given() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("x/m")).unwrap();
        let given = dir.path().join("x/../x/m");
        let target = Target::of(&given);
        let real = fs::canonicalize(dir.path().join("x/m")).unwrap();
        assert_eq!(target.watched(), (real.as_path(), RecursiveMode::Recursive));
        assert_eq!(
            target.touched(&real.join("a.yaml")),
            Some(Touch::Path(given.join("a.yaml")))
        );
    }

    #[test]
    fn a_single_file_is_watched_through_its_resolved_parent() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("x")).unwrap();
        let given = dir.path().join("x/../only.yaml");
        let target = Target::of(&given);
        let parent = fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            target.watched(),
            (parent.as_path(), RecursiveMode::NonRecursive)
        );
        assert_eq!(
            target.touched(&parent.join("only.yaml")),
            Some(Touch::Path(given))
        );
        assert_eq!(target.touched(&parent.join("..data")), Some(Touch::Unnamed));
        assert_eq!(target.touched(&parent.join("other.yaml")), None);
    }
}
