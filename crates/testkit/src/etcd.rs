//! Real etcd processes for tests (Debian's `etcd-server` and `etcdctl`): one member or a
//! cluster on 127.0.0.1 with free ports and a temporary data directory (in /dev/shm when there
//! is one, so fsync is cheap), plain or TLS-only with client certificates made here. Members
//! can be killed (SIGKILL), stopped (SIGTERM) and started again; history can be compacted.
//! Every process is killed by PID when the cluster is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long a member may take to answer after it is started.
const READY: Duration = Duration::from_secs(30);

/// A running etcd cluster.
#[derive(Debug)]
pub struct EtcdCluster {
    /// The address members listen on.
    host: String,
    dir: TempDir,
    members: Vec<Member>,
    tls: Option<EtcdTls>,
}

#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// PEM files of a TLS-only cluster: its authority, and a client certificate it accepts.
#[derive(Debug, Clone)]
pub struct EtcdTls {
    pub ca: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl EtcdCluster {
    /// `size` members over plain HTTP, all answering when this returns.
    pub fn start(size: usize) -> EtcdCluster {
        EtcdCluster::launch(size, false)
    }

    /// One member that speaks TLS only and requires a client certificate signed by its CA.
    pub fn start_tls() -> EtcdCluster {
        EtcdCluster::launch(1, true)
    }

    /// One plain member listening on `host` (e.g. an address on a test bridge that network
    /// namespaces reach) instead of loopback.
    pub fn start_on(host: std::net::IpAddr) -> EtcdCluster {
        EtcdCluster::launch_on(host.to_string(), 1, false)
    }

    fn launch(size: usize, tls: bool) -> EtcdCluster {
        EtcdCluster::launch_on("127.0.0.1".to_owned(), size, tls)
    }

    fn launch_on(host: String, size: usize, tls: bool) -> EtcdCluster {
        let dir = temp_dir();
        let tls = tls.then(|| EtcdTls::generate(dir.path()));
        let members = (0..size)
            .map(|i| Member {
                name: format!("m{i}"),
                client_port: crate::free_port(),
                peer_port: crate::free_port(),
                child: None,
            })
            .collect();
        let mut cluster = EtcdCluster {
            host,
            dir,
            members,
            tls,
        };
        for i in 0..size {
            cluster.spawn(i);
        }
        cluster.wait_healthy(None);
        cluster
    }

    /// `HOST:PORT` of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("{}:{}", self.host, m.client_port))
            .collect()
    }

    /// The PEM files, for a TLS-only cluster.
    pub fn tls(&self) -> Option<&EtcdTls> {
        self.tls.as_ref()
    }

    /// SIGKILLs member `i` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERMs member `i` and waits for it to exit.
    pub fn stop(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data and waits until it answers.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
        self.wait_healthy(Some(i));
    }

    /// The newest revision.
    pub fn revision(&self) -> i64 {
        let out = self.etcdctl(&["get", "/", "-w", "json"]);
        let json: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("etcdctl get -w json gave {out:?}: {e}"));
        json["header"]["revision"]
            .as_i64()
            .unwrap_or_else(|| panic!("no header.revision in {out}"))
    }

    /// Compacts the history up to the newest revision; returns it.
    pub fn compact(&self) -> i64 {
        let revision = self.revision();
        self.etcdctl(&["compact", &revision.to_string()]);
        revision
    }

    /// Runs etcdctl against the running members (with the client certificate of a TLS
    /// cluster); its stdout. Panics, with stderr, when it fails.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let out = self.etcdctl_command(args, None).output();
        let out = out.unwrap_or_else(|e| panic!("running etcdctl: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "etcdctl {args:?} failed: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn etcdctl_command(&self, args: &[&str], only: Option<usize>) -> Command {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let endpoints: Vec<String> = (self.members.iter().enumerate())
            .filter(|(i, m)| only.is_none_or(|o| o == *i) && m.child.is_some())
            .map(|(_, m)| format!("{scheme}://{}:{}", self.host, m.client_port))
            .collect();
        let mut command = Command::new("etcdctl");
        command
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", endpoints.join(",")))
            .arg("--dial-timeout=2s")
            .arg("--command-timeout=5s");
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cacert={}", tls.ca.display()))
                .arg(format!("--cert={}", tls.client_cert.display()))
                .arg(format!("--key={}", tls.client_key.display()));
        }
        command.args(args);
        command
    }

    fn spawn(&mut self, i: usize) {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let cluster: Vec<String> = (self.members.iter())
            .map(|m| format!("{}=http://{}:{}", m.name, self.host, m.peer_port))
            .collect();
        let member = &self.members[i];
        let data = self.dir.path().join(&member.name);
        let log = std::fs::File::create(self.dir.path().join(format!("{}.log", member.name)))
            .unwrap_or_else(|e| panic!("creating the etcd log: {e}"));
        let client = format!("{scheme}://{}:{}", self.host, member.client_port);
        let peer = format!("http://{}:{}", self.host, member.peer_port);
        let mut command = Command::new("etcd");
        command
            .arg(format!("--name={}", member.name))
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster={}", cluster.join(",")))
            .arg("--initial-cluster-state=new")
            .arg("--initial-cluster-token=portico-test")
            .args(["--logger=zap", "--log-level=warn", "--log-outputs=stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.server_cert.display()))
                .arg(format!("--key-file={}", tls.server_key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting etcd (is etcd-server installed?): {e}"));
        self.members[i].child = Some(child);
    }

    /// Waits until member `only` (or every running member) reports healthy.
    fn wait_healthy(&mut self, only: Option<usize>) {
        let start = Instant::now();
        loop {
            let status = self
                .etcdctl_command(&["endpoint", "health"], only)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if status.is_ok_and(|s| s.success()) {
                return;
            }
            self.check_running();
            assert!(
                start.elapsed() < READY,
                "etcd did not become healthy; logs in {}",
                self.dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn check_running(&mut self) {
        for member in &mut self.members {
            let exited = member.child.as_mut().map(|c| c.try_wait());
            if let Some(Ok(Some(status))) = exited {
                let log = self.dir.path().join(format!("{}.log", member.name));
                let log = std::fs::read_to_string(log).unwrap_or_default();
                panic!("etcd {} exited ({status}): {log}", member.name);
            }
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

fn temp_dir() -> TempDir {
    let shm = Path::new("/dev/shm");
    let made = match shm.is_dir() {
        true => tempfile::Builder::new().prefix("etcd-test").tempdir_in(shm),
        false => tempfile::Builder::new().prefix("etcd-test").tempdir(),
    };
    made.unwrap_or_else(|e| panic!("creating a temporary directory: {e}"))
}

impl EtcdTls {
    /// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate.
    fn generate(dir: &Path) -> EtcdTls {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let mut ca_params = made(CertificateParams::new(Vec::<String>::new()));
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "portico test etcd CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = made(KeyPair::generate());
        let ca_cert = made(ca_params.self_signed(&ca_key));
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: &[&str], file: &str| {
            let owned: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            let mut params = made(CertificateParams::new(owned));
            params.distinguished_name.push(DnType::CommonName, names[0]);
            let key = made(KeyPair::generate());
            let cert = made(params.signed_by(&key, &issuer));
            let cert_path = write(dir, &format!("{file}.pem"), &cert.pem());
            let key_path = write(dir, &format!("{file}-key.pem"), &key.serialize_pem());
            (cert_path, key_path)
        };
        let (server_cert, server_key) = leaf(&["127.0.0.1", "localhost"], "server");
        let (client_cert, client_key) = leaf(&["portico-client"], "client");
        EtcdTls {
            ca: write(dir, "ca.pem", &ca_cert.pem()),
            client_cert,
            client_key,
            server_cert,
            server_key,
        }
    }
}

fn made<T>(made: Result<T, rcgen::Error>) -> T {
    made.unwrap_or_else(|e| panic!("making test certificates: {e}"))
}

fn write(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}
