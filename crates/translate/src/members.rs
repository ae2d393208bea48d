//! Pool members: the endpoints of one Service port, from EndpointSlices or legacy Endpoints.

use crate::backend::{PoolKey, resolve};
use crate::{CompactSlice, ObjectKey, Objects};
use foldhash::{HashMap, HashMapExt};
use k8s_openapi::api::core::v1::Endpoints;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub(crate) const SLICE_SERVICE_LABEL: &str = "kubernetes.io/service-name";

/// Ready per (address, port); an address listed twice is ready if any listing says so.
pub(crate) type EndpointSet = BTreeMap<(IpAddr, u16), bool>;

/// EndpointSlices by the Service they belong to (namespace, `kubernetes.io/service-name`),
/// built once per translation so finding a pool's slices is a lookup, not a scan.
#[derive(Debug, Default)]
pub(crate) struct SliceIndex<'a> {
    by_service: HashMap<ObjectKey, Vec<&'a CompactSlice>>,
}

impl<'a> SliceIndex<'a> {
    pub(crate) fn new(objects: &'a Objects) -> Self {
        SliceIndex::build(objects, |namespace, service| {
            Some(ObjectKey::new(namespace, service))
        })
    }

    /// Like [`SliceIndex::new`], but only the slices of `services`: the endpoint fast path
    /// refreshes a few Services, and indexing every slice (a key allocated for each) cost more
    /// than the refresh itself. With many Services the whole index is cheaper than the lookups.
    pub(crate) fn of_services(objects: &'a Objects, services: &BTreeSet<ObjectKey>) -> Self {
        if services.len() > 16 {
            return SliceIndex::new(objects);
        }
        SliceIndex::build(objects, |namespace, service| {
            let wanted = |s: &&ObjectKey| s.namespace == namespace && s.name == service;
            services.iter().find(wanted).cloned()
        })
    }

    /// Every slice with a Service label, under the key `service_key` gives its namespace and
    /// Service name (none: left out).
    fn build(
        objects: &'a Objects,
        mut service_key: impl FnMut(&str, &str) -> Option<ObjectKey>,
    ) -> Self {
        let mut by_service: HashMap<_, Vec<_>> = HashMap::new();
        for (key, slice) in objects.endpoint_slices.iter() {
            let service = slice.service.as_deref();
            if let Some(service_key) = service.and_then(|s| service_key(&key.namespace, s)) {
                by_service.entry(service_key).or_default().push(&**slice);
            }
        }
        SliceIndex { by_service }
    }

    fn of(&self, service: &ObjectKey) -> &[&'a CompactSlice] {
        self.by_service.get(service).map_or(&[], Vec::as_slice)
    }
}

/// The endpoints behind `key`, ordered by (address, port). Empty when the Service or its port
/// does not exist: the pool then answers 503.
pub(crate) fn endpoints(objects: &Objects, slices: &SliceIndex<'_>, key: &PoolKey) -> EndpointSet {
    let mut found = EndpointSet::new();
    let Ok((_, service_port)) = resolve(objects, key) else {
        return found;
    };
    let port_name = service_port.name.as_deref().unwrap_or_default();
    let slices = slices.of(&key.service);
    if !slices.is_empty() {
        slices
            .iter()
            .for_each(|s| from_slice(&mut found, s, port_name));
    } else if let Some(legacy) = objects.endpoints.get(&key.service) {
        from_legacy(&mut found, legacy, port_name);
    }
    found
}

/// Adds a member; an address listed twice is ready if any listing says so.
fn add(found: &mut EndpointSet, address: IpAddr, port: u16, ready: bool) {
    *found.entry((address, port)).or_insert(false) |= ready;
}

/// Like [`add`], for an address as an Endpoints object writes it; one that is not an IP
/// address is skipped.
fn add_written(found: &mut EndpointSet, address: &str, port: u16, ready: bool) {
    if let Ok(address) = address.parse::<IpAddr>() {
        add(found, address, port, ready);
    }
}

fn valid_port(port: i32) -> Option<u16> {
    u16::try_from(port).ok().filter(|p| *p != 0)
}

fn from_slice(found: &mut EndpointSet, slice: &CompactSlice, port_name: &str) {
    if !slice.ip {
        return;
    }
    let port = (slice.ports.iter())
        .find(|p| p.name == port_name)
        .and_then(|p| p.port)
        .and_then(valid_port);
    let Some(port) = port else { return };
    for endpoint in &slice.endpoints {
        for &address in &endpoint.addresses {
            add(found, address, port, endpoint.ready);
        }
    }
}

fn from_legacy(found: &mut EndpointSet, endpoints: &Endpoints, port_name: &str) {
    for subset in endpoints.subsets.iter().flatten() {
        let port = subset
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or_default() == port_name)
            .and_then(|p| valid_port(p.port));
        let Some(port) = port else { continue };
        for address in subset.addresses.iter().flatten() {
            add_written(found, &address.ip, port, true);
        }
        for address in subset.not_ready_addresses.iter().flatten() {
            add_written(found, &address.ip, port, false);
        }
    }
}
