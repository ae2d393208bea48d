//! Paths → the manifest files they name: files as given, directories walked recursively.

use crate::decode::FILE_KIND;
use portico_model::{Diagnostic, ObjectRef};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// The files to read, in order (later files win on duplicates), and the paths that failed.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub files: Vec<PathBuf>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A file given by path is read whatever its name. In a directory, only `*.yaml`, `*.yml` and
/// `*.json` are read, in name order, and hidden entries (editor swap files, the `..data`
/// internals of a mounted ConfigMap) are skipped; symlinks are followed, which is how a
/// mounted ConfigMap's visible names reach their content.
pub(crate) fn list_files(paths: &[PathBuf]) -> Listing {
    let mut walk = Walk::default();
    for path in paths {
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => walk.dir(path),
            Ok(_) => walk.file(path.clone()),
            Err(err) => walk.error(path, &err),
        }
    }
    walk.listing
}

#[derive(Default)]
struct Walk {
    listing: Listing,
    seen_files: HashSet<PathBuf>,
    seen_dirs: HashSet<PathBuf>,
}

impl Walk {
    fn file(&mut self, path: PathBuf) {
        if self.seen_files.insert(path.clone()) {
            self.listing.files.push(path);
        }
    }

    fn dir(&mut self, dir: &Path) {
        // Symlinked directories could form a loop.
        let canonical = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if !self.seen_dirs.insert(canonical) {
            return;
        }
        let mut entries = match fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect::<Vec<_>>(),
            Err(err) => return self.error(dir, &err),
        };
        entries.sort();
        for path in entries.into_iter().filter(|p| !is_hidden(p)) {
            match fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => self.dir(&path),
                // Anything else with a manifest's name (a FIFO, a device, a socket) is listed
                // too: reading it refuses it with a diagnostic, without blocking.
                Ok(_) if has_manifest_extension(&path) => self.file(path),
                Ok(_) => {}
                // A dangling symlink or a file deleted while we walk: nothing to read.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => self.error(&path, &err),
            }
        }
    }

    fn error(&mut self, path: &Path, err: &std::io::Error) {
        let file = ObjectRef::new(FILE_KIND, "", &path.display().to_string());
        let message = format!("cannot read: {err}");
        self.listing
            .diagnostics
            .push(Diagnostic::error(file, "", message));
    }
}

pub(crate) fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

pub(crate) fn has_manifest_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "").unwrap();
    }

    fn names(listing: &Listing, root: &Path) -> Vec<String> {
        let relative = |p: &PathBuf| p.strip_prefix(root).unwrap().display().to_string();
        listing.files.iter().map(relative).collect()
    }

    #[test]
    fn directories_are_walked_in_name_order_for_manifest_extensions() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "b.yaml",
            "a.json",
            "sub/c.yml",
            "notes.txt",
            ".a.yaml.swp",
            ".hidden/d.yaml",
        ] {
            touch(&dir.path().join(name));
        }
        let listing = list_files(&[dir.path().to_path_buf()]);
        assert_eq!(
            names(&listing, dir.path()),
            ["a.json", "b.yaml", "sub/c.yml"]
        );
        assert!(listing.diagnostics.is_empty());
    }

    #[test]
    fn a_file_given_by_path_is_read_whatever_its_extension() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("manifest.txt");
        touch(&file);
        assert_eq!(list_files(std::slice::from_ref(&file)).files, vec![file]);
    }

    #[test]
    fn a_missing_path_is_an_error_naming_it() {
        let missing = PathBuf::from("/nonexistent/portico/manifests");
        let listing = list_files(&[missing]);
        assert!(listing.files.is_empty());
        let d = &listing.diagnostics[0];
        assert_eq!(
            d.object,
            ObjectRef::new("File", "", "/nonexistent/portico/manifests")
        );
        assert!(d.is_error());
    }

    #[test]
    fn a_file_named_twice_is_listed_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        touch(&file);
        let listing = list_files(&[dir.path().to_path_buf(), file.clone()]);
        assert_eq!(listing.files, vec![file]);
    }

    #[cfg(unix)]
    #[test]
    fn a_configmap_style_symlink_layout_is_read_through_its_visible_names() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("..2026_01_01/ing.yaml"));
        std::os::unix::fs::symlink("..2026_01_01", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/ing.yaml", dir.path().join("ing.yaml")).unwrap();
        let listing = list_files(&[dir.path().to_path_buf()]);
        assert_eq!(names(&listing, dir.path()), ["ing.yaml"]);
    }
}
