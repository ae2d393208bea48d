//! What an incremental translation says it rebuilt (`Memo::rebuilt`): after a change of
//! Ingresses alone, every Ingress whose policies or SNI entries differ on a load balancer is
//! named for it, whatever the annotations that make Ingresses on one host depend on each other.

mod support;

use portico_model::{L7Policy, ListenerId, Model, ObjectRef, SniCertificate};
use portico_translate::{Config, Memo, Objects, Previous, translate_incremental};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::{ingress, load_values, service};

const HOSTS: [&str; 6] = ["a.test", "www.a.test", "x.w.test", "*.w.test", "b.test", ""];
const PATHS: [&str; 3] = ["/", "/a", "/a/.*"];
const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// (age, routes (host, path, exact, service), TLS hosts, annotations (a bit each), alias host)
type GenIngress = (u8, Vec<(u8, u8, bool, u8)>, Vec<u8>, u8, u8);

fn gen_ingress() -> impl Strategy<Value = GenIngress> {
    (
        0..3u8,
        prop::collection::vec((0..6u8, 0..3u8, any::<bool>(), 0..2u8), 0..3),
        prop::collection::vec(0..6u8, 0..2),
        any::<u8>(),
        0..6u8,
    )
}

fn doc(i: usize, (age, routes, tls, bits, alias): &GenIngress) -> Value {
    let rules: Vec<Value> = (routes.iter())
        .map(|(host, path, exact, service)| {
            let path_type = if *exact { "Exact" } else { "Prefix" };
            let backend = json!({"service": {"name": format!("s{service}"), "port": {"number": 80}}});
            let path = json!({"path": PATHS[usize::from(*path)], "pathType": path_type, "backend": backend});
            let mut rule = json!({"http": {"paths": [path]}});
            if !HOSTS[usize::from(*host)].is_empty() {
                rule["host"] = json!(HOSTS[usize::from(*host)]);
            }
            rule
        })
        .collect();
    let mut spec = json!({"rules": rules});
    if !tls.is_empty() {
        let hosts: Vec<&str> = tls.iter().map(|h| HOSTS[usize::from(*h)]).collect();
        spec["tls"] = json!([{"hosts": hosts, "secretName": format!("cert-{i}")}]);
    }
    let mut annotations = serde_json::Map::new();
    let mut set = |bit: u8, name: &str, value: &str| {
        if bits & (1 << bit) != 0 {
            annotations.insert(name.to_owned(), json!(value));
        }
    };
    set(0, &format!("{NGINX}canary"), "true");
    set(0, &format!("{NGINX}canary-weight"), "30");
    set(
        1,
        &format!("{NGINX}server-alias"),
        HOSTS[usize::from(*alias)],
    );
    set(2, &format!("{NGINX}from-to-www-redirect"), "true");
    set(3, &format!("{NGINX}use-regex"), "true");
    set(4, "portico.dev/ssl-redirect", "false");
    set(5, &format!("{NGINX}force-ssl-redirect"), "true");
    set(6, &format!("{NGINX}ssl-passthrough"), "true");
    let created = format!("2026-01-0{}T00:00:00Z", age + 1);
    let mut doc = ingress("default", &format!("i{i}"), Some(&created), spec);
    doc["metadata"]["annotations"] = Value::Object(annotations);
    doc
}

fn objects(ingresses: &[Option<GenIngress>]) -> Objects {
    let mut docs: Vec<Value> = (ingresses.iter().enumerate())
        .filter_map(|(i, g)| g.as_ref().map(|g| doc(i, g)))
        .collect();
    docs.extend(service("default", "s0", "10.0.0.1"));
    docs.extend(service("default", "s1", "10.0.0.2"));
    load_values(docs)
}

/// What one source gives a load balancer's listeners: its policies (positions aside) and SNI
/// entries, in the listeners' order.
type Fragments = BTreeMap<ObjectRef, Vec<(ListenerId, Result<L7Policy, SniCertificate>)>>;

fn fragments(model: &Model) -> BTreeMap<portico_model::LoadBalancerId, Fragments> {
    let mut out = BTreeMap::new();
    for lb in &model.load_balancers {
        let mut by_source = Fragments::new();
        for listener in lb.listeners.iter() {
            for policy in &listener.policies {
                let policy = L7Policy::clone(policy);
                let entry = by_source.entry((*policy.source).clone()).or_default();
                entry.push((listener.id, Ok(policy)));
            }
            for sni in listener.tls.iter().flat_map(|t| &t.sni) {
                let entry = by_source.entry(sni.source.clone()).or_default();
                entry.push((listener.id, Err(sni.clone())));
            }
        }
        out.insert(lb.id, by_source);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn every_ingress_whose_policies_changed_is_named(
        first in prop::collection::vec(prop::option::of(gen_ingress()), 1..6),
        changes in prop::collection::vec((0usize..6, prop::option::of(gen_ingress())), 1..5),
    ) {
        let config = Config::default();
        let mut ingresses = first;
        let mut memo = Memo::default();
        let mut old = objects(&ingresses);
        let mut model = translate_incremental(&old, &config, None, &mut memo).model;
        for (i, changed) in changes {
            let i = i % ingresses.len();
            ingresses[i] = changed;
            let new = objects(&ingresses);
            let previous = Previous { objects: &old, model: &model };
            let next = translate_incremental(&new, &config, Some(previous), &mut memo).model;
            let rebuilt = memo.rebuilt();
            let (before, after) = (fragments(&model), fragments(&next));
            for lb in &next.load_balancers {
                let Some(was) = model.load_balancers.iter().find(|l| l.id == lb.id) else {
                    continue;
                };
                let Some(named) = rebuilt.sources(&lb.id, &was.listeners, &lb.listeners) else {
                    prop_assert!(false, "no hint for load balancer {}", lb.name);
                    unreachable!()
                };
                let empty = Fragments::new();
                let (b, a) = (&before[&lb.id], after.get(&lb.id).unwrap_or(&empty));
                for source in b.keys().chain(a.keys()) {
                    if b.get(source) != a.get(source) {
                        prop_assert!(named.contains(source),
                            "{source} changed on {} and is not named (named: {named:?})", lb.name);
                    }
                }
            }
            old = new;
            model = next;
        }
    }
}
