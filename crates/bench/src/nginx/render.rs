//! The generated routes as one nginx.conf (pure): one `upstream` per Service listing its
//! endpoints, one `server` per host, one prefix `location` per path; a host of a TLS Ingress
//! also listens with TLS, on the certificate of the first such Ingress.

use crate::generate::Layout;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// What the config needs besides the routes.
#[derive(Debug, Clone, Copy)]
pub struct Conf<'a> {
    pub layout: &'a Layout,
    pub port: u16,
    /// Where nginx keeps its pid file, error log and temp files.
    pub dir: &'a Path,
    /// Routes served on another path than the generated one.
    pub renamed: &'a BTreeMap<usize, String>,
    /// The TLS port, and the generated manifests (where the certificates' PEM files are).
    pub tls: (u16, &'a Path),
}

pub fn render(c: &Conf<'_>) -> String {
    let mut out = String::new();
    header(&mut out, c);
    for j in 0..c.layout.sizes.services {
        upstream(&mut out, c.layout, j);
    }
    servers(&mut out, c);
    out.push_str("}\n");
    out
}

fn header(out: &mut String, c: &Conf<'_>) {
    let d = c.dir.display();
    let names = (c.layout.sizes.hosts * 2).max(512);
    let _ = write!(
        out,
        "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  server_names_hash_max_size {names};\n  server_names_hash_bucket_size 128;\n  \
         client_body_temp_path {d}/client_body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  \
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n"
    );
}

fn upstream(out: &mut String, layout: &Layout, j: usize) {
    let _ = write!(out, "  upstream {} {{", layout.service_name(j));
    for e in layout.service_endpoints(j).iter().filter(|e| e.ready) {
        let _ = write!(out, " server {}:{};", e.ip, e.port);
    }
    out.push_str(" }\n");
}

fn servers(out: &mut String, c: &Conf<'_>) {
    let certificates = certificates(c.layout);
    let mut host: Option<String> = None;
    for k in 0..c.layout.sizes.paths {
        let route = c.layout.route(k);
        if host.as_ref() != Some(&route.host) {
            if host.is_some() {
                out.push_str("  }\n");
            }
            let _ = writeln!(
                out,
                "  server {{\n    listen 127.0.0.1:{};\n    server_name {};",
                c.port, route.host
            );
            if let Some(&i) = certificates.get(&route.host) {
                let pem = crate::generate::pem_file(c.tls.1, c.layout, i);
                let (port, pem) = (c.tls.0, pem.display());
                let _ = writeln!(
                    out,
                    "    listen 127.0.0.1:{port} ssl;\n    ssl_certificate {pem};\n    ssl_certificate_key {pem};"
                );
            }
            host = Some(route.host);
        }
        let path = c.renamed.get(&k).unwrap_or(&route.path);
        let upstream = c.layout.service_name(route.service);
        let _ = writeln!(
            out,
            "    location {path} {{ proxy_pass http://{upstream}; }}"
        );
    }
    if host.is_some() {
        out.push_str("  }\n");
    }
}

/// Host → the first TLS Ingress with a route on it.
fn certificates(layout: &Layout) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for k in 0..layout.sizes.paths {
        let route = layout.route(k);
        if layout.has_tls(route.ingress) {
            out.entry(route.host).or_insert(route.ingress);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{PortCycle, Sizes};

    fn render_small(renamed: &BTreeMap<usize, String>) -> String {
        let sizes = Sizes {
            ingresses: 4,
            hosts: 2,
            paths: 4,
            services: 2,
            endpoints: 4,
        };
        let layout = Layout::new(sizes, vec![9001, 9002], PortCycle::default()).unwrap();
        let layout = layout.with_tls(1);
        let dir = Path::new("/tmp/x");
        render(&Conf {
            layout: &layout,
            port: 8000,
            dir,
            renamed,
            tls: (8443, Path::new("/m")),
        })
    }

    #[test]
    fn hosts_of_tls_ingresses_listen_with_their_certificate() {
        let conf = render_small(&BTreeMap::new());
        assert_eq!(
            conf.matches("listen 127.0.0.1:8443 ssl;").count(),
            1,
            "{conf}"
        );
        assert!(
            conf.contains("ssl_certificate /m/secrets/tls-ing-00000.pem;"),
            "{conf}"
        );
    }

    #[test]
    fn one_server_per_host_and_one_location_per_path() {
        let conf = render_small(&BTreeMap::new());
        assert_eq!(conf.matches("server_name ").count(), 2);
        assert_eq!(conf.matches("location /p").count(), 4);
        assert_eq!(conf.matches("upstream svc-").count(), 2);
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
    }

    #[test]
    fn a_renamed_route_gets_its_new_location() {
        let renamed = BTreeMap::from([(1, "/moved".to_owned())]);
        let conf = render_small(&renamed);
        assert!(conf.contains("location /moved { proxy_pass http://svc-0001; }"));
        assert_eq!(conf.matches("location /p").count(), 3);
    }
}
