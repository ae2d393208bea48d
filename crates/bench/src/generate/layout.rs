//! Which host, path, Ingress and Service each generated route gets, and which backend port each
//! endpoint gets: pure index arithmetic, so the manifests, the nginx config and the driver agree
//! without sharing any state.
//!
//! Route `k` (0..paths) belongs to host `k * hosts / paths` and to Ingress
//! `k * ingresses / paths`, so both are spread evenly and each Ingress holds consecutive routes;
//! it goes to Service `k % services`. Endpoint `g` (0..endpoints) belongs to Service
//! `j = g * services / endpoints`.
//!
//! Every endpoint is 127.0.0.1, and an EndpointSlice lists one port for all its endpoints, so
//! the backend ports cycle per Service by default (Service `j` on port `j % backends`): one
//! slice per Service as in a real cluster, but Portico sees each Service's endpoints as one
//! address and port, one pool member. [`PortCycle::PerEndpoint`] gives endpoint `g` port
//! `g % backends` instead: distinct members, at the price of one slice per port.
//! [`PortCycle::PodAddresses`] gives every endpoint an address of its own, as pods have.

use crate::generate::yaml::Endpoint;
use std::net::Ipv4Addr;
use std::ops::Range;

/// How big the generated cluster is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub ingresses: usize,
    pub hosts: usize,
    pub paths: usize,
    pub services: usize,
    pub endpoints: usize,
}

impl Sizes {
    /// The cluster of the Performance issue: 10,000 Ingresses, 20,000 paths over 2,000 hosts,
    /// 5,000 Services, 50,000 endpoints.
    #[cfg(test)]
    pub const FULL: Sizes = Sizes {
        ingresses: 10_000,
        hosts: 2_000,
        paths: 20_000,
        services: 5_000,
        endpoints: 50_000,
    };

    /// Every Ingress needs a route, every host a path and every Service an endpoint.
    pub fn check(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        if self.paths == 0 || self.services == 0 {
            errors.push("--paths and --services must be at least 1".to_owned());
        }
        if self.ingresses == 0 || self.ingresses > self.paths {
            errors.push("--ingresses must be between 1 and --paths".to_owned());
        }
        if self.hosts == 0 || self.hosts > self.paths {
            errors.push("--hosts must be between 1 and --paths".to_owned());
        }
        if self.endpoints < self.services {
            errors.push("--endpoints must be at least --services".to_owned());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// One generated route: host and path, the Ingress that declares it, the Service it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub index: usize,
    pub host: String,
    pub path: String,
    pub ingress: usize,
    pub service: usize,
}

/// How endpoints get their backend ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortCycle {
    /// All endpoints of Service `j` on port `j % backends`: one EndpointSlice per Service.
    #[default]
    PerService,
    /// Endpoint `g` on port `g % backends`: one EndpointSlice per port of each Service.
    PerEndpoint,
    /// Every endpoint an address of its own, as pods have, all on Service `j`'s port
    /// `j % backends` (one slice per Service): the first on 127.0.0.1, where its echo backend
    /// answers; endpoint `g` of the others on 127.1.0.0 + `g`, where nobody listens, and not
    /// ready (starting pods), so that they count as members but take no request.
    PodAddresses,
}

/// The generated cluster: sizes plus the backend ports the endpoints cycle over, and how many
/// Ingresses terminate TLS (each with a Secret of its own).
#[derive(Debug, Clone)]
pub struct Layout {
    pub sizes: Sizes,
    pub ports: Vec<u16>,
    pub cycle: PortCycle,
    pub tls_secrets: usize,
    /// Ingresses per Ingress file and Services per Service file (multi-document YAML); 1
    /// gives one object per file.
    pub per_file: usize,
}

impl Layout {
    pub fn new(sizes: Sizes, ports: Vec<u16>, cycle: PortCycle) -> Result<Self, String> {
        sizes.check()?;
        if ports.is_empty() {
            return Err("at least one backend port is needed".to_owned());
        }
        Ok(Layout {
            sizes,
            ports,
            cycle,
            tls_secrets: 0,
            per_file: 1,
        })
    }

    /// `secrets` Ingresses (at most all), spread evenly, get `spec.tls` and a Secret each.
    pub fn with_tls(mut self, secrets: usize) -> Self {
        self.tls_secrets = secrets.min(self.sizes.ingresses);
        self
    }

    /// `n` Ingresses per Ingress file and `n` Services per Service file (at least 1).
    pub fn with_per_file(mut self, n: usize) -> Self {
        self.per_file = n.max(1);
        self
    }

    /// Whether Ingress `i` terminates TLS: exactly `tls_secrets` Ingresses, evenly spread.
    pub fn has_tls(&self, i: usize) -> bool {
        let n = self.tls_secrets;
        n > 0 && (i * n) % self.sizes.ingresses < n
    }

    /// The Secret of Ingress `i`'s certificate.
    pub fn tls_secret_name(&self, i: usize) -> String {
        format!("tls-{}", self.ingress_name(i))
    }

    /// The distinct hosts of Ingress `i`'s routes, in order.
    pub fn ingress_hosts(&self, i: usize) -> Vec<String> {
        let mut hosts: Vec<String> = Vec::new();
        for k in self.routes_of_ingress(i) {
            let host = self.route(k).host;
            if hosts.last() != Some(&host) {
                hosts.push(host);
            }
        }
        hosts
    }

    pub fn route(&self, k: usize) -> Route {
        let s = &self.sizes;
        let host = k * s.hosts / s.paths;
        let first_of_host = first_in_share(host, s.paths, s.hosts);
        Route {
            index: k,
            host: host_name(host),
            path: format!("/p{}", k - first_of_host),
            ingress: k * s.ingresses / s.paths,
            service: k % s.services,
        }
    }

    pub fn routes_of_ingress(&self, i: usize) -> Range<usize> {
        let s = &self.sizes;
        first_in_share(i, s.paths, s.ingresses)..first_in_share(i + 1, s.paths, s.ingresses)
    }

    pub fn endpoints_of_service(&self, j: usize) -> Range<usize> {
        let s = &self.sizes;
        first_in_share(j, s.endpoints, s.services)..first_in_share(j + 1, s.endpoints, s.services)
    }

    /// The endpoints of Service `j`, in endpoint order.
    pub fn service_endpoints(&self, j: usize) -> Vec<Endpoint> {
        let port = |n: usize| self.ports[n % self.ports.len()];
        let first = self.endpoints_of_service(j).start;
        self.endpoints_of_service(j)
            .map(|g| match self.cycle {
                PortCycle::PerService => Endpoint::local(port(j)),
                PortCycle::PerEndpoint => Endpoint::local(port(g)),
                PortCycle::PodAddresses if g == first => Endpoint::local(port(j)),
                PortCycle::PodAddresses => Endpoint {
                    ip: pod_address(g),
                    port: port(j),
                    ready: false,
                },
            })
            .collect()
    }

    pub fn ingress_name(&self, i: usize) -> String {
        format!("ing-{i:0w$}", w = width(self.sizes.ingresses, 5))
    }

    pub fn service_name(&self, j: usize) -> String {
        format!("svc-{j:0w$}", w = width(self.sizes.services, 4))
    }
}

/// Endpoint `g`'s address in [`PortCycle::PodAddresses`]: 127.1.0.0 + `g` (127.255.255.255
/// at most).
fn pod_address(g: usize) -> Ipv4Addr {
    let base = u32::from(Ipv4Addr::new(127, 1, 0, 0));
    let g = u32::try_from(g).unwrap_or(u32::MAX);
    Ipv4Addr::from(
        base.saturating_add(g)
            .min(u32::from(Ipv4Addr::new(127, 255, 255, 254))),
    )
}

pub fn host_name(h: usize) -> String {
    format!("h{h}.scale.test")
}

/// The first item `k` of `items` whose share `k * shares / items` is `share`.
fn first_in_share(share: usize, items: usize, shares: usize) -> usize {
    (share * items).div_ceil(shares)
}

/// Digits of the largest index, at least `min`.
fn width(count: usize, min: usize) -> usize {
    count.saturating_sub(1).to_string().len().max(min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn exactly_the_asked_number_of_ingresses_get_tls_spread_evenly() {
        let layout = Layout::new(Sizes::FULL, vec![1], PortCycle::default()).unwrap();
        let layout = layout.with_tls(1_000);
        let tls: Vec<usize> = (0..10_000).filter(|i| layout.has_tls(*i)).collect();
        assert_eq!(tls.len(), 1_000);
        assert!(tls.windows(2).all(|w| w[1] - w[0] == 10), "evenly spread");
        assert_eq!(layout.ingress_hosts(0), ["h0.scale.test"]);
    }

    fn full() -> Layout {
        full_with(PortCycle::PerEndpoint)
    }

    fn full_with(cycle: PortCycle) -> Layout {
        Layout::new(Sizes::FULL, (18101..18111).collect(), cycle).unwrap()
    }

    #[test]
    fn every_host_gets_ten_distinct_paths() {
        let layout = full();
        let mut per_host: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for k in 0..20_000 {
            let r = layout.route(k);
            per_host.entry(r.host).or_default().insert(r.path);
        }
        assert_eq!(per_host.len(), 2_000);
        assert!(per_host.values().all(|paths| paths.len() == 10));
    }

    #[test]
    fn every_ingress_gets_two_routes_that_name_it() {
        let layout = full();
        for i in 0..10_000 {
            let routes = layout.routes_of_ingress(i);
            assert_eq!(routes.len(), 2);
            assert!(routes.clone().all(|k| layout.route(k).ingress == i));
        }
    }

    #[test]
    fn per_service_ports_put_all_endpoints_of_a_service_on_one_port() {
        let layout = full_with(PortCycle::PerService);
        assert_eq!(
            layout.service_endpoints(3),
            vec![Endpoint::local(18104); 10]
        );
        assert_eq!(
            layout.service_endpoints(13),
            vec![Endpoint::local(18104); 10]
        );
    }

    #[test]
    fn per_endpoint_ports_give_ten_distinct_ports_per_service() {
        let layout = full();
        for j in 0..5_000 {
            let ports: BTreeSet<u16> = (layout.service_endpoints(j).iter())
                .map(|e| e.port)
                .collect();
            assert_eq!(ports.len(), 10);
        }
    }

    /// 50,000 distinct addresses: each Service's first endpoint where its backend answers, the
    /// other nine on loopback addresses of their own, not ready.
    #[test]
    fn pod_addresses_are_distinct_and_only_the_first_of_a_service_is_live() {
        let layout = full_with(PortCycle::PodAddresses);
        let mut addresses = BTreeSet::new();
        for j in 0..5_000 {
            let endpoints = layout.service_endpoints(j);
            assert_eq!(endpoints[0], Endpoint::local(layout.ports[j % 10]));
            assert!(
                endpoints[1..]
                    .iter()
                    .all(|e| !e.ready && e.ip.octets()[..2] == [127, 1])
            );
            assert!(endpoints.iter().all(|e| e.port == endpoints[0].port));
            addresses.extend(endpoints.iter().map(|e| e.ip));
        }
        assert_eq!(addresses.len(), 50_000 - 5_000 + 1);
    }

    #[test]
    fn uneven_sizes_still_cover_every_route_once() {
        let sizes = Sizes {
            ingresses: 7,
            hosts: 3,
            paths: 23,
            services: 5,
            endpoints: 11,
        };
        let layout = Layout::new(sizes, vec![1, 2], PortCycle::default()).unwrap();
        let covered: usize = (0..7).map(|i| layout.routes_of_ingress(i).len()).sum();
        let endpoints: usize = (0..5).map(|j| layout.endpoints_of_service(j).len()).sum();
        assert_eq!((covered, endpoints), (23, 11));
    }

    #[test]
    fn more_ingresses_than_paths_is_rejected() {
        let sizes = Sizes {
            ingresses: 3,
            hosts: 1,
            paths: 2,
            services: 1,
            endpoints: 1,
        };
        assert!(Layout::new(sizes, vec![1], PortCycle::default()).is_err());
    }

    #[test]
    fn names_are_zero_padded() {
        let layout = full();
        assert_eq!(layout.ingress_name(42), "ing-00042");
        assert_eq!(layout.service_name(42), "svc-0042");
    }
}
