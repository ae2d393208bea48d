//! The local cache: a saved view comes back whole, or not at all.

use bytes::Bytes;
use portico_store::kv::{Entry, View};
use portico_store_etcd::CacheError;
use portico_store_etcd::cache::{load, save};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

fn view() -> View {
    let entries = (0..50)
        .map(|i| {
            let entry = Entry {
                value: Bytes::from(vec![i as u8; i * 10]),
                mod_revision: 100 + i as i64,
            };
            (format!("desired/lb/{i:02}"), entry)
        })
        .collect::<BTreeMap<_, _>>();
    View {
        revision: 4242,
        entries: Arc::new(entries),
    }
}

#[test]
fn a_saved_view_loads_back_equal_from_an_owner_only_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("view.cache");
    save(&path, &View::default()).expect("save empty");
    assert_eq!(load(&path).expect("load empty"), View::default());
    save(&path, &view()).expect("save over");
    assert_eq!(load(&path).expect("load"), view());
    let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let names: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
    assert_eq!(names.len(), 1, "no temp file left");
}

#[test]
fn a_flipped_byte_or_a_truncation_is_an_error_never_a_partial_view() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("view.cache");
    save(&path, &view()).expect("save");
    let bytes = std::fs::read(&path).expect("read");
    for at in [20, bytes.len() / 2, bytes.len() - 1] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x01;
        std::fs::write(&path, &flipped).expect("write");
        let err = load(&path).expect_err("flipped byte");
        assert!(
            matches!(err, CacheError::Checksum { .. }),
            "byte {at}: {err}"
        );
    }
    for len in [0, 10, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..len]).expect("write");
        assert!(load(&path).is_err(), "truncated to {len} bytes");
    }
    let missing = load(&dir.path().join("missing")).expect_err("no file");
    assert!(matches!(missing, CacheError::Io { .. }));
}
