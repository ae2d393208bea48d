//! The controller's side of the pipeline (kube-manager and svc-monitor's roles): a source's
//! objects → compile → the desired state for the store; and the agents' feedback → what the
//! admin API and Ingress status show.

use crate::compile::{Compiled, Compiler};
use crate::metrics::AppMetrics;
use crate::placement::Placer;
use crate::snapshot::build_snapshot;
use foldhash::{HashMap, HashMapExt, HashSet};
use portico_admin::{LoadBalancerAddress, Snapshot};
use portico_model::{LoadBalancer, LoadBalancerId, Placement};
use portico_store::Feedback;
use portico_translate::{Allocations, Config, Loaded};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Compiles each new load and keeps the result for the next one.
#[derive(Debug)]
pub struct Controller {
    compiler: Compiler,
    compiled: Option<Compiled>,
    placer: Placer,
    /// Who holds each load balancer's claim (`ha/<lb>`) now: the admin API shows the holder
    /// as active, which after a failover is the placed standby.
    holders: BTreeMap<LoadBalancerId, String>,
    /// The last snapshot's views, for the next to share.
    views: Mutex<Views>,
}

impl Controller {
    pub fn new(config: Config) -> Self {
        Controller {
            compiler: Compiler::new(config),
            compiled: None,
            placer: Placer::default(),
            holders: BTreeMap::new(),
            views: Mutex::new(Views::default()),
        }
    }

    /// The claims' holders as the store has them now.
    pub(crate) fn set_holders(&mut self, holders: BTreeMap<LoadBalancerId, String>) {
        self.holders = holders;
    }

    /// The load balancers placed on agents.
    pub(crate) fn placed(&self) -> impl Iterator<Item = LoadBalancerId> + '_ {
        self.placer.placements().keys().copied()
    }

    /// Takes the addresses and placements the store holds (what the last leader decided) as
    /// the previous ones, and compiles the last load again with them.
    pub(crate) fn seed(
        &mut self,
        allocations: Allocations,
        placements: BTreeMap<LoadBalancerId, Placement>,
        metrics: &AppMetrics,
    ) {
        self.compiler.seed(allocations);
        self.placer.seed(placements);
        if let Some(previous) = self.compiled.take() {
            let loaded = previous.loaded.clone();
            drop(previous);
            self.compiled = Some(self.compiler.compile(loaded, None).0);
        }
        self.place(metrics);
    }

    /// The agents registered now (their feedback); whether a placement changed.
    pub(crate) fn set_agents(
        &mut self,
        feedback: &BTreeMap<String, Feedback>,
        metrics: &AppMetrics,
    ) -> bool {
        self.placer.set_agents(feedback) && self.place(metrics) > 0
    }

    /// Places the compiled load balancers and records the placements in the desired state;
    /// how many changed.
    fn place(&mut self, metrics: &AppMetrics) -> usize {
        let Some(compiled) = &mut self.compiled else {
            return 0;
        };
        let changed = (self.placer).place(&compiled.desired.model, &compiled.selectors);
        if changed > 0 {
            metrics.placement_changed(changed);
            tracing::info!(changed, "load balancers placed");
        }
        compiled.desired.placements = self.placer.placements().clone();
        changed
    }

    /// Compiles `loaded`; returns the load it supersedes, for its owner to free.
    pub fn compile(&mut self, loaded: Arc<Loaded>, metrics: &AppMetrics) -> Option<Arc<Loaded>> {
        let started = std::time::Instant::now();
        let (compiled, retired) = self.compiler.compile(loaded, self.compiled.take());
        let took = started.elapsed();
        metrics.observe(&compiled.loaded.objects, compiled.diagnostics());
        for d in compiled.diagnostics() {
            tracing::debug!(diagnostic = %d, "diagnostic");
        }
        tracing::info!(
            ingresses = compiled.loaded.objects.ingresses.len(),
            diagnostics = compiled.diagnostics().count(),
            compile_ms = crate::compile::ms(took),
            "configuration compiled"
        );
        self.compiled = Some(compiled);
        self.place(metrics);
        retired
    }

    /// The last compile's result.
    pub fn compiled(&self) -> Option<&Compiled> {
        self.compiled.as_ref()
    }

    /// Publishes [`Controller::snapshot`] to the admin API and, with Kubernetes, hands the
    /// report to `source`'s writer.
    pub(crate) fn publish(
        &self,
        source: &crate::source::Source,
        admin: &portico_admin::Admin,
        revision: u64,
        feedback: &BTreeMap<String, Feedback>,
        publish: &[LoadBalancerAddress],
    ) {
        let Some(snapshot) = self.snapshot(revision, feedback, publish) else {
            return;
        };
        if let Some(compiled) = &self.compiled {
            source.report(&compiled.loaded.objects, &snapshot, publish);
        }
        admin.publish(snapshot);
    }

    /// What the admin API shows: the compiled state at store revision `revision`, with Ingress
    /// addresses only where an agent serves the Ingress's load balancer, ready once every
    /// agent serves, and the agents' problems.
    pub fn snapshot(
        &self,
        revision: u64,
        feedback: &BTreeMap<String, Feedback>,
        publish: &[LoadBalancerAddress],
    ) -> Option<Snapshot> {
        let compiled = self.compiled.as_ref()?;
        let served: HashSet<LoadBalancerId> = feedback
            .values()
            .flat_map(|f| f.served.iter().copied())
            .collect();
        let model = compiled.desired.model.clone();
        let key = ViewsKey::new(compiled, &served, publish);
        let mut views = self.views.lock().unwrap_or_else(PoisonError::into_inner);
        if views.key.as_ref() != Some(&key) {
            let controller = &self.compiler.config().gateway_controller;
            let built = Views::build(key, compiled, (&served, publish), controller, &views);
            *views = built;
        }
        let services = (model.load_balancers.iter())
            .filter(|lb| lb.origin.kind == "Service")
            .map(|lb| {
                let mut addresses = vec![];
                if served.contains(&lb.id) {
                    with_addresses(&mut addresses, lb);
                }
                let (namespace, name) = (lb.origin.namespace.clone(), lb.origin.name.clone());
                portico_admin::ServiceView::new(namespace, name, addresses)
            });
        let mut services: Vec<_> = services.collect();
        services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let placements = Arc::new(crate::failover::as_held(
            self.placer.placements().clone(),
            |id| self.holders.get(id).cloned(),
        ));
        let mut diagnostics = views.diagnostics.clone();
        let agents = feedback
            .values()
            .flat_map(|f| f.diagnostics.iter().cloned());
        diagnostics.extend(agents);
        diagnostics.sort();
        diagnostics.dedup();
        Some(Snapshot {
            generation: revision,
            ready: !feedback.is_empty() && feedback.values().all(|f| f.ready),
            model,
            placements,
            ingresses: views.ingresses.clone(),
            services,
            diagnostics,
            detail: vec![],
            gateway_api: views.gateway_api.clone(),
            applied_at: None,
        })
    }
}

/// The Ingress views and the other objects' diagnostics of the last snapshot. They are what
/// costs in a snapshot (10,000 Ingresses: 10,000 views), and an endpoint change leaves them as
/// they were: the next snapshot shares them when [`ViewsKey`] says nothing they show changed.
#[derive(Debug, Default)]
struct Views {
    key: Option<ViewsKey>,
    ingresses: Arc<Vec<portico_admin::IngressView>>,
    diagnostics: Vec<portico_model::Diagnostic>,
    /// The Gateway API objects with the status they would get.
    gateway_api: Arc<portico_translate::gateway::Statuses>,
    /// What `gateway_api` was made of.
    gateway_key: Option<GatewayKey>,
}

/// What the Gateway API statuses are made of: the translation's verdicts, the Gateway API's
/// objects and each Gateway's reach. An Ingress change (the Gateway API's share of the
/// translation reused whole, the verdicts the same `Arc`) leaves them all as they were, and
/// the next views share the statuses instead of copying 10,000 routes again. The maps are
/// held, not their addresses, so that a freed map's address taken again cannot pass for it.
#[derive(Debug)]
struct GatewayKey {
    verdicts: Arc<portico_translate::gateway::Verdicts>,
    objects: portico_translate::Objects,
    reaches: BTreeMap<portico_translate::ObjectKey, portico_translate::gateway::Reach>,
}

impl GatewayKey {
    fn new(
        compiled: &Compiled,
        reaches: BTreeMap<portico_translate::ObjectKey, portico_translate::gateway::Reach>,
    ) -> Self {
        let all = &compiled.loaded.objects;
        // Only the kinds the statuses read; the others stay empty.
        let objects = portico_translate::Objects {
            gateway_classes: all.gateway_classes.clone(),
            gateways: all.gateways.clone(),
            http_routes: all.http_routes.clone(),
            grpc_routes: all.grpc_routes.clone(),
            tcp_routes: all.tcp_routes.clone(),
            udp_routes: all.udp_routes.clone(),
            tls_routes: all.tls_routes.clone(),
            listener_sets: all.listener_sets.clone(),
            backend_tls_policies: all.backend_tls_policies.clone(),
            ..Default::default()
        };
        GatewayKey {
            verdicts: compiled.translation.gateways.clone(),
            objects,
            reaches,
        }
    }

    /// The same verdicts and the same maps (pointers), the same reaches.
    fn same(&self, other: &GatewayKey) -> bool {
        let (a, b) = (&self.objects, &other.objects);
        Arc::ptr_eq(&self.verdicts, &other.verdicts)
            && Arc::ptr_eq(&a.gateway_classes, &b.gateway_classes)
            && Arc::ptr_eq(&a.gateways, &b.gateways)
            && Arc::ptr_eq(&a.http_routes, &b.http_routes)
            && Arc::ptr_eq(&a.grpc_routes, &b.grpc_routes)
            && Arc::ptr_eq(&a.tcp_routes, &b.tcp_routes)
            && Arc::ptr_eq(&a.udp_routes, &b.udp_routes)
            && Arc::ptr_eq(&a.tls_routes, &b.tls_routes)
            && Arc::ptr_eq(&a.listener_sets, &b.listener_sets)
            && Arc::ptr_eq(&a.backend_tls_policies, &b.backend_tls_policies)
            && self.reaches == other.reaches
    }
}

/// What the views are made of: the translation (its Ingress states and diagnostics), the
/// source's diagnostics, the addresses to publish, which load balancers are served and their
/// addresses.
#[derive(Debug, PartialEq)]
struct ViewsKey {
    translation: u64,
    source_diagnostics: Vec<portico_model::Diagnostic>,
    publish: Vec<LoadBalancerAddress>,
    served: Vec<LoadBalancerId>,
    addresses: Vec<(LoadBalancerId, Option<IpAddr>, Option<IpAddr>)>,
}

impl ViewsKey {
    fn new(
        compiled: &Compiled,
        served: &HashSet<LoadBalancerId>,
        publish: &[LoadBalancerAddress],
    ) -> Self {
        let mut served: Vec<_> = served.iter().copied().collect();
        served.sort();
        let lbs = compiled.desired.model.load_balancers.iter();
        ViewsKey {
            translation: compiled.translation_id,
            source_diagnostics: compiled.loaded.diagnostics.clone(),
            publish: publish.to_vec(),
            served,
            addresses: lbs.map(|lb| (lb.id, lb.vip, lb.floating_ip)).collect(),
        }
    }
}

impl Views {
    /// Every Ingress with its class, diagnostics and addresses: those of its load balancer and
    /// the published ones, where an agent serves the load balancer and the Ingress is served.
    /// `last` is the views this replaces: its Gateway API statuses are shared when nothing
    /// they are made of changed.
    fn build(
        key: ViewsKey,
        compiled: &Compiled,
        (served, publish): (&HashSet<LoadBalancerId>, &[LoadBalancerAddress]),
        gateway_controller: &str,
        last: &Views,
    ) -> Views {
        let model = compiled.desired.model.clone();
        let reaches = crate::snapshot::gateway_reaches(compiled, &|lb: &LoadBalancer| {
            served.contains(&lb.id).then(|| {
                let mut addresses = publish.to_vec();
                with_addresses(&mut addresses, lb);
                addresses
            })
        });
        let gateway_key = GatewayKey::new(compiled, reaches);
        let gateway_api = match &last.gateway_key {
            Some(k) if k.same(&gateway_key) => last.gateway_api.clone(),
            _ => Arc::new(crate::snapshot::gateway_api(
                compiled,
                &gateway_key.reaches,
                gateway_controller,
                &now(),
            )),
        };
        let mut snapshot = build_snapshot(
            0,
            &compiled.loaded.diagnostics,
            &compiled.translation,
            model.clone(),
            publish,
        );
        let ingress_states = compiled.translation.ingresses.iter();
        let served_ingresses: HashSet<(&str, &str)> = ingress_states
            .filter(|s| s.served)
            .map(|s| (s.key.namespace.as_str(), s.key.name.as_str()))
            .collect();
        let mut dedicated = HashMap::new();
        let mut shared = HashMap::new();
        for lb in &model.load_balancers {
            match lb.ingress_class() {
                Some(class) => shared.insert(class, lb),
                None => {
                    dedicated.insert((lb.origin.namespace.as_str(), lb.origin.name.as_str()), lb)
                }
            };
        }
        let mut ingresses = Arc::unwrap_or_clone(std::mem::take(&mut snapshot.ingresses));
        for ingress in &mut ingresses {
            let key = (ingress.namespace.as_str(), ingress.name.as_str());
            let class = ingress.ingress_class_name.as_deref();
            let lb = (dedicated.get(&key).copied())
                .or_else(|| class.and_then(|c| shared.get(c).copied()));
            let addresses = &mut ingress.status.load_balancer.ingress;
            match lb {
                Some(lb) if served.contains(&lb.id) => {
                    if served_ingresses.contains(&key) {
                        with_addresses(addresses, lb);
                    }
                }
                _ => addresses.clear(),
            }
        }
        Views {
            key: Some(key),
            ingresses: Arc::new(ingresses),
            diagnostics: snapshot.diagnostics,
            gateway_api,
            gateway_key: Some(gateway_key),
        }
    }
}

/// The time conditions that change now are stamped with.
fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

/// The load balancer's VIP and floating IP first, then the published addresses (without
/// repeating one).
fn with_addresses(addresses: &mut Vec<LoadBalancerAddress>, lb: &LoadBalancer) {
    let own = [lb.vip, lb.floating_ip].into_iter().flatten();
    let mut all: Vec<LoadBalancerAddress> = own
        .map(|ip| LoadBalancerAddress {
            ip: Some(ip.to_string()),
            hostname: None,
        })
        .collect();
    for a in addresses.drain(..) {
        if !all.contains(&a) {
            all.push(a);
        }
    }
    // Kept in the snapshot for every Ingress: no spare room (10,000 of them had room for four).
    all.shrink_to_fit();
    *addresses = all;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use portico_source_file::Catalog;
    use std::path::{Path, PathBuf};

    const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: portico
  rules:
  - host: HOST
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: portico}
spec: {controller: portico.dev/ingress-controller}
";

    const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [ADDRESS], conditions: {ready: true}}]
";

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn served(controller: &Controller) -> BTreeMap<String, Feedback> {
        let lbs = controller
            .compiled()
            .unwrap()
            .desired
            .model
            .load_balancers
            .iter();
        let feedback = Feedback {
            served: lbs.map(|lb| lb.id).collect(),
            ready: true,
            ..Feedback::default()
        };
        BTreeMap::from([("local".to_owned(), feedback)])
    }

    fn members(snapshot: &Snapshot) -> Vec<IpAddr> {
        let pools = snapshot
            .model
            .load_balancers
            .iter()
            .flat_map(|lb| &lb.pools);
        pools.flat_map(|p| &p.members).map(|m| m.address).collect()
    }

    /// A directory with one Ingress (host `a.test`) and its Service (endpoint 10.0.0.1), and
    /// the paths naming it.
    fn ingress_and_service() -> (tempfile::TempDir, [PathBuf; 1]) {
        let dir = tempfile::tempdir().unwrap();
        let paths: [PathBuf; 1] = [dir.path().to_path_buf()];
        write(
            dir.path(),
            "ingress.yaml",
            &INGRESS.replace("HOST", "a.test"),
        );
        write(
            dir.path(),
            "service.yaml",
            &SERVICE.replace("ADDRESS", "10.0.0.1"),
        );
        (dir, paths)
    }

    #[test]
    fn an_endpoint_change_shares_the_last_snapshots_ingress_views_and_other_changes_do_not() {
        let (dir, paths) = ingress_and_service();
        let mut catalog = Catalog::new();
        let metrics = AppMetrics::new(&mut prometheus_client::registry::Registry::default());
        let mut controller = Controller::new(Config::default());
        let address = |ip: &str| LoadBalancerAddress {
            ip: Some(ip.into()),
            hostname: None,
        };
        let publish = [address("192.0.2.1")];
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let feedback = served(&controller);
        let first = controller.snapshot(1, &feedback, &publish).unwrap();
        let addresses = |s: &Snapshot| s.ingresses[0].status.load_balancer.ingress.clone();
        assert_eq!(addresses(&first), publish);

        // Endpoints only: new members, the same views.
        write(
            dir.path(),
            "service.yaml",
            &SERVICE.replace("ADDRESS", "10.0.0.2"),
        );
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let second = controller.snapshot(2, &feedback, &publish).unwrap();
        assert_eq!(members(&second), ["10.0.0.2".parse::<IpAddr>().unwrap()]);
        assert!(Arc::ptr_eq(&first.ingresses, &second.ingresses));

        // Other addresses to publish: built again.
        let other = [address("192.0.2.9")];
        let third = controller.snapshot(3, &feedback, &other).unwrap();
        assert!(!Arc::ptr_eq(&second.ingresses, &third.ingresses));
        assert_eq!(addresses(&third), other);

        // No agent serves the load balancer any more: no address.
        let fourth = controller.snapshot(4, &BTreeMap::new(), &other).unwrap();
        assert!(addresses(&fourth).is_empty());

        // The Ingress changed (a host with a problem), nothing else: built again, with its
        // diagnostic.
        let fifth = controller.snapshot(5, &feedback, &other).unwrap();
        write(
            dir.path(),
            "ingress.yaml",
            &INGRESS.replace("HOST", "Bad_Host"),
        );
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let sixth = controller.snapshot(6, &feedback, &other).unwrap();
        assert!(fifth.ingresses[0].diagnostics.is_empty());
        assert!(!sixth.ingresses[0].diagnostics.is_empty());
    }

    const GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: BACKEND, port: 80}]
";

    /// The status our route's parent entry gives condition `type_`.
    fn route_condition(snapshot: &Snapshot, type_: &str) -> serde_json::Value {
        let route = serde_json::to_value(&snapshot.gateway_api.routes[0]).unwrap();
        let conditions = route["status"]["parents"][0]["conditions"]
            .as_array()
            .unwrap();
        let condition = conditions.iter().find(|c| c["type"] == type_).unwrap();
        condition["status"].clone()
    }

    #[test]
    fn an_ingress_change_shares_the_gateway_api_statuses_and_a_route_change_does_not() {
        let (dir, paths) = ingress_and_service();
        write(
            dir.path(),
            "gateway.yaml",
            &GATEWAY.replace("BACKEND", "web"),
        );
        let mut catalog = Catalog::new();
        let metrics = AppMetrics::new(&mut prometheus_client::registry::Registry::default());
        let mut controller = Controller::new(Config::default());
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let feedback = served(&controller);
        let first = controller.snapshot(1, &feedback, &[]).unwrap();
        assert_eq!(route_condition(&first, "ResolvedRefs"), "True");

        // An Ingress change: the statuses are shared.
        write(
            dir.path(),
            "ingress.yaml",
            &INGRESS.replace("HOST", "b.test"),
        );
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let second = controller.snapshot(2, &feedback, &[]).unwrap();
        assert!(!Arc::ptr_eq(&first.ingresses, &second.ingresses));
        assert!(Arc::ptr_eq(&first.gateway_api, &second.gateway_api));

        // The route names a Service that does not exist: built again, with its verdict.
        write(
            dir.path(),
            "gateway.yaml",
            &GATEWAY.replace("BACKEND", "missing"),
        );
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let third = controller.snapshot(3, &feedback, &[]).unwrap();
        assert!(!Arc::ptr_eq(&second.gateway_api, &third.gateway_api));
        assert_eq!(route_condition(&third, "ResolvedRefs"), "False");

        // The Gateway is no longer served: built again.
        let fourth = controller.snapshot(4, &BTreeMap::new(), &[]).unwrap();
        assert!(!Arc::ptr_eq(&third.gateway_api, &fourth.gateway_api));
    }

    /// The compile hands the store's encoder the Ingresses the translation changed: after a
    /// one-Ingress change, only that Ingress's fragment is hashed and written.
    #[test]
    fn a_one_ingress_change_is_encoded_from_what_the_translation_names() {
        let dir = tempfile::tempdir().unwrap();
        let paths: [PathBuf; 1] = [dir.path().to_path_buf()];
        write(
            dir.path(),
            "ingress.yaml",
            &INGRESS.replace("HOST", "a.test"),
        );
        let other = INGRESS.split("---").next().unwrap();
        let other = other.replace("name: web, namespace", "name: other, namespace");
        write(dir.path(), "other.yaml", &other.replace("HOST", "b.test"));
        write(
            dir.path(),
            "service.yaml",
            &SERVICE.replace("ADDRESS", "10.0.0.1"),
        );
        let mut catalog = Catalog::new();
        let metrics = AppMetrics::new(&mut prometheus_client::registry::Registry::default());
        let mut controller = Controller::new(Config::default());
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let mut encoder = portico_store::codec::Encoder::default();
        let desired = &controller.compiled().unwrap().desired;
        encoder.desired_changes(desired, BTreeMap::new());
        assert_eq!(encoder.hashed(), 3, "two fragments and a pool");

        write(
            dir.path(),
            "ingress.yaml",
            &INGRESS.replace("HOST", "c.test"),
        );
        controller.compile(Arc::new(catalog.reload(&paths)), &metrics);
        let desired = &controller.compiled().unwrap().desired;
        let named: Vec<&str> = (desired.rebuilt.load_balancers.values())
            .flat_map(|r| r.sources.iter().map(|s| s.name.as_str()))
            .collect();
        assert_eq!(named, ["web"]);
        let ops = encoder.desired_changes(desired, BTreeMap::new());
        assert_eq!(encoder.hashed(), 1, "web's fragment only");
        assert_eq!(ops.len(), 1, "{ops:?}");
        assert!(ops[0].key().contains("/src/"));
    }
}
