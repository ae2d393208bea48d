//! Which Ingresses' policies a translation may have changed on each load balancer, so that
//! what consumes the model (the store's encoder, the agents) looks at those only
//! ([`portico_model::Rebuilt`]).
//!
//! Only for a change of Ingresses alone: anything else (a Service, a Secret, a class) may touch
//! every policy, and then nothing is named. A changed Ingress changes its own policies and SNI
//! entries, and may change those of the Ingresses whose hosts meet its hosts (its old ones and
//! its new ones): the same host (merging, canaries, regex paths, aliases, passthrough, SNI
//! entries, the HTTPS redirects and their catch-alls), a wildcard and a host one label below it
//! (the redirect of a host that a wildcard's TLS covers), and `www.` and the host without it
//! (`from-to-www-redirect`); and an Ingress met that has aliases meets what its hosts and
//! aliases meet (its aliases serve the routes of every Ingress on its hosts). Each Ingress's hosts are its rules', its TLS entries' and its
//! aliases', each with its `www.` partner; their meeting is tested through hashed keys, where a
//! collision only names one Ingress too many.

use crate::memo::for_each_change;
use crate::route::HostMatch;
use crate::source::Source;
use crate::{ObjectKey, Objects};
use foldhash::HashSet;
use portico_model::{LoadBalancer, LoadBalancerId, Model, ObjectRef, Rebuilt, RebuiltListeners};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// The Ingresses a translation changed (added, removed or replaced), with the keys their
/// hosts meet others' by.
#[derive(Debug, Default)]
pub(crate) struct Changed {
    objects: Vec<ObjectRef>,
    probes: HashSet<u64>,
}

impl Changed {
    /// The Ingresses that differ between `old` and `new` when nothing else does; `old_sources`
    /// are the previous translation's prepared Ingresses, in key order.
    pub(crate) fn of(old: &Objects, new: &Objects, old_sources: &[Arc<Source>]) -> Option<Self> {
        if !only_ingresses_differ(old, new) {
            return None;
        }
        let mut changed = Changed::default();
        let mut keys: Vec<&ObjectKey> = Vec::new();
        for_each_change(&old.ingresses, &new.ingresses, |key, _| keys.push(key));
        keys.dedup();
        for key in keys {
            changed
                .objects
                .push(ObjectRef::new("Ingress", &key.namespace, &key.name));
            if let Some(source) = find(old_sources, key) {
                changed.probes.extend(probes(source));
            }
        }
        Some(changed)
    }

    /// Adds the hosts of the changed Ingresses as now prepared (`sources`, in key order).
    pub(crate) fn with_new(&mut self, sources: &[Arc<Source>]) {
        for object in &self.objects {
            let key = ObjectKey::new(&object.namespace, &object.name);
            if let Some(source) = find(sources, &key) {
                self.probes.extend(probes(source));
            }
        }
    }

    /// The hint for `lb`, built from `sources` (the Ingresses it carries), against the load
    /// balancer of the same id in `previous`.
    pub(crate) fn hint(
        &self,
        lb: &LoadBalancer,
        sources: &[Arc<Source>],
        previous: &Model,
        rebuilt: &mut Rebuilt,
    ) {
        let Some(before) = find_lb(previous, lb.id) else {
            return;
        };
        let mut hint = RebuiltListeners::new(&before.listeners, &lb.listeners);
        hint.sources.extend(self.objects.iter().cloned());
        let met = self.met(sources);
        let met = sources.iter().zip(met).filter(|(_, met)| *met);
        hint.sources
            .extend(met.map(|(s, _)| ObjectRef::clone(&s.object)));
        rebuilt.load_balancers.insert(lb.id, hint);
    }
}

impl Changed {
    /// Which of `sources` the changed Ingresses' hosts meet. An Ingress's aliases serve every
    /// route on its hosts, whoever's: one that is met (its alias may be ignored now, or
    /// served again, or serve other routes) meets in turn the Ingresses its own hosts and
    /// aliases meet.
    fn met(&self, sources: &[Arc<Source>]) -> Vec<bool> {
        let mut probing = self.probes.clone();
        let mut met = vec![false; sources.len()];
        loop {
            let mut more = Vec::new();
            for (source, met) in sources.iter().zip(met.iter_mut()) {
                if *met || !links(source).iter().any(|k| probing.contains(k)) {
                    continue;
                }
                *met = true;
                if !source.location.aliases.is_empty() {
                    more.extend(probes(source));
                }
            }
            let before = probing.len();
            probing.extend(more);
            if probing.len() == before {
                return met;
            }
        }
    }
}

fn find<'s>(sources: &'s [Arc<Source>], key: &ObjectKey) -> Option<&'s Source> {
    let at = sources.binary_search_by(|s| s.key.cmp(key)).ok()?;
    Some(&sources[at])
}

fn find_lb(model: &Model, id: LoadBalancerId) -> Option<&LoadBalancer> {
    let lbs = &model.load_balancers;
    match lbs.binary_search_by_key(&id, |lb| lb.id) {
        Ok(at) => Some(&lbs[at]),
        Err(_) => lbs.iter().find(|lb| lb.id == id),
    }
}

/// Whether `old` and `new` differ in Ingresses only. Every kind is named, so that a kind
/// added later must be placed on one side or the other.
fn only_ingresses_differ(old: &Objects, new: &Objects) -> bool {
    use crate::memo::same;
    let Objects {
        ingresses: _,
        // Portico's own status writes: not translated.
        ingress_seen: _,
        service_seen: _,
        ingress_classes,
        services,
        endpoint_slices,
        endpoints,
        secrets,
        gateway_classes,
        gateways,
        http_routes,
        grpc_routes,
        reference_grants,
        tcp_routes,
        udp_routes,
        tls_routes,
        listener_sets,
        backend_tls_policies,
        config_maps,
        namespaces,
    } = new;
    same(&old.ingress_classes, ingress_classes)
        && same(&old.services, services)
        && same(&old.endpoint_slices, endpoint_slices)
        && same(&old.endpoints, endpoints)
        && same(&old.secrets, secrets)
        && same(&old.gateway_classes, gateway_classes)
        && same(&old.gateways, gateways)
        && same(&old.http_routes, http_routes)
        && same(&old.grpc_routes, grpc_routes)
        && same(&old.reference_grants, reference_grants)
        && same(&old.tcp_routes, tcp_routes)
        && same(&old.udp_routes, udp_routes)
        && same(&old.tls_routes, tls_routes)
        && same(&old.listener_sets, listener_sets)
        && same(&old.backend_tls_policies, backend_tls_policies)
        && same(&old.config_maps, config_maps)
        && same(&old.namespaces, namespaces)
}

/// Every host of `source` (rules', TLS entries', aliases', routes'), each with its `www.`
/// partner.
fn hosts(source: &Source) -> Vec<HostMatch> {
    let ingress = source.ingress();
    let rules = ingress.spec.rules.iter().map(|r| r.host.as_deref());
    let tls = ingress
        .spec
        .tls
        .iter()
        .flat_map(|t| t.hosts.iter().flatten());
    let mut hosts: Vec<HostMatch> = rules.map(HostMatch::of).collect();
    hosts.extend(tls.map(|h| HostMatch::of(Some(h))));
    hosts.extend(
        source
            .location
            .aliases
            .iter()
            .map(|a| HostMatch::of(Some(a))),
    );
    hosts.extend(source.routes.iter().map(|r| r.host.clone()));
    let partners: Vec<HostMatch> = hosts.iter().filter_map(partner).collect();
    hosts.extend(partners);
    hosts.sort();
    hosts.dedup();
    hosts
}

/// `www.host` for `host`, `host` for `www.host`.
fn partner(host: &HostMatch) -> Option<HostMatch> {
    let HostMatch::Exact(h) = host else {
        return None;
    };
    Some(HostMatch::Exact(match h.strip_prefix("www.") {
        Some(bare) => bare.to_owned(),
        None => format!("www.{h}"),
    }))
}

const EXACT: u8 = 0;
const WILDCARD: u8 = 1;
const ANY: u8 = 2;
const PARENT: u8 = 3;

fn key(kind: u8, name: &str) -> u64 {
    let mut h = DefaultHasher::new();
    (kind, name).hash(&mut h);
    h.finish()
}

/// What others' probes find a host by: itself, and an exact host also by its parent (for a
/// wildcard there).
fn host_links(host: &HostMatch, out: &mut Vec<u64>) {
    match host {
        HostMatch::Exact(h) => {
            out.push(key(EXACT, h));
            out.extend(parent(h).map(|p| key(PARENT, p)));
        }
        HostMatch::Wildcard(s) => out.push(key(WILDCARD, s)),
        HostMatch::Any => out.push(key(ANY, "")),
    }
}

/// What a changed host finds others by: the same host, an exact host's wildcard one label
/// up, a wildcard's exact hosts one label down.
fn host_probes(host: &HostMatch, out: &mut Vec<u64>) {
    match host {
        HostMatch::Exact(h) => {
            out.push(key(EXACT, h));
            out.extend(parent(h).map(|p| key(WILDCARD, p)));
        }
        HostMatch::Wildcard(s) => {
            out.push(key(WILDCARD, s));
            out.push(key(PARENT, s));
        }
        HostMatch::Any => out.push(key(ANY, "")),
    }
}

fn parent(host: &str) -> Option<&str> {
    host.split_once('.').map(|(_, parent)| parent)
}

/// The keys `source`'s hosts are found by, computed once per prepared Ingress.
fn links(source: &Source) -> &[u64] {
    source.links.get_or_init(|| {
        let mut out = Vec::new();
        for host in hosts(source) {
            host_links(&host, &mut out);
        }
        out.into_boxed_slice()
    })
}

fn probes(source: &Source) -> Vec<u64> {
    let mut out = Vec::new();
    for host in hosts(source) {
        host_probes(&host, &mut out);
    }
    out
}
