//! `ssl-passthrough`: the hosts of an Ingress with `ssl-passthrough: "true"` are not
//! terminated on the HTTPS port; their TLS streams go, as they are, to the pool of the host's
//! `/` path (ingress-nginx's root location), else of its shortest path. The other hosts of the
//! port still terminate. On a host two Ingresses pass through, the older one's pool serves and
//! the younger is warned.

use crate::source::Source;
use crate::tls::policy_host;
use portico_model::{
    CompareType, Diagnostic, L7Policy, ObjectRef, PolicyAction, PoolId, RuleType, SniPassthrough,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The passthrough entries of the served Ingresses (`sources`, oldest first), ordered by host,
/// with the pools their HTTPS policies (`policies`) forward to.
pub(crate) fn entries(
    sources: &[Arc<Source>],
    policies: &[Arc<L7Policy>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<SniPassthrough> {
    let mut hosts: BTreeMap<String, SniPassthrough> = BTreeMap::new();
    for source in sources.iter().filter(|s| s.location.ssl_passthrough) {
        let own = policies.iter().filter(|p| *p.source == *source.object);
        let mut pools: BTreeMap<String, (usize, PoolId)> = BTreeMap::new();
        for policy in own {
            let (Some(host), Some((length, pool))) = (policy_host(policy), root_pool(policy))
            else {
                continue;
            };
            let shortest = pools.entry(host).or_insert((length, pool));
            if length < shortest.0 {
                *shortest = (length, pool);
            }
        }
        for (host, (_, pool)) in pools {
            add(&mut hosts, source, host, pool, diagnostics);
        }
    }
    hosts.into_values().collect()
}

fn add(
    hosts: &mut BTreeMap<String, SniPassthrough>,
    source: &Source,
    host: String,
    pool: PoolId,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if let Some(first) = hosts.get(&host) {
        let message = format!(
            "host \"{host}\" already passes through for {}, which is older; this Ingress's \
             backend does not get its TLS",
            first.source
        );
        let field = "metadata.annotations[ssl-passthrough]";
        let object = ObjectRef::clone(&source.object);
        return diagnostics.push(Diagnostic::warning(object, field, message));
    }
    let source = ObjectRef::clone(&source.object);
    hosts.insert(
        host.clone(),
        SniPassthrough {
            host,
            pool,
            source,
            terminate: false,
        },
    );
}

/// The length of a forwarding policy's path (the root path `/` counts 0) and its pool;
/// `None` for redirects, splits and regular-expression paths.
fn root_pool(policy: &L7Policy) -> Option<(usize, PoolId)> {
    let PolicyAction::RedirectToPool { pool } = policy.action else {
        return None;
    };
    let path = policy.rules.iter().find(|r| r.rule_type == RuleType::Path);
    match path {
        None => Some((0, pool)),
        Some(rule) if rule.compare_type == CompareType::Regex => None,
        Some(rule) => Some((rule.value.trim_end_matches('/').len(), pool)),
    }
}
