//! A served Ingress prepared for merging: its identity and age, its routes and default backend
//! with their ids derived, and the diagnostics all of that raised.
//!
//! Preparing an Ingress depends only on the Ingress, on the ids of its class's load balancer
//! and on the Services its backends name. The next translation reuses a prepared Ingress when
//! none of those changed (see [`crate::memo`]); most of a translation's work is here.

use crate::KeptIngress;
use crate::admission::validate_ingress;
use crate::annotations::{Location, location, upstream};
use crate::route::{Backend, Lookups, RouteSpec, backend_key, routes};
use crate::{Config, ObjectKey, Objects};
use foldhash::HashSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use portico_model::{Diagnostic, ListenerId, LoadBalancerId, ObjectRef};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The ids of a class's load balancer and of its listeners, which the ids of policies, rules
/// and pools derive from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassIds {
    pub load_balancer: LoadBalancerId,
    pub listener: ListenerId,
    pub https_listener: ListenerId,
}

impl ClassIds {
    pub(crate) fn new(class: &str, config: &Config) -> Self {
        Self::of(
            LoadBalancerId::derive(&format!("loadbalancer/{class}")),
            config,
        )
    }

    /// The ids of an Ingress's own load balancer (dedicated topology).
    pub(crate) fn dedicated(key: &ObjectKey, config: &Config) -> Self {
        let name = format!("loadbalancer/ingress/{}/{}", key.namespace, key.name);
        Self::of(LoadBalancerId::derive(&name), config)
    }

    fn of(load_balancer: LoadBalancerId, config: &Config) -> Self {
        let (http, https) = (config.http_port, config.https_port);
        let listener = ListenerId::derive(&format!("{load_balancer}/listener/HTTP/{http}"));
        let https_listener = ListenerId::derive(&format!(
            "{load_balancer}/listener/TERMINATED_HTTPS/{https}"
        ));
        ClassIds {
            load_balancer,
            listener,
            https_listener,
        }
    }
}

/// An owned Ingress, admitted or not, prepared for its class's load balancer.
#[derive(Debug)]
pub(crate) struct Source {
    pub key: ObjectKey,
    /// The Ingress as last seen (see [`Source::ingress`]).
    ingress: Mutex<Arc<KeptIngress>>,
    /// Its creationTimestamp (the same in every version it holds for).
    created: Option<Time>,
    pub ids: ClassIds,
    /// Shared with the policies made from it.
    pub object: Arc<ObjectRef>,
    /// Admitted (no Error diagnostic): its routes are served.
    pub served: bool,
    /// Admission errors and warnings, and the warnings of its backends.
    pub diagnostics: Vec<Diagnostic>,
    /// The Services its backends name, whether they exist or not.
    pub services: Vec<ObjectKey>,
    /// In YAML order; empty when not served.
    pub routes: Vec<RouteSpec>,
    /// `spec.defaultBackend`, when served and it names a Service. Boxed: few Ingresses have
    /// one, and a `Source` is kept per Ingress.
    pub default: Option<Box<Backend>>,
    /// Its per-location annotations (rewrite, redirects, CORS, …); shared default for most.
    pub location: Arc<Location>,
    /// The `default-backend` annotation's Service, when it resolves.
    pub error_backend: Option<Box<Backend>>,
    /// The keys its hosts meet other Ingresses' by (`crate::rebuilt`), once asked for.
    pub(crate) links: OnceLock<Box<[u64]>>,
}

impl Source {
    /// Validates `ingress` as the API server would and, when admitted, prepares its routes.
    pub(crate) fn prepare(
        key: &ObjectKey,
        ingress: &Arc<KeptIngress>,
        ids: ClassIds,
        objects: &Objects,
    ) -> Self {
        let object = Arc::new(ObjectRef::new("Ingress", &key.namespace, &key.name));
        let mut lookups = Lookups {
            diagnostics: validate_ingress(key, ingress),
            ..Lookups::default()
        };
        let served = !lookups.diagnostics.iter().any(Diagnostic::is_error);
        let mut settings = Location::default_arc();
        if served {
            lookups.upstream = upstream(&object, ingress, &mut lookups.diagnostics);
            settings = location(&object, ingress, &mut lookups.diagnostics);
        }
        let (routes, default) = if served {
            let routes = routes(key, &object, ingress, &ids, objects, &mut lookups);
            let default = ingress.spec.default_backend.as_deref();
            let default = default.and_then(|backend| {
                let field = || "spec.defaultBackend".to_owned();
                backend_key(key, &object, objects, backend, field, &mut lookups)
            });
            (routes, default.map(|k| Box::new(Backend::new(&ids, k))))
        } else {
            (Vec::new(), None)
        };
        let found = (&mut lookups.services, &mut lookups.diagnostics);
        let error_backend =
            crate::errors::annotation_backend(&object, &settings, &ids, objects, found);
        lookups.services.sort();
        lookups.services.dedup();
        lookups.services.shrink_to_fit();
        Source {
            key: key.clone(),
            ingress: Mutex::new(ingress.clone()),
            created: ingress.metadata.creation_timestamp.clone(),
            ids,
            object,
            served,
            diagnostics: lookups.diagnostics,
            services: lookups.services,
            routes,
            default,
            location: settings,
            error_backend,
            links: OnceLock::new(),
        }
    }

    /// Older first: by creationTimestamp (a missing one counts as newest), then namespace/name.
    pub(crate) fn age(&self) -> (bool, Option<&Time>, &ObjectKey) {
        let created = self.created.as_ref();
        (created.is_none(), created, &self.key)
    }

    /// The Ingress as last seen. A newer version that translates the same replaces it (see
    /// [`Source::still_holds`]), so that a prepared Ingress keeps no outdated copy alive.
    pub(crate) fn ingress(&self) -> Arc<KeptIngress> {
        let ingress = self.ingress.lock().unwrap_or_else(PoisonError::into_inner);
        ingress.clone()
    }

    /// Whether this preparation still holds for `ingress` under `ids` when `changed_services`
    /// changed. A version of the Ingress that differs only in its status and resourceVersion
    /// (Portico's own status writes, coming back through the watch) holds too, and takes the
    /// place of the version kept: at 10,000 Ingresses, keeping both cost megabytes, and
    /// preparing them all again cost the next change tens of milliseconds.
    pub(crate) fn still_holds(
        &self,
        ingress: &Arc<KeptIngress>,
        ids: ClassIds,
        changed_services: &HashSet<ObjectKey>,
    ) -> bool {
        if self.ids != ids || self.services.iter().any(|s| changed_services.contains(s)) {
            return false;
        }
        let mut kept = self.ingress.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::ptr_eq(&kept, ingress) {
            return true;
        }
        let holds = kept.same_for_serving(ingress);
        if holds {
            *kept = ingress.clone();
        }
        holds
    }
}

/// Sorts sources oldest first.
pub(crate) fn by_age(sources: &mut [Arc<Source>]) {
    sources.sort_by(|a, b| a.age().cmp(&b.age()));
}
