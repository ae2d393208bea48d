//! Golden haproxy configurations: the models of the translator's golden cases (the three seed
//! Ingress types, the path and host rule cases, TLS) rendered for haproxy must equal
//! `tests/golden/<case>.conf` (the route maps follow, commented), and every one must pass `haproxy -c`.
//! `PORTICO_BLESS=1 cargo test -p portico-provider-haproxy --test golden` rewrites them.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::Model;
use std::path::{Path, PathBuf};

const CASES: &[&str] = &[
    "seed-single-service",
    "seed-simple-fanout",
    "seed-name-virtual-hosting",
    "path-rules",
    "host-rules",
    "tls",
    "balancing",
];

fn model(case: &str) -> Model {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../translate/tests/golden");
    let text = std::fs::read_to_string(root.join(case).join("expected.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(doc["model"].clone()).unwrap()
}

#[test]
fn every_golden_model_renders_to_its_expected_config_which_haproxy_accepts() {
    let bless = std::env::var("PORTICO_BLESS").is_ok_and(|v| v == "1");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut failed = Vec::new();
    for case in CASES {
        let model = model(case);
        assert_eq!(model.load_balancers.len(), 1, "{case}");
        let lb = &model.load_balancers[0];
        let fixed = PathBuf::from("/var/lib/portico/loadbalancer/haproxy").join(lb.id.to_string());
        let rendered = support::render_in(lb, &fixed);
        assert!(
            rendered.diagnostics.is_empty(),
            "{case}: {:?}",
            rendered.diagnostics
        );
        let mut actual = format!(
            "{}# crt-list.txt\n{}",
            rendered.config,
            commented(&rendered.crt_list)
        );
        for (name, entries) in &rendered.maps {
            let text = portico_provider_haproxy::routes::file_text(entries);
            actual.push_str(&format!("# {name}\n{}", commented(&text)));
        }
        let path = golden.join(format!("{case}.conf"));
        if bless {
            std::fs::write(&path, &actual).unwrap();
        } else if std::fs::read_to_string(&path).unwrap_or_default() != actual {
            failed.push(case.to_string());
        }
        support::check(lb).unwrap_or_else(|e| panic!("{case}: haproxy -c failed:\n{e}"));
    }
    assert!(
        failed.is_empty(),
        "differ from their golden file (PORTICO_BLESS=1 rewrites): {failed:?}"
    );
}

fn commented(text: &str) -> String {
    text.lines().map(|l| format!("#   {l}\n")).collect()
}
