//! Pure: what the watchers have seen, kept as the [`Objects`] the translator reads.
//!
//! Each kind's watcher feeds [`State`] with live changes ([`State::apply`], [`State::delete`])
//! and with whole relists ([`State::relisted`]): a relist (the first list, a watch that could
//! not resume, a 410 Gone) is collected apart by the watcher task and swapped in at once when
//! complete, so the objects served never have a gap and nothing is counted twice.
//!
//! Secrets are kept only while referenced ([`portico_translate::referenced_secrets`]): a Secret
//! event for an unreferenced Secret is dropped. When an Ingress starts to name a Secret that is
//! not kept, the source fetches it ([`State::fetch_done`]); a per-Secret event counter makes a
//! fetch that raced with a watch event lose to the event, which is newer.

use crate::kinds::{GatewayApi, Kind, Watched, same_meta_for_serving, slim, slim_meta};
use kube::api::DynamicObject;
use portico_translate::{Config, ObjectKey, Objects, referenced_secrets};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// What a change asks of the source besides publishing.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Effects {
    /// The objects changed: publish a new snapshot (once every kind is synced).
    pub changed: bool,
    /// Secrets to fetch, with the event count each had when the fetch was decided.
    pub fetch: Vec<(ObjectKey, u64)>,
}

#[derive(Debug)]
pub(crate) struct State {
    objects: Objects,
    config: Config,
    /// Kinds whose first list has completed.
    synced: BTreeSet<Kind>,
    /// Secrets named by owned Ingresses (and `--default-certificate`).
    referenced: BTreeSet<ObjectKey>,
    /// Live watch events seen per Secret that is referenced or being fetched.
    secret_events: HashMap<ObjectKey, u64>,
    /// Referenced Secrets known not to exist (fetched: 404, or deleted).
    missing: HashSet<ObjectKey>,
    /// Referenced Secrets being fetched.
    fetching: HashSet<ObjectKey>,
}

impl State {
    pub fn new(config: Config) -> Self {
        State {
            objects: Objects::default(),
            config,
            synced: BTreeSet::new(),
            referenced: BTreeSet::new(),
            secret_events: HashMap::new(),
            missing: HashSet::new(),
            fetching: HashSet::new(),
        }
    }

    /// True once every kind has been listed.
    pub fn synced(&self) -> bool {
        Kind::ALL.iter().all(|k| self.synced.contains(k))
    }

    /// The objects as they are now (shared: a copy of maps of `Arc`s).
    pub fn objects(&self) -> Objects {
        self.objects.clone()
    }

    /// Whether a Secret is kept in memory.
    fn keeps<K: Watched>(&self, key: &K::Key) -> bool {
        K::secret(key).is_none_or(|k| self.referenced.contains(k))
    }

    /// An added or modified object. One that differs from the known one only in its status or
    /// resource version (`Watched::same_for_serving`) is no change: the known object stays,
    /// shared with the snapshot already published, and what changed is noted beside it
    /// (`Watched::note_status`) for the next snapshot, whose status report then sees what was
    /// written.
    pub fn apply<K: Watched>(&mut self, object: K) -> Effects {
        let object = slim(object);
        let key = object.key();
        self.secret_event::<K>(&key, false);
        let changed = if self.keeps::<K>(&key) {
            let object = object.store();
            let map = K::map(&mut self.objects);
            let same = (map.get(&key)).is_some_and(|old| K::same_for_serving(old, &object));
            if same {
                K::note_status(&mut self.objects, &key, object);
            } else {
                Arc::make_mut(map).insert(key.clone(), Arc::new(object));
                K::forget_status(&mut self.objects, &key);
            }
            !same
        } else {
            remove::<K>(&mut self.objects, &key)
        };
        self.after::<K>(changed)
    }

    /// A Gateway API object as the watch delivers it (its metadata decoded, the rest JSON),
    /// taken as the echo of a status write when the kept object has the same metadata but for
    /// the resource version and managed fields: its `generation` included (the API server
    /// bumps it on every change of the spec), its labels and annotations. Then only its status
    /// is decoded, and the kept object takes it and the new resource version without being a
    /// change, as [`State::apply`] keeps a status-only update: at 10,000 routes each write
    /// came back to be decoded whole and compared. `api_version` is the version it was read
    /// in. `Err` gives the object back when it is not an echo (or has no generation, or its
    /// status does not decode): decode it whole and [`State::apply`] it.
    pub fn echo<K: GatewayApi>(
        &mut self,
        api_version: &str,
        mut object: DynamicObject,
    ) -> Result<Effects, Box<DynamicObject>> {
        slim_meta(&mut object.metadata);
        let key = K::key_of(&object.metadata);
        let held = K::map(&mut self.objects).get(&key);
        let echo = held.is_some_and(|held| {
            object.metadata.generation.is_some()
                && held.read_in() == api_version
                && same_meta_for_serving(held.meta(), &object.metadata)
        });
        if !echo {
            return Err(Box::new(object));
        }
        let status = match object.data.get("status") {
            None | Some(serde_json::Value::Null) => None,
            Some(status) => match K::Status::deserialize(status) {
                Ok(status) => Some(status),
                Err(_) => return Err(Box::new(object)),
            },
        };
        // Changed in place; copied only while a published snapshot shares it.
        let map = Arc::make_mut(K::map(&mut self.objects));
        if let Some(held) = map.get_mut(&key) {
            let held = Arc::make_mut(held);
            *held.meta_mut() = object.metadata;
            held.set_status(status);
        }
        Ok(self.after::<K>(false))
    }

    /// A deleted object.
    pub fn delete<K: Watched>(&mut self, object: &K) -> Effects {
        let key = object.key();
        self.secret_event::<K>(&key, true);
        let changed = remove::<K>(&mut self.objects, &key);
        self.after::<K>(changed)
    }

    /// A complete list of the kind (the first one, or a relist): it replaces what was known.
    pub fn relisted<K: Watched>(&mut self, objects: Vec<K>) -> Effects {
        let mut map = BTreeMap::new();
        for object in objects {
            let key = object.key();
            if self.keeps::<K>(&key) {
                map.insert(key, Arc::new(slim(object).store()));
            }
        }
        if K::KIND == Kind::Secret {
            // The list is the truth now: Secrets named but absent are fetched again, in case
            // the list was taken before they were named.
            self.missing.clear();
        }
        *K::map(&mut self.objects) = Arc::new(map);
        K::forget_statuses(&mut self.objects);
        self.synced.insert(K::KIND);
        self.after::<K>(true)
    }

    /// A fetch of Secret `key`, decided when it had seen `events` watch events, came back.
    pub fn fetch_done(
        &mut self,
        key: &ObjectKey,
        events: u64,
        secret: Option<k8s_openapi::api::core::v1::Secret>,
    ) -> Effects {
        self.fetching.remove(key);
        if !self.referenced.contains(key) {
            self.secret_events.remove(key);
            return Effects::default();
        }
        let raced = self.secret_events.get(key).copied().unwrap_or(0) != events;
        if raced {
            // A watch event since the fetch was decided is newer than what the fetch read. If
            // that event did not leave the Secret kept (it came while the Secret was not
            // referenced), read it again.
            return Effects {
                changed: false,
                fetch: self.start_fetches(),
            };
        }
        match secret {
            Some(secret) => {
                Arc::make_mut(&mut self.objects.secrets).insert(key.clone(), Arc::new(secret));
                Effects {
                    changed: true,
                    fetch: vec![],
                }
            }
            None => {
                self.missing.insert(key.clone());
                Effects::default()
            }
        }
    }

    /// A fetch failed (not a 404): it is tried again at the next change of what is named.
    pub fn fetch_failed(&mut self, key: &ObjectKey) {
        self.fetching.remove(key);
    }

    fn secret_event<K: Watched>(&mut self, key: &K::Key, deleted: bool) {
        if let Some(key) = K::secret(key) {
            if self.referenced.contains(key) || self.fetching.contains(key) {
                *self.secret_events.entry(key.clone()).or_default() += 1;
            }
            if deleted {
                if self.referenced.contains(key) {
                    self.missing.insert(key.clone());
                }
            } else {
                self.missing.remove(key);
            }
        }
    }

    fn after<K: Watched>(&mut self, changed: bool) -> Effects {
        let mut effects = Effects {
            changed,
            fetch: vec![],
        };
        if K::KIND.names_secrets() && changed {
            self.referenced = referenced_secrets(&self.objects, &self.config);
            let referenced = &self.referenced;
            // The map is copied (when shared) only if a Secret is dropped.
            if self.objects.secrets.keys().any(|k| !referenced.contains(k)) {
                Arc::make_mut(&mut self.objects.secrets).retain(|k, _| referenced.contains(k));
                effects.changed = true;
            }
            self.missing.retain(|k| referenced.contains(k));
            // Counters live while a Secret is referenced or being fetched, so that a fetch in
            // flight still sees every event that came after it was decided.
            let fetching = &self.fetching;
            (self.secret_events).retain(|k, _| referenced.contains(k) || fetching.contains(k));
        }
        // Only after a change of what names Secrets, or a Secret event: the echo of each
        // Ingress status write looked up every referenced Secret three times (at 10,000
        // Ingresses and 1,000 Secrets, a third of the leader's CPU while it wrote status).
        if self.synced.contains(&Kind::Secret)
            && ((K::KIND.names_secrets() && changed) || K::KIND == Kind::Secret)
        {
            effects.fetch = self.start_fetches();
        }
        effects
    }

    /// Referenced Secrets neither kept, known missing nor being fetched.
    fn start_fetches(&mut self) -> Vec<(ObjectKey, u64)> {
        let mut fetch = Vec::new();
        for key in &self.referenced {
            if self.objects.secrets.contains_key(key)
                || self.missing.contains(key)
                || self.fetching.contains(key)
            {
                continue;
            }
            let events = self.secret_events.get(key).copied().unwrap_or(0);
            fetch.push((key.clone(), events));
        }
        for (key, _) in &fetch {
            self.fetching.insert(key.clone());
        }
        fetch
    }
}

/// Removes `key` from its kind's map; whether it was there. A map shared with a published
/// snapshot is copied only when something is removed (an event for a Secret not kept, or a
/// delete of an object never seen, changes nothing).
fn remove<K: Watched>(objects: &mut Objects, key: &K::Key) -> bool {
    let map = K::map(objects);
    let removed = map.contains_key(key) && Arc::make_mut(map).remove(key).is_some();
    if removed {
        K::forget_status(objects, key);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Secret, Service};
    use k8s_openapi::api::networking::v1::{Ingress, IngressClass, IngressSpec, IngressTLS};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use portico_translate::KeptIngress;

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        }
    }

    fn ingress(name: &str, class: &str, secret: &str) -> Ingress {
        Ingress {
            metadata: meta("ns", name),
            spec: Some(IngressSpec {
                ingress_class_name: Some(class.into()),
                tls: Some(vec![IngressTLS {
                    secret_name: Some(secret.into()),
                    hosts: None,
                }]),
                ..IngressSpec::default()
            }),
            ..Ingress::default()
        }
    }

    fn secret(name: &str, value: &str) -> Secret {
        Secret {
            metadata: meta("ns", name),
            string_data: Some([("v".to_owned(), value.to_owned())].into()),
            ..Secret::default()
        }
    }

    fn service(name: &str) -> Service {
        Service {
            metadata: meta("ns", name),
            ..Service::default()
        }
    }

    fn kept(state: &State) -> Vec<String> {
        state
            .objects
            .secrets
            .keys()
            .map(|k| k.to_string())
            .collect()
    }

    /// A state with every kind listed (empty).
    fn synced() -> State {
        let mut state = State::new(Config::default());
        state.relisted::<Ingress>(vec![]);
        state.relisted::<k8s_openapi::api::networking::v1::IngressClass>(vec![]);
        state.relisted::<Service>(vec![]);
        state.relisted::<k8s_openapi::api::discovery::v1::EndpointSlice>(vec![]);
        state.relisted::<Secret>(vec![]);
        state.relisted::<portico_gateway::GatewayClass>(vec![]);
        state.relisted::<portico_gateway::Gateway>(vec![]);
        state.relisted::<portico_gateway::HttpRoute>(vec![]);
        state.relisted::<portico_gateway::ReferenceGrant>(vec![]);
        state.relisted::<portico_gateway::TcpRoute>(vec![]);
        state.relisted::<portico_gateway::UdpRoute>(vec![]);
        state.relisted::<portico_gateway::TlsRoute>(vec![]);
        state.relisted::<portico_gateway::GrpcRoute>(vec![]);
        state.relisted::<portico_gateway::ListenerSet>(vec![]);
        state.relisted::<k8s_openapi::api::core::v1::Namespace>(vec![]);
        state
    }

    /// `ingress` as the API server sends it back after a status write.
    fn with_status(mut ingress: Ingress, ip: &str, version: &str) -> Ingress {
        use k8s_openapi::api::networking::v1::{
            IngressLoadBalancerIngress, IngressLoadBalancerStatus, IngressStatus,
        };
        ingress.metadata.resource_version = Some(version.into());
        ingress.status = Some(IngressStatus {
            load_balancer: Some(IngressLoadBalancerStatus {
                ingress: Some(vec![IngressLoadBalancerIngress {
                    ip: Some(ip.into()),
                    ..IngressLoadBalancerIngress::default()
                }]),
            }),
        });
        ingress
    }

    #[test]
    fn a_status_or_version_only_update_is_kept_without_a_change() {
        let mut state = synced();
        assert!(state.apply(ingress("web", "portico", "tls")).changed);
        let published = state.objects().ingresses.values().next().cloned().unwrap();
        let written = with_status(ingress("web", "portico", "tls"), "10.0.0.1", "7");
        assert!(!state.apply(written.clone()).changed);
        // The published object stays; the next snapshot carries what was written beside it.
        let objects = state.objects();
        let (key, kept) = objects.ingresses.iter().next().unwrap();
        assert!(Arc::ptr_eq(kept, &published));
        let (version, status) = objects.ingress_status(key, kept);
        assert_eq!(version, written.metadata.resource_version.as_ref());
        assert_eq!(status, written.status.as_ref());
        let mut service_written = service("lb");
        assert!(state.apply(service_written.clone()).changed);
        service_written.metadata.resource_version = Some("9".into());
        service_written.status = Some(Default::default());
        assert!(!state.apply(service_written.clone()).changed);
        let objects = state.objects();
        let (key, kept) = objects.services.iter().next().unwrap();
        let (version, status) = objects.service_status(key, kept);
        assert_eq!(version.map(String::as_str), Some("9"));
        assert_eq!(status, service_written.status.as_ref());
        // What is served from is a change: the spec, an annotation. The new object carries its
        // own status, and the note is forgotten.
        let moved = with_status(ingress("web", "other", "tls"), "10.0.0.2", "8");
        assert!(state.apply(moved.clone()).changed);
        let objects = state.objects();
        assert!(objects.ingress_seen.is_empty());
        let (key, kept) = objects.ingresses.iter().next().unwrap();
        assert_eq!(**kept, KeptIngress::from(moved.clone()));
        assert_eq!(objects.ingress_status(key, kept).1, moved.status.as_ref());
        let mut annotated = with_status(ingress("web", "other", "tls"), "10.0.0.1", "9");
        annotated.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
        assert!(state.apply(annotated.clone()).changed);
        // A delete and a relist forget the notes too.
        assert!(!state.objects().service_seen.is_empty());
        assert!(state.delete(&service("lb")).changed);
        assert!(state.objects().service_seen.is_empty());
        let rewritten = with_status(annotated, "10.0.0.3", "10");
        assert!(!state.apply(rewritten).changed);
        assert!(!state.objects().ingress_seen.is_empty());
        state.relisted(vec![ingress("web", "other", "tls")]);
        assert!(state.objects().ingress_seen.is_empty());
    }

    #[test]
    fn a_gateway_api_status_update_replaces_the_kept_object_without_a_change() {
        let route = |generation: i64, version: &str, status: serde_json::Value| {
            let route = serde_json::json!({"metadata": {"namespace": "ns", "name": "r",
                "generation": generation, "resourceVersion": version},
                "spec": {"hostnames": ["a.example"]}, "status": status});
            serde_json::from_value::<portico_gateway::HttpRoute>(route).unwrap()
        };
        let mut state = synced();
        assert!(state.apply(route(1, "1", serde_json::json!(null))).changed);
        let written = route(1, "2", serde_json::json!({"parents": []}));
        assert!(!state.apply(written.clone()).changed, "our write's echo");
        let kept = only_route(&state);
        assert_eq!(*kept, written, "kept with its status, for the next report");
        let mut changed = route(2, "3", serde_json::json!({"parents": []}));
        changed.spec.hostnames = vec!["b.example".into()];
        assert!(state.apply(changed.clone()).changed);
        // Metadata besides the resource version is compared too: a label or an annotation
        // (a ListenerSet selects by labels; the translation reads annotations).
        let mut labelled = changed.clone();
        labelled.metadata.resource_version = Some("4".into());
        labelled.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        assert!(state.apply(labelled.clone()).changed, "a label");
        let mut annotated = labelled;
        annotated.metadata.resource_version = Some("5".into());
        annotated.metadata.annotations = Some([("x".to_owned(), "1".to_owned())].into());
        assert!(state.apply(annotated).changed, "an annotation");
    }

    /// The one HTTPRoute `state` keeps.
    fn only_route(state: &State) -> Arc<portico_gateway::HttpRoute> {
        let routes = state.objects().http_routes.clone();
        routes.values().next().cloned().unwrap()
    }

    /// An HTTPRoute as the watch delivers it: a dynamic object.
    fn dynamic(route: serde_json::Value) -> DynamicObject {
        serde_json::from_value(route).unwrap()
    }

    #[test]
    fn a_status_echo_is_taken_without_decoding_the_route_and_a_real_change_is_not() {
        use portico_gateway::HttpRoute;
        use serde_json::json;
        const V1: &str = "gateway.networking.k8s.io/v1";
        let route = |generation: i64, version: &str, status: serde_json::Value| {
            json!({"apiVersion": V1, "kind": "HTTPRoute", "metadata": {"namespace": "ns",
                "name": "r", "generation": generation, "resourceVersion": version,
                "labels": {"team": "a"}, "annotations": {"x": "1"}},
                "spec": {"hostnames": ["a.example"]}, "status": status})
        };
        let decoded =
            |route: serde_json::Value| serde_json::from_value::<HttpRoute>(route).unwrap();
        let parents = json!({"parents": [{"parentRef": {"name": "gw"},
            "controllerName": "portico.dev/gateway-controller", "conditions": []}]});
        let mut state = synced();
        // Not kept yet: not an echo.
        let first = route(1, "1", json!(null));
        assert!(state.echo::<HttpRoute>(V1, dynamic(first.clone())).is_err());
        assert!(state.apply(decoded(first)).changed);
        let published = state.objects();
        // Our write comes back: same generation, labels and annotations. Taken as an echo,
        // no change; the kept route has the status and resource version written, for the
        // next report, and the published snapshot keeps its own.
        let mut written = route(1, "2", parents.clone());
        written["metadata"]["managedFields"] = json!([{"manager": "portico"}]);
        let effects = state.echo::<HttpRoute>(V1, dynamic(written)).unwrap();
        assert_eq!(effects, Effects::default());
        let kept = only_route(&state);
        assert_eq!(*kept, decoded(route(1, "2", parents.clone())));
        assert_eq!(published.http_routes.values().next().unwrap().status, None);
        // A change the echo would hide is not one: each is given back, to be decoded whole.
        let not_echo = |state: &mut State, changed: serde_json::Value| {
            state.echo::<HttpRoute>(V1, dynamic(changed)).is_err()
        };
        let mut spec = route(2, "3", parents.clone());
        spec["spec"]["hostnames"] = json!(["b.example"]);
        assert!(not_echo(&mut state, spec), "a new generation");
        let mut labels = route(1, "3", parents.clone());
        labels["metadata"]["labels"] = json!({"team": "b"});
        assert!(not_echo(&mut state, labels), "a label");
        let mut annotations = route(1, "3", parents.clone());
        annotations["metadata"]["annotations"] = json!({"x": "2"});
        assert!(not_echo(&mut state, annotations), "an annotation");
        let mut no_generation = route(1, "3", parents.clone());
        no_generation["metadata"]["generation"] = json!(null);
        assert!(
            not_echo(&mut state, no_generation),
            "no generation to trust"
        );
        let beta = "gateway.networking.k8s.io/v1beta1";
        let in_beta = state.echo::<HttpRoute>(beta, dynamic(route(1, "3", parents.clone())));
        assert!(in_beta.is_err(), "read in another version");
        let bad = route(1, "3", json!({"parents": "many"}));
        assert!(not_echo(&mut state, bad), "a status that does not decode");
        // kubectl's copy of the object is dropped before comparing, as when kept.
        let mut applied = route(1, "4", json!(null));
        let last = "kubectl.kubernetes.io/last-applied-configuration";
        applied["metadata"]["annotations"][last] = json!("{}");
        assert!(state.echo::<HttpRoute>(V1, dynamic(applied)).is_ok());
        let kept = only_route(&state);
        assert_eq!(kept.status, None, "the status removed");
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("4"));
    }

    #[test]
    fn managed_fields_and_the_last_applied_copy_are_not_kept() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        fn fatten(meta: &mut ObjectMeta) {
            meta.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                ..ManagedFieldsEntry::default()
            }]);
            let last = (
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                "{}".into(),
            );
            let own = ("portico.dev/ssl-redirect".to_owned(), "false".to_owned());
            meta.annotations = Some([last, own].into());
        }
        let fat = |mut ingress: Ingress| {
            fatten(&mut ingress.metadata);
            ingress
        };
        let mut state = synced();
        state.apply(fat(ingress("web", "portico", "tls")));
        state.relisted(vec![fat(ingress("api", "portico", "tls"))]);
        state.apply(fat(ingress("web", "portico", "tls")));
        let objects = state.objects();
        assert_eq!(objects.ingresses.len(), 2);
        // The kept Ingress has no managed fields to keep.
        for (key, kept) in objects.ingresses.iter() {
            let annotations = kept.metadata.annotations.clone().unwrap_or_default();
            let keys: Vec<_> = annotations.keys().map(String::as_str).collect();
            assert_eq!(keys, ["portico.dev/ssl-redirect"], "{key}");
        }
        // A kind kept whole: an IngressClass.
        let mut class = IngressClass::default();
        class.metadata.name = Some("portico".into());
        fatten(&mut class.metadata);
        state.apply(class);
        let objects = state.objects();
        let kept = objects.ingress_classes.values().next().unwrap();
        assert_eq!(kept.metadata.managed_fields, None);
        let annotations = kept.metadata.annotations.clone().unwrap_or_default();
        let keys: Vec<_> = annotations.keys().map(String::as_str).collect();
        assert_eq!(keys, ["portico.dev/ssl-redirect"]);
    }

    #[test]
    fn nothing_is_synced_until_every_kind_is_listed() {
        let mut state = State::new(Config::default());
        state.relisted::<Ingress>(vec![]);
        state.relisted::<Service>(vec![]);
        assert!(!state.synced());
        assert!(synced().synced());
    }

    #[test]
    fn a_relist_replaces_the_kind_whole() {
        let mut state = synced();
        state.apply(service("a"));
        state.apply(service("b"));
        // While the watch was down, b was deleted and c created: the relist says a and c.
        state.relisted(vec![service("a"), service("c")]);
        let names: Vec<_> = state
            .objects()
            .services
            .keys()
            .map(|k| k.name.clone())
            .collect();
        assert_eq!(names, ["a", "c"]);
        assert!(state.delete(&service("c")).changed);
        assert!(
            !state.delete(&service("c")).changed,
            "deleting twice changes nothing"
        );
    }

    #[test]
    fn only_secrets_named_by_owned_ingresses_are_kept() {
        let mut state = synced();
        assert_eq!(state.apply(secret("unused", "x")), Effects::default());
        state.apply(ingress("theirs", "nginx", "theirs-tls"));
        state.apply(secret("theirs-tls", "x"));
        assert!(kept(&state).is_empty());
        // An owned Ingress names a Secret not kept: it is fetched.
        let effects = state.apply(ingress("ours", "portico", "tls"));
        assert_eq!(effects.fetch, [(ObjectKey::new("ns", "tls"), 0)]);
        // Asking again while the fetch runs fetches nothing more.
        assert!(state.apply(service("s")).fetch.is_empty());
        assert!(
            state
                .apply(ingress("ours", "portico", "tls"))
                .fetch
                .is_empty()
        );
        assert!(
            state
                .fetch_done(&ObjectKey::new("ns", "tls"), 0, Some(secret("tls", "1")))
                .changed
        );
        assert_eq!(kept(&state), ["ns/tls"]);
        // Updates of a kept Secret are applied; when no Ingress names it, it is dropped.
        assert!(state.apply(secret("tls", "2")).changed);
        let effects = state.apply(ingress("ours", "portico", "other-tls"));
        assert!(effects.changed);
        assert!(kept(&state).is_empty());
        assert_eq!(effects.fetch, [(ObjectKey::new("ns", "other-tls"), 0)]);
    }

    #[test]
    fn a_fetch_that_raced_with_a_watch_event_loses_to_the_event() {
        let mut state = synced();
        let key = ObjectKey::new("ns", "tls");
        let fetch = state.apply(ingress("ours", "portico", "tls")).fetch;
        assert_eq!(fetch, [(key.clone(), 0)]);
        // The watch delivers the Secret (newer), then the fetch returns an older copy.
        state.apply(secret("tls", "new"));
        assert!(
            !state
                .fetch_done(&key, 0, Some(secret("tls", "old")))
                .changed
        );
        let kept = &state.objects().secrets[&key];
        assert_eq!(kept.string_data.as_ref().unwrap()["v"], "new");
        // A delete between the decision and the answer wins too.
        state.delete(&secret("tls", "new"));
        assert!(state.objects().secrets.is_empty());
        assert!(
            state
                .apply(ingress("ours", "portico", "tls"))
                .fetch
                .is_empty(),
            "known missing"
        );
    }

    #[test]
    fn a_fetch_outrun_by_an_event_while_unreferenced_is_read_again() {
        let mut state = synced();
        let key = ObjectKey::new("ns", "tls");
        assert_eq!(
            state.apply(ingress("ours", "portico", "tls")).fetch,
            [(key.clone(), 0)]
        );
        // While the GET is in flight: the Secret stops being named, changes, is named again.
        state.apply(ingress("ours", "portico", "other"));
        state.apply(secret("tls", "new"));
        assert!(
            state
                .apply(ingress("ours", "portico", "tls"))
                .fetch
                .is_empty(),
            "in flight"
        );
        // The answer may predate the change: it is dropped and the Secret read again.
        let effects = state.fetch_done(&key, 0, Some(secret("tls", "old")));
        assert!(!effects.changed);
        assert_eq!(effects.fetch, [(key.clone(), 1)]);
        assert!(
            state
                .fetch_done(&key, 1, Some(secret("tls", "new")))
                .changed
        );
        let kept = &state.objects().secrets[&key];
        assert_eq!(kept.string_data.as_ref().unwrap()["v"], "new");
    }

    #[test]
    fn counters_are_kept_only_for_referenced_or_fetched_secrets() {
        let mut state = synced();
        for i in 0..100 {
            state.apply(secret(&format!("unused-{i}"), "x"));
        }
        assert!(state.secret_events.is_empty());
    }

    #[test]
    fn a_missing_secret_is_not_fetched_again_until_it_appears_or_a_relist() {
        let mut state = synced();
        let key = ObjectKey::new("ns", "tls");
        state.apply(ingress("ours", "portico", "tls"));
        assert!(!state.fetch_done(&key, 0, None).changed);
        assert!(
            state
                .apply(ingress("ours2", "portico", "tls"))
                .fetch
                .is_empty()
        );
        // It is created: the watch delivers it and it is kept.
        assert!(state.apply(secret("tls", "1")).changed);
        assert_eq!(kept(&state), ["ns/tls"]);
        // A relist that was taken before it existed fetches it again.
        let effects = state.relisted::<Secret>(vec![]);
        assert_eq!(effects.fetch, [(key, 1)]);
    }

    #[test]
    fn a_failed_fetch_is_retried_on_the_next_change() {
        let mut state = synced();
        let key = ObjectKey::new("ns", "tls");
        state.apply(ingress("ours", "portico", "tls"));
        state.fetch_failed(&key);
        assert_eq!(state.apply(ingress("other", "x", "y")).fetch, [(key, 0)]);
    }

    #[test]
    fn an_update_that_changes_nothing_starts_no_fetch() {
        let mut state = synced();
        let key = ObjectKey::new("ns", "tls");
        state.apply(ingress("ours", "portico", "tls"));
        state.fetch_failed(&key);
        // The echo of a status write: not a change, so no fetch (not even the failed one,
        // tried again at the next change of what is named).
        let echo = with_status(ingress("ours", "portico", "tls"), "10.0.0.1", "2");
        let effects = state.apply(echo);
        assert!(!effects.changed);
        assert_eq!(effects.fetch, []);
        assert_eq!(state.apply(ingress("other", "x", "y")).fetch, [(key, 0)]);
    }

    #[test]
    fn an_event_that_changes_nothing_leaves_the_published_maps_shared() {
        let mut state = synced();
        state.apply(ingress("web", "portico", "tls"));
        state.apply(secret("tls", "a"));
        let published = state.objects();
        // A Secret no Ingress names, and a delete of a Service never seen.
        assert!(!state.apply(secret("other", "b")).changed);
        assert!(!state.delete(&service("gone")).changed);
        let now = state.objects();
        assert!(Arc::ptr_eq(&published.secrets, &now.secrets));
        assert!(Arc::ptr_eq(&published.services, &now.services));
        // A change copies its kind's map only.
        state.apply(secret("tls", "c"));
        let after = state.objects();
        assert!(!Arc::ptr_eq(&now.secrets, &after.secrets));
        assert!(Arc::ptr_eq(&now.ingresses, &after.ingresses));
        assert_eq!(kept(&state), ["ns/tls"]);
    }

    #[test]
    fn namespaces_are_kept_as_name_and_labels_and_a_relabel_is_a_change() {
        use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec};
        let namespace = |labels: &[(&str, &str)]| Namespace {
            metadata: ObjectMeta {
                name: Some("team".into()),
                resource_version: Some("1".into()),
                annotations: Some([("a".to_owned(), "b".to_owned())].into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NamespaceSpec {
                finalizers: Some(vec!["kubernetes".into()]),
            }),
            ..Namespace::default()
        };
        let mut state = synced();
        assert!(state.apply(namespace(&[("expose", "yes")])).changed);
        let kept = state.objects().namespaces["team"].clone();
        let labels = kept.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("expose").map(String::as_str), Some("yes"));
        assert_eq!(kept.metadata.annotations, None);
        assert_eq!(kept.metadata.resource_version, None);
        assert_eq!(kept.spec, None);
        // The same labels again (a new resource version) change nothing; other labels do.
        assert!(!state.apply(namespace(&[("expose", "yes")])).changed);
        assert!(state.apply(namespace(&[])).changed);
        assert_eq!(state.objects().namespaces["team"].metadata.labels, None);
        assert!(state.delete(&namespace(&[])).changed);
        assert!(state.objects().namespaces.is_empty());
    }
}
