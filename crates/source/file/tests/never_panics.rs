//! The manifest decoder on arbitrary input: it never panics, and the diagnostics it returns
//! stay within the per-file cap.

use portico_source_file::parse_documents;
use proptest::prelude::*;

/// Text made of YAML's structural characters, words Portico looks for, and any characters.
fn yamlish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("\n".to_owned()),
        Just("---\n".to_owned()),
        Just("- ".to_owned()),
        Just(": ".to_owned()),
        Just("  ".to_owned()),
        Just("&a ".to_owned()),
        Just("*a".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("\"".to_owned()),
        Just("apiVersion: networking.k8s.io/v1\n".to_owned()),
        Just("apiVersion: v1\n".to_owned()),
        Just("kind: Ingress\n".to_owned()),
        Just("kind: List\nitems:\n".to_owned()),
        Just("kind: Service\n".to_owned()),
        Just("metadata: {name: x, namespace: y}\n".to_owned()),
        Just("spec:\n".to_owned()),
        Just("rules:\n".to_owned()),
        "[a-z0-9]{1,8}",
        any::<String>(),
    ];
    proptest::collection::vec(token, 0..64).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_decoder_never_panics_and_caps_its_diagnostics(text in yamlish()) {
        let parsed = parse_documents("fuzz.yaml", &text);
        prop_assert!(parsed.diagnostics.len() <= 101);
    }

    #[test]
    fn json_text_never_panics(text in "[\\[\\]{}:,\"a-z0-9 \\n]{0,200}") {
        let _ = parse_documents("fuzz.json", &text);
    }
}
