#![allow(clippy::unwrap_used)]

use super::*;
use crate::kv::{Entry, View, changes};
use crate::{CaBundles, Certificates, Delta};
use bytes::Bytes;
use portico_model::Credentials;
use portico_model::{Model, PolicyAction};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The translator's golden models: every shape the translator gives.
fn golden_models() -> Vec<(String, Model)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../translate/tests/golden");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let model: Model = serde_json::from_value(value["model"].clone()).unwrap();
        out.push((dir.display().to_string(), model));
    }
    assert!(out.len() >= 10, "golden models found: {}", out.len());
    out
}

/// A view of `entries` as if each key was written at `revision` unless `old` had it already.
fn view(entries: &BTreeMap<String, Bytes>, old: Option<&View>, revision: i64) -> View {
    let entries = entries
        .iter()
        .map(|(k, v)| {
            let kept = old
                .and_then(|o| o.entries.get(k))
                .filter(|e| e.value == *v)
                .map(|e| e.mod_revision);
            let mod_revision = kept.unwrap_or(revision);
            (
                k.clone(),
                Entry {
                    value: v.clone(),
                    mod_revision,
                },
            )
        })
        .collect();
    View {
        revision,
        entries: Arc::new(entries),
    }
}

#[test]
fn every_golden_model_comes_back_from_the_store_as_it_went_in() {
    for (name, model) in golden_models() {
        let entries = encode(
            &model,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        );
        let desired = Decoder::default().decode(&view(&entries, None, 7));
        assert_eq!(*desired.model, model, "{name}");
        assert!(
            desired.diagnostics.is_empty(),
            "{name}: {:?}",
            desired.diagnostics
        );
        assert_eq!(desired.revision, 7);
    }
}

#[test]
fn a_change_to_one_source_writes_only_that_sources_fragment() {
    let (_, model) = golden_models()
        .into_iter()
        .find(|(n, _)| n.ends_with("seed-simple-fanout"))
        .unwrap();
    let mut changed = model.clone();
    let lb = &mut changed.load_balancers[0];
    let lb_id = lb.id;
    let listeners = Arc::make_mut(&mut lb.listeners);
    let policy = Arc::make_mut(&mut listeners[0].policies[0]);
    let source = policy.source.clone();
    policy.action = PolicyAction::Reject { status: 403 };
    let ops = changes(
        &encode(
            &model,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        ),
        &encode(
            &changed,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        ),
    );
    assert_eq!(ops.len(), 1, "{ops:?}");
    let expected = format!("desired/lb/{lb_id}/src/{}", object_hash(&source));
    assert_eq!(ops[0].key(), expected);
}

#[test]
fn a_pool_change_alone_is_a_members_delta_and_keeps_the_listeners() {
    let (_, model) = golden_models()
        .into_iter()
        .find(|(n, _)| n.ends_with("seed-simple-fanout"))
        .unwrap();
    let mut decoder = Decoder::default();
    let first_entries = encode(
        &model,
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    );
    let first_view = view(&first_entries, None, 1);
    let first = decoder.decode(&first_view);
    assert_eq!(first.delta, Delta::Full);

    let mut changed = model.clone();
    let pool = std::sync::Arc::make_mut(&mut changed.load_balancers[0].pools[0]);
    pool.members[0].ready = !pool.members[0].ready;
    let pool_id = pool.id;
    let second = decoder.decode(&view(
        &encode(
            &changed,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        ),
        Some(&first_view),
        2,
    ));
    assert_eq!(second.delta, Delta::Members([pool_id].into()));
    assert!(Arc::ptr_eq(
        &first.model.load_balancers[0].listeners,
        &second.model.load_balancers[0].listeners
    ));
    assert_eq!(*second.model, changed);
}

#[test]
fn a_malformed_value_is_a_diagnostic_naming_its_key_and_the_rest_is_served() {
    let (_, model) = golden_models()
        .into_iter()
        .find(|(n, _)| n.ends_with("seed-name-virtual-hosting"))
        .unwrap();
    let mut entries = encode(
        &model,
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    );
    entries.insert("desired/cert/zzz".into(), Bytes::from_static(b"{not json"));
    let wrong_schema = br#"{"schema":99,"kind":"Pool","data":{}}"#;
    entries.insert(
        "desired/lb/00000000-0000-0000-0000-000000000000/pool/x".into(),
        Bytes::from_static(wrong_schema),
    );
    let desired = Decoder::default().decode(&view(&entries, None, 3));
    assert_eq!(*desired.model, model);
    let messages: Vec<String> = desired.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("desired/cert/zzz") && m.contains("not a value envelope")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("schema 99")),
        "{messages:?}"
    );
}

#[test]
fn certificates_travel_with_their_key_material() {
    let authority = portico_tls::generate::Authority::new("test ca").unwrap();
    let issued = authority.issue(&["a.test"]).unwrap();
    let material =
        portico_tls::Material::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes())
            .unwrap();
    let secret = ObjectRef::new("Secret", "default", "a-tls");
    let certificates = Certificates::from([(secret.clone(), Arc::new(material))]);
    let entries = encode(
        &Model::default(),
        &certificates,
        &CaBundles::new(),
        &Credentials::new(),
    );
    let desired = Decoder::default().decode(&view(&entries, None, 1));
    assert_eq!(desired.certificates, certificates);
}

#[test]
fn ca_bundles_travel_under_their_own_keys_and_a_bad_one_is_a_diagnostic() {
    let a = portico_tls::generate::Authority::new("ca a").unwrap();
    let b = portico_tls::generate::Authority::new("ca b").unwrap();
    let pem = format!("{}{}", a.cert_pem(), b.cert_pem());
    let bundle = portico_tls::CaBundle::from_pem(pem.as_bytes()).unwrap();
    let secret = ObjectRef::new("Secret", "default", "upstream-ca");
    let ca_bundles = CaBundles::from([(secret.clone(), Arc::new(bundle))]);
    let mut entries = encode(
        &Model::default(),
        &Certificates::new(),
        &ca_bundles,
        &Credentials::new(),
    );
    let key = format!("desired/ca/{}", object_hash(&secret));
    assert_eq!(entries.keys().collect::<Vec<_>>(), [&key]);
    let desired = Decoder::default().decode(&view(&entries, None, 1));
    assert_eq!(desired.ca_bundles, ca_bundles);
    assert!(desired.certificates.is_empty());
    assert!(desired.diagnostics.is_empty(), "{:?}", desired.diagnostics);

    let broken = serde_json::json!({"schema": 1, "kind": "CaBundle",
        "data": {"secret": secret, "caPem": "no certificate"}});
    entries.insert(key.clone(), Bytes::from(broken.to_string()));
    let desired = Decoder::default().decode(&view(&entries, None, 2));
    assert!(desired.ca_bundles.is_empty());
    let messages: Vec<_> = desired.diagnostics.iter().map(|d| &d.message).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("CA bundle of Secret default/upstream-ca")),
        "{messages:?}"
    );
}

#[test]
fn an_encoder_gives_what_encode_gives_and_keeps_the_bytes_of_what_did_not_change() {
    for (name, model) in golden_models() {
        let mut encoder = Encoder::default();
        let first = encoder.encode(
            &model,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        );
        assert_eq!(
            first,
            encode(
                &model,
                &Certificates::new(),
                &CaBundles::new(),
                &Credentials::new()
            ),
            "{name}"
        );
        let mut changed = model.clone();
        let Some(lb) = changed.load_balancers.first_mut() else {
            continue;
        };
        let listeners = Arc::make_mut(&mut lb.listeners);
        let Some(policy) = listeners[0].policies.first_mut() else {
            continue;
        };
        Arc::make_mut(policy).action = PolicyAction::Reject { status: 403 };
        let second = encoder.encode(
            &changed,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
        );
        assert_eq!(
            second,
            encode(
                &changed,
                &Certificates::new(),
                &CaBundles::new(),
                &Credentials::new()
            ),
            "{name}"
        );
        let changed_keys = changes(&first, &second);
        assert_eq!(changed_keys.len(), 1, "{name}: {changed_keys:?}");
        let same = second
            .iter()
            .filter(|(k, v)| first.get(*k).is_some_and(|f| f.as_ptr() == v.as_ptr()))
            .count();
        assert!(
            same + 2 >= second.len(),
            "{name}: unchanged values were encoded again"
        );
    }
}

#[test]
fn placements_round_trip_and_a_bad_value_is_a_diagnostic_naming_its_key() {
    let id = portico_model::LoadBalancerId::derive("lb");
    let placement = portico_model::Placement {
        active: "a".into(),
        standby: Some("b".into()),
        epoch: 3,
    };
    let placements = BTreeMap::from([(id, placement)]);
    let mut entries = encode_placements(&placements);
    assert_eq!(entries.keys().next().unwrap(), &format!("placement/{id}"));
    entries.insert("placement/nope".into(), Bytes::from_static(b"{}"));
    let (decoded, diagnostics) = decode_placements(&view(&entries, None, 1));
    assert_eq!(decoded, placements);
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].object.name, "placement/nope");
}

#[test]
fn headers_give_back_the_allocated_addresses() {
    let mut model = golden_models().remove(0).1;
    let lb = &mut model.load_balancers[0];
    lb.vip = Some([198, 18, 0, 1].into());
    lb.floating_ip = Some([198, 19, 0, 7].into());
    let id = lb.id;
    let entries = encode(
        &model,
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    );
    let got = addresses(&view(&entries, None, 1));
    assert_eq!(
        got.get(&id),
        Some(&(Some([198, 18, 0, 1].into()), Some([198, 19, 0, 7].into())))
    );
    assert_eq!(got.len(), model.load_balancers.len());
}

#[test]
fn credentials_travel_under_their_own_keys_and_a_bad_one_is_a_diagnostic() {
    let secret = ObjectRef::new("Secret", "shop", "users");
    let users = portico_model::Htpasswd::from_file("alice:bGVh02xkuGli2\n").unwrap();
    let credentials = Credentials::from([(secret.clone(), Arc::new(users))]);
    let mut entries = encode(
        &Model::default(),
        &Certificates::new(),
        &CaBundles::new(),
        &credentials,
    );
    let key = format!("desired/auth/{}", object_hash(&secret));
    assert_eq!(entries.keys().collect::<Vec<_>>(), [&key]);
    let desired = Decoder::default().decode(&view(&entries, None, 1));
    assert_eq!(desired.credentials, credentials);
    assert!(desired.diagnostics.is_empty(), "{:?}", desired.diagnostics);
    let broken = serde_json::json!({"schema": 1, "kind": "Credentials",
        "data": {"secret": secret, "users": {"alice": "not-a-hash"}}});
    entries.insert(key, Bytes::from(broken.to_string()));
    let desired = Decoder::default().decode(&view(&entries, None, 2));
    assert!(desired.credentials.is_empty());
    assert_eq!(desired.diagnostics.len(), 1, "{:?}", desired.diagnostics);
}

/// What one source gives the load balancer of [`sources_model`]: (host, path, on HTTPS too)
/// per policy, and SNI hosts.
pub(super) type SourceSpec = (Vec<(u8, u8, bool)>, Vec<u8>);

/// One load balancer with an HTTP and an HTTPS listener and a policy (and SNI entry) per spec
/// of each present source. Hosts and paths come from small sets, so policies of different
/// sources tie in evaluation order.
pub(super) fn sources_model(sources: &[Option<SourceSpec>]) -> Model {
    use portico_model::{
        CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId, ListenerTls,
        LoadBalancer, LoadBalancerId, PoolId, Protocol, RuleType, SniCertificate,
    };
    let listener = |name: &str, protocol, tls| Listener {
        id: ListenerId::derive(name),
        name: name.into(),
        protocol,
        port: 80,
        policies: vec![],
        default_pool: None,
        default_source: None,
        tls,
    };
    let mut listeners = vec![
        listener("http", Protocol::Http, None),
        listener(
            "https",
            Protocol::TerminatedHttps,
            Some(ListenerTls::default()),
        ),
    ];
    for (i, spec) in sources.iter().enumerate() {
        let Some((policies, sni)) = spec else {
            continue;
        };
        let source = Arc::new(ObjectRef::new("Ingress", "default", &format!("ing-{i}")));
        for (n, (host, path, https)) in policies.iter().enumerate() {
            let host = format!("h{host}.test");
            let path = ["/", "/a", "/a/b"][usize::from(*path % 3)];
            let rule = |t, c, v: &str| L7Rule {
                id: L7RuleId::derive(&format!("{i}/{n}/{v}")),
                rule_type: t,
                compare_type: c,
                key: None,
                value: v.to_owned(),
            };
            let policy = L7Policy {
                id: L7PolicyId::derive(&format!("{i}/{n}")),
                action: PolicyAction::RedirectToPool {
                    pool: PoolId::derive(&format!("pool-{n}")),
                },
                rules: vec![
                    rule(RuleType::HostName, CompareType::EqualTo, &host),
                    rule(RuleType::Path, CompareType::PathPrefix, path),
                ],
                source: source.clone(),
                precedence: 0,
                options: None,
            };
            let policy = Arc::new(policy);
            if *https {
                listeners[1].policies.push(policy.clone());
            }
            listeners[0].policies.push(policy);
        }
        for host in sni {
            let tls = listeners[1].tls.as_mut().unwrap();
            tls.sni.push(SniCertificate {
                host: format!("h{host}.test"),
                certificate: ObjectRef::new("Secret", "default", &format!("cert-{i}")),
                source: (*source).clone(),
            });
        }
    }
    let lb = LoadBalancer {
        id: LoadBalancerId::derive("shared"),
        name: "shared".into(),
        origin: ObjectRef::new("IngressClass", "", "shared"),
        provider: "proxy".into(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools: vec![],
    };
    Model {
        load_balancers: vec![lb],
    }
}

pub(super) fn source_spec() -> impl proptest::strategy::Strategy<Value = Option<SourceSpec>> {
    use proptest::prelude::*;
    let policies = prop::collection::vec((0u8..3, 0u8..3, any::<bool>()), 0..3);
    let sni = prop::collection::vec(0u8..3, 0..2);
    prop::option::of((policies, sni))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// A decoder that applies each state's changed fragments in place gives, state after
    /// state, what a new decoder assembling every fragment gives.
    #[test]
    fn fragments_applied_in_place_give_what_a_full_assembly_gives(
        first in proptest::collection::vec(source_spec(), 1..12),
        steps in proptest::collection::vec(
            proptest::collection::vec((0usize..12, source_spec()), 1..3), 1..8),
    ) {
        let mut sources = first;
        let mut decoder = Decoder::default();
        let mut last: Option<View> = None;
        let mut served: Option<Arc<Model>> = None;
        for (revision, step) in (1..).zip(std::iter::once(vec![]).chain(steps)) {
            for (i, spec) in step {
                let i = i % sources.len();
                sources[i] = spec;
            }
            let entries = encode(
                &sources_model(&sources),
                &Certificates::new(),
                &CaBundles::new(),
                &Credentials::new(),
            );
            let next = view(&entries, last.as_ref(), revision);
            let in_place = decoder.decode(&next);
            let full = Decoder::default().decode(&next);
            proptest::prop_assert_eq!(&*in_place.model, &*full.model);
            proptest::prop_assert_eq!(&in_place.diagnostics, &full.diagnostics);
            // What it says it rebuilt in place names every source whose entries changed.
            for (id, hint) in &in_place.rebuilt.load_balancers {
                let before = served.as_ref().and_then(|m| m.load_balancers.iter().find(|l| l.id == *id));
                let after = in_place.model.load_balancers.iter().find(|l| l.id == *id);
                let (Some(before), Some(after)) = (before, after) else {
                    proptest::prop_assert!(false, "a hint for a load balancer not in both states");
                    unreachable!()
                };
                proptest::prop_assert!(hint.between(&before.listeners, &after.listeners));
                let (b, a) = (by_source(before), by_source(after));
                for source in b.keys().chain(a.keys()) {
                    if b.get(source) != a.get(source) {
                        proptest::prop_assert!(hint.sources.contains(source), "{} not named", source);
                    }
                }
            }
            served = Some(in_place.model.clone());
            last = Some(next);
        }
    }
}

/// Each source's policies (positions aside) and SNI entries on `lb`'s listeners.
fn by_source(lb: &portico_model::LoadBalancer) -> BTreeMap<ObjectRef, Vec<String>> {
    let mut out: BTreeMap<ObjectRef, Vec<String>> = BTreeMap::new();
    for listener in lb.listeners.iter() {
        for policy in &listener.policies {
            let policy = portico_model::L7Policy::clone(policy);
            let entry = out.entry((*policy.source).clone()).or_default();
            entry.push(format!("{} {policy:?}", listener.id));
        }
        for sni in listener.tls.iter().flat_map(|t| &t.sni) {
            let entry = out.entry(sni.source.clone()).or_default();
            entry.push(format!("{} {sni:?}", listener.id));
        }
    }
    out
}

#[test]
fn a_fragment_under_another_sources_key_is_a_diagnostic() {
    let spec = Some((vec![(0, 0, true)], vec![0]));
    let mut entries = encode(
        &sources_model(&[spec.clone(), spec]),
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    );
    let fragments: Vec<String> = (entries.keys())
        .filter(|k| k.contains("/src/"))
        .cloned()
        .collect();
    let moved = entries[&fragments[0]].clone();
    entries.insert(fragments[1].clone(), moved);
    let desired = Decoder::default().decode(&view(&entries, None, 1));
    let messages: Vec<String> = desired.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains(&fragments[1]) && m.contains("holds the fragment of")),
        "{messages:?}"
    );
}

/// `map` with `ops` applied.
pub(super) fn applied(
    mut map: BTreeMap<String, Bytes>,
    ops: Vec<crate::kv::Op>,
) -> BTreeMap<String, Bytes> {
    for op in ops {
        match op {
            crate::kv::Op::Put { key, value } => {
                map.insert(key, value);
            }
            crate::kv::Op::Delete { key } => {
                map.remove(&key);
            }
        }
    }
    map
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]
    /// What an encoder's changes make of the store, state after state, is what `encode`
    /// gives for each state.
    #[test]
    fn an_encoders_changes_give_the_store_what_encode_gives(
        first in proptest::collection::vec(source_spec(), 1..10),
        steps in proptest::collection::vec(
            proptest::collection::vec((0usize..10, source_spec()), 0..3), 1..6),
    ) {
        let mut sources = first;
        let mut encoder = Encoder::default();
        let mut store = BTreeMap::new();
        let none = (Certificates::new(), CaBundles::new(), Credentials::new());
        for step in steps {
            let unchanged = step.is_empty();
            for (i, spec) in step {
                let i = i % sources.len();
                sources[i] = spec;
            }
            let model = sources_model(&sources);
            let ops = encoder.changes(&model, &none.0, &none.1, &none.2, BTreeMap::new());
            if unchanged && !store.is_empty() {
                proptest::prop_assert!(ops.is_empty(), "{:?}", ops);
            }
            store = applied(store, ops);
            proptest::prop_assert_eq!(&store, &encode(&model, &none.0, &none.1, &none.2));
        }
    }
}

#[test]
fn a_change_to_a_policys_options_or_precedence_alone_writes_its_fragment() {
    let sources = vec![Some((vec![(0, 1, true), (0, 2, true)], vec![])); 4];
    let model = sources_model(&sources);
    let none = (Certificates::new(), CaBundles::new(), Credentials::new());
    let mut encoder = Encoder::default();
    let mut stored = applied(
        BTreeMap::new(),
        encoder.changes(&model, &none.0, &none.1, &none.2, BTreeMap::new()),
    );
    let options = portico_model::PolicyOptions {
        upstream_host: Some("changed.test".into()),
        ..Default::default()
    };
    let changes: [&dyn Fn(&mut portico_model::L7Policy); 2] =
        [&|p| p.options = Some(Arc::new(options.clone())), &|p| {
            p.precedence += 1
        }];
    let mut model = model;
    for change in changes {
        let lb = &mut model.load_balancers[0];
        let policy = Arc::make_mut(&mut Arc::make_mut(&mut lb.listeners)[0].policies[1]);
        change(policy);
        let key = format!("desired/lb/{}/src/{}", lb.id, object_hash(&policy.source));
        let ops = encoder.changes(&model, &none.0, &none.1, &none.2, BTreeMap::new());
        assert_eq!(ops.iter().map(|op| op.key()).collect::<Vec<_>>(), [&key]);
        stored = applied(stored, ops);
        assert_eq!(stored, encode(&model, &none.0, &none.1, &none.2));
    }
}

#[test]
fn an_endpoint_change_hashes_and_writes_the_changed_pool_only() {
    let (_, model) = golden_models()
        .into_iter()
        .find(|(n, _)| n.ends_with("seed-simple-fanout"))
        .unwrap();
    let none = (Certificates::new(), CaBundles::new(), Credentials::new());
    let mut encoder = Encoder::default();
    let stored = applied(
        BTreeMap::new(),
        encoder.changes(&model, &none.0, &none.1, &none.2, BTreeMap::new()),
    );
    assert!(encoder.hashed() > 1);
    // As an endpoint change leaves it: the same listeners and other pools, one pool new.
    let mut changed = model.clone();
    let lb = &mut changed.load_balancers[0];
    let pool = Arc::make_mut(&mut lb.pools[0]);
    pool.members[0].ready = !pool.members[0].ready;
    let key = format!("desired/lb/{}/pool/{}", lb.id, pool.id);
    let ops = encoder.changes(&changed, &none.0, &none.1, &none.2, BTreeMap::new());
    assert_eq!(ops.iter().map(|op| op.key()).collect::<Vec<_>>(), [&key]);
    assert_eq!(encoder.hashed(), 1);
    assert_eq!(
        applied(stored.clone(), ops),
        encode(&changed, &none.0, &none.1, &none.2)
    );

    // A store read back: the next changes are the diff against it, whatever was written.
    let mut stale = stored;
    stale.insert("desired/cert/gone".into(), Bytes::from_static(b"{}"));
    encoder.assume(stale.clone());
    let ops = encoder.changes(&changed, &none.0, &none.1, &none.2, BTreeMap::new());
    assert_eq!(
        applied(stale, ops),
        encode(&changed, &none.0, &none.1, &none.2)
    );
}

/// Times, at 10,000 sources (40,000 policies) and 5,000 pools, a one-source change and an
/// endpoint change through the encoder and the decoder, against encoding everything (and
/// diffing) and assembling everything. `cargo test -p portico-store --release -- --ignored
/// --nocapture scale_timing`.
#[test]
#[ignore = "a measurement: run it on its own, in release"]
fn scale_timing() {
    use std::time::Instant;
    let template = (golden_models().into_iter())
        .find_map(|(_, m)| {
            m.load_balancers
                .iter()
                .find_map(|lb| lb.pools.first().cloned())
        })
        .unwrap();
    let sources: Vec<Option<SourceSpec>> =
        vec![Some((vec![(0, 1, true), (0, 2, true)], vec![])); 10_000];
    let mut model = sources_model(&sources);
    // Distinct hosts and paths, as Ingresses have: 5 sources per host.
    let lb = &mut model.load_balancers[0];
    for listener in Arc::make_mut(&mut lb.listeners) {
        for p in &mut listener.policies {
            let p = Arc::make_mut(p);
            let i: usize = p.source.name[4..].parse().unwrap();
            p.rules[0].value = format!("h{}.test", i / 5);
            p.rules[1].value = format!("/p{i}{}", p.rules[1].value);
        }
    }
    lb.pools = (0..5_000)
        .map(|i| {
            let mut pool = portico_model::Pool::clone(&template);
            pool.id = portico_model::PoolId::derive(&format!("pool-{i}"));
            Arc::new(pool)
        })
        .collect();
    let none = (Certificates::new(), CaBundles::new(), Credentials::new());
    let mut encoder = Encoder::default();
    let entries = encoder.encode(&model, &none.0, &none.1, &none.2);
    let mut hinted = Encoder::default();
    hinted.encode(&model, &none.0, &none.1, &none.2);
    let first = view(&entries, None, 1);
    let mut decoder = Decoder::default();
    let rss = resident_kib();
    let decoded = decoder.decode(&first);
    println!(
        "first decode: resident memory grew by {} KiB (the decoder and the state it handed out)",
        resident_kib() - rss
    );
    drop(decoded);

    // One source's path moved: new listeners, the same pools.
    let mut changed = model.clone();
    let listeners = Arc::make_mut(&mut changed.load_balancers[0].listeners);
    Arc::make_mut(&mut listeners[0].policies[17]).rules[1]
        .value
        .push_str("/moved");
    let t = Instant::now();
    let all = encode(&changed, &none.0, &none.1, &none.2);
    let diff = changes(&entries, &all);
    let full_encode = t.elapsed();
    let t = Instant::now();
    let ops = encoder.changes(&changed, &none.0, &none.1, &none.2, BTreeMap::new());
    let incremental_encode = t.elapsed();
    assert_eq!(ops, diff);
    // The same with the translation's hint: the moved policy's source and the others on its
    // host (5 in all).
    let (before, after) = (&model.load_balancers[0], &changed.load_balancers[0]);
    let mut hint = portico_model::RebuiltListeners::new(&before.listeners, &after.listeners);
    let moved: usize = after.listeners[0].policies[17].source.name[4..]
        .parse()
        .unwrap();
    let host = moved / 5 * 5;
    let named = (host..host + 5).map(|i| ObjectRef::new("Ingress", "default", &format!("ing-{i}")));
    hint.sources.extend(named);
    let rebuilt = portico_model::Rebuilt {
        load_balancers: std::collections::HashMap::from([(after.id, hint)]),
    };
    let desired = crate::Desired {
        model: Arc::new(changed.clone()),
        rebuilt,
        ..crate::Desired::default()
    };
    let t = Instant::now();
    let ops = hinted.desired_changes(&desired, BTreeMap::new());
    let hinted_encode = t.elapsed();
    assert_eq!(ops, diff);
    assert_eq!(hinted.hashed(), 5);
    let second = view(&all, Some(&first), 2);
    // The same change with the header written again too: a warm decoder assembles everything
    // (as every change did before the in-place assembly).
    let mut reassembling = Decoder::default();
    reassembling.decode(&first);
    let mut bumped = (*second.entries).clone();
    let header = format!("desired/lb/{}", model.load_balancers[0].id);
    bumped.get_mut(&header).unwrap().mod_revision = 2;
    let bumped = View {
        revision: 2,
        entries: Arc::new(bumped),
    };
    let t = Instant::now();
    let full = reassembling.decode(&bumped);
    let full_decode = t.elapsed();
    let t = Instant::now();
    let in_place = decoder.decode(&second);
    let in_place_decode = t.elapsed();
    assert_eq!(in_place.model, full.model);
    println!(
        "one-source change: encode+diff everything {full_encode:?}, encoder changes {incremental_encode:?} ({} hashed), \
         with the translation's hint {hinted_encode:?} (5 hashed); \
         warm decode assembling everything {full_decode:?}, decode in place {in_place_decode:?}",
        encoder.hashed()
    );

    // An endpoint change: the same listeners, one pool new.
    let mut endpoint = changed.clone();
    let pool = Arc::make_mut(&mut endpoint.load_balancers[0].pools[9]);
    pool.members.clear();
    let t = Instant::now();
    let diff = changes(&all, &encode(&endpoint, &none.0, &none.1, &none.2));
    let full_encode = t.elapsed();
    let t = Instant::now();
    let ops = encoder.changes(&endpoint, &none.0, &none.1, &none.2, BTreeMap::new());
    let incremental_encode = t.elapsed();
    assert_eq!(ops, diff);
    println!(
        "endpoint change: encode+diff everything {full_encode:?}, encoder changes {incremental_encode:?} ({} hashed)",
        encoder.hashed()
    );
}

/// This process's resident memory (`VmRSS`), in KiB; 0 where it cannot be read.
fn resident_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:"));
    let kib = line.and_then(|l| l.split_whitespace().nth(1));
    kib.and_then(|k| k.parse().ok()).unwrap_or(0)
}

/// The agent writes its cache from the state it decoded, encoded again, not from the values it
/// read (it does not keep them): that must be the bytes the controller wrote, key for key.
#[test]
fn a_decoded_state_encodes_again_to_the_values_it_was_read_from() {
    let authority = portico_tls::generate::Authority::new("test ca").unwrap();
    let issued = authority.issue(&["a.test"]).unwrap();
    let material =
        portico_tls::Material::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes())
            .unwrap();
    let certificates = Certificates::from([(
        ObjectRef::new("Secret", "default", "a-tls"),
        Arc::new(material),
    )]);
    let bundle = portico_tls::CaBundle::from_pem(authority.cert_pem().as_bytes()).unwrap();
    let ca_bundles = CaBundles::from([(
        ObjectRef::new("Secret", "default", "upstream-ca"),
        Arc::new(bundle),
    )]);
    let users = portico_model::Htpasswd::from_file("alice:bGVh02xkuGli2\n").unwrap();
    let credentials =
        Credentials::from([(ObjectRef::new("Secret", "shop", "users"), Arc::new(users))]);
    for (name, model) in golden_models() {
        let written = encode(&model, &certificates, &ca_bundles, &credentials);
        let desired = Decoder::default().decode(&view(&written, None, 1));
        assert!(
            desired.diagnostics.is_empty(),
            "{name}: {:?}",
            desired.diagnostics
        );
        let mut again = BTreeMap::new();
        encode_each(
            &desired.model,
            &desired.certificates,
            &desired.ca_bundles,
            &desired.credentials,
            |key, value| {
                let first = again.insert(key.to_owned(), Bytes::copy_from_slice(value));
                assert!(first.is_none(), "{name}: {key} twice");
            },
        );
        assert_eq!(again, written, "{name}");
        let counted = count(
            &desired.model,
            &desired.certificates,
            &desired.ca_bundles,
            &desired.credentials,
        );
        assert_eq!(counted, written.len(), "{name}");
    }
}

/// A fragment's policies share one copy of their source once read (as the translation's do),
/// rather than one each.
#[test]
fn the_policies_of_a_fragment_share_their_source_once_read() {
    let sources: Vec<Option<SourceSpec>> =
        vec![Some((vec![(0, 1, true), (0, 2, true)], vec![])); 3];
    let model = sources_model(&sources);
    let entries = encode(
        &model,
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    );
    let desired = Decoder::default().decode(&view(&entries, None, 1));
    let lb = &desired.model.load_balancers[0];
    let mut by_source: BTreeMap<&ObjectRef, *const ObjectRef> = BTreeMap::new();
    let mut policies = 0;
    for policy in lb.listeners.iter().flat_map(|l| &l.policies) {
        policies += 1;
        let first = by_source
            .entry(&policy.source)
            .or_insert(Arc::as_ptr(&policy.source));
        assert_eq!(*first, Arc::as_ptr(&policy.source), "{}", policy.source);
    }
    assert!(
        policies > by_source.len(),
        "{policies} policies, {} sources",
        by_source.len()
    );
}
