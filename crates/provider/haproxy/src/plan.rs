//! Pure: the model's haproxy load balancers → where each one listens, its directory, its
//! files and its rendered configuration. Shared by the provider and `portico render`.

use crate::PROVIDER;
use crate::instance::{Desired, MASTER_SOCKET};
use crate::render::{Binds, DEFAULT_CERTIFICATE_FILE, Input, STATS_SOCKET, render};
use portico_model::{
    Diagnostic, Listener, LoadBalancer, LoadBalancerId, Model, ObjectRef, Protocol,
};
use portico_provider::{CaBundles, Certificates, Credentials};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Certificate files: name → PEM.
type Files = BTreeMap<String, Arc<Vec<u8>>>;

/// Settings shared by every load balancer.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    /// `<state-dir>/loadbalancer/haproxy`: one directory per load balancer UUID below it.
    pub root: PathBuf,
    /// The run's listeners, when haproxy is the default provider: the first load balancer
    /// without a VIP binds them; when none does, an empty load balancer answers 404 there.
    pub default_binds: Option<Binds>,
    /// The class whose load balancer stands in when no load balancer takes `default_binds`.
    pub default_class: String,
    /// Deadlines, sizes and connection caps, the same as the built-in proxy's.
    pub limits: portico_model::Limits,
    /// Deadlines of Services' TCP listeners, the same as provider `l4`'s.
    pub tcp: crate::render::TcpLimits,
    /// The unix datagram socket haproxy sends access log lines to; `None`: no access log.
    pub access_log: Option<PathBuf>,
    /// The hard descriptor limit every haproxy inherits from Portico (`None`: unlimited or
    /// unknown), read once at start ([`crate::descriptor_limit`]).
    pub descriptors: Option<u64>,
}

/// One load balancer, ready to hand to its haproxy.
#[derive(Debug, Clone)]
pub struct Planned {
    pub id: LoadBalancerId,
    /// The IngressClass the load balancer serves: where its problems are reported.
    pub object: ObjectRef,
    pub dir: PathBuf,
    pub binds: Binds,
    pub(crate) desired: Desired,
}

impl Planned {
    pub fn config(&self) -> &str {
        &self.desired.rendered.config
    }

    /// The configuration to show (`portico render`): the password hashes of its userlists
    /// (basic-auth Secrets) replaced by `*`, which no password matches; the rest as written.
    pub fn printable_config(&self) -> String {
        let mut out = String::with_capacity(self.config().len());
        for line in self.config().lines() {
            match line.split_once(" password ") {
                Some((user, _)) if user.starts_with("    user ") => {
                    out.push_str(user);
                    out.push_str(" password \"*\"");
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }

    /// Writes the files the configuration names (certificates with mode 0600, crt-lists, route
    /// maps) into
    /// its directory, as the provider does before a check: `portico render` does it so that
    /// what it prints passes `haproxy -c` as printed.
    pub fn write_files(&self) -> std::io::Result<()> {
        crate::files::create_dir(&self.dir)?;
        crate::files::write_certificates(&self.dir, &self.desired.certificates)?;
        crate::files::write_lists(&self.dir, &self.desired.rendered.crt_list)?;
        crate::files::write_maps(&self.dir, &self.desired.rendered.maps)
    }
}

/// Plans every `haproxy` load balancer of `model`; `fallback` is the PEM of the certificate
/// served when no other fits.
pub fn plan(
    model: &Model,
    certificates: &Certificates,
    ca_bundles: &CaBundles,
    credentials: &Credentials,
    settings: &PlanSettings,
    fallback: &Arc<Vec<u8>>,
) -> (Vec<Planned>, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let mut taken = BTreeSet::new();
    let mut planned = Vec::new();
    // Load balancers on the same address are served by one haproxy, merged.
    let mut groups: Vec<(Binds, Vec<&LoadBalancer>)> = Vec::new();
    for lb in model
        .load_balancers
        .iter()
        .filter(|lb| lb.provider == PROVIDER)
    {
        if crate::render::is_l4(lb) {
            // A Service's: its own VIP and ports, never merged with another's (each listener
            // is one Service port), never on the run's listeners. Without a TCP port (UDP
            // ones are skipped with a warning on the Service) there is nothing to serve.
            if !lb.listeners.iter().any(|l| l.protocol == Protocol::Tcp) {
                continue;
            }
            match lb.vip {
                Some(vip) => groups.push((vip_binds(lb, vip), vec![lb])),
                None => diagnostics.push(Diagnostic::warning(
                    lb.origin.clone(),
                    "status.loadBalancer.ingress",
                    "not served: provider haproxy needs a VIP for a Service (start Portico with --vip-pool, or set spec.loadBalancerIP)",
                )),
            }
            continue;
        }
        let binds = match (lb.vip, settings.default_binds) {
            (Some(vip), _) => vip_binds(lb, vip),
            (None, Some(binds)) => binds,
            (None, None) => {
                let class = lb.origin.clone();
                diagnostics.push(Diagnostic::error(class, "metadata.annotations[portico.dev/vip]",
                    format!("load balancer {} has no address to listen on: annotate its IngressClass with portico.dev/vip (with --provider haproxy, load balancers without one are served on --http-listen and --https-listen)", lb.id)));
                continue;
            }
        };
        let shared = |(b, lbs): &&mut (Binds, Vec<&LoadBalancer>)| {
            *b == binds && !lbs.iter().any(|lb| crate::render::is_l4(lb))
        };
        match groups.iter_mut().find(shared) {
            Some((_, lbs)) => lbs.push(lb),
            None => groups.push((binds, vec![lb])),
        }
    }
    let default_taken = (groups.iter())
        .any(|(b, lbs)| Some(*b) == settings.default_binds && !crate::render::is_l4(lbs[0]));
    for (binds, lbs) in groups {
        let Some(lb) = portico_model::merge(&lbs) else {
            continue;
        };
        let class = lb.origin.clone();
        if let Err(d) = claim(&mut taken, &binds, &lb, &class) {
            diagnostics.push(*d);
            continue;
        }
        match one(
            &lb,
            binds,
            class,
            (certificates, ca_bundles, credentials),
            settings,
            fallback,
        ) {
            Ok(p) => {
                diagnostics.extend(p.desired.rendered.diagnostics.iter().cloned());
                planned.push(p);
            }
            Err(d) => diagnostics.push(*d),
        }
    }
    if let Some(binds) = settings.default_binds.filter(|_| !default_taken) {
        let lb = placeholder(&settings.default_class);
        let class = lb.origin.clone();
        match one(
            &lb,
            binds,
            class,
            (certificates, ca_bundles, credentials),
            settings,
            fallback,
        ) {
            Ok(p) => planned.push(p),
            Err(d) => diagnostics.push(*d),
        }
    }
    (planned, diagnostics)
}

/// The VIP and each listener's port, bound whether or not the VIP is on this node (an
/// active-standby pair's standby, or keepalived's backup, does not hold it).
fn vip_binds(lb: &LoadBalancer, vip: std::net::IpAddr) -> Binds {
    let port = |protocol| {
        let listener = lb
            .listeners
            .iter()
            .find(|l: &&Listener| l.protocol == protocol);
        listener.map(|l| SocketAddr::new(vip, l.port))
    };
    Binds {
        http: port(Protocol::Http),
        https: port(Protocol::TerminatedHttps),
        transparent: true,
        floating: lb.floating_ip,
    }
}

/// Two haproxy processes binding one address would share its connections (SO_REUSEPORT):
/// the second load balancer is not served. Port 0 would give a port nobody knows.
fn claim(
    taken: &mut BTreeSet<SocketAddr>,
    binds: &Binds,
    lb: &LoadBalancer,
    class: &ObjectRef,
) -> Result<(), Box<Diagnostic>> {
    let mut addrs = binds.all();
    // A Service's TCP listeners: the VIP and the floating IP at each port.
    let ips = lb.vip.into_iter().chain(binds.floating);
    let tcp = (lb.listeners.iter()).filter(|l| l.protocol == Protocol::Tcp);
    let ports: Vec<u16> = tcp.map(|l| l.port).collect();
    addrs.extend(ips.flat_map(|ip| ports.iter().map(move |p| SocketAddr::new(ip, *p))));
    let field = if lb.origin.kind == "Service" {
        "spec.ports"
    } else {
        "metadata.annotations[portico.dev/vip]"
    };
    for addr in &addrs {
        if addr.port() == 0 {
            let message = format!(
                "load balancer {} would listen on {addr}: haproxy needs a fixed port",
                lb.id
            );
            return Err(Box::new(Diagnostic::error(class.clone(), field, message)));
        }
        if taken.contains(addr) {
            let message = format!(
                "load balancer {}: {addr} is already used by another haproxy load balancer; not served",
                lb.id
            );
            return Err(Box::new(Diagnostic::error(class.clone(), field, message)));
        }
    }
    taken.extend(addrs);
    Ok(())
}

/// An empty load balancer: HTTP and HTTPS listeners without policies, so 404 everywhere.
fn placeholder(class: &str) -> LoadBalancer {
    let id = LoadBalancerId::derive(&format!("loadbalancer/{class}"));
    let listener = |protocol, port| Listener {
        id: portico_model::ListenerId::derive(&format!("{id}/listener/{protocol:?}/{port}")),
        name: format!("{protocol:?}:{port}"),
        protocol,
        port,
        policies: vec![],
        default_pool: None,
        default_source: None,
        tls: None,
    };
    LoadBalancer {
        id,
        name: format!("ingressclass/{class}"),
        origin: ObjectRef::new("IngressClass", "", class),
        provider: PROVIDER.to_owned(),
        vip: None,
        floating_ip: None,
        listeners: Arc::new(vec![
            listener(Protocol::Http, 80),
            listener(Protocol::TerminatedHttps, 443),
        ]),
        pools: vec![],
    }
}

fn one(
    lb: &LoadBalancer,
    binds: Binds,
    object: ObjectRef,
    (certificates, ca_bundles, credentials): (&Certificates, &CaBundles, &Credentials),
    settings: &PlanSettings,
    fallback: &Arc<Vec<u8>>,
) -> Result<Planned, Box<Diagnostic>> {
    let dir = settings.root.join(lb.id.to_string());
    check_socket_paths(&dir).map_err(|m| Box::new(Diagnostic::error(object.clone(), "", m)))?;
    let (names, mut files) = certificate_files(lb, certificates, fallback);
    let ca_files = ca_files(lb, ca_bundles, &mut files);
    let rendered = render(
        lb,
        &Input {
            dir: &dir,
            binds,
            certificates: &names,
            ca_files: &ca_files,
            credentials,
            limits: &settings.limits,
            tcp: settings.tcp,
            access_log: settings.access_log.as_deref(),
            descriptors: settings.descriptors,
        },
    );
    Ok(Planned {
        id: lb.id,
        object,
        dir,
        binds,
        desired: Desired {
            rendered,
            certificates: files,
        },
    })
}

fn check_socket_paths(dir: &Path) -> Result<(), String> {
    for name in [STATS_SOCKET, MASTER_SOCKET] {
        let Some(path) = portico_statedir::socket_path(dir, name) else {
            return Err(format!(
                "no path for the socket {name} of {} fits in the {} bytes haproxy allows, even through a short alias in the temporary directory: set TMPDIR to a short directory",
                dir.display(),
                portico_statedir::MAX_SOCKET_PATH
            ));
        };
        if path.to_string_lossy().contains(',') {
            return Err(format!(
                "the socket path {} holds a comma, which haproxy's -S reads as an option separator: choose another --state-dir",
                path.display()
            ));
        }
    }
    Ok(())
}

/// File names for the certificates the listeners name (by content, so a changed Secret is a
/// new file and the running configuration's files stay until the new one is accepted), and
/// the default certificate.
fn certificate_files(
    lb: &LoadBalancer,
    certificates: &Certificates,
    fallback: &Arc<Vec<u8>>,
) -> (BTreeMap<ObjectRef, String>, Files) {
    let mut names = BTreeMap::new();
    let mut files = BTreeMap::new();
    let mut default = fallback.clone();
    for tls in lb.listeners.iter().filter_map(|l| l.tls.as_ref()) {
        let refs = tls.sni.iter().map(|s| &s.certificate);
        for secret in refs {
            if let Some(material) = certificates.get(secret) {
                let pem = Arc::new(material.pem());
                let name = format!("{}.pem", digest(&pem));
                names.insert(secret.clone(), name.clone());
                files.insert(name, pem);
            }
        }
        let chosen = tls
            .default_certificate
            .as_ref()
            .and_then(|d| certificates.get(d));
        if let Some(material) = chosen {
            default = Arc::new(material.pem());
        }
    }
    files.insert(DEFAULT_CERTIFICATE_FILE.to_owned(), default);
    (names, files)
}

/// File names for the CA bundles the load balancer's verifying pools name (`ca-<digest>.pem`,
/// by content, written 0600 with the certificates and removed with them); adds them to
/// `files`.
fn ca_files(
    lb: &LoadBalancer,
    ca_bundles: &CaBundles,
    files: &mut Files,
) -> BTreeMap<ObjectRef, String> {
    let mut names = BTreeMap::new();
    let tls = lb
        .pools
        .iter()
        .filter_map(|p| p.settings.upstream_tls.as_ref());
    for secret in tls.filter(|t| t.verify).filter_map(|t| t.ca.as_ref()) {
        if let Some(bundle) = ca_bundles.get(secret) {
            let pem = Arc::new(bundle.pem().to_vec());
            let name = format!("ca-{}.pem", digest(&pem));
            names.insert(secret.clone(), name.clone());
            files.insert(name, pem);
        }
    }
    names
}

/// A short content digest for file names (not a secret: SHA-1 of the PEM, 64 bits shown).
fn digest(bytes: &[u8]) -> String {
    use sha1::Digest;
    let hash = sha1::Sha1::digest(bytes);
    hash[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings with the run's listeners on 127.0.0.1:8080 and :8443.
    fn with_default_listeners() -> PlanSettings {
        PlanSettings {
            root: PathBuf::from("/state/loadbalancer/haproxy"),
            default_binds: Some(Binds {
                http: Some("127.0.0.1:8080".parse().unwrap()),
                https: Some("127.0.0.1:8443".parse().unwrap()),
                transparent: false,
                floating: None,
            }),
            default_class: "portico".into(),
            limits: portico_model::Limits::default(),
            tcp: Default::default(),
            access_log: None,
            descriptors: None,
        }
    }

    /// A VIP may be held by the other agent of a pair: its binds are `transparent`. The run's
    /// listeners (`--http-listen`, `--https-listen`) are this node's: theirs are not.
    #[test]
    fn vip_binds_are_transparent_and_the_default_listeners_are_not() {
        let mut with_vip = placeholder("a");
        with_vip.vip = Some("198.18.0.5".parse().unwrap());
        let vip = vip_binds(&with_vip, "198.18.0.5".parse().unwrap());
        assert!(vip.transparent);
        assert_eq!(vip.http, Some("198.18.0.5:80".parse().unwrap()));
        let settings = with_default_listeners();
        let model = Model {
            load_balancers: vec![with_vip],
        };
        let fallback = Arc::new(Vec::new());
        let (planned, _) = plan(
            &model,
            &Certificates::new(),
            &CaBundles::new(),
            &Credentials::new(),
            &settings,
            &fallback,
        );
        let transparent: Vec<bool> = planned.iter().map(|p| p.binds.transparent).collect();
        assert_eq!(
            transparent,
            [true, false],
            "the VIP's, then the placeholder's"
        );
        assert!(
            planned[0]
                .config()
                .contains("bind 198.18.0.5:80 transparent\n")
        );
        assert!(planned[1].config().contains("bind 127.0.0.1:8080\n"));
    }

    /// A Service's load balancer never takes the run's listeners: without a VIP it is not
    /// served (and says so), without a TCP port it gets no haproxy.
    #[test]
    fn a_services_load_balancer_needs_its_vip_and_a_tcp_port() {
        let service = |name: &str, protocol| {
            let mut lb = placeholder(name);
            lb.origin = ObjectRef::new("Service", "apps", name);
            lb.listeners = Arc::new(
                (lb.listeners.iter().take(1).cloned())
                    .map(|l| Listener { protocol, ..l })
                    .collect(),
            );
            lb
        };
        let settings = with_default_listeners();
        let mut empty = service("udp-only", Protocol::Tcp);
        empty.listeners = Arc::new(Vec::new());
        let model = Model {
            load_balancers: vec![service("novip", Protocol::Tcp), empty],
        };
        let fallback = Arc::new(Vec::new());
        let none = (Certificates::new(), CaBundles::new());
        let (planned, diagnostics) = plan(
            &model,
            &none.0,
            &none.1,
            &Credentials::new(),
            &settings,
            &fallback,
        );
        let names: Vec<&str> = planned.iter().map(|p| p.object.name.as_str()).collect();
        assert_eq!(
            names,
            ["portico"],
            "only the placeholder on the run's listeners"
        );
        assert!(
            diagnostics
                .iter()
                .any(|d| d.object.name == "novip" && d.message.contains("needs a VIP")),
            "{diagnostics:?}"
        );
    }
}
