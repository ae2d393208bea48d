//! The agent's local copy of the last view, to serve from at start while etcd is away.
//!
//! Layout: `PORTICO-VIEW 1\n`, the revision (i64), the entry count (u64), per entry the key
//! and value (u32 length, bytes) and the mod revision (i64), all little-endian; then the SHA-1
//! of everything before it. Written to a new temp file (O_EXCL, 0600) in the same directory,
//! synced, renamed over the old one, then the directory synced: a reader finds the old file or
//! the new one, never a mix. A file that does not check out whole is an error, never a view.

use bytes::Bytes;
use portico_store::kv::{Entry, View};
use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8] = b"PORTICO-VIEW 1\n";
const DIGEST: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cache {path} is not a Portico view cache (or not this version)")]
    NotACache { path: PathBuf },
    #[error("cache {path} is corrupt: its checksum does not match")]
    Checksum { path: PathBuf },
    #[error("cache {path} is malformed: {reason}")]
    Malformed { path: PathBuf, reason: &'static str },
}

/// Writes `view` to `path` atomically (blocking; small files).
pub fn save(path: &Path, view: &View) -> Result<(), CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = encode(view);
    portico_statedir::write_file(path, &bytes, 0o600).map_err(io)?;
    sync_dir(path).map_err(io)
}

/// Reads the view `save` wrote; any damage is an error.
pub fn load(path: &Path) -> Result<View, CacheError> {
    let bytes = std::fs::read(path).map_err(|source| CacheError::Io {
        path: path.to_owned(),
        source,
    })?;
    let fail = |reason| CacheError::Malformed {
        path: path.to_owned(),
        reason,
    };
    if !bytes.starts_with(MAGIC) {
        return Err(CacheError::NotACache {
            path: path.to_owned(),
        });
    }
    let Some(body_len) = bytes.len().checked_sub(DIGEST) else {
        return Err(fail("shorter than its checksum"));
    };
    let (body, digest) = bytes.split_at(body_len);
    if Sha1::digest(body).as_slice() != digest {
        return Err(CacheError::Checksum {
            path: path.to_owned(),
        });
    }
    decode(&body[MAGIC.len()..]).ok_or_else(|| fail("lengths do not add up"))
}

fn encode(view: &View) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(view.revision.to_le_bytes());
    out.extend((view.entries.len() as u64).to_le_bytes());
    for (key, entry) in view.entries.iter() {
        put_bytes(&mut out, key.as_bytes());
        put_bytes(&mut out, &entry.value);
        out.extend(entry.mod_revision.to_le_bytes());
    }
    let digest = Sha1::digest(&out);
    out.extend(digest);
    out
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Keys and values are far below 4 GiB (etcd caps requests at a few MiB).
    out.extend((bytes.len() as u32).to_le_bytes());
    out.extend(bytes);
}

fn decode(body: &[u8]) -> Option<View> {
    let mut reader = Reader(body);
    let revision = i64::from_le_bytes(reader.array()?);
    let count = u64::from_le_bytes(reader.array()?);
    let mut entries = BTreeMap::new();
    for _ in 0..count {
        let key = String::from_utf8(reader.bytes()?.to_vec()).ok()?;
        let value = Bytes::copy_from_slice(reader.bytes()?);
        let mod_revision = i64::from_le_bytes(reader.array()?);
        entries.insert(
            key,
            Entry {
                value,
                mod_revision,
            },
        );
    }
    reader.0.is_empty().then(|| View {
        revision,
        entries: Arc::new(entries),
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.array()?);
        self.take(usize::try_from(len).ok()?)
    }
}

/// Makes the rename itself durable.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
