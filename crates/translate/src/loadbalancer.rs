//! One load balancer: in the shared-router topology a class's, with one HTTP listener carrying
//! the policies of every served Ingress of the class; in the dedicated topology one Ingress's
//! own. The pools are those its policies name.

use crate::aliases::alias_routes;
use crate::annotations::provider_warnings;
use crate::backend::PoolKey;
use crate::errors::ControllerErrors;
use crate::memo::Pools;
use crate::merge::{Entry, default_backend, merge, order};
use crate::policy::build_policies;
use crate::regex_hosts::{RegexPaths, regex_paths};
use crate::route::{Backend, Route};
use crate::source::{ClassIds, Source};
use crate::{Config, Objects, class};
use portico_model::{Diagnostic, L7Policy, Listener, LoadBalancer, PoolId, Protocol};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a load balancer is made for: its name, the object it reports to, its class and its
/// ids.
pub(crate) struct Identity<'a> {
    pub name: String,
    pub origin: portico_model::ObjectRef,
    pub class: &'a str,
    pub ids: ClassIds,
}

impl<'a> Identity<'a> {
    /// A class's shared load balancer.
    pub(crate) fn shared(class: &'a str, ids: ClassIds) -> Self {
        Identity {
            name: format!("ingressclass/{class}"),
            origin: portico_model::ObjectRef::new("IngressClass", "", class),
            class,
            ids,
        }
    }

    /// One Ingress's own load balancer.
    pub(crate) fn dedicated(class: &'a str, source: &Source) -> Self {
        let key = &source.key;
        Identity {
            name: format!("ingress/{}/{}", key.namespace, key.name),
            origin: portico_model::ObjectRef::clone(&source.object),
            class,
            ids: source.ids,
        }
    }
}

/// `sources` are the served Ingresses the load balancer carries, oldest first. `order_memo`
/// is the merged order of its routes the last translation made (see [`order`]), if any; it
/// is replaced by this one's; so are the policies each route became (`built`).
pub(crate) fn build_load_balancer(
    identity: Identity<'_>,
    sources: &[Arc<Source>],
    objects: &Objects,
    pools: &mut Pools<'_>,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
    (order_memo, built): (&mut Option<Vec<Entry>>, &mut BuiltRoutes),
) -> LoadBalancer {
    let ids = identity.ids;
    let port = config.http_port;
    let routes = order(sources, order_memo.take());
    let mut winners = merge(&routes, diagnostics);
    let mut regex = regex_paths(&mut winners, diagnostics);
    let aliased = alias_routes(&winners, diagnostics);
    let mut winners: Vec<Route<'_>> = winners;
    for (i, source, spec) in &aliased {
        if let Some(written) = regex.get(i).cloned() {
            regex.insert(winners.len(), written);
        }
        let canary = winners[*i].canary;
        winners.push(Route {
            source,
            spec,
            canary,
        });
    }
    let sort = !regex.is_empty() || !aliased.is_empty();
    let default = default_backend(sources, diagnostics);

    let canaries = winners.iter().filter_map(|r| r.canary.map(|c| c.spec));
    let mut used: BTreeMap<PoolId, &PoolKey> = (winners.iter().map(|r| r.spec))
        .chain(canaries)
        .map(|spec| (spec.backend.pool, &spec.backend.key))
        .collect();
    if let Some((backend, _)) = default {
        used.insert(backend.pool, &backend.key);
    }
    let controller = controller_backend(&ids, objects, config, diagnostics);
    if let Some(backend) = &controller {
        used.insert(backend.pool, &backend.key);
    }
    for source in sources {
        if let Some(backend) = &source.error_backend {
            used.insert(backend.pool, &backend.key);
        }
    }
    let controller_pool = controller.as_ref().map(|b| b.pool);
    if controller_pool.is_none() {
        diagnostics.extend(sources.iter().filter_map(|s| pageless(s)));
    }
    let pools = used
        .into_iter()
        .map(|(id, key)| pools.pool(id, key))
        .collect();
    let errors = controller_pool.map(|pool| ControllerErrors {
        pool,
        codes: &config.custom_errors,
    });
    let kept = std::mem::take(built);
    let (mut policies, mut https_policies) =
        policies(&winners, &regex, sort, errors, (sources, kept, built));
    let www = crate::www::redirects(&winners, diagnostics);
    if !www.is_empty() {
        policies.extend(
            crate::www::policies(&www, ids.listener)
                .into_iter()
                .map(Arc::new),
        );
        let https = crate::www::policies(&www, ids.https_listener);
        https_policies.extend(https.into_iter().map(Arc::new));
        portico_model::order::sort(&mut policies);
        portico_model::order::sort(&mut https_policies);
    }
    drop(www);
    let listener = Listener {
        id: ids.listener,
        name: format!("HTTP:{port}"),
        protocol: Protocol::Http,
        port,
        policies,
        default_pool: default.map(|(backend, _)| backend.pool).or(controller_pool),
        default_source: default.map(|(_, source)| portico_model::ObjectRef::clone(&source.object)),
        tls: None,
    };
    let provider = class::provider(objects, identity.class, config);
    if provider != "proxy" {
        for source in sources {
            let ingress = source.ingress();
            let warnings = provider_warnings(&source.object, &ingress, &provider);
            diagnostics.extend(warnings);
        }
    }
    let mut listeners = crate::tls::listeners(
        ids.https_listener,
        listener,
        https_policies,
        sources,
        config,
        diagnostics,
    );
    if !class::http3(objects, identity.class, diagnostics) {
        for tls in listeners.iter_mut().filter_map(|l| l.tls.as_mut()) {
            tls.http3_off = true;
        }
    }
    let load_balancer = LoadBalancer {
        id: ids.load_balancer,
        provider,
        name: identity.name,
        origin: identity.origin,
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools,
    };
    drop(winners);
    *order_memo = Some(routes);
    load_balancer
}

/// The pool of `--default-backend-service` on this load balancer, or an error naming the flag
/// when its Service does not resolve (requests no rule matches are then answered 404).
fn controller_backend(
    ids: &ClassIds,
    objects: &Objects,
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Backend> {
    let service = config.default_backend.as_ref()?;
    match crate::errors::backend_key(objects, service) {
        Ok(key) => Some(Backend::new(ids, key)),
        Err(why) => {
            let object =
                portico_model::ObjectRef::new("Service", &service.namespace, &service.name);
            let message = format!(
                "--default-backend-service: {why}; requests no rule matches are answered 404"
            );
            diagnostics.push(Diagnostic::warning(object, "metadata.name", message));
            None
        }
    }
}

/// The warning of an Ingress with `custom-http-errors` and no default backend to take the
/// pages from (neither its `default-backend` nor `--default-backend-service`).
fn pageless(source: &Source) -> Option<Diagnostic> {
    let location = &source.location;
    if location.custom_errors.is_empty() || source.error_backend.is_some() {
        return None;
    }
    let ingress = source.ingress();
    let annotations = ingress.metadata.annotations.as_ref()?;
    let (name, _) = crate::annotations::get(annotations, "custom-http-errors")?;
    let field = format!("metadata.annotations[{name}]");
    let message = "no default backend to take the error pages from (a default-backend \
        annotation or --default-backend-service): the backend's own answers are served";
    Some(Diagnostic::warning(
        (*source.object).clone(),
        field,
        message,
    ))
}

/// From this many routes on, the two listeners' policies are built on two threads.
const PARALLEL_ROUTES: usize = 2048;

/// The policies of the HTTP and of the TERMINATED_HTTPS listener: the same routes in the same
/// order, under each listener's ids. With regex hosts (their paths ordered by their written
/// length) or aliases (routes added after the merged order), sorted as the store orders them
/// again ([`portico_model::order`]).
fn policies(
    winners: &[Route<'_>],
    regex: &RegexPaths,
    sort: bool,
    controller: Option<ControllerErrors<'_>>,
    (sources, kept, built): (&[Arc<Source>], BuiltRoutes, &mut BuiltRoutes),
) -> (Vec<Arc<L7Policy>>, Vec<Arc<L7Policy>>) {
    let by_pointer: foldhash::HashMap<usize, &Arc<Source>> = (sources.iter())
        .map(|s| (Arc::as_ptr(s) as usize, s))
        .collect();
    let by_pointer = &by_pointer;
    let build = |https: bool, mut kept: Kept| -> (Vec<Arc<L7Policy>>, Kept) {
        let ids = |route: &Route<'_>| {
            if https {
                route.spec.https
            } else {
                route.spec.http
            }
        };
        let mut out = Vec::with_capacity(winners.len());
        let mut now = Kept::default();
        let mut fresh = Vec::new();
        for (i, route) in winners.iter().enumerate() {
            let written = regex.get(&i).map(String::as_str);
            let made_of = BuiltRoute::made_of(route, written, controller, by_pointer);
            let key = std::ptr::from_ref(route.spec) as usize;
            let reused = made_of.and_then(|made_of| {
                let old = kept.remove(&key).filter(|b| b.is_made_of(&made_of))?;
                Some((made_of, old.policies))
            });
            let (made_of, policies) = match reused {
                Some(reused) => reused,
                None => {
                    build_policies(route, &ids(route), (written, controller), &mut fresh);
                    let policies: Vec<Arc<L7Policy>> = fresh.drain(..).map(Arc::new).collect();
                    let Some(made_of) = BuiltRoute::made_of(route, written, controller, by_pointer)
                    else {
                        out.extend(policies);
                        continue;
                    };
                    (made_of, policies)
                }
            };
            out.extend(policies.iter().cloned());
            now.insert(key, BuiltRoute { made_of, policies });
        }
        if sort {
            portico_model::order::sort(&mut out);
        }
        (out, now)
    };
    let [http_kept, https_kept] = kept;
    let ((http, http_now), (https, https_now)) = if winners.len() < PARALLEL_ROUTES {
        (build(false, http_kept), build(true, https_kept))
    } else {
        std::thread::scope(|scope| {
            let https = scope.spawn(|| build(true, https_kept));
            let http = build(false, http_kept);
            let https = https
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (http, https)
        })
    };
    *built = [http_now, https_now];
    (http, https)
}

/// Each route's policies on the HTTP and on the TERMINATED_HTTPS listener, by the route's
/// address (a route of a kept prepared Ingress keeps its address).
pub(crate) type BuiltRoutes = [Kept; 2];

type Kept = foldhash::HashMap<usize, BuiltRoute>;

/// The policies one route became on one listener, and what they were made of.
#[derive(Debug, Clone)]
pub(crate) struct BuiltRoute {
    made_of: MadeOf,
    policies: Vec<Arc<L7Policy>>,
}

/// What a route's policies are made of: its prepared Ingress and its canary's (held, so
/// that the route's address stays theirs), the path as written on a regex host, and the
/// controller's error pages.
#[derive(Debug, Clone)]
struct MadeOf {
    source: Arc<Source>,
    canary: Option<(Arc<Source>, usize)>,
    regex: Option<String>,
    controller: Option<(PoolId, Vec<u16>)>,
}

impl BuiltRoute {
    /// What `route`'s policies are made of, when they can be kept: its route and its
    /// canary's are those of prepared Ingresses among the load balancer's sources (an alias
    /// route, made for this translation, is not).
    fn made_of(
        route: &Route<'_>,
        regex: Option<&str>,
        controller: Option<ControllerErrors<'_>>,
        sources: &foldhash::HashMap<usize, &Arc<Source>>,
    ) -> Option<MadeOf> {
        let held = |source: &Source, spec: &crate::route::RouteSpec| {
            let source = sources.get(&(std::ptr::from_ref(source) as usize))?;
            let own = source
                .routes
                .as_ptr_range()
                .contains(&std::ptr::from_ref(spec));
            own.then(|| Arc::clone(source))
        };
        let source = held(route.source, route.spec)?;
        let canary = match route.canary {
            Some(c) => Some((held(c.source, c.spec)?, std::ptr::from_ref(c.spec) as usize)),
            None => None,
        };
        Some(MadeOf {
            source,
            canary,
            regex: regex.map(str::to_owned),
            controller: controller.map(|c| (c.pool, c.codes.to_vec())),
        })
    }

    fn is_made_of(&self, other: &MadeOf) -> bool {
        let mine = &self.made_of;
        let same_canary = match (&mine.canary, &other.canary) {
            (None, None) => true,
            (Some((a, x)), Some((b, y))) => Arc::ptr_eq(a, b) && x == y,
            _ => false,
        };
        Arc::ptr_eq(&mine.source, &other.source)
            && same_canary
            && mine.regex == other.regex
            && mine.controller == other.controller
    }
}
