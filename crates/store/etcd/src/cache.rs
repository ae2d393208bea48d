//! The agent's local copy of the last view, to serve from at start while etcd is away.
//!
//! Layout: `PORTICO-VIEW 1\n`, the revision (i64), the entry count (u64), per entry the key
//! and value (u32 length, bytes) and the mod revision (i64), all little-endian; then the SHA-1
//! of everything before it. Written to a new temp file (O_EXCL, 0600) in the same directory,
//! synced, renamed over the old one, then the directory synced: a reader finds the old file or
//! the new one, never a mix. A file that does not check out whole is an error, never a view.
//!
//! The agent writes it from the state it decoded, encoded again ([`save_state`]): it does not
//! keep the store's values once decoded. The codec's encoding is a function of the state, so
//! the values are the ones the controller wrote; each keeps the mod revision the view gives
//! its key.

use bytes::Bytes;
use portico_store::Desired;
use portico_store::codec;
use portico_store::kv::{Entry, View};
use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
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

/// Writes the state decoded from `view` to `path`, as [`save`] would write the view: the
/// values encoded again from `desired` (a value that did not decode is left out), each with
/// the mod revision `view` gives its key. `view`'s own values are not read (they may be gone).
/// The values go to the file as they are encoded (through a buffer): the state is never whole
/// in memory encoded beside itself.
pub fn save_state(path: &Path, view: &View, desired: &Desired) -> Result<(), CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_owned(),
        source,
    };
    let state = (
        &*desired.model,
        &desired.certificates,
        &desired.ca_bundles,
        &desired.credentials,
    );
    let count = codec::count(state.0, state.1, state.2, state.3) as u64;
    portico_statedir::write_file_with(path, 0o600, |file| {
        let mut out = Hashed {
            file: std::io::BufWriter::with_capacity(1 << 16, file),
            sha1: Sha1::new(),
        };
        out.write(MAGIC)?;
        out.write(&view.revision.to_le_bytes())?;
        out.write(&count.to_le_bytes())?;
        let mut result = Ok(());
        codec::encode_each(state.0, state.1, state.2, state.3, |key, value| {
            if result.is_err() {
                return;
            }
            let mod_revision = view.entries.get(key).map_or(0, |e| e.mod_revision);
            result = (out.bytes(key.as_bytes()))
                .and_then(|()| out.bytes(value))
                .and_then(|()| out.write(&mod_revision.to_le_bytes()));
        });
        result?;
        let digest = out.sha1.finalize();
        out.file.write_all(&digest)?;
        out.file.flush()
    })
    .map_err(io)?;
    sync_dir(path).map_err(io)
}

/// A file being written and the SHA-1 of what was written to it.
struct Hashed<W> {
    file: W,
    sha1: Sha1,
}

impl<W: Write> Hashed<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sha1.update(bytes);
        self.file.write_all(bytes)
    }

    /// Length-prefixed, as [`put_bytes`].
    fn bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write(&(bytes.len() as u32).to_le_bytes())?;
        self.write(bytes)
    }
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
