//! The Gateway API beside the Ingresses: `gateway/gateway.yaml` (a GatewayClass of Portico's
//! controller and one Gateway with an HTTP listener, served on the default listeners like the
//! Ingresses' class) and `httproutes/route-NNNNN.yaml`, one HTTPRoute each attached to it, with
//! a hostname of its own (`rN.gateway.test`) and two PathPrefix rules (`/g0`, `/g1`) to two of
//! the generated Services (pure text, but for [`write_all`]).

use super::Layout;
use super::yaml::NAMESPACE;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

/// Rules per HTTPRoute.
pub const RULES: usize = 2;

/// One HTTPRoute change: the first rule of route `route` moves to path `new_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    pub route: usize,
    pub new_path: String,
}

/// `changes` HTTPRoute changes spread evenly over `routes` routes.
pub fn changes(routes: usize, changes: usize) -> Vec<RouteChange> {
    let changes = changes.min(routes);
    (0..changes)
        .map(|n| RouteChange {
            route: n * routes / changes,
            new_path: format!("/gmoved{n}"),
        })
        .collect()
}

pub fn route_name(r: usize) -> String {
    format!("route-{r:05}")
}

pub fn route_host(r: usize) -> String {
    format!("r{r}.gateway.test")
}

/// The path of rule `k` as generated.
pub fn rule_path(k: usize) -> String {
    format!("/g{k}")
}

pub fn route_file(dir: &Path, r: usize) -> PathBuf {
    dir.join("httproutes")
        .join(format!("{}.yaml", route_name(r)))
}

/// The GatewayClass and the Gateway.
pub fn gateway_yaml() -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: portico\nspec:\n  controllerName: portico.dev/gateway-controller\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: scale\n  namespace: {NAMESPACE}\nspec:\n  gatewayClassName: portico\n  listeners:\n  - name: http\n    port: 80\n    protocol: HTTP\n    allowedRoutes:\n      namespaces:\n        from: Same\n"
    )
}

/// HTTPRoute `r`, its first rule moved to `moved` when given.
pub fn route_yaml(layout: &Layout, r: usize, moved: Option<&str>) -> String {
    let mut y = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  parentRefs:\n  - name: scale\n  hostnames:\n  - {host}\n  rules:\n",
        name = route_name(r),
        host = route_host(r),
    );
    for k in 0..RULES {
        let path = match moved {
            Some(path) if k == 0 => path.to_owned(),
            _ => rule_path(k),
        };
        let service = layout.service_name((r * RULES + k) % layout.sizes.services.max(1));
        let _ = write!(
            y,
            "  - matches:\n    - path:\n        type: PathPrefix\n        value: {path}\n    backendRefs:\n    - name: {service}\n      port: 80\n"
        );
    }
    y
}

/// Writes the Gateway and `routes` HTTPRoutes under `dir`.
pub fn write_all(dir: &Path, layout: &Layout, routes: usize) -> io::Result<()> {
    if routes == 0 {
        return Ok(());
    }
    std::fs::create_dir_all(dir.join("gateway"))?;
    std::fs::create_dir_all(dir.join("httproutes"))?;
    std::fs::write(dir.join("gateway").join("gateway.yaml"), gateway_yaml())?;
    for r in 0..routes {
        std::fs::write(route_file(dir, r), route_yaml(layout, r, None))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{PortCycle, Sizes};

    fn layout() -> Layout {
        let sizes = Sizes {
            ingresses: 2,
            hosts: 1,
            paths: 2,
            services: 3,
            endpoints: 3,
        };
        Layout::new(sizes, vec![9000], PortCycle::default()).unwrap()
    }

    #[test]
    fn a_route_has_its_own_host_and_two_rules_to_services_that_exist() {
        let y = route_yaml(&layout(), 4, None);
        assert!(y.contains("name: route-00004") && y.contains("- r4.gateway.test"));
        assert!(y.contains("value: /g0") && y.contains("value: /g1"));
        // Rules 8 and 9, over 3 Services.
        assert!(
            y.contains("name: svc-0002") && y.contains("name: svc-0000"),
            "{y}"
        );
        let moved = route_yaml(&layout(), 4, Some("/gmoved0"));
        assert!(moved.contains("value: /gmoved0") && !moved.contains("value: /g0\n"));
        assert!(moved.contains("value: /g1"));
    }

    #[test]
    fn changes_spread_over_the_routes() {
        let c = changes(1000, 4);
        let routes: Vec<usize> = c.iter().map(|c| c.route).collect();
        assert_eq!(routes, [0, 250, 500, 750]);
        assert_eq!(changes(2, 10).len(), 2);
    }

    #[test]
    fn write_all_writes_the_gateway_and_one_file_per_route() {
        let dir = tempfile::tempdir().unwrap();
        write_all(dir.path(), &layout(), 3).unwrap();
        let count = |sub: &str| std::fs::read_dir(dir.path().join(sub)).unwrap().count();
        assert_eq!((count("gateway"), count("httproutes")), (1, 3));
    }
}
