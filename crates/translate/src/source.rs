//! A served Ingress with its identity and age: the unit merging and precedence work on.

use crate::ObjectKey;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use portico_model::ObjectRef;

/// Older first: by creationTimestamp (a missing one counts as newest), then namespace/name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Age {
    missing: bool,
    created: Option<Time>,
    key: ObjectKey,
}

#[derive(Debug)]
pub(crate) struct Source<'a> {
    pub key: &'a ObjectKey,
    pub ingress: &'a Ingress,
    pub object: ObjectRef,
    pub age: Age,
}

impl<'a> Source<'a> {
    pub(crate) fn new(key: &'a ObjectKey, ingress: &'a Ingress) -> Self {
        let created = ingress.metadata.creation_timestamp.clone();
        Source {
            key,
            ingress,
            object: ObjectRef::new("Ingress", &key.namespace, &key.name),
            age: Age {
                missing: created.is_none(),
                created,
                key: key.clone(),
            },
        }
    }
}

/// Sorts sources oldest first.
pub(crate) fn by_age(sources: &mut [Source<'_>]) {
    sources.sort_by(|a, b| a.age.cmp(&b.age));
}
