//! Property: translation never panics, whatever hosts, paths and ports an Ingress holds, and
//! an owned Ingress is served exactly when admission finds no error in it.

mod support;

use portico_translate::admission::validate_ingress;
use portico_translate::{Config, ObjectKey, translate};
use proptest::prelude::*;
use serde_json::json;
use support::{ingress, load_values, service};

fn path_type() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Exact".to_owned()),
        Just("Prefix".to_owned()),
        Just("ImplementationSpecific".to_owned()),
        ".{0,12}",
    ]
}

proptest! {
    #[test]
    fn translate_never_panics_on_arbitrary_hosts_paths_and_ports(
        host in prop_oneof![Just(String::new()), "[a-z*.0-9:-]{0,20}", ".{0,20}"],
        path in prop_oneof!["/[a-z/.%2fF]{0,16}", ".{0,16}"],
        path_type in path_type(),
        port in prop_oneof![Just(80), any::<i32>()],
    ) {
        let spec = json!({"rules": [{"host": host, "http": {"paths": [
            {"path": path, "pathType": path_type,
             "backend": {"service": {"name": "web", "port": {"number": port}}}}
        ]}}]});
        let mut docs = vec![ingress("default", "i", None, spec)];
        docs.extend(service("default", "web", "10.0.0.1"));
        let objects = load_values(docs);
        let t = translate(&objects, &Config::default());
        let key = ObjectKey::new("default", "i");
        let admitted = !validate_ingress(&key, &objects.ingresses[&key]).iter().any(|d| d.is_error());
        prop_assert_eq!(t.ingresses[0].served, admitted);
        let policies = &t.model.load_balancers[0].listeners[0].policies;
        prop_assert_eq!(policies.len(), usize::from(admitted));
        for policy in policies {
            let path_rule = policy.rules.last().expect("a path rule");
            prop_assert!(path_rule.value.starts_with('/'));
        }
    }
}
