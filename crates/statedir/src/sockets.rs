//! Unix socket paths that fit, whatever the state directory's length.
//!
//! A unix socket's path is limited (`sun_path`: 107 bytes; haproxy keeps room for its
//! `.<pid>.tmp` suffix and accepts 97). A socket whose path under the state directory is
//! longer is reached through a short alias instead: a symlink named by a hash of its directory
//! in a private directory of this user's (`<tmp>/portico-<uid>`, mode 0700). The socket itself
//! stays in its directory (binding and connecting resolve the symlink); only the path handed to
//! `bind`/`connect` is short.

use std::io;
use std::path::{Path, PathBuf};

/// The longest socket path haproxy accepts (`sun_path` less its `.<pid>.tmp` suffix).
pub const MAX_SOCKET_PATH: usize = 97;

/// The path to use for the socket `name` in `dir`: `dir/name` when it fits in
/// [`MAX_SOCKET_PATH`], else `<tmp>/portico-<uid>/<hash of dir>/name` (pure: see
/// [`make_socket_alias`] for the symlink it needs). `None` when even that is too long.
pub fn socket_path(dir: &Path, name: &str) -> Option<PathBuf> {
    let direct = dir.join(name);
    if direct.as_os_str().len() <= MAX_SOCKET_PATH {
        return Some(direct);
    }
    let aliased = alias(dir).join(name);
    (aliased.as_os_str().len() <= MAX_SOCKET_PATH).then_some(aliased)
}

/// Creates what [`socket_path`] needs for sockets in `dir`: nothing when its paths fit, else
/// the private alias directory (0700, this user's, refused otherwise) and the symlink to `dir`
/// in it (replaced when it points elsewhere).
pub fn make_socket_alias(dir: &Path, name: &str) -> io::Result<()> {
    let Some(path) = socket_path(dir, name) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "no path for the socket {name} of {} fits in {MAX_SOCKET_PATH} bytes",
                dir.display()
            ),
        ));
    };
    if path == dir.join(name) {
        return Ok(());
    }
    let link = alias(dir);
    let base = link.parent().unwrap_or(Path::new("/"));
    crate::ensure_private_dir(base).map_err(io::Error::other)?;
    if std::fs::read_link(&link).is_ok_and(|target| target == dir) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(dir, &link)
}

/// Removes the alias of `dir`, if it has one and it points to `dir`.
pub fn remove_socket_alias(dir: &Path) {
    let link = alias(dir);
    if std::fs::read_link(&link).is_ok_and(|target| target == dir) {
        let _ = std::fs::remove_file(&link);
    }
}

/// `<tmp>/portico-<uid>/<16 hex digits of a hash of dir>`.
fn alias(dir: &Path) -> PathBuf {
    let tmp = std::env::temp_dir();
    let tmp = if tmp.as_os_str().len() <= 40 {
        tmp
    } else {
        PathBuf::from("/tmp")
    };
    let uid = rustix::process::geteuid().as_raw();
    tmp.join(format!("portico-{uid}")).join(format!(
        "{:016x}",
        fnv1a(dir.as_os_str().as_encoded_bytes())
    ))
}

/// FNV-1a, 64 bits: a stable name, not a secret (the directory is private).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_paths_stay_and_long_ones_are_aliased_and_reachable() {
        assert_eq!(
            socket_path(Path::new("/var/lib/portico"), "x.sock"),
            Some(PathBuf::from("/var/lib/portico/x.sock"))
        );
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d".repeat(120));
        std::fs::create_dir_all(&dir).unwrap();
        let path = socket_path(&dir, "haproxy.sock").unwrap();
        assert!(
            path.as_os_str().len() <= MAX_SOCKET_PATH,
            "{}",
            path.display()
        );
        assert_ne!(path, dir.join("haproxy.sock"));
        make_socket_alias(&dir, "haproxy.sock").unwrap();
        make_socket_alias(&dir, "haproxy.sock").unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // The socket lives in its directory; the short path reaches it.
        assert!(dir.join("haproxy.sock").exists());
        std::os::unix::net::UnixStream::connect(&path).unwrap();
        drop(listener);
        remove_socket_alias(&dir);
        assert!(std::fs::symlink_metadata(alias(&dir)).is_err());
    }
}
