//! The generated cluster on disk: `ingresses/ing-NNNNN.yaml` (one Ingress each),
//! `services/svc-NNNN.yaml` (one Service and its EndpointSlices each) and, for the Ingresses
//! with TLS, `secrets/tls-ing-NNNNN.yaml` (a Secret) beside `.pem` (chain and key, for nginx;
//! Portico reads only manifest extensions) under one directory. With `per_file` N > 1 the
//! Ingresses and Services go N to a multi-document file instead (`ingresses/group-NNNN.yaml`,
//! `services/group-NNNN.yaml`, named after the group's number); a change rewrites the whole file.

pub mod gateway;
pub mod layout;
mod tls;
pub mod yaml;

pub use layout::{Layout, PortCycle, Route, Sizes};
pub use tls::pem_file;

use std::io;
use std::path::{Path, PathBuf};
use yaml::IngressPath;

/// The file that holds Ingress `i`.
pub fn ingress_file(dir: &Path, layout: &Layout, i: usize) -> PathBuf {
    let name = if layout.per_file > 1 {
        format!("group-{:04}", i / layout.per_file)
    } else {
        layout.ingress_name(i)
    };
    dir.join("ingresses").join(format!("{name}.yaml"))
}

/// The file that holds Service `j`.
pub fn service_file(dir: &Path, layout: &Layout, j: usize) -> PathBuf {
    let name = if layout.per_file > 1 {
        format!("group-{:04}", j / layout.per_file)
    } else {
        layout.service_name(j)
    };
    dir.join("services").join(format!("{name}.yaml"))
}

/// The indices of the objects (out of `count`) that share a file with object `i`.
fn file_mates(layout: &Layout, i: usize, count: usize) -> std::ops::Range<usize> {
    let first = i / layout.per_file * layout.per_file;
    first..(first + layout.per_file).min(count)
}

/// The whole text of the file holding Ingress `i`, with Ingress `i` as [`ingress_yaml`] gives
/// it for `renamed` and its file mates as generated.
pub fn ingress_file_yaml(layout: &Layout, i: usize, renamed: Option<(usize, &str)>) -> String {
    let docs: Vec<String> = file_mates(layout, i, layout.sizes.ingresses)
        .map(|m| ingress_yaml(layout, m, if m == i { renamed } else { None }))
        .collect();
    docs.join("---\n")
}

/// The whole text of the file holding Service `j`, with Service `j`'s endpoints moved to
/// `port` when given and its file mates as generated.
pub fn service_file_yaml(layout: &Layout, j: usize, port: Option<u16>) -> String {
    let docs: Vec<String> = file_mates(layout, j, layout.sizes.services)
        .map(|m| match port {
            Some(port) if m == j => service_yaml_on(layout, m, port),
            _ => service_yaml(layout, m),
        })
        .collect();
    docs.join("---\n")
}

/// Ingress `i` as generated, or with route `renamed.0` moved to path `renamed.1`.
pub fn ingress_yaml(layout: &Layout, i: usize, renamed: Option<(usize, &str)>) -> String {
    let paths: Vec<IngressPath> = layout
        .routes_of_ingress(i)
        .map(|k| {
            let r = layout.route(k);
            let path = match renamed {
                Some((changed, path)) if changed == k => path.to_owned(),
                _ => r.path,
            };
            IngressPath {
                host: r.host,
                path,
                service: layout.service_name(r.service),
            }
        })
        .collect();
    let tls = layout.has_tls(i).then(|| layout.tls_secret_name(i));
    yaml::ingress(&layout.ingress_name(i), i, &paths, tls.as_deref())
}

/// Service `j` with its endpoints as generated.
pub fn service_yaml(layout: &Layout, j: usize) -> String {
    yaml::service(&layout.service_name(j), &layout.service_endpoints(j))
}

/// Service `j` with every one of its endpoints moved to 127.0.0.1 at `port`, ready.
pub fn service_yaml_on(layout: &Layout, j: usize, port: u16) -> String {
    let endpoints = vec![yaml::Endpoint::local(port); layout.endpoints_of_service(j).len()];
    yaml::service(&layout.service_name(j), &endpoints)
}

/// Writes every file of the cluster under `dir`.
pub fn write_all(dir: &Path, layout: &Layout) -> io::Result<()> {
    std::fs::create_dir_all(dir.join("ingresses"))?;
    std::fs::create_dir_all(dir.join("services"))?;
    let step = layout.per_file;
    for i in (0..layout.sizes.ingresses).step_by(step) {
        let text = ingress_file_yaml(layout, i, None);
        std::fs::write(ingress_file(dir, layout, i), text)?;
    }
    for j in (0..layout.sizes.services).step_by(step) {
        std::fs::write(
            service_file(dir, layout, j),
            service_file_yaml(layout, j, None),
        )?;
    }
    tls::write_secrets(dir, layout)
}

/// A new version of a file written beside it, to be renamed over it by [`Staged::commit`].
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    target: PathBuf,
}

impl Staged {
    /// The temporary name (`.NAME.tmp`) is not a manifest, so the watcher ignores it.
    pub fn write(target: &Path, text: &str) -> io::Result<Self> {
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let tmp = target.with_file_name(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        Ok(Staged {
            tmp,
            target: target.to_owned(),
        })
    }

    /// The file it replaces.
    pub fn target(&self) -> &Path {
        &self.target
    }

    pub fn commit(self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_all_writes_one_file_per_ingress_and_service() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            ingresses: 4,
            hosts: 2,
            paths: 8,
            services: 3,
            endpoints: 6,
        };
        let layout = Layout::new(sizes, vec![9000, 9001], PortCycle::default()).unwrap();
        write_all(dir.path(), &layout.with_tls(2)).unwrap();
        let count = |sub: &str| std::fs::read_dir(dir.path().join(sub)).unwrap().count();
        assert_eq!((count("ingresses"), count("services")), (4, 3));
        assert_eq!(
            count("secrets"),
            4,
            "a Secret and a PEM file per TLS Ingress"
        );
    }

    #[test]
    fn per_file_groups_objects_into_multi_document_files() {
        let dir = tempfile::tempdir().unwrap();
        let sizes = Sizes {
            ingresses: 5,
            hosts: 2,
            paths: 10,
            services: 3,
            endpoints: 6,
        };
        let layout = Layout::new(sizes, vec![9000], PortCycle::default()).unwrap();
        let layout = layout.with_per_file(2);
        write_all(dir.path(), &layout).unwrap();
        let count = |sub: &str| std::fs::read_dir(dir.path().join(sub)).unwrap().count();
        assert_eq!((count("ingresses"), count("services")), (3, 2));
        assert_eq!(
            ingress_file(dir.path(), &layout, 2),
            ingress_file(dir.path(), &layout, 3)
        );
        let text = std::fs::read_to_string(ingress_file(dir.path(), &layout, 3)).unwrap();
        assert!(text.contains("name: ing-00002") && text.contains("name: ing-00003"));
        let last = std::fs::read_to_string(ingress_file(dir.path(), &layout, 4)).unwrap();
        assert!(last.contains("name: ing-00004") && !last.contains("name: ing-00003"));
        let moved = service_file_yaml(&layout, 1, Some(7777));
        assert!(moved.contains("name: svc-0000") && moved.contains("port: 7777"));
        assert_eq!(moved.matches("port: 7777").count(), 1, "only svc-1 moves");
    }

    #[test]
    fn renaming_a_route_changes_only_that_path() {
        let sizes = Sizes {
            ingresses: 1,
            hosts: 1,
            paths: 2,
            services: 1,
            endpoints: 1,
        };
        let layout = Layout::new(sizes, vec![9000], PortCycle::default()).unwrap();
        let y = ingress_yaml(&layout, 0, Some((1, "/new0")));
        assert!(y.contains("path: /p0") && y.contains("path: /new0") && !y.contains("/p1"));
    }
}
