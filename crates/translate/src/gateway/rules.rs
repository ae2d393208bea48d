//! A prepared Gateway → its LoadBalancer: one HTTP and one TERMINATED_HTTPS listener (the
//! ports of its served listeners), each attached route's rules as policies on them, ordered
//! by the Gateway API's precedence ([`portico_model::order`]), and the pools they name.

use super::backends;
use super::filters::{self, Place};
use super::listeners::{Attachment, Prepared};
use super::reuse::Built;
use crate::backend::PoolKey;
use crate::memo::Pools;
use crate::{Config, ObjectKey, Objects, PROVIDER_ANNOTATION};
use portico_gateway::{BackendRef, HttpRouteMatch};
use portico_model::{
    CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId, ListenerTls,
    LoadBalancer, LoadBalancerId, ObjectRef, PolicyAction, PolicyOptions, PoolId, Protocol,
    RuleType, SniCertificate, order,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The load balancer of Gateway `gateway`, unless it is not accepted.
pub(crate) fn load_balancer(
    gateway: &Prepared<'_>,
    objects: &Objects,
    config: &Config,
    pools: &mut Pools<'_>,
) -> Option<LoadBalancer> {
    if !gateway.accepted() {
        return None;
    }
    let key = gateway.key;
    let name = format!("gateway/{}/{}", key.namespace, key.name);
    let id = LoadBalancerId::derive(&format!("loadbalancer/{name}"));
    let origin = ObjectRef::new("Gateway", &key.namespace, &key.name);
    let mut used = BTreeMap::new();
    let mut listeners = Vec::new();
    for protocol in [Protocol::Http, Protocol::TerminatedHttps] {
        let served = (gateway.listeners.iter().enumerate())
            .filter(|(_, l)| l.served() && l.protocol == Some(protocol));
        let served: Vec<usize> = served.map(|(i, _)| i).collect();
        let Some(&first) = served.first() else {
            continue;
        };
        let port = u16::try_from(gateway.listeners[first].spec.port).unwrap_or_default();
        let protocol_name = match protocol {
            Protocol::TerminatedHttps => "TERMINATED_HTTPS",
            _ => "HTTP",
        };
        let listener_id = ListenerId::derive(&format!("{id}/listener/{protocol_name}/{port}"));
        let attachments =
            (gateway.attachments.iter()).filter(|a| served.contains(&a.attached.listener));
        // (the policy as built, its order key as built, its precedence with the rank)
        let mut taken: Vec<(Arc<L7Policy>, &order::Key, u32)> = Vec::new();
        let mut seen = foldhash::HashSet::default();
        let scheme = match protocol {
            Protocol::TerminatedHttps => "https",
            _ => "http",
        };
        let place = Place { scheme, port };
        for attachment in attachments {
            let at = (listener_id, id, place);
            let built = (attachment.attached.built).get_or_init(|| built(attachment, at, objects));
            for (pool, key) in &built.pools {
                used.entry(*pool).or_insert_with(|| key.clone());
            }
            let rank = attachment.rank;
            let shared = built.ranked(rank, |unranked| ranked(rank, unranked));
            let each = shared.into_iter().zip(&built.keys);
            for (policy, key) in each.filter(|(p, _)| seen.insert(p.id)) {
                let precedence = policy.precedence;
                taken.push((policy, key, precedence));
            }
        }
        // Passed-through hosts, and those of TLS listeners (their streams are not HTTP), never
        // reach the policies: no isolation for them; the latter's certificates serve.
        let terminated: Vec<usize> = (served.iter().copied())
            .filter(|&i| !gateway.listeners[i].passthrough)
            .collect();
        let http: Vec<usize> = (terminated.iter().copied())
            .filter(|&i| !gateway.listeners[i].terminate)
            .collect();
        let isolated = isolation(gateway, &http, listener_id, &origin);
        let isolated_keys: Vec<order::Key> = isolated.iter().map(order::key).collect();
        let each = isolated.into_iter().zip(&isolated_keys);
        taken.extend(each.map(|(policy, key)| {
            let precedence = policy.precedence;
            (Arc::new(policy), key, precedence)
        }));
        let policies = in_order(taken);
        let tls = (protocol == Protocol::TerminatedHttps).then(|| {
            let mut tls = tls(gateway, &terminated, &origin);
            tls.passthrough = super::tlsroutes::entries(gateway, id, &mut used);
            tls.refused = super::tlsroutes::refused(gateway, &served);
            tls
        });
        listeners.push(Listener {
            id: listener_id,
            name: format!("{protocol_name}:{port}"),
            protocol,
            port,
            policies,
            default_pool: None,
            default_source: None,
            tls,
        });
    }
    let pools = used
        .into_iter()
        .map(|(id, key)| pools.pool(id, &key))
        .collect();
    Some(LoadBalancer {
        id,
        name,
        origin,
        provider: provider(objects, &gateway.gateway.spec.gateway_class_name, config),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(listeners),
        pools,
    })
}

/// The policies of a listener in [`portico_model::order`]'s order, from each policy (its
/// precedence the one on the listener) with its order key as built: what [`order::sort`]
/// gives, without computing a key.
fn in_order(mut taken: Vec<(Arc<L7Policy>, &order::Key, u32)>) -> Vec<Arc<L7Policy>> {
    // Stable, as `order::sort` is.
    taken.sort_by(|a, b| full_key(a).cmp(&full_key(b)));
    taken.into_iter().map(|(policy, _, _)| policy).collect()
}

/// The order key of a policy taken on a listener: its key as built with its precedence on the
/// listener (a policy that can never match keeps its key's 0, as `order::key` gives it).
#[allow(clippy::type_complexity)]
fn full_key<'k>(
    &(_, k, precedence): &(Arc<L7Policy>, &'k order::Key, u32),
) -> (
    u8,
    Reverse<usize>,
    &'k str,
    Reverse<usize>,
    bool,
    &'k str,
    Reverse<(bool, usize, usize)>,
    u32,
) {
    let precedence = if k.0 == order::NEVER { k.7 } else { precedence };
    (k.0, k.1, &k.2, k.3, k.4, &k.5, k.6, precedence)
}

/// Listener isolation: a request whose host matches a listener's hostname reaches only that
/// listener's routes, not those of a listener on the same port whose hostname (or lack of
/// one) also covers it. Each served listener whose hostname another one covers gets a
/// catch-all answering 404, last among the policies of its host, so that such a request
/// does not fall through to the wider listener's policies.
fn isolation(
    gateway: &Prepared<'_>,
    served: &[usize],
    listener: ListenerId,
    origin: &ObjectRef,
) -> Vec<L7Policy> {
    let hosts: Vec<Option<String>> = (served.iter())
        .map(|&i| {
            gateway.listeners[i]
                .spec
                .hostname
                .as_deref()
                .map(str::to_ascii_lowercase)
        })
        .collect();
    let covered = |host: &str| {
        (hosts.iter().flatten()).any(|other| other != host && super::attach::covers(other, host))
            || hosts.contains(&None)
    };
    let source = Arc::new(origin.clone());
    let mut seen = BTreeSet::new();
    let isolated = hosts
        .iter()
        .flatten()
        .filter(|h| covered(h) && seen.insert(*h));
    isolated
        .map(|host| {
            let id = L7PolicyId::derive(&format!("{listener}/isolation/{host}"));
            L7Policy {
                id,
                action: PolicyAction::Reject { status: 404 },
                rules: rules(id, Some(host), &HttpRouteMatch::default()),
                source: source.clone(),
                precedence: u32::MAX,
                options: None,
            }
        })
        .collect()
}

/// The GatewayClass's `portico.dev/provider`, else `--provider`.
pub(super) fn provider(objects: &Objects, class: &str, config: &Config) -> String {
    let class = objects.gateway_classes.get(class);
    let annotations = class.and_then(|c| c.metadata.annotations.as_ref());
    let annotated = annotations.and_then(|a| a.get(PROVIDER_ANNOTATION));
    annotated.unwrap_or(&config.default_provider).clone()
}

/// The certificates of the served HTTPS listeners: one SNI entry per hostname, and the
/// default one from the listener without hostname (else the first).
fn tls(gateway: &Prepared<'_>, served: &[usize], origin: &ObjectRef) -> ListenerTls {
    let secret = |key: &ObjectKey| ObjectRef::new("Secret", &key.namespace, &key.name);
    let mut sni: Vec<SniCertificate> = Vec::new();
    let mut default = None;
    for &i in served {
        let listener = &gateway.listeners[i];
        let Some(certificate) = listener.certificates.first() else {
            continue;
        };
        match listener.spec.hostname.as_deref() {
            Some(host) => sni.push(SniCertificate {
                host: host.to_ascii_lowercase(),
                certificate: secret(certificate),
                source: origin.clone(),
            }),
            None => {
                default.get_or_insert_with(|| secret(certificate));
            }
        }
    }
    sni.sort_by(|a, b| a.host.cmp(&b.host));
    sni.dedup_by(|a, b| a.host == b.host);
    let first = served
        .iter()
        .find_map(|&i| gateway.listeners[i].certificates.first());
    ListenerTls {
        default_certificate: default.or_else(|| first.map(secret)),
        sni,
        passthrough: Vec::new(),
        refused: Vec::new(),
        http3_off: false,
    }
}

/// The policies of an attachment on a model listener, their precedence without the route's
/// rank, and the pools they name.
fn built(
    attachment: &Attachment<'_>,
    at: (ListenerId, LoadBalancerId, Place<'_>),
    objects: &Objects,
) -> Built {
    let mut pools = BTreeMap::new();
    let policies = policies_of(attachment, at, objects, &mut pools);
    Built {
        keys: policies.iter().map(order::key).collect(),
        ranked: std::sync::Mutex::new((0, Vec::new())),
        policies,
        pools: pools.into_iter().collect(),
    }
}

/// One policy per (rule, match, hostname) of an attached route.
fn policies_of(
    attachment: &Attachment<'_>,
    (listener, lb, place): (ListenerId, LoadBalancerId, Place<'_>),
    objects: &Objects,
    pools: &mut BTreeMap<PoolId, PoolKey>,
) -> Vec<L7Policy> {
    let key = attachment.route;
    let kind = super::kind(attachment.spec);
    let namespace = (kind, key.namespace.as_str());
    let source = Arc::new(ObjectRef::new(kind, &key.namespace, &key.name));
    let mut out = Vec::new();
    for (r, rule) in attachment.spec.spec.rules.iter().enumerate() {
        let own = filters::decode(&rule.filters);
        let timeouts = filters::timeouts(rule).unwrap_or_default();
        for (m, matched) in rule.effective_matches().iter().enumerate() {
            let mut mirror = |b: &BackendRef| backends::pool(b, namespace, objects, lb, pools);
            let (redirect, mut options) = filters::compile(&own, matched, place, &mut mirror);
            options.timeouts = timeouts;
            let shares = (rule.backend_refs.iter())
                .map(|b| {
                    let theirs = filters::decode(&b.filters);
                    let (_, backend) = filters::compile(&theirs, matched, place, &mut mirror);
                    (!theirs.is_empty()).then(|| Arc::new(filters::merge(&options, backend)))
                })
                .collect();
            let action = match redirect {
                Some(redirect) => PolicyAction::RequestRedirect(redirect),
                None => backends::action(rule, (namespace, objects), lb, pools, shares),
            };
            let options = (options != PolicyOptions::default()).then(|| Arc::new(options));
            for host in &attachment.attached.hosts {
                let id = format!(
                    "{listener}/route/{key}/{r}/{m}/{}",
                    host.as_deref().unwrap_or("")
                );
                let id = L7PolicyId::derive(&id);
                out.push(L7Policy {
                    id,
                    action: action.clone(),
                    rules: rules(id, host.as_deref(), matched),
                    source: source.clone(),
                    precedence: unranked(r, m),
                    options: options.clone(),
                });
            }
        }
    }
    out
}

/// Ties broken by route age, then rule, then match: at most 16 rules of 64 matches each.
/// The rule and match part, kept in a route's memo ([`ranked`] adds the age).
fn unranked(rule: usize, matched: usize) -> u32 {
    let place = rule.min(15) * 64 + matched.min(63);
    u32::try_from(place).unwrap_or(u32::MAX)
}

/// The precedence of a policy of the route of age rank `rank` (oldest first) whose
/// [`unranked`] precedence is `unranked`.
fn ranked(rank: usize, unranked: u32) -> u32 {
    let place = rank.saturating_mul(1024).saturating_add(unranked as usize);
    u32::try_from(place).unwrap_or(u32::MAX)
}

/// A match's rules: host (if any), path, each header (the first match of a name counts).
fn rules(policy: L7PolicyId, host: Option<&str>, matched: &HttpRouteMatch) -> Vec<L7Rule> {
    let rule = |name: String, rule_type, compare_type, key, value: &str| L7Rule {
        id: L7RuleId::derive(&format!("{policy}/{name}")),
        rule_type,
        compare_type,
        key,
        value: value.to_owned(),
    };
    let mut out = Vec::new();
    if let Some(host) = host {
        let (compare, value) = match host.strip_prefix("*.") {
            Some(suffix) => (CompareType::WildcardSuffix, suffix),
            None => (CompareType::EqualTo, host),
        };
        out.push(rule(
            "host".into(),
            RuleType::HostName,
            compare,
            None,
            value,
        ));
    }
    let (path_type, path) = matched.path_match();
    let (compare, path) = match path_type {
        "Exact" => (CompareType::EqualTo, path.to_owned()),
        "RegularExpression" => (CompareType::Regex, whole(path)),
        _ => (CompareType::PathPrefix, path.to_owned()),
    };
    out.push(rule("path".into(), RuleType::Path, compare, None, &path));
    if let Some(method) = &matched.method {
        out.push(rule(
            "method".into(),
            RuleType::Method,
            CompareType::EqualTo,
            None,
            method,
        ));
    }
    let mut names = BTreeSet::new();
    for header in &matched.headers {
        let name = header.name.to_ascii_lowercase();
        if names.insert(name.clone()) {
            let (compare, value) = value_match(header);
            let id = format!("header/{name}");
            out.push(rule(id, RuleType::Header, compare, Some(name), &value));
        }
    }
    let mut names = BTreeSet::new();
    for query in &matched.query_params {
        if names.insert(query.name.clone()) {
            let (compare, value) = value_match(query);
            let id = format!("query/{}", query.name);
            out.push(rule(
                id,
                RuleType::Query,
                compare,
                Some(query.name.clone()),
                &value,
            ));
        }
    }
    out
}

/// A header or query parameter match's comparison: `Exact`, or a regular expression.
fn value_match(matched: &portico_gateway::HeaderMatch) -> (CompareType, String) {
    match matched.match_type() {
        "RegularExpression" => (CompareType::Regex, whole(&matched.value)),
        _ => (CompareType::EqualTo, matched.value.clone()),
    }
}

/// A Gateway API regular expression as the model's [`CompareType::Regex`] (matched from the
/// value's start, case-insensitively) made to match the whole value, case-sensitively, as
/// RE2 full matches do in the API's other implementations.
pub(crate) fn whole(pattern: &str) -> String {
    format!("(?-i:{pattern})$")
}
