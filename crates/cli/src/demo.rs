//! `portico demo`: echo backends plus the three seed Ingress examples and one Gateway with an
//! HTTPRoute beside them, served by the real pipeline from manifest files in a temporary
//! directory (edit them to see live changes).

use crate::{ClassArgs, ListenArgs, TlsArgs, settings};
use anyhow::Context;
use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

/// (service, pods) of the demo; every pod is an echo backend on 127.0.0.1.
const SERVICES: &[(&str, usize)] = &[
    ("webservice-1", 2),
    ("webservice-dev", 2),
    ("webservice-qa", 2),
    ("webservice-maps", 2),
    ("webservice-images", 2),
];

const INGRESSES: &str = r#"apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: portico
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: portico.dev/ingress-controller
---
# Seed example 1: single service. Everything goes to one Service.
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: single-service
  namespace: demo
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  defaultBackend:
    service:
      name: webservice-1
      port:
        number: 80
---
# Seed example 2: simple fanout by path.
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: simple-fanout
  namespace: demo
  creationTimestamp: "2026-01-01T00:01:00Z"
spec:
  rules:
  - http:
      paths:
      - path: /dev
        pathType: Prefix
        backend:
          service:
            name: webservice-dev
            port:
              number: 80
      - path: /qa
        pathType: Prefix
        backend:
          service:
            name: webservice-qa
            port:
              name: http
---
# Seed example 3: name-based virtual hosting with a default backend.
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: virtual-host
  namespace: demo
  creationTimestamp: "2026-01-01T00:02:00Z"
spec:
  defaultBackend:
    service:
      name: webservice-1
      port:
        number: 80
  rules:
  - host: maps.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: webservice-maps
            port:
              number: 80
  - host: images.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: webservice-images
            port:
              number: 80
"#;

/// The Gateway API beside the Ingresses: a Gateway of Portico's class on the same listeners,
/// and an HTTPRoute that sends a header-matched request to one Service and the rest to another,
/// adding a response field.
const GATEWAY_API: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: portico
spec:
  controllerName: portico.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: demo
  namespace: demo
spec:
  gatewayClassName: portico
  listeners:
  - name: http
    port: 80
    protocol: HTTP
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: store
  namespace: demo
spec:
  parentRefs:
  - name: demo
  hostnames:
  - store.example.com
  rules:
  - matches:
    - headers:
      - name: x-env
        value: qa
    backendRefs:
    - name: webservice-qa
      port: 80
  - matches:
    - path:
        type: PathPrefix
        value: /
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        add:
        - name: x-routed-by
          value: httproute-store
    backendRefs:
    - name: webservice-dev
      port: 80
"#;

const BANNER: &str = "
Portico demo: three seed Ingress examples and a Gateway API HTTPRoute on echo backends. Try:
  curl -s http://{http}/                                  # single service -> webservice-1
  curl -s http://{http}/dev/build                         # simple fanout  -> webservice-dev
  curl -s http://{http}/qa                                # simple fanout  -> webservice-qa
  curl -s -H 'Host: maps.example.com' http://{http}/      # virtual host   -> webservice-maps
  curl -s -H 'Host: images.example.com' http://{http}/    # virtual host   -> webservice-images
  curl -s -H 'Host: other.example.com' http://{http}/x    # unknown host   -> default backend
  curl -sk -H 'Host: maps.example.com' https://{https}/    # HTTPS, generated self-signed certificate
  curl -si -H 'Host: store.example.com' http://{http}/    # HTTPRoute      -> webservice-dev
  curl -s -H 'Host: store.example.com' -H 'x-env: qa' http://{http}/  # header match -> webservice-qa
  curl -s http://{admin}/api/v1/ingresses                 # status and diagnostics
  curl -s http://{admin}/api/v1/httproutes                # the HTTPRoute's status
  curl -s http://{admin}/api/v1/loadbalancers             # the load-balancer model
  open http://{admin}/                                    # dashboard
Manifests: {dir} (edit them; changes are served without restart). Ctrl-C stops.";

pub async fn run(listen: &ListenArgs) -> anyhow::Result<ExitCode> {
    // A fresh private directory: a random name, created exclusively (never one that exists,
    // which another user could have planted), mode 0700; removed when the demo ends.
    let dir = tempfile::Builder::new()
        .prefix("portico-demo-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .context("creating the demo's directory")?;
    run_in(dir.path(), listen).await
}

async fn run_in(dir: &Path, listen: &ListenArgs) -> anyhow::Result<ExitCode> {
    let mut backends = String::new();
    for (service, pods) in SERVICES {
        let mut addrs = Vec::new();
        for i in 0..*pods {
            let pod = format!("{service}-{i}");
            let any: SocketAddr = ([127, 0, 0, 1], 0).into();
            let addr = portico_app::offline::spawn_echo(any, service, &pod)
                .await
                .with_context(|| format!("starting echo backend {pod}"))?;
            addrs.push((pod, addr));
        }
        backends.push_str(&service_yaml(service, &addrs));
    }
    std::fs::write(dir.join("backends.yaml"), backends).context("writing backends.yaml")?;
    std::fs::write(dir.join("ingresses.yaml"), INGRESSES).context("writing ingresses.yaml")?;
    std::fs::write(dir.join("gateway.yaml"), GATEWAY_API).context("writing gateway.yaml")?;
    let class = ClassArgs {
        provider: crate::ProviderArgs {
            ingress_class: "portico".into(),
            provider: "proxy".into(),
        },
        gateway_controller_name: portico_app::offline::GATEWAY_CONTROLLER_NAME.into(),
        vip_pool: None,
        fip_pool: None,
        l4_all_services: false,
        default_backend_service: None,
        custom_http_errors: None,
    };
    let banner = BANNER.replace("{dir}", &dir.display().to_string());
    let tls = TlsArgs {
        default_certificate: None,
    };
    let haproxy = crate::HaproxyArgs {
        state: crate::StateDirArgs { state_dir: None },
        haproxy_bin: "haproxy".into(),
    };
    let settings = settings(
        portico_app::SourceSettings::Files(
            vec![dir.to_path_buf()],
            portico_app::offline::ReadLimits::default(),
        ),
        listen,
        &class,
        &tls,
        &haproxy,
    )?;
    crate::serve(settings, Some(banner)).await
}

/// A Service with one named port and one EndpointSlice per pod (each pod listens on its own port).
fn service_yaml(service: &str, pods: &[(String, SocketAddr)]) -> String {
    let mut y = format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {service}\n  namespace: demo\nspec:\n  selector:\n    app: {service}\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"
    );
    for (pod, addr) in pods {
        let _ = write!(
            y,
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {pod}\n  namespace: demo\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\nports:\n- name: http\n  port: {port}\nendpoints:\n- addresses: [\"{ip}\"]\n  conditions:\n    ready: true\n  targetRef:\n    kind: Pod\n    name: {pod}\n",
            port = addr.port(),
            ip = addr.ip()
        );
    }
    y
}
