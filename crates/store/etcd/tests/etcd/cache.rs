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

/// The agent writes its cache from the state it decoded (its values dropped once read): the
/// file holds the values and mod revisions of the view it was decoded from.
#[test]
fn a_state_saved_loads_back_as_the_view_it_was_decoded_from() {
    use portico_store::codec::{Decoder, encode};
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../translate/tests/golden");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("view.cache");
    let mut models = 0;
    for golden in std::fs::read_dir(&root).expect("golden models") {
        let golden = golden.expect("entry").path();
        let text = std::fs::read_to_string(golden.join("expected.json")).expect("read");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        let model: portico_model::Model =
            serde_json::from_value(value["model"].clone()).expect("a model");
        let none = Default::default();
        let written = encode(&model, &none, &Default::default(), &Default::default());
        let entries = (written.into_iter().enumerate())
            .map(|(i, (key, value))| {
                let mod_revision = 10 + i as i64;
                (
                    key,
                    Entry {
                        value,
                        mod_revision,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        let view = View {
            revision: 99,
            entries: Arc::new(entries),
        };
        let desired = Decoder::default().decode(&view);
        let keys_only = View {
            revision: view.revision,
            entries: Arc::new(
                (view.entries.iter())
                    .map(|(k, e)| {
                        let entry = Entry {
                            value: Bytes::new(),
                            mod_revision: e.mod_revision,
                        };
                        (k.clone(), entry)
                    })
                    .collect(),
            ),
        };
        portico_store_etcd::cache::save_state(&path, &keys_only, &desired).expect("save");
        assert_eq!(load(&path).expect("load"), view, "{}", golden.display());
        models += 1;
    }
    assert!(models >= 10, "golden models: {models}");
}
