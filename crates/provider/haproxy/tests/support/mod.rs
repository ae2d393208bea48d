//! Test support: rendering into a real directory with every file haproxy reads, and
//! `haproxy -c` on the result.

#![allow(dead_code)]

pub mod live;

use portico_model::{LoadBalancer, ObjectRef};
use portico_provider_haproxy::{
    BAD_GATEWAY_FILE, BAD_GATEWAY_RESPONSE, Binds, CONFIG_FILE, CRT_LIST_FILE,
    DEFAULT_CERTIFICATE_FILE, Input, Rendered, render, routes,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

pub fn binds() -> Binds {
    Binds {
        http: Some(([127, 0, 0, 1], 8080).into()),
        https: Some(([127, 0, 0, 1], 8443).into()),
        transparent: false,
        floating: None,
    }
}

/// One certificate file per Secret the listeners name, `<namespace>_<name>.pem`.
pub fn certificate_files(lb: &LoadBalancer) -> BTreeMap<ObjectRef, String> {
    let tls = lb.listeners.iter().filter_map(|l| l.tls.as_ref());
    tls.flat_map(|t| &t.sni)
        .map(|s| {
            let c = &s.certificate;
            (c.clone(), format!("{}_{}.pem", c.namespace, c.name))
        })
        .collect()
}

pub fn render_in(lb: &LoadBalancer, dir: &Path) -> Rendered {
    let certificates = certificate_files(lb);
    render(
        lb,
        &Input {
            dir,
            binds: binds(),
            certificates: &certificates,
            ca_files: &std::collections::BTreeMap::new(),
            credentials: &portico_model::Credentials::new(),
            limits: &portico_model::Limits::default(),
            tcp: Default::default(),
            access_log: Some(Path::new("/state/access-log.sock")),
            descriptors: None,
        },
    )
}

/// Renders `lb` into a new directory with its files and runs `haproxy -c` on it.
pub fn check(lb: &LoadBalancer) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let rendered = render_in(lb, dir.path());
    write_files(dir.path(), &rendered, certificate_files(lb).values());
    let out = Command::new("haproxy")
        .arg("-c")
        .arg("-q")
        .arg("-f")
        .arg(dir.path().join(CONFIG_FILE))
        .output()
        .map_err(|e| format!("cannot run haproxy (is it installed?): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            rendered.config
        ))
    }
}

pub fn write_files<'a>(dir: &Path, rendered: &Rendered, certs: impl Iterator<Item = &'a String>) {
    let material = portico_tls::self_signed(&["portico.invalid"]).unwrap();
    std::fs::write(dir.join(CONFIG_FILE), &rendered.config).unwrap();
    std::fs::write(dir.join(CRT_LIST_FILE), &rendered.crt_list).unwrap();
    std::fs::write(dir.join(BAD_GATEWAY_FILE), BAD_GATEWAY_RESPONSE).unwrap();
    std::fs::write(dir.join(DEFAULT_CERTIFICATE_FILE), material.pem()).unwrap();
    for name in certs {
        std::fs::write(dir.join(name), material.pem()).unwrap();
    }
    for (name, entries) in &rendered.maps {
        std::fs::write(dir.join(name), routes::file_text(entries)).unwrap();
    }
}
