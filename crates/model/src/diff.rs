//! `diff(old, new) → changes`: the core operation between two model snapshots.

use crate::Model;
use serde::Serialize;
use std::collections::BTreeMap;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementKind {
    LoadBalancer,
    Listener,
    L7Policy,
    Pool,
    Member,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Updated,
}

/// One element that differs between two models.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Change {
    pub element: ElementKind,
    pub id: Uuid,
    pub kind: ChangeKind,
}

/// Flattens a model to `(kind, id) → JSON` so every element compares on its own fields only.
fn flatten(model: &Model) -> BTreeMap<(ElementKind, Uuid), serde_json::Value> {
    let mut out = BTreeMap::new();
    let mut put = |kind, id, v: serde_json::Value| {
        out.insert((kind, id), v);
    };
    for lb in &model.load_balancers {
        let mut shell = lb.clone();
        shell.listeners = Default::default();
        shell.pools.clear();
        put(ElementKind::LoadBalancer, lb.id.0, json(&shell));
        for l in lb.listeners.iter() {
            let mut shell = l.clone();
            shell.policies.clear();
            put(ElementKind::Listener, l.id.0, json(&shell));
            for p in &l.policies {
                put(ElementKind::L7Policy, p.id.0, json(p));
            }
        }
        for pool in &lb.pools {
            let mut shell = crate::Pool::clone(pool);
            shell.members.clear();
            put(ElementKind::Pool, pool.id.0, json(&shell));
            for m in &pool.members {
                put(ElementKind::Member, m.id.0, json(m));
            }
        }
    }
    out
}

fn json<T: Serialize>(v: &T) -> serde_json::Value {
    // Model types serialize infallibly (no maps with non-string keys, no custom serializers).
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// The elements added, removed or updated from `old` to `new`, ordered by kind then id.
pub fn diff(old: &Model, new: &Model) -> Vec<Change> {
    let (a, b) = (flatten(old), flatten(new));
    let mut changes = Vec::new();
    for (key, va) in &a {
        match b.get(key) {
            None => changes.push(change(*key, ChangeKind::Removed)),
            Some(vb) if vb != va => changes.push(change(*key, ChangeKind::Updated)),
            Some(_) => {}
        }
    }
    for key in b.keys().filter(|k| !a.contains_key(k)) {
        changes.push(change(*key, ChangeKind::Added));
    }
    changes.sort();
    changes
}

fn change((element, id): (ElementKind, Uuid), kind: ChangeKind) -> Change {
    Change { element, id, kind }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    fn model_with_member(ready: bool) -> Model {
        let pool = PoolId::derive("pool");
        Model {
            load_balancers: vec![LoadBalancer {
                id: LoadBalancerId::derive("lb"),
                name: "lb".into(),
                origin: crate::ObjectRef::new("IngressClass", "", "portico"),
                provider: "proxy".into(),
                vip: None,
                floating_ip: None,
                listeners: Default::default(),
                pools: vec![std::sync::Arc::new(Pool {
                    id: pool,
                    name: "default_web_80".into(),
                    service: ObjectRef::new("Service", "default", "web"),
                    service_port: "80".into(),
                    algorithm: Algorithm::RoundRobin,
                    settings: Default::default(),
                    protocol: PoolProtocol::Http,
                    members: vec![Member {
                        id: MemberId::derive("m"),
                        address: [10, 0, 0, 1].into(),
                        port: 80,
                        weight: 1,
                        ready,
                    }],
                })],
            }],
        }
    }

    #[test]
    fn identical_models_have_no_changes() {
        assert!(diff(&model_with_member(true), &model_with_member(true)).is_empty());
    }

    #[test]
    fn member_readiness_change_is_one_member_update() {
        let changes = diff(&model_with_member(true), &model_with_member(false));
        assert_eq!(
            changes,
            vec![Change {
                element: ElementKind::Member,
                id: MemberId::derive("m").0,
                kind: ChangeKind::Updated
            }]
        );
    }

    #[test]
    fn everything_is_added_from_empty() {
        let changes = diff(&Model::default(), &model_with_member(true));
        assert_eq!(changes.len(), 3);
        assert!(changes.iter().all(|c| c.kind == ChangeKind::Added));
    }
}
