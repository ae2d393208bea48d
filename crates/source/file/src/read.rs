//! Reading one manifest file within bounds: regular files only, opened without blocking (a
//! FIFO or a device never stalls the reload), at most `max_file_bytes` read.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Bounds on what one manifest file may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Largest manifest file read, in bytes; larger files are a diagnostic (and the objects
    /// they held before keep being served).
    pub max_file_bytes: u64,
}

impl ReadLimits {
    /// 8 MiB: 10,000 Ingresses of a typical size fit in one file; a file that size parses in
    /// well under a second and a few hundred MiB at worst.
    pub const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_file_bytes: ReadLimits::DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// The content of the regular file at `path`, or why it was not read.
pub(crate) fn read_bounded(path: &Path, limits: ReadLimits) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let what = describe(&meta.file_type());
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({what}); only regular files are read"),
        ));
    }
    let limit = limits.max_file_bytes;
    if meta.len() > limit {
        return Err(too_large(meta.len(), limit));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    read_at_most(file, limit, &mut bytes)?;
    Ok(bytes)
}

/// Reads up to `limit` bytes; a file that grew past it since `fstat` is refused too.
fn read_at_most(file: File, limit: u64, bytes: &mut Vec<u8>) -> io::Result<()> {
    file.take(limit.saturating_add(1)).read_to_end(bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(())
}

fn too_large(size: u64, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "the file is {size} bytes or more, over the limit of {limit} bytes \
             (--max-manifest-bytes); split it or raise the limit"
        ),
    )
}

fn describe(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, b"0123456789").unwrap();
        let ten = ReadLimits { max_file_bytes: 10 };
        assert_eq!(read_bounded(&path, ten).unwrap(), b"0123456789");
        let nine = ReadLimits { max_file_bytes: 9 };
        let err = read_bounded(&path, nine).unwrap_err().to_string();
        assert!(err.contains("over the limit of 9 bytes"), "{err}");
    }

    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let err = read_bounded(&fifo, ReadLimits::default()).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let zero = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_bounded(&zero, ReadLimits::default()).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let err = read_bounded(dir.path(), ReadLimits::default()).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }
}
