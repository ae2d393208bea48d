//! Pure: one translation → what the admin API shows (Ingress status and diagnostics).

use crate::compile::Compiled;
use portico_admin::{IngressView, LoadBalancerAddress, Snapshot};
use portico_model::{Diagnostic, LoadBalancer, Model};
use portico_translate::gateway::{Reach, Statuses};
use portico_translate::{IngressState, ObjectKey, Translation};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `status.loadBalancer.ingress` for a publish address: an IP goes to `ip`, anything else to
/// `hostname`; none gives no entry.
pub fn status_addresses(publish: Option<&str>) -> Vec<LoadBalancerAddress> {
    match publish {
        None => vec![],
        Some(a) if a.parse::<std::net::IpAddr>().is_ok() => {
            vec![LoadBalancerAddress {
                ip: Some(a.to_owned()),
                hostname: None,
            }]
        }
        Some(a) => vec![LoadBalancerAddress {
            ip: None,
            hostname: Some(a.to_owned()),
        }],
    }
}

/// Builds the admin snapshot: every Ingress with its class, its status (owned and served
/// Ingresses only) and its diagnostics; diagnostics of other objects are listed apart.
pub fn build_snapshot(
    generation: u64,
    source_diagnostics: &[Diagnostic],
    translation: &Translation,
    model: Arc<Model>,
    publish: &[LoadBalancerAddress],
) -> Snapshot {
    let mut by_ingress: BTreeMap<(&str, &str), Vec<Diagnostic>> = BTreeMap::new();
    let mut others = Vec::new();
    for d in source_diagnostics.iter().chain(&translation.diagnostics) {
        if d.object.kind == "Ingress" {
            by_ingress
                .entry((&d.object.namespace, &d.object.name))
                .or_default()
                .push(d.clone());
        } else {
            others.push(d.clone());
        }
    }
    let mut ingresses: Vec<IngressView> = translation
        .ingresses
        .iter()
        .map(|s| view(s, &mut by_ingress, publish))
        .collect();
    // Ingresses the source could not even decode still show up, with their diagnostics.
    for ((namespace, name), diagnostics) in by_ingress {
        let (ns, n) = (namespace.to_owned(), name.to_owned());
        ingresses.push(IngressView::new(ns, n, None, false, vec![], diagnostics));
    }
    ingresses.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    others.sort();
    others.dedup();
    Snapshot {
        generation,
        ready: true,
        model,
        placements: Default::default(),
        ingresses: Arc::new(ingresses),
        services: vec![],
        diagnostics: others,
        detail: vec![],
        gateway_api: Default::default(),
        applied_at: None,
    }
}

fn view<'a>(
    s: &'a IngressState,
    by_ingress: &mut BTreeMap<(&'a str, &'a str), Vec<Diagnostic>>,
    publish: &[LoadBalancerAddress],
) -> IngressView {
    let mut diagnostics = by_ingress
        .remove(&(s.key.namespace.as_str(), s.key.name.as_str()))
        .unwrap_or_default();
    diagnostics.sort();
    diagnostics.dedup();
    let addresses = if s.served { publish.to_vec() } else { vec![] };
    IngressView::new(
        s.key.namespace.clone(),
        s.key.name.clone(),
        s.class.clone(),
        s.owned,
        addresses,
        diagnostics,
    )
}

/// Each of our Gateways' reach: `reach` gives a load balancer's addresses once an agent serves
/// it (none: not served yet).
pub(crate) fn gateway_reaches(
    compiled: &Compiled,
    reach: &dyn Fn(&LoadBalancer) -> Option<Vec<LoadBalancerAddress>>,
) -> BTreeMap<ObjectKey, Reach> {
    let lbs = compiled.desired.model.load_balancers.iter();
    lbs.filter(|lb| lb.origin.kind == "Gateway")
        .map(|lb| {
            let key = ObjectKey::new(&lb.origin.namespace, &lb.origin.name);
            let addresses = reach(lb);
            let values = addresses
                .iter()
                .flatten()
                .filter_map(|a| a.ip.clone().or(a.hostname.clone()));
            let reach = Reach {
                addresses: values.collect(),
                served: addresses.is_some(),
            };
            (key, reach)
        })
        .collect()
}

/// Every Gateway API object with the status it would get, its Gateways reaching as `reaches`
/// says.
pub(crate) fn gateway_api(
    compiled: &Compiled,
    reaches: &BTreeMap<ObjectKey, Reach>,
    controller: &str,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Statuses {
    let verdicts = &compiled.translation.gateways;
    let objects = &compiled.loaded.objects;
    portico_translate::gateway::statuses(objects, verdicts, reaches, controller, now)
}
