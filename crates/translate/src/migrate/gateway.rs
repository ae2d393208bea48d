//! `portico migrate --to gateway-api`: the served Ingresses of Portico's classes as Gateway API
//! objects that route as they do, for everything the Gateway API can express: a GatewayClass
//! with Portico's controller name; a Gateway per IngressClass with an HTTP listener and an
//! HTTPS listener per TLS host (its Secret, a ReferenceGrant where the Secret lives in another
//! namespace); an HTTPRoute per Ingress host, in the Ingress's namespace: paths, backends
//! (named ports resolved through the Service), the default backend, the HTTP → HTTPS
//! redirect, `permanent-` and `temporal-redirect`, `app-root`, rewrites that need no regular
//! expression, `upstream-vhost`, `x-forwarded-prefix`, and canaries (weight, header, cookie).
//! What it cannot express is a [`Note`] naming the Ingress; nothing is dropped silently.
//!
//! Pure: objects and their translation in, objects and notes out.

use crate::annotations::{self, HeaderMatch, Location, NGINX, PORTICO};
use crate::kept::{KeptBackend, KeptIngress, PathType};
use crate::{ObjectKey, Objects, SSL_REDIRECT_ANNOTATION, Translation};
use portico_model::ObjectRef;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const API_VERSION: &str = "gateway.networking.k8s.io/v1";
const GRANT_API_VERSION: &str = "gateway.networking.k8s.io/v1beta1";

/// The Gateway API allows this many rules in one HTTPRoute.
const RULES_PER_ROUTE: usize = 16;

/// The HTTP → HTTPS redirect's status, as Portico serves it for Ingresses.
const SSL_REDIRECT_STATUS: u16 = 308;

/// `app-root`'s status, as ingress-nginx answers it.
const APP_ROOT_STATUS: u16 = 302;

/// What the objects are named and where they go.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The GatewayClass's `spec.controllerName` (`--gateway-controller-name`).
    pub controller_name: String,
    /// The GatewayClass's name.
    pub class_name: String,
    /// The namespace of the Gateways.
    pub namespace: String,
    pub http_port: u16,
    pub https_port: u16,
}

/// The objects (as the API server takes them) and what they leave out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Converted {
    pub objects: Vec<Value>,
    pub notes: Vec<Note>,
}

/// Something of an Ingress the objects do not express, or express differently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub namespace: String,
    pub name: String,
    pub message: String,
}

/// One served Ingress of a class, with its annotations read.
struct Served {
    key: ObjectKey,
    ingress: Arc<KeptIngress>,
    location: Arc<Location>,
}

impl Served {
    fn annotation(&self, key: &str) -> Option<&str> {
        let annotations = self.ingress.metadata.annotations.as_ref()?;
        annotations.get(key).map(String::as_str)
    }

    /// `ssl-redirect: "false"` (Portico's or ingress-nginx's key): its routes are not
    /// redirected to HTTPS.
    fn opted_out(&self) -> bool {
        let value = (self.annotation(SSL_REDIRECT_ANNOTATION))
            .or_else(|| self.annotation("nginx.ingress.kubernetes.io/ssl-redirect"));
        value.is_some_and(|v| v.eq_ignore_ascii_case("false"))
    }

    fn rule_hosts(&self) -> impl Iterator<Item = String> + '_ {
        let rules = self.ingress.spec.rules.iter();
        rules.filter_map(|r| {
            r.host
                .as_deref()
                .filter(|h| !h.is_empty())
                .map(str::to_ascii_lowercase)
        })
    }
}

/// The Gateway API objects for the Ingresses `translation` serves, one Gateway per class.
pub fn to_gateway_api(
    objects: &Objects,
    translation: &Translation,
    options: &GatewayOptions,
) -> Converted {
    let mut classes: BTreeMap<String, Vec<Served>> = BTreeMap::new();
    let mut scratch = Vec::new();
    let states = translation.ingresses.iter().filter(|s| s.owned && s.served);
    for state in states {
        let Some(ingress) = objects.ingresses.get(&state.key) else {
            continue;
        };
        let object = ObjectRef::new("Ingress", &state.key.namespace, &state.key.name);
        let location = annotations::location(&object, ingress, &mut scratch);
        let class = state
            .class
            .clone()
            .unwrap_or_else(|| options.class_name.clone());
        classes.entry(class).or_default().push(Served {
            key: state.key.clone(),
            ingress: ingress.clone(),
            location,
        });
    }
    let mut out = Converted::default();
    out.objects.push(json!({
        "apiVersion": API_VERSION,
        "kind": "GatewayClass",
        "metadata": {"name": options.class_name},
        "spec": {"controllerName": options.controller_name},
    }));
    for (class, mut served) in classes {
        served.sort_by(|a, b| age(a).cmp(&age(b)));
        Class::new(&class, &served, objects, options, &mut out).convert();
    }
    out
}

/// Older first: by creationTimestamp (a missing one counts as newest), then namespace/name,
/// as the translation orders Ingresses.
fn age(
    s: &Served,
) -> (
    bool,
    Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    &ObjectKey,
) {
    let created = s.ingress.metadata.creation_timestamp.as_ref();
    (created.is_none(), created, &s.key)
}

/// One class's Gateway and routes.
struct Class<'a> {
    gateway: String,
    served: &'a [Served],
    objects: &'a Objects,
    options: &'a GatewayOptions,
    out: &'a mut Converted,
    /// TLS host → (listener name, Secret's namespace and name), the oldest Ingress's.
    tls: BTreeMap<String, (String, ObjectKey)>,
    /// Hosts whose HTTP requests are redirected to HTTPS.
    redirected: BTreeSet<String>,
    /// Hosts whose paths are regular expressions (`use-regex`, `rewrite-target`).
    regex_hosts: BTreeSet<String>,
    /// Hosts some Ingress routes `/` for (a prefix): no request for them reaches the default
    /// backend.
    rooted_hosts: BTreeSet<String>,
    /// The class's default backend (the oldest Ingress's `spec.defaultBackend`).
    default_backend: Option<Value>,
    /// (host, path as matched) → the canary Ingress for it.
    canaries: BTreeMap<(String, String), (&'a Served, &'a KeptBackend)>,
}

impl<'a> Class<'a> {
    fn new(
        class: &str,
        served: &'a [Served],
        objects: &'a Objects,
        options: &'a GatewayOptions,
        out: &'a mut Converted,
    ) -> Self {
        let mut c = Class {
            gateway: class.to_owned(),
            served,
            objects,
            options,
            out,
            tls: BTreeMap::new(),
            redirected: BTreeSet::new(),
            regex_hosts: BTreeSet::new(),
            rooted_hosts: BTreeSet::new(),
            default_backend: None,
            canaries: BTreeMap::new(),
        };
        c.read_hosts();
        c
    }

    fn note(&mut self, s: &Served, message: impl Into<String>) {
        self.out.notes.push(Note {
            namespace: s.key.namespace.clone(),
            name: s.key.name.clone(),
            message: message.into(),
        });
    }

    /// The TLS hosts, the redirected hosts, the regex hosts and the canaries, as the
    /// translation reads them.
    fn read_hosts(&mut self) {
        for s in self.served {
            let rule_hosts: Vec<String> = s.rule_hosts().collect();
            for (i, entry) in s.ingress.spec.tls.iter().enumerate() {
                let hosts: Vec<String> = match &entry.hosts {
                    Some(h) if !h.is_empty() => h.iter().map(|h| h.to_ascii_lowercase()).collect(),
                    _ => rule_hosts.clone(),
                };
                let Some(secret) = entry.secret_name.as_deref().filter(|n| !n.is_empty()) else {
                    let message = format!(
                        "spec.tls[{i}] has no secretName: Portico serves its hosts with the default \
                         certificate; an HTTPS listener needs a certificateRef, so none is written"
                    );
                    self.note(s, message);
                    continue;
                };
                for host in hosts {
                    let listener = format!("https-{}", host.replace('*', "wildcard"));
                    let secret = ObjectKey::new(&s.key.namespace, secret);
                    self.tls.entry(host.clone()).or_insert((listener, secret));
                    if !s.opted_out() {
                        self.redirected.insert(host);
                    }
                }
            }
            if s.location.force_ssl_redirect {
                self.redirected.extend(rule_hosts.iter().cloned());
            }
            for rule in s.ingress.spec.rules.iter() {
                let host = host_of(rule.host.as_deref());
                for path in rule.http.iter().flatten() {
                    let written = path.path.as_deref().unwrap_or_default();
                    let exact = matches!(path.path_type, PathType::Exact);
                    if !exact && plain_key(&path.path_type, written) == "/" {
                        self.rooted_hosts.insert(host.clone());
                    }
                    if s.location.makes_regex(written) {
                        self.regex_hosts.insert(host.clone());
                    }
                    if s.location.canary.is_some() {
                        let key = (host.clone(), plain_key(&path.path_type, written));
                        self.canaries.entry(key).or_insert((s, &path.backend));
                    }
                }
            }
        }
    }

    fn convert(mut self) {
        self.gateway_and_grants();
        self.default_backend_route();
        for s in self.served {
            self.unexpressed_annotations(s);
            if s.location.canary.is_some() {
                continue;
            }
            let rules = s.ingress.spec.rules.iter().enumerate();
            for (i, rule) in rules {
                let host = host_of(rule.host.as_deref());
                let paths = rule.http.iter().flatten();
                let mut http_rules = Vec::new();
                let mut redirect_rules = Vec::new();
                for (j, path) in paths.enumerate() {
                    let field = format!("spec.rules[{i}].http.paths[{j}]");
                    let Some(converted) = self.path_rules(s, &host, path, &field) else {
                        continue;
                    };
                    redirect_rules.extend(converted.iter().map(|r| ssl_redirect(&r["matches"])));
                    http_rules.extend(converted);
                }
                if http_rules.is_empty() {
                    continue;
                }
                let name = if s.ingress.spec.rules.len() == 1 {
                    s.key.name.clone()
                } else {
                    format!("{}-{i}", s.key.name)
                };
                self.host_routes(s, &name, &host, http_rules, redirect_rules);
            }
        }
    }

    /// The class's default backend: an HTTPRoute without hostnames on the HTTP listener (where
    /// any route naming the host takes precedence). On HTTPS listeners, which have a hostname,
    /// a route without one would tie with the host's own routes, so there it is a last rule of
    /// the host's routes instead ([`Class::host_routes`]).
    fn default_backend_route(&mut self) {
        let served = self.served;
        let with_default = served.iter().filter(|s| s.location.canary.is_none());
        for s in with_default {
            let Some(backend) = &s.ingress.spec.default_backend else {
                continue;
            };
            if self.default_backend.is_some() {
                let message = "spec.defaultBackend: an older Ingress of the class holds the \
                               default backend, as in Portico";
                self.note(s, message);
                continue;
            }
            let Some(backend_ref) = self.backend_ref(s, backend, None) else {
                continue;
            };
            let name = format!("{}-default-backend", s.key.name);
            let rules = vec![json!({"backendRefs": [backend_ref]})];
            let route = self.route(s, &name, None, vec![self.parent(Some("http"))], rules);
            self.out.objects.push(route);
            self.default_backend = Some(backend_ref);
        }
    }

    /// The routes of one Ingress host: attached to the HTTPS listener of a TLS host and to
    /// the HTTP listener, where a redirected host's get a redirect instead.
    fn host_routes(
        &mut self,
        s: &Served,
        name: &str,
        host: &str,
        rules: Vec<Value>,
        redirect_rules: Vec<Value>,
    ) {
        let hostname = (!host.is_empty()).then_some(host);
        let https = hostname.and_then(|h| self.tls_listener(h));
        let redirected = hostname.is_some_and(|h| {
            (self.redirected.contains(h) && !s.opted_out()) || s.location.force_ssl_redirect
        });
        let mut parents = Vec::new();
        if hostname.is_none() {
            parents.push(self.parent(None));
        } else {
            if !redirected {
                parents.push(self.parent(Some("http")));
            }
            match &https {
                Some(listener) => parents.push(self.parent(Some(listener))),
                None if redirected => {
                    let message = format!(
                        "host {host}: force-ssl-redirect without a TLS Secret for it: Portico \
                         serves it on HTTPS with the default certificate; the Gateway has no \
                         HTTPS listener for it, so only the redirect is written"
                    );
                    self.note(s, message);
                }
                None => {}
            }
        }
        if redirected {
            let redirect_name = format!("{name}-ssl-redirect");
            let parent = vec![self.parent(Some("http"))];
            for (n, chunk) in redirect_rules.chunks(RULES_PER_ROUTE).enumerate() {
                let route = self.route(
                    s,
                    &chunked(&redirect_name, n),
                    hostname,
                    parent.clone(),
                    chunk.to_vec(),
                );
                self.out.objects.push(route);
            }
        }
        if parents.is_empty() {
            return;
        }
        let mut rules = rules;
        if let (Some(_), Some(backend)) = (&https, &self.default_backend)
            && !self.rooted_hosts.contains(host)
        {
            rules.push(json!({"backendRefs": [backend]}));
        }
        for (n, chunk) in rules.chunks(RULES_PER_ROUTE).enumerate() {
            let route = self.route(
                s,
                &chunked(name, n),
                hostname,
                parents.clone(),
                chunk.to_vec(),
            );
            self.out.objects.push(route);
        }
    }

    /// The listener serving `host` over HTTPS: its own, else a wildcard covering it.
    fn tls_listener(&self, host: &str) -> Option<String> {
        if let Some((listener, _)) = self.tls.get(host) {
            return Some(listener.clone());
        }
        let (_, parent) = host.split_once('.')?;
        let wildcard = format!("*.{parent}");
        self.tls.get(&wildcard).map(|(l, _)| l.clone())
    }

    fn parent(&self, section: Option<&str>) -> Value {
        let mut parent = json!({"name": self.gateway, "namespace": self.options.namespace});
        if let Some(section) = section {
            parent["sectionName"] = json!(section);
        }
        parent
    }

    fn route(
        &self,
        s: &Served,
        name: &str,
        hostname: Option<&str>,
        parents: Vec<Value>,
        rules: Vec<Value>,
    ) -> Value {
        let mut spec = json!({"parentRefs": parents, "rules": rules});
        if let Some(host) = hostname {
            spec["hostnames"] = json!([host]);
        }
        json!({
            "apiVersion": API_VERSION,
            "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": s.key.namespace},
            "spec": spec,
        })
    }

    /// The Gateway, and a ReferenceGrant in each other namespace whose Secrets it uses.
    fn gateway_and_grants(&mut self) {
        let all = json!({"namespaces": {"from": "All"}});
        let mut listeners = vec![json!({
            "name": "http", "port": self.options.http_port, "protocol": "HTTP",
            "allowedRoutes": all,
        })];
        let mut secret_namespaces = BTreeSet::new();
        for (host, (listener, secret)) in &self.tls {
            let mut reference = json!({"name": secret.name});
            if secret.namespace != self.options.namespace {
                reference["namespace"] = json!(secret.namespace);
                secret_namespaces.insert(secret.namespace.clone());
            }
            listeners.push(json!({
                "name": listener, "port": self.options.https_port, "protocol": "HTTPS",
                "hostname": host,
                "tls": {"mode": "Terminate", "certificateRefs": [reference]},
                "allowedRoutes": all,
            }));
        }
        self.out.objects.push(json!({
            "apiVersion": API_VERSION,
            "kind": "Gateway",
            "metadata": {"name": self.gateway, "namespace": self.options.namespace},
            "spec": {"gatewayClassName": self.options.class_name, "listeners": listeners},
        }));
        for namespace in secret_namespaces {
            self.out.objects.push(json!({
                "apiVersion": GRANT_API_VERSION,
                "kind": "ReferenceGrant",
                "metadata": {"name": format!("{}-certificates", self.gateway), "namespace": namespace},
                "spec": {
                    "from": [{"group": portico_gateway::GROUP, "kind": "Gateway", "namespace": self.options.namespace}],
                    "to": [{"group": "", "kind": "Secret"}],
                },
            }));
        }
    }

    /// A note for each ingress-nginx or Portico annotation the objects do not carry.
    fn unexpressed_annotations(&mut self, s: &Served) {
        let annotations = s.ingress.metadata.annotations.iter().flatten();
        let keys: Vec<String> = annotations
            .filter_map(|(name, _)| {
                let key = name
                    .strip_prefix(NGINX)
                    .or_else(|| name.strip_prefix(PORTICO))?;
                (!EXPRESSED.contains(&key)).then(|| name.clone())
            })
            .collect();
        for key in keys {
            let message = format!(
                "annotation {key}: the Gateway API objects have no field for it (Portico serves it \
                 on the Ingress)"
            );
            self.note(s, message);
        }
    }

    /// The rules of one Ingress path: the `app-root` redirect of `/`, the canary's header
    /// and cookie rules, and the path's own.
    fn path_rules(
        &mut self,
        s: &'a Served,
        host: &str,
        path: &'a crate::kept::KeptPath,
        field: &str,
    ) -> Option<Vec<Value>> {
        let written = path.path.as_deref().unwrap_or_default();
        let location = &s.location;
        let (path_match, rewrite) = match self.path_match(s, host, &path.path_type, written) {
            Ok(m) => m,
            Err(why) => {
                self.note(s, format!("{field}: {why}; the path is left out"));
                return None;
            }
        };
        let mut rules = Vec::new();
        let root = path_match["type"] == "PathPrefix" && path_match["value"] == "/";
        if let (Some(app_root), true) = (&location.app_root, root) {
            let exact = json!({"path": {"type": "Exact", "value": "/"}});
            let filter = redirect_filter(None, None, None, Some(app_root), APP_ROOT_STATUS);
            rules.push(json!({"matches": [exact], "filters": [filter]}));
        }
        let matches = json!([{"path": path_match}]);
        if let Some((status, url)) = &location.redirect {
            match url_redirect(url, *status) {
                Ok(filter) => rules.push(json!({"matches": matches, "filters": [filter]})),
                Err(why) => {
                    self.note(s, format!("{field}: {why}; the path is left out"));
                    return None;
                }
            }
            return Some(rules);
        }
        let main = self.backend_ref(s, &path.backend, Some(field))?;
        let filters = self.filters(s, rewrite, field);
        let key = (host.to_owned(), plain_key(&path.path_type, written));
        let canary = self.canaries.get(&key).copied();
        let canary = canary.and_then(|(c, backend)| {
            let backend_ref = self.backend_ref(c, backend, Some(field))?;
            Some((c, backend_ref))
        });
        let Some((canary_ingress, canary_ref)) = canary else {
            rules.push(rule(&matches, &filters, vec![main]));
            return Some(rules);
        };
        let settings = canary_ingress.location.canary.as_ref()?;
        let mut decisions: Vec<(Value, bool)> = Vec::new();
        if let Some(name) = &settings.header {
            match &settings.header_match {
                HeaderMatch::Value(v) => decisions.push((header_match("Exact", name, v), true)),
                HeaderMatch::Pattern(p) => {
                    decisions.push((header_match("RegularExpression", name, p), true));
                }
                HeaderMatch::AlwaysNever => {
                    decisions.push((header_match("Exact", name, "always"), true));
                    decisions.push((header_match("Exact", name, "never"), false));
                }
            }
        }
        if let Some(cookie) = &settings.cookie {
            for (value, to_canary) in [("always", true), ("never", false)] {
                // The whole Cookie header, as Gateway API implementations match regular
                // expressions (Portico from the start; Envoy the whole value).
                let pattern = format!("(.*;\\s*)?{}={value}(\\s*;.*)?", regex::escape(cookie));
                decisions.push((
                    header_match("RegularExpression", "Cookie", &pattern),
                    to_canary,
                ));
            }
        }
        for (header, to_canary) in decisions {
            let mut m = matches[0].clone();
            m["headers"] = json!([header]);
            let backend = if to_canary {
                canary_ref.clone()
            } else {
                main.clone()
            };
            rules.push(rule(&json!([m]), &filters, vec![backend]));
        }
        let weight = settings.weight.min(settings.total);
        let backends = if weight == 0 {
            vec![main]
        } else {
            let mut main = main;
            let mut canary = canary_ref;
            main["weight"] = json!(settings.total - weight);
            canary["weight"] = json!(weight);
            vec![main, canary]
        };
        rules.push(rule(&matches, &filters, backends));
        Some(rules)
    }

    /// The path match of one Ingress path, and the rewrite of its path if any.
    fn path_match(
        &mut self,
        s: &Served,
        host: &str,
        path_type: &PathType,
        written: &str,
    ) -> Result<(Value, Option<Value>), String> {
        let location = &s.location;
        let exact = matches!(path_type, PathType::Exact);
        if !self.regex_hosts.contains(host) {
            let value = plain_key(path_type, written);
            let kind = if exact { "Exact" } else { "PathPrefix" };
            return Ok((json!({"type": kind, "value": value}), None));
        }
        let (prefix, captured) = match written.strip_suffix("(/|$)(.*)") {
            Some(rest) => (rest, true),
            None => (written, false),
        };
        if !is_plain(prefix) || (exact && captured) {
            return Err(format!(
                "{written:?} is a regular expression (its host's paths are, with use-regex or \
                 rewrite-target); the Gateway API's path matches express only a prefix followed \
                 by \"(/|$)(.*)\""
            ));
        }
        let kind = if exact { "Exact" } else { "PathPrefix" };
        let value = plain_key(path_type, prefix);
        let rewrite = match location
            .rewrite_target
            .as_deref()
            .filter(|_| location.rewrites(written))
        {
            None => None,
            Some(target) if !target.contains('$') => {
                Some(json!({"type": "ReplaceFullPath", "replaceFullPath": target}))
            }
            Some(target) => {
                let rest = target
                    .strip_suffix("/$2")
                    .filter(|r| captured && is_plain(r));
                let Some(rest) = rest else {
                    return Err(format!(
                        "rewrite-target {target:?} uses capture groups other than the \
                         \"(/|$)(.*)\" → \"…/$2\" prefix form"
                    ));
                };
                let replacement = if rest.is_empty() { "/" } else { rest };
                Some(json!({"type": "ReplacePrefixMatch", "replacePrefixMatch": replacement}))
            }
        };
        let message = format!(
            "host {}: its paths are regular expressions in ingress-nginx (use-regex or \
             rewrite-target), matched from the start case-insensitively; written as Gateway API \
             path matches, which compare whole segments case-sensitively",
            if host.is_empty() { "(any)" } else { host }
        );
        if !self
            .out
            .notes
            .iter()
            .any(|n| n.message == message && n.name == s.key.name)
        {
            self.note(s, message);
        }
        Ok((json!({"type": kind, "value": value}), rewrite))
    }

    /// URLRewrite (`upstream-vhost`, the path's rewrite) and RequestHeaderModifier
    /// (`x-forwarded-prefix`, sent with rewritten requests).
    fn filters(&mut self, s: &Served, rewrite: Option<Value>, field: &str) -> Vec<Value> {
        let mut filters = Vec::new();
        let mut url = serde_json::Map::new();
        if let Some(host) = &s.location.upstream_host {
            if host.contains(':') {
                let message = format!(
                    "{field}: upstream-vhost {host:?} has a port; URLRewrite's hostname takes a \
                     host name only, so the Host is not rewritten"
                );
                self.note(s, message);
            } else {
                url.insert("hostname".into(), json!(host));
            }
        }
        if let Some(path) = &rewrite {
            url.insert("path".into(), path.clone());
        }
        if !url.is_empty() {
            filters.push(json!({"type": "URLRewrite", "urlRewrite": url}));
        }
        if let (Some(prefix), Some(_)) = (&s.location.forwarded_prefix, &rewrite) {
            let set = json!([{"name": "X-Forwarded-Prefix", "value": prefix}]);
            filters.push(
                json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": set}}),
            );
        }
        filters
    }

    /// A backendRef to the Service of `backend`, its named port resolved; None (noted) when
    /// it cannot be written.
    fn backend_ref(
        &mut self,
        s: &Served,
        backend: &KeptBackend,
        field: Option<&str>,
    ) -> Option<Value> {
        let field = field.unwrap_or("spec.defaultBackend");
        let Some(service) = &backend.service else {
            self.note(
                s,
                format!("{field}: a resource backend; the Gateway API routes to Services only"),
            );
            return None;
        };
        let port = service.port.as_ref();
        let number = port.and_then(|p| p.number);
        let number = number.or_else(|| {
            let name = port?.name.as_deref()?;
            let key = ObjectKey::new(&s.key.namespace, &service.name);
            let found = self.objects.services.get(&key)?;
            let ports = found.spec.ports.iter();
            ports
                .filter(|p| p.name.as_deref() == Some(name))
                .map(|p| p.port)
                .next()
        });
        let Some(number) = number else {
            let message = format!(
                "{field}: the port of Service {} is named and the Service is not among the \
                 objects read (a backendRef needs its number)",
                service.name
            );
            self.note(s, message);
            return None;
        };
        Some(json!({"name": &*service.name, "port": number}))
    }
}

/// The annotation keys (after the prefix) the objects express.
const EXPRESSED: &[&str] = &[
    "rewrite-target",
    "use-regex",
    "x-forwarded-prefix",
    "upstream-vhost",
    "app-root",
    "permanent-redirect",
    "permanent-redirect-code",
    "temporal-redirect",
    "temporal-redirect-code",
    "force-ssl-redirect",
    "ssl-redirect",
    "canary",
    "canary-by-header",
    "canary-by-header-value",
    "canary-by-header-pattern",
    "canary-by-cookie",
    "canary-weight",
    "canary-weight-total",
];

fn host_of(host: Option<&str>) -> String {
    host.filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}

/// The path as the translation compares it: Exact as written, prefixes without trailing
/// slashes, the root `/`.
fn plain_key(path_type: &PathType, written: &str) -> String {
    let kind = if matches!(path_type, PathType::Exact) {
        "Exact"
    } else {
        "Prefix"
    };
    crate::route::PathMatch::of(kind, written).value
}

/// A path without regular-expression syntax.
fn is_plain(path: &str) -> bool {
    !path.contains([
        '.', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '^', '$', '\\',
    ])
}

fn chunked(name: &str, n: usize) -> String {
    if n == 0 {
        name.to_owned()
    } else {
        format!("{name}-{n}")
    }
}

fn rule(matches: &Value, filters: &[Value], backends: Vec<Value>) -> Value {
    let mut rule = json!({"matches": matches, "backendRefs": backends});
    if !filters.is_empty() {
        rule["filters"] = json!(filters);
    }
    rule
}

fn header_match(kind: &str, name: &str, value: &str) -> Value {
    json!({"type": kind, "name": name, "value": value})
}

/// The HTTP listener's copy of a rule: the same matches, redirected to HTTPS.
fn ssl_redirect(matches: &Value) -> Value {
    let filter = redirect_filter(Some("https"), None, None, None, SSL_REDIRECT_STATUS);
    json!({"matches": matches, "filters": [filter]})
}

fn redirect_filter(
    scheme: Option<&str>,
    hostname: Option<&str>,
    port: Option<u16>,
    path: Option<&str>,
    status: u16,
) -> Value {
    let mut r = json!({"statusCode": status});
    if let Some(scheme) = scheme {
        r["scheme"] = json!(scheme);
    }
    if let Some(hostname) = hostname {
        r["hostname"] = json!(hostname);
    }
    if let Some(port) = port {
        r["port"] = json!(port);
    }
    if let Some(path) = path {
        r["path"] = json!({"type": "ReplaceFullPath", "replaceFullPath": path});
    }
    json!({"type": "RequestRedirect", "requestRedirect": r})
}

/// `permanent-redirect` / `temporal-redirect`'s URL as a RequestRedirect filter.
fn url_redirect(url: &str, status: u16) -> Result<Value, String> {
    if ![301, 302, 303, 307, 308].contains(&status) {
        return Err(format!(
            "redirect status {status}: RequestRedirect takes 301, 302, 303, 307 or 308"
        ));
    }
    if url.contains(['?', '#']) {
        return Err(format!(
            "redirect to {url:?}: RequestRedirect cannot set a query or fragment"
        ));
    }
    if url.starts_with('/') {
        return Ok(redirect_filter(None, None, None, Some(url), status));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("redirect to {url:?}: not a URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("redirect to {url:?}: bad port"))?;
            (h, Some(port))
        }
        None => (authority, None),
    };
    let well_known = matches!((scheme, port), ("http", Some(80)) | ("https", Some(443)));
    let port = port.filter(|_| !well_known);
    Ok(redirect_filter(
        Some(scheme),
        Some(host),
        port,
        Some(path),
        status,
    ))
}
