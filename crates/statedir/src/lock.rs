//! One Portico per state directory: an exclusive advisory lock (`flock`) on `DIR/portico.lock`,
//! held while the [`Lock`] lives. The kernel releases it when the process ends, however it
//! ends, so a lock is never stale; the file holds the holder's PID, for the error the next
//! process gets.

use crate::{StateDirError, open_dir};
use rustix::fs::{FlockOperation, Mode, OFlags};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "portico.lock";

/// A state directory locked by this process.
#[derive(Debug)]
pub struct Lock {
    dir: PathBuf,
    _file: OwnedFd,
}

impl Lock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file's descriptor, for a successor process (`portico run`'s upgrade): the lock
    /// belongs to the open file, so a process given this descriptor holds the lock too, and
    /// keeps it after this one exits.
    pub fn file(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self._file.as_fd()
    }

    /// Whether `path` is inside the locked directory (lexically: `path` is absolute or relative
    /// like the directory was given).
    pub fn covers(&self, path: &Path) -> bool {
        path.starts_with(&self.dir)
    }
}

/// Locks the state directory `dir` (which exists) for this process, or says which process
/// holds it.
pub fn lock(dir: &Path) -> Result<Lock, StateDirError> {
    let failed = |source: io::Error| StateDirError::Lock {
        path: dir.to_owned(),
        source,
    };
    let handle = open_dir(dir).map_err(failed)?;
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = rustix::fs::openat(&handle, LOCK_FILE, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| failed(e.into()))?;
    hold(dir, file)
}

/// Takes over the lock of `dir` from a predecessor that handed its lock file over (`file`, an
/// open file that holds the lock, as [`Lock::file`] gives it): checks that `file` is the
/// directory's lock file and holds the lock, and writes this process's PID into it.
pub fn adopt(dir: &Path, file: OwnedFd) -> Result<Lock, StateDirError> {
    let failed = |source: io::Error| StateDirError::Lock {
        path: dir.to_owned(),
        source,
    };
    let handle = open_dir(dir).map_err(failed)?;
    let at = rustix::fs::statat(&handle, LOCK_FILE, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
    let (at, given) = (at.map_err(|e| failed(e.into()))?, rustix::fs::fstat(&file));
    let given = given.map_err(|e| failed(e.into()))?;
    if (at.st_dev, at.st_ino) != (given.st_dev, given.st_ino) {
        let wrong = io::Error::other("the handed-over descriptor is not this directory's lock");
        return Err(failed(wrong));
    }
    // The same open file: this succeeds when it holds the lock, and fails when it does not
    // and another process holds it.
    hold(dir, file)
}

/// Locks `file` (the lock file of `dir`) for this process, or says who holds it, and writes
/// this process's PID into it.
fn hold(dir: &Path, file: OwnedFd) -> Result<Lock, StateDirError> {
    let failed = |source: io::Error| StateDirError::Lock {
        path: dir.to_owned(),
        source,
    };
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            return Err(StateDirError::InUse {
                path: dir.to_owned(),
                holder: holder(&file),
            });
        }
        Err(e) => return Err(failed(e.into())),
    }
    let pid = format!("{}\n", rustix::process::getpid().as_raw_nonzero());
    rustix::fs::ftruncate(&file, 0).map_err(|e| failed(e.into()))?;
    rustix::io::pwrite(&file, pid.as_bytes(), 0).map_err(|e| failed(e.into()))?;
    Ok(Lock {
        dir: dir.to_owned(),
        _file: file,
    })
}

/// Who holds the lock, from the PID in its file.
fn holder(file: &OwnedFd) -> String {
    let mut buf = [0u8; 32];
    let read = rustix::io::pread(file, &mut buf, 0).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..read]);
    match text.trim().parse::<u32>() {
        Ok(pid) => format!("another Portico (PID {pid})"),
        Err(_) => "another Portico".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_directory_is_refused_naming_the_holder_until_it_is_unlocked() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let pid = std::process::id();
        let written = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(written, format!("{pid}\n"));
        // A second open file description conflicts like another process's.
        let err = lock(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&format!("in use by another Portico (PID {pid})"))
                && err.contains(&dir.path().display().to_string())
                && err.contains("its own state directory"),
            "{err}"
        );
        assert!(first.covers(&dir.path().join("loadbalancer/haproxy")));
        assert!(!first.covers(Path::new("/elsewhere")));
        drop(first);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn a_handed_over_lock_file_is_adopted_and_another_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let handed = first.file().try_clone_to_owned().unwrap();
        let adopted = adopt(dir.path(), handed).unwrap();
        drop(first);
        // The adopted lock still holds the directory.
        assert!(lock(dir.path()).is_err());
        let other = tempfile::tempfile().unwrap();
        assert!(adopt(dir.path(), other.into()).is_err());
        drop(adopted);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn a_symlink_as_the_lock_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(LOCK_FILE)).unwrap();
        assert!(lock(dir.path()).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
