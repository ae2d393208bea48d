//! The encoder with the translation's hint of the sources it rebuilt ([`Rebuilt`]).

#![allow(clippy::unwrap_used)]

use super::tests::{SourceSpec, applied, source_spec, sources_model};
use super::*;
use crate::{CaBundles, Certificates, Desired};
use portico_model::{Credentials, Model, ObjectRef, Rebuilt, RebuiltListeners};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

fn source(i: usize) -> ObjectRef {
    ObjectRef::new("Ingress", "default", &format!("ing-{i}"))
}

/// `model` as desired, with a hint naming `sources` as what changed since `before`.
fn hinted(before: &Model, model: Model, sources: impl IntoIterator<Item = usize>) -> Desired {
    let (from, to) = (&before.load_balancers[0], &model.load_balancers[0]);
    let mut hint = RebuiltListeners::new(&from.listeners, &to.listeners);
    hint.sources.extend(sources.into_iter().map(source));
    let rebuilt = Rebuilt {
        load_balancers: HashMap::from([(to.id, hint)]),
    };
    Desired {
        model: Arc::new(model),
        rebuilt,
        ..Desired::default()
    }
}

fn everything(model: &Model) -> BTreeMap<String, bytes::Bytes> {
    encode(
        model,
        &Certificates::new(),
        &CaBundles::new(),
        &Credentials::new(),
    )
}

#[test]
fn a_hint_limits_the_hashing_to_the_sources_it_names() {
    let mut specs: Vec<Option<SourceSpec>> = vec![Some((vec![(0, 1, true)], vec![0])); 50];
    let first = sources_model(&specs);
    let mut encoder = Encoder::default();
    let whole = Desired {
        model: Arc::new(first.clone()),
        ..Desired::default()
    };
    let mut store = applied(
        BTreeMap::new(),
        encoder.desired_changes(&whole, BTreeMap::new()),
    );
    assert_eq!(encoder.hashed(), 50);

    specs[7] = Some((vec![(1, 2, false)], vec![]));
    specs[9] = None;
    let desired = hinted(&first, sources_model(&specs), [7, 9, 11]);
    let ops = encoder.desired_changes(&desired, BTreeMap::new());
    assert_eq!(encoder.hashed(), 2, "7 and 11 hashed, 9 is gone");
    let keys: Vec<&str> = ops.iter().map(|op| op.key()).collect();
    assert_eq!(keys.len(), 2, "7 put, 9 deleted: {keys:?}");
    store = applied(store, ops);
    assert_eq!(store, everything(&desired.model));

    // A hint from other listeners than the ones last written is not taken.
    specs[3] = None;
    let stale = hinted(&first, sources_model(&specs), []);
    let ops = encoder.desired_changes(&stale, BTreeMap::new());
    assert_eq!(encoder.hashed(), 48);
    assert_eq!(applied(store, ops), everything(&stale.model));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]
    /// With a hint naming the sources each step changed (and others that did not change), what
    /// the encoder's changes make of the store is what `encode` gives for each state.
    #[test]
    fn an_encoder_taking_hints_gives_the_store_what_encode_gives(
        first in proptest::collection::vec(source_spec(), 1..10),
        steps in proptest::collection::vec(
            proptest::collection::vec((0usize..10, source_spec()), 0..3), 1..6),
        extra in proptest::collection::vec(0usize..10, 0..3),
    ) {
        let mut sources = first;
        let mut encoder = Encoder::default();
        let mut model = sources_model(&sources);
        let whole = Desired { model: Arc::new(model.clone()), ..Desired::default() };
        let mut store = applied(BTreeMap::new(), encoder.desired_changes(&whole, BTreeMap::new()));
        for step in steps {
            let mut named = extra.clone();
            for (i, spec) in step {
                let i = i % sources.len();
                sources[i] = spec;
                named.push(i);
            }
            let next = sources_model(&sources);
            let desired = hinted(&model, next.clone(), named);
            store = applied(store, encoder.desired_changes(&desired, BTreeMap::new()));
            proptest::prop_assert_eq!(&store, &everything(&next));
            model = next;
        }
    }
}
