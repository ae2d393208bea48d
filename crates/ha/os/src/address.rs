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
    #[error("cannot list the addresses on {interface} with `ip`: {stderr}")]
    List { interface: String, stderr: String },
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
        self.hosts().await.is_ok_and(|all| all.contains(&address))
    }

    /// The addresses on the interface now as this adapter adds them: with a host prefix
    /// (IPv4 /32, IPv6 /128).
    pub async fn hosts(&self) -> Result<Vec<IpAddr>, AddressError> {
        let args = ["-o", "address", "show", "dev", self.name.as_str()];
        let failed = |stderr: String| AddressError::List {
            interface: self.name.clone(),
            stderr,
        };
        let out = Command::new("ip")
            .args(args)
            .output()
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            return Err(failed(
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ));
        }
        Ok(hosts(&String::from_utf8_lossy(&out.stdout)))
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

/// The host-prefix addresses of `ip -o address show` lines (`2: eth0    inet 10.0.0.5/32 …`).
fn hosts(listing: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in listing.lines() {
        let mut words = line.split_whitespace();
        let Some(family) = words.find(|w| *w == "inet" || *w == "inet6") else {
            continue;
        };
        let Some((address, prefix)) = words.next().and_then(|w| w.split_once('/')) else {
            continue;
        };
        let host = if family == "inet" { "32" } else { "128" };
        if let Ok(address) = address.parse::<IpAddr>()
            && prefix == host
        {
            out.push(address);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_host_prefix_addresses_are_listed() {
        let listing = "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever preferred_lft forever
2: eth0    inet 198.18.0.7/32 scope global eth0\\       valid_lft forever preferred_lft forever
2: eth0    inet6 fd00::7/128 scope global nodad \\       valid_lft forever preferred_lft forever
2: eth0    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever
garbage
";
        let want: Vec<IpAddr> = ["198.18.0.7", "fd00::7"]
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        assert_eq!(hosts(listing), want);
    }
}
