//! TLS termination in the model: every load balancer gets a TERMINATED_HTTPS listener beside
//! its HTTP one, with the same policies and an SNI host → Secret entry for each host named in
//! a served Ingress's `spec.tls`; on the HTTP listener, requests for those hosts are redirected
//! to HTTPS (308) unless their Ingress says `portico.dev/ssl-redirect: "false"`; so are those
//! of the rule hosts of an Ingress with `force-ssl-redirect: "true"`, TLS or not.
//!
//! A host named by two Ingresses with different Secrets gets the older Ingress's (the younger
//! is warned). A `spec.tls` entry without hosts applies to the Ingress's rule hosts. Only
//! references go into the model; [`crate::certificates`] loads the key material.

use crate::source::Source;
use crate::{Config, SSL_REDIRECT_ANNOTATION};
use k8s_openapi::api::networking::v1::IngressTLS;
use portico_model::{
    CompareType, Diagnostic, L7Policy, L7PolicyId, L7Rule, L7RuleId, Listener, ListenerId,
    ListenerTls, ObjectRef, PolicyAction, Protocol, RuleType, SniCertificate,
};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The status of HTTP → HTTPS redirects: permanent, method and body kept (as ingress-nginx).
pub(crate) const REDIRECT_STATUS: u16 = 308;

/// The HTTP listener (its policies for TLS hosts turned into redirects) and the
/// TERMINATED_HTTPS listener `https_id` with `https_policies` (the HTTP listener's policies,
/// before any redirect, under ids of their own). `sources` are oldest first.
pub(crate) fn listeners(
    https_id: ListenerId,
    mut http: Listener,
    https_policies: Vec<Arc<L7Policy>>,
    sources: &[Arc<Source>],
    config: &Config,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Listener> {
    let hosts = TlsHosts::of(sources, diagnostics);
    let passthrough = crate::passthrough::entries(sources, &https_policies, diagnostics);
    let mut https = https_listener(https_id, &http, https_policies, hosts.sni, config);
    if let Some(tls) = &mut https.tls {
        tls.passthrough = passthrough;
    }
    redirect(&mut http, &hosts.redirect, &hosts.opted_out);
    vec![http, https]
}

/// What the `spec.tls` entries of the served Ingresses say, merged.
#[derive(Default)]
struct TlsHosts {
    /// Host (lower-cased, or `*.suffix`) → certificate, the oldest Ingress's.
    sni: BTreeMap<String, SniCertificate>,
    /// Hosts whose HTTP requests are redirected: named in `spec.tls` by an Ingress that does
    /// not opt out; each with the oldest such Ingress.
    redirect: BTreeMap<String, Arc<ObjectRef>>,
    /// Ingresses with `portico.dev/ssl-redirect: "false"`.
    opted_out: BTreeSet<Arc<ObjectRef>>,
}

impl TlsHosts {
    fn of(sources: &[Arc<Source>], diagnostics: &mut Vec<Diagnostic>) -> Self {
        let mut hosts = TlsHosts::default();
        for source in sources {
            // `force-ssl-redirect` redirects its hosts whether they have TLS or not, and
            // whatever `ssl-redirect` says (ingress-nginx: TLS terminated in front of it).
            let forced = source.location.force_ssl_redirect;
            let redirects = ssl_redirect(source, diagnostics) || forced;
            if !redirects {
                hosts.opted_out.insert(source.object.clone());
            }
            let ingress = source.ingress();
            if forced {
                for rule in &ingress.spec.rules {
                    let host = rule.host.as_deref().filter(|h| !h.is_empty());
                    if let Some(host) = host {
                        let first = hosts.redirect.entry(host.to_ascii_lowercase());
                        first.or_insert_with(|| source.object.clone());
                    }
                }
            }
            for (i, entry) in ingress.spec.tls.iter().enumerate() {
                for (host, field) in entry_hosts(source, entry, i) {
                    if redirects {
                        let first = hosts.redirect.entry(host.clone());
                        first.or_insert_with(|| source.object.clone());
                    }
                    hosts.add_sni(source, entry, host, field, diagnostics);
                }
            }
        }
        hosts
    }

    fn add_sni(
        &mut self,
        source: &Source,
        entry: &IngressTLS,
        host: String,
        field: String,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        let Some(secret) = entry.secret_name.as_deref().filter(|s| !s.is_empty()) else {
            return;
        };
        let certificate = ObjectRef::new("Secret", &source.key.namespace, secret);
        match self.sni.entry(host) {
            Entry::Vacant(slot) => {
                let host = slot.key().clone();
                let source = ObjectRef::clone(&source.object);
                slot.insert(SniCertificate {
                    host,
                    certificate,
                    source,
                });
            }
            Entry::Occupied(first) if first.get().certificate == certificate => {}
            Entry::Occupied(first) => {
                let winner = first.get();
                let message = format!(
                    "host \"{}\" already has the certificate of {} from {}, which is older; \
                     this entry's certificate is not used for it",
                    winner.host, winner.certificate, winner.source
                );
                let loser = ObjectRef::clone(&source.object);
                diagnostics.push(Diagnostic::warning(loser, field, message));
            }
        }
    }
}

/// The hosts of `spec.tls[i]` (lower-cased) with the field naming each; an entry without
/// hosts stands for the Ingress's rule hosts.
fn entry_hosts(source: &Source, entry: &IngressTLS, i: usize) -> Vec<(String, String)> {
    let listed = entry.hosts.as_deref().unwrap_or_default();
    if !listed.is_empty() {
        let hosts = listed.iter().enumerate().filter(|(_, h)| !h.is_empty());
        let field = |j| format!("spec.tls[{i}].hosts[{j}]");
        return hosts
            .map(|(j, h)| (h.to_ascii_lowercase(), field(j)))
            .collect();
    }
    let ingress = source.ingress();
    let hosts = ingress.spec.rules.iter().filter_map(|r| r.host.as_deref());
    let hosts: BTreeSet<String> = hosts
        .filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let field = format!("spec.tls[{i}]");
    hosts.into_iter().map(|h| (h, field.clone())).collect()
}

/// The `portico.dev/ssl-redirect` annotation (or ingress-nginx's
/// `nginx.ingress.kubernetes.io/ssl-redirect`): `"true"` (the default) or `"false"`; any other
/// value is reported and the default applies.
fn ssl_redirect(source: &Source, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let ingress = source.ingress();
    let annotations = ingress.metadata.annotations.as_ref();
    let nginx = "nginx.ingress.kubernetes.io/ssl-redirect";
    let found = [SSL_REDIRECT_ANNOTATION, nginx]
        .into_iter()
        .find_map(|k| annotations.and_then(|a| a.get(k)).map(|v| (k, v)));
    let Some((name, value)) = found else {
        return true;
    };
    match value.to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        _ => {
            let field = format!("metadata.annotations[{name}]");
            let message = format!(
                "invalid value {value:?}: must be \"true\" or \"false\"; the default \
                 (\"true\") applies"
            );
            diagnostics.push(Diagnostic::warning(
                ObjectRef::clone(&source.object),
                field,
                message,
            ));
            true
        }
    }
}

/// The TERMINATED_HTTPS listener: `policies`, the HTTP listener's defaults, the certificates.
fn https_listener(
    id: ListenerId,
    http: &Listener,
    policies: Vec<Arc<L7Policy>>,
    sni: BTreeMap<String, SniCertificate>,
    config: &Config,
) -> Listener {
    let port = config.https_port;
    let default_certificate = config
        .default_certificate
        .as_ref()
        .map(|key| ObjectRef::new("Secret", &key.namespace, &key.name));
    Listener {
        id,
        name: format!("TERMINATED_HTTPS:{port}"),
        protocol: Protocol::TerminatedHttps,
        port,
        policies,
        default_pool: http.default_pool,
        default_source: http.default_source.clone(),
        tls: Some(ListenerTls {
            default_certificate,
            sni: sni.into_values().collect(),
            passthrough: Vec::new(),
            refused: Vec::new(),
            http3_off: false,
        }),
    }
}

/// The host a policy matches, as `spec.tls` writes it: `foo.com`, `*.foo.com`; none for
/// host-less policies.
pub(crate) fn policy_host(policy: &L7Policy) -> Option<String> {
    let rule = policy
        .rules
        .iter()
        .find(|r| r.rule_type == RuleType::HostName)?;
    match rule.compare_type {
        CompareType::EqualTo => Some(rule.value.clone()),
        CompareType::WildcardLabel => Some(format!("*.{}", rule.value)),
        // WildcardSuffix: only Gateway API policies have it, never Ingress ones.
        CompareType::PathPrefix | CompareType::Regex | CompareType::WildcardSuffix => None,
    }
}

/// Whether requests for `host` (a policy's) go to HTTPS: the host itself or the wildcard one
/// label above it has TLS.
fn covered(host: &str, redirect: &BTreeMap<String, Arc<ObjectRef>>) -> bool {
    if redirect.contains_key(host) {
        return true;
    }
    let parent = host.split_once('.').filter(|(label, _)| *label != "*");
    parent.is_some_and(|(_, suffix)| redirect.contains_key(&format!("*.{suffix}")))
}

/// Turns the HTTP policies of TLS hosts into redirects (except those of Ingresses that opt
/// out), and adds a catch-all redirect (`/`, Prefix) for each such host that has none, so
/// that every HTTP request for it goes to HTTPS.
fn redirect(
    http: &mut Listener,
    hosts: &BTreeMap<String, Arc<ObjectRef>>,
    opted_out: &BTreeSet<Arc<ObjectRef>>,
) {
    if hosts.is_empty() {
        return;
    }
    let mut with_root = BTreeSet::new();
    for policy in &mut http.policies {
        let Some(host) = policy_host(policy) else {
            continue;
        };
        if is_root_prefix(policy) {
            with_root.insert(host.clone());
        }
        if covered(&host, hosts) && !opted_out.contains(&policy.source) {
            Arc::make_mut(policy).action = PolicyAction::RedirectToHttps {
                status: REDIRECT_STATUS,
            };
        }
    }
    let mut catch_alls: Vec<L7Policy> = (hosts.iter())
        .filter(|(h, _)| !with_root.contains(*h))
        .map(|(host, source)| catch_all(http.id, host, source))
        .collect();
    if !catch_alls.is_empty() {
        // Each goes after the last policy of its host's place in the host order; policies are
        // in that order already, so one merge pass places them all.
        catch_alls.sort_by(|a, b| host_order(a).cmp(&host_order(b)));
        let policies = std::mem::take(&mut http.policies);
        let mut merged = Vec::with_capacity(policies.len() + catch_alls.len());
        let mut catch_alls = catch_alls.into_iter().map(Arc::new).peekable();
        for policy in policies {
            while let Some(next) = catch_alls.next_if(|c| host_order(&policy) > host_order(c)) {
                merged.push(next);
            }
            merged.push(policy);
        }
        merged.extend(catch_alls);
        http.policies = merged;
    }
}

fn is_root_prefix(policy: &L7Policy) -> bool {
    policy.rules.iter().any(|r| {
        r.rule_type == RuleType::Path && r.compare_type == CompareType::PathPrefix && r.value == "/"
    })
}

/// The translator's host order: exact hosts, then wildcards (by suffix), then host-less.
fn host_order(policy: &L7Policy) -> (u8, &str) {
    let rule = policy
        .rules
        .iter()
        .find(|r| r.rule_type == RuleType::HostName);
    match rule.map(|r| (r.compare_type, r.value.as_str())) {
        Some((CompareType::EqualTo, host)) => (0, host),
        Some((CompareType::WildcardLabel, suffix)) => (1, suffix),
        _ => (2, ""),
    }
}

/// A redirect of every path of `host` (as `spec.tls` writes it), placed last among the
/// host's policies (the shortest path).
fn catch_all(listener: ListenerId, host: &str, source: &Arc<ObjectRef>) -> L7Policy {
    let id = L7PolicyId::derive(&format!("{listener}/policy/redirect/{host}"));
    let (compare_type, value) = match host.strip_prefix("*.") {
        Some(suffix) => (CompareType::WildcardLabel, suffix),
        None => (CompareType::EqualTo, host),
    };
    let rule = |rule_type, compare_type, value: &str, name| L7Rule {
        id: L7RuleId::derive(&format!("{id}/{name}")),
        rule_type,
        compare_type,
        key: None,
        value: value.to_owned(),
    };
    L7Policy {
        id,
        action: PolicyAction::RedirectToHttps {
            status: REDIRECT_STATUS,
        },
        rules: vec![
            rule(RuleType::HostName, compare_type, value, "host"),
            rule(RuleType::Path, CompareType::PathPrefix, "/", "path"),
        ],
        source: source.clone(),
        precedence: 0,
        options: None,
    }
}
