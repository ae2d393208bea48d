//! Addresses on the agent's interface, through the `ip` command (iproute2): IPv4 as /32,
//! IPv6 as /128 without duplicate address detection. Adding an address that is there and
//! removing one that is not both succeed.

use std::net::IpAddr;
use tokio::process::Command;

/// Why an address could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("cannot run `ip` to {what} {address} on {interface}: {source}")]
    Spawn {
        what: &'static str,
        address: IpAddr,
        interface: String,
        source: std::io::Error,
    },
    #[error("`ip` failed to {what} {address} on {interface}: {stderr}")]
    Failed {
        what: &'static str,
        address: IpAddr,
        interface: String,
        stderr: String,
    },
}

/// The interface where the active agent holds its load balancers' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
}

impl Interface {
    pub fn new(name: impl Into<String>) -> Self {
        Interface { name: name.into() }
    }

    /// Adds `address` (idempotent).
    pub async fn add(&self, address: IpAddr) -> Result<(), AddressError> {
        let cidr = cidr(address);
        let mut args = vec![
            "address",
            "replace",
            cidr.as_str(),
            "dev",
            self.name.as_str(),
        ];
        if address.is_ipv6() {
            args.push("nodad");
        }
        self.ip("add", address, &args).await
    }

    /// Removes `address` (idempotent).
    pub async fn remove(&self, address: IpAddr) -> Result<(), AddressError> {
        let cidr = cidr(address);
        let args = ["address", "del", cidr.as_str(), "dev", self.name.as_str()];
        match self.ip("remove", address, &args).await {
            Err(AddressError::Failed { stderr, .. }) if absent(&stderr) => Ok(()),
            done => done,
        }
    }

    /// Whether `address` is on the interface now.
    pub async fn has(&self, address: IpAddr) -> bool {
        let out = Command::new("ip")
            .args(["-o", "address", "show", "dev", self.name.as_str()])
            .output()
            .await;
        let needle = format!(" {} ", cidr(address));
        out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&needle))
    }

    async fn ip(
        &self,
        what: &'static str,
        address: IpAddr,
        args: &[&str],
    ) -> Result<(), AddressError> {
        let out = Command::new("ip")
            .args(args)
            .output()
            .await
            .map_err(|source| AddressError::Spawn {
                what,
                address,
                interface: self.name.clone(),
                source,
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(AddressError::Failed {
            what,
            address,
            interface: self.name.clone(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

fn cidr(address: IpAddr) -> String {
    match address {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

/// `ip address del` of an address that is not there.
fn absent(stderr: &str) -> bool {
    [
        "Cannot assign requested address",
        "No such",
        "Address not found",
    ]
    .iter()
    .any(|m| stderr.contains(m))
}
