//! Pure: which address pair serves each `proxy` load balancer.

use portico_model::{LoadBalancer, Model, Protocol};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Where a load balancer's HTTP and TERMINATED_HTTPS listeners are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bind {
    /// The node's default listeners (`--http-listen`, `--https-listen`).
    Default,
    /// The load balancer's VIP with its listeners' ports.
    Vip { http: SocketAddr, https: SocketAddr },
}

impl fmt::Display for Bind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bind::Default => f.write_str("the default listeners"),
            Bind::Vip { http, https } => write!(f, "{http} and {https}"),
        }
    }
}

/// The load balancers of `model` (the registry hands this provider only its own) by where they
/// are served: on their VIP and on their floating IP, each with the listeners' ports, else on
/// the default listeners. A VIP whose ports are the default listeners' addresses is
/// the default listeners (one route table, merged).
pub fn place(
    model: &Model,
    defaults: Option<(SocketAddr, SocketAddr)>,
) -> BTreeMap<Bind, Vec<&LoadBalancer>> {
    let mut out: BTreeMap<Bind, Vec<&LoadBalancer>> = BTreeMap::new();
    for lb in &model.load_balancers {
        let addresses: Vec<IpAddr> = lb.vip.into_iter().chain(lb.floating_ip).collect();
        if addresses.is_empty() {
            out.entry(Bind::Default).or_default().push(lb);
            continue;
        }
        for ip in addresses {
            let port = |protocol| {
                lb.listeners
                    .iter()
                    .find(|l| l.protocol == protocol)
                    .map_or(0, |l| l.port)
            };
            let http = SocketAddr::new(ip, port(Protocol::Http));
            let https = SocketAddr::new(ip, port(Protocol::TerminatedHttps));
            let bind = if defaults == Some((http, https)) {
                Bind::Default
            } else {
                Bind::Vip { http, https }
            };
            let group = out.entry(bind).or_default();
            if !group.iter().any(|l| l.id == lb.id) {
                group.push(lb);
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use portico_model::{Listener, ListenerId, LoadBalancerId, ObjectRef};
    use std::sync::Arc;

    fn lb(name: &str, provider: &str, vip: Option<&str>, ports: (u16, u16)) -> LoadBalancer {
        let listener = |protocol, port| Listener {
            id: ListenerId::derive(&format!("{name}/{port}")),
            name: format!("{port}"),
            protocol,
            port,
            policies: vec![],
            default_pool: None,
            default_source: None,
            tls: None,
        };
        LoadBalancer {
            id: LoadBalancerId::derive(name),
            name: name.into(),
            origin: ObjectRef::new("IngressClass", "", name),
            provider: provider.into(),
            vip: vip.map(|v| v.parse().unwrap()),
            floating_ip: None,
            listeners: Arc::new(vec![
                listener(Protocol::Http, ports.0),
                listener(Protocol::TerminatedHttps, ports.1),
            ]),
            pools: vec![],
        }
    }

    fn names(lbs: &[&LoadBalancer]) -> Vec<String> {
        lbs.iter().map(|lb| lb.name.clone()).collect()
    }

    #[test]
    fn load_balancers_group_by_vip_and_ports_and_the_rest_share_the_defaults() {
        let model = Model {
            load_balancers: vec![
                lb("a", "proxy", None, (80, 443)),
                lb("b", "proxy", Some("127.0.0.5"), (8080, 8443)),
                lb("c", "proxy", Some("127.0.0.5"), (8080, 8443)),
                lb("d", "proxy", Some("127.0.0.6"), (8080, 8443)),
                lb("f", "proxy", Some("127.0.0.1"), (8080, 8443)),
            ],
        };
        let defaults = Some((
            "127.0.0.1:8080".parse().unwrap(),
            "127.0.0.1:8443".parse().unwrap(),
        ));
        let placed = place(&model, defaults);
        let vip = |ip: &str| Bind::Vip {
            http: format!("{ip}:8080").parse().unwrap(),
            https: format!("{ip}:8443").parse().unwrap(),
        };
        assert_eq!(names(&placed[&Bind::Default]), ["a", "f"]);
        assert_eq!(names(&placed[&vip("127.0.0.5")]), ["b", "c"]);
        assert_eq!(names(&placed[&vip("127.0.0.6")]), ["d"]);
        assert_eq!(
            placed.len(),
            3,
            "haproxy's load balancer is not the proxy's"
        );
    }

    #[test]
    fn a_floating_ip_is_served_like_a_second_vip() {
        let mut b = lb("b", "proxy", Some("198.18.0.5"), (80, 443));
        b.floating_ip = Some("198.19.0.5".parse().unwrap());
        let mut same = lb("s", "proxy", Some("198.18.0.7"), (80, 443));
        same.floating_ip = same.vip;
        let model = Model {
            load_balancers: vec![b, same],
        };
        let placed = place(&model, None);
        let bind = |ip: &str| Bind::Vip {
            http: format!("{ip}:80").parse().unwrap(),
            https: format!("{ip}:443").parse().unwrap(),
        };
        assert_eq!(names(&placed[&bind("198.18.0.5")]), ["b"]);
        assert_eq!(names(&placed[&bind("198.19.0.5")]), ["b"]);
        assert_eq!(names(&placed[&bind("198.18.0.7")]), ["s"], "once");
        assert_eq!(placed.len(), 3);
    }
}
