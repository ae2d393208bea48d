//! Golden tests: every `tests/golden/<case>/input.yaml` translated with `Config::default()` must
//! equal `expected.json` beside it (diagnostics include those of the certificates step). `PORTICO_BLESS=1 cargo test -p portico-translate --test
//! golden` rewrites the expected files; read the diff before keeping it.

mod support;

use portico_translate::{Certificates, Config, Objects, Translation, certificates, translate};
use serde_json::json;
use std::path::{Path, PathBuf};

fn render(objects: &Objects, translation: &Translation) -> String {
    let certificates = certificates(
        objects,
        translation,
        &Config::default(),
        &Certificates::default(),
    );
    let mut diagnostics = translation.diagnostics.clone();
    diagnostics.extend(certificates.diagnostics);
    diagnostics.sort();
    let ingresses: Vec<_> = translation
        .ingresses
        .iter()
        .map(|i| json!({"key": i.key.to_string(), "class": i.class, "owned": i.owned, "served": i.served}))
        .collect();
    let doc = json!({
        "model": translation.model,
        "diagnostics": diagnostics,
        "ingresses": ingresses,
    });
    serde_json::to_string_pretty(&doc).expect("serializable") + "\n"
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/golden exists")
        .map(|e| e.expect("readable dir entry").path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_golden_case_translates_to_its_expected_json() {
    let bless = std::env::var("PORTICO_BLESS").is_ok_and(|v| v == "1");
    let cases = cases();
    assert!(cases.len() >= 10, "golden cases missing: {cases:?}");
    let mut failed = Vec::new();
    for case in &cases {
        let input = std::fs::read_to_string(case.join("input.yaml")).expect("input readable");
        let objects = support::load(&input);
        let actual = render(&objects, &translate(&objects, &Config::default()));
        let expected_path = case.join("expected.json");
        if bless {
            std::fs::write(&expected_path, &actual).expect("expected.json writable");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            eprintln!("--- {} differs; actual:\n{actual}", case.display());
            failed.push(case.file_name().map(|n| n.to_string_lossy().into_owned()));
        }
    }
    assert!(
        failed.is_empty(),
        "golden cases differ: {failed:?} (PORTICO_BLESS=1 to rewrite)"
    );
}
