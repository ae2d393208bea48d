//! Writing one load balancer's files: the directory (0700), certificate PEMs (0600), the
//! crt-list, the 502 error file and the configuration candidate.

use crate::render::{BAD_GATEWAY_FILE, BAD_GATEWAY_RESPONSE, CRT_LIST_FILE};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Creates `dir` and its parents, readable by this user only, and refuses a directory that
/// is not this user's own or that others can write to (see `portico_statedir`).
pub(crate) fn create_dir(dir: &Path) -> std::io::Result<()> {
    portico_statedir::ensure_private_dir(dir).map_err(std::io::Error::other)
}

/// The path to bind or reach the socket `name` of `dir` by: `dir/name`, or a short alias when
/// that is too long for a unix socket (`portico_statedir::socket_path`; [`plan`] refuses a
/// directory for which even the alias is too long).
///
/// [`plan`]: crate::plan
pub(crate) fn socket(dir: &Path, name: &str) -> std::path::PathBuf {
    portico_statedir::socket_path(dir, name).unwrap_or_else(|| dir.join(name))
}

/// Every regular file of `dir` (name → content) but those named in `ignore`: what a running
/// haproxy reads, to tell whether staging a configuration changed it.
pub(crate) fn snapshot(dir: &Path, ignore: &[&str]) -> BTreeMap<std::ffi::OsString, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_str().is_none_or(|n| !ignore.contains(&n)))
        .filter_map(|e| Some((e.file_name(), std::fs::read(e.path()).ok()?)))
        .collect()
}

/// Writes `bytes` to `path` through an exclusive temporary file with a random name and a
/// rename, mode `mode` (see `portico_statedir::write_file`).
pub(crate) fn write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    portico_statedir::write_file(path, bytes, mode)
}

/// The certificate files (name → PEM, key included): written 0600, unchanged ones left alone.
pub(crate) fn write_certificates(
    dir: &Path,
    files: &BTreeMap<String, Arc<Vec<u8>>>,
) -> std::io::Result<()> {
    for (name, pem) in files {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|old| old == **pem) {
            continue;
        }
        write(&path, pem, 0o600)?;
    }
    Ok(())
}

/// The crt-list and the 502 error file.
pub(crate) fn write_lists(dir: &Path, crt_list: &str) -> std::io::Result<()> {
    write(&dir.join(CRT_LIST_FILE), crt_list.as_bytes(), 0o600)?;
    let error = dir.join(BAD_GATEWAY_FILE);
    if !error.exists() {
        write(&error, BAD_GATEWAY_RESPONSE.as_bytes(), 0o644)?;
    }
    Ok(())
}

/// The route maps (0600; unchanged ones left alone), and no other `routes-*.map` file.
pub(crate) fn write_maps(dir: &Path, maps: &crate::routes::Maps) -> std::io::Result<()> {
    for (name, entries) in maps {
        let text = crate::routes::file_text(entries);
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
            continue;
        }
        write(&path, text.as_bytes(), 0o600)?;
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("routes-") && name.ends_with(".map") && !maps.contains_key(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Removes the `.pem` files of `dir` that `keep` does not name.
pub(crate) fn remove_other_certificates(dir: &Path, keep: &BTreeMap<String, Arc<Vec<u8>>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".pem") && !keep.contains_key(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
