//! Safe state directories: where Portico writes haproxy's configurations and certificate keys,
//! its sockets and the agent's cache.
//!
//! - A state directory must be a directory (not a symlink) owned by this user and writable by
//!   no one else; Portico creates it (mode 0700) when missing and refuses it otherwise, with an
//!   error that says what to do.
//! - Files are written relative to a handle on their directory, through a temporary file with
//!   an unpredictable name, created exclusively without following symlinks, with its final
//!   mode from the start, then renamed over the old one: a file another user planted is never
//!   written through.
//! - A state directory serves one process at a time: [`lock`] takes an advisory lock on it
//!   for the process's life, and a second process given the same directory is refused with
//!   the PID of the first.
//! - Unix sockets whose path would be too long are reached through a short private alias
//!   ([`socket_path`]).

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod lock;
mod sockets;

pub use lock::{LOCK_FILE, Lock, adopt, lock};
pub use sockets::{MAX_SOCKET_PATH, make_socket_alias, remove_socket_alias, socket_path};

use rustix::fs::{AtFlags, Mode, OFlags};
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("cannot create the state directory {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error(
        "the state directory {path} is not a directory (a symlink or a file): give a directory \
         owned by this user"
    )]
    NotADirectory { path: PathBuf },
    #[error(
        "the state directory {path} belongs to uid {owner}, not to this user (uid {me}): another \
         user could change what Portico reads and writes there; give a directory of your own"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "the state directory {path} is writable by other users (mode {mode:o}): they could \
         replace what Portico writes there; run `chmod go-w {path}` or give another directory"
    )]
    Shared { path: PathBuf, mode: u32 },
    #[error(
        "the state directory {path} is in use by {holder}: give each Portico its own state \
         directory"
    )]
    InUse { path: PathBuf, holder: String },
    #[error("cannot lock the state directory {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
}

/// Creates `path` (and its missing parents) mode 0700 when missing, then checks that it is a
/// directory of this user's that no one else can write to.
pub fn ensure_private_dir(path: &Path) -> Result<(), StateDirError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| StateDirError::Create {
            path: path.to_owned(),
            source,
        })?;
    check(path)
}

/// Checks an existing state directory (see [`ensure_private_dir`]).
pub fn check(path: &Path) -> Result<(), StateDirError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| StateDirError::Create {
        path: path.to_owned(),
        source,
    })?;
    let path = path.to_owned();
    if !meta.is_dir() {
        return Err(StateDirError::NotADirectory { path });
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(StateDirError::NotOwned {
            path,
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(StateDirError::Shared { path, mode });
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically with permissions `mode`: a temporary file with a random
/// name in the same directory (opened through a handle on the directory, exclusively, without
/// following symlinks), synced, then renamed over `path`.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_file_with(path, mode, |file| file.write_all(bytes))
}

/// [`write_file`] of what `write` writes to the temporary file (e.g. through a buffer, so that
/// a large file is never whole in memory); an error from `write` leaves `path` as it was.
pub fn write_file_with(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut std::fs::File) -> io::Result<()>,
) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let dir = open_dir(dir)?;
    let (temp, mut file) = create_temp(&dir, name, mode)?;
    let written = write(&mut file)
        .and_then(|()| file.sync_all())
        .and_then(|()| rustix::fs::renameat(&dir, &temp, &dir, name).map_err(io::Error::from));
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
        return Err(e);
    }
    Ok(())
}

fn split(path: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rustix::fs::open(dir, flags, Mode::empty())?)
}

/// `.<name>.<16 random hex digits>.tmp`, created with `O_EXCL | O_NOFOLLOW`.
fn create_temp(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    mode: u32,
) -> io::Result<(String, std::fs::File)> {
    let name = name.to_string_lossy();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last = None;
    for _ in 0..8 {
        let mut random = [0u8; 8];
        rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty())?;
        let mut temp = format!(".{name}.");
        for b in random {
            let _ = write!(temp, "{b:02x}");
        }
        temp.push_str(".tmp");
        match rustix::fs::openat(dir, &temp, flags, Mode::from_raw_mode(mode)) {
            Ok(fd) => {
                // The umask may have cleared bits of `mode`: set exactly what was asked.
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
                return Ok((temp, std::fs::File::from(fd)));
            }
            Err(e) if e == rustix::io::Errno::EXIST => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| io::Error::other("no temporary name left"), Into::into))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_is_created_and_shared_ones_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = ensure_private_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("writable by other users") && err.contains("chmod go-w"),
            "{err}"
        );
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = check(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn files_are_replaced_atomically_with_their_mode_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        write_file(&path, b"one", 0o600).unwrap();
        write_file(&path, b"two", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_planted_file_or_symlink_at_the_old_temporary_name_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        // The names Portico used before: predictable.
        std::os::unix::fs::symlink(&victim, dir.path().join("key.pem.tmp")).unwrap();
        write_file(&dir.path().join("key.pem"), b"secret", 0o600).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(
            std::fs::read(dir.path().join("key.pem")).unwrap(),
            b"secret"
        );
    }
}
