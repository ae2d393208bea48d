//! Where a load balancer listens, from its IngressClass: `portico.dev/vip` (an IP address) with
//! `portico.dev/http-port` and `portico.dev/https-port` (default 80 and 443). Both L7
//! providers bind the VIP (and the floating IP) with the listeners' ports; a load balancer
//! without a VIP is served on `--http-listen` and `--https-listen`.
//!
//! A pass over a translated model (it does not change ids), so the translation itself stays
//! as it was: run it after every translation.

use crate::{Config, Objects};
use portico_model::{Diagnostic, Listener, Model, Protocol};
use std::net::IpAddr;

/// IngressClass annotation: the load balancer's virtual IP.
pub const VIP_ANNOTATION: &str = "portico.dev/vip";
/// IngressClass annotation: the port of the HTTP listener (with a VIP).
pub const HTTP_PORT_ANNOTATION: &str = "portico.dev/http-port";
/// IngressClass annotation: the port of the TERMINATED_HTTPS listener (with a VIP).
pub const HTTPS_PORT_ANNOTATION: &str = "portico.dev/https-port";

/// Sets every load balancer's VIP and listener ports from its IngressClass; a bad value is an
/// error on the IngressClass and leaves the load balancer without a VIP.
pub fn assign_vips(model: &mut Model, objects: &Objects, config: &Config) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    // A Gateway's address and ports are its own (`spec.addresses`, its listeners').
    let ingress = model.load_balancers.iter_mut();
    for lb in ingress.filter(|lb| lb.origin.kind != "Gateway") {
        let annotations = objects
            .ingress_classes
            .get(crate::class::class_of(lb, objects).unwrap_or_default())
            .and_then(|c| c.metadata.annotations.as_ref());
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
        let object = lb.origin.clone();
        let parsed = parse(
            get(VIP_ANNOTATION),
            get(HTTP_PORT_ANNOTATION),
            get(HTTPS_PORT_ANNOTATION),
            config,
        );
        let (vip, http, https) = match parsed {
            Ok(v) => v,
            Err((key, message)) => {
                let field = format!("metadata.annotations[{key}]");
                diagnostics.push(Diagnostic::error(object, field, message));
                (None, config.http_port, config.https_port)
            }
        };
        lb.vip = vip;
        let port = |l: &Listener| match l.protocol {
            Protocol::Http => http,
            Protocol::TerminatedHttps => https,
            Protocol::Tcp | Protocol::Udp => l.port,
        };
        // The listeners are shared with the previous model: copied only when a port changes.
        if lb.listeners.iter().any(|l| l.port != port(l)) {
            for listener in std::sync::Arc::make_mut(&mut lb.listeners) {
                listener.port = port(listener);
            }
        }
    }
    diagnostics
}

type Parsed = (Option<IpAddr>, u16, u16);

fn parse(
    vip: Option<&str>,
    http: Option<&str>,
    https: Option<&str>,
    config: &Config,
) -> Result<Parsed, (&'static str, String)> {
    let Some(vip) = vip else {
        return Ok((None, config.http_port, config.https_port));
    };
    let ip: IpAddr = vip
        .trim()
        .parse()
        .map_err(|_| (VIP_ANNOTATION, format!("{vip:?} is not an IP address")))?;
    let port = |key: &'static str, value: Option<&str>, default: u16| match value {
        None => Ok(default),
        Some(v) => match v.trim().parse::<u16>() {
            Ok(p) if p > 0 => Ok(p),
            _ => Err((key, format!("{v:?} is not a port (1-65535)"))),
        },
    };
    let http = port(HTTP_PORT_ANNOTATION, http, config.http_port)?;
    let https = port(HTTPS_PORT_ANNOTATION, https, config.https_port)?;
    if http == https {
        return Err((
            HTTPS_PORT_ANNOTATION,
            format!("the HTTP and HTTPS listeners cannot share port {http}"),
        ));
    }
    Ok((Some(ip), http, https))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn no_vip_keeps_the_configured_ports() {
        assert_eq!(
            parse(None, Some("x"), None, &Config::default()),
            Ok((None, 80, 443))
        );
    }

    #[test]
    fn vip_and_ports_are_read_and_checked() {
        let c = Config::default();
        let ip: IpAddr = [127, 0, 0, 1].into();
        assert_eq!(
            parse(Some("127.0.0.1"), Some("8080"), None, &c),
            Ok((Some(ip), 8080, 443))
        );
        assert_eq!(
            parse(Some("::1"), None, None, &c).map(|p| p.0),
            Ok(Some("::1".parse().unwrap()))
        );
        assert_eq!(
            parse(Some("a b"), None, None, &c).unwrap_err().0,
            VIP_ANNOTATION
        );
        assert_eq!(
            parse(Some("10.0.0.1"), Some("0"), None, &c).unwrap_err().0,
            HTTP_PORT_ANNOTATION
        );
        assert_eq!(
            parse(Some("10.0.0.1"), Some("443"), None, &c)
                .unwrap_err()
                .0,
            HTTPS_PORT_ANNOTATION
        );
    }
}
