//! Servers' state from haproxy's runtime API (`show servers state`), for the admin API's pool
//! health.

use crate::render::STATS_SOCKET;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(500);

/// One server as haproxy sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// The backend: the pool's id.
    pub backend: String,
    /// The server: the member's id.
    pub server: String,
    pub address: String,
    pub port: u16,
    /// Operational state RUNNING (passing its checks, not marked down by errors).
    pub up: bool,
    /// In maintenance: the member is not ready (not in rotation by configuration).
    pub maintenance: bool,
}

/// The state of every server of the haproxy whose directory is `dir` (empty when it does not
/// answer).
pub fn query(dir: &Path) -> Vec<ServerState> {
    let ask = || -> std::io::Result<String> {
        let mut stream = UnixStream::connect(crate::files::socket(dir, STATS_SOCKET))?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream.write_all(b"show servers state\n")?;
        let mut out = String::new();
        stream.read_to_string(&mut out)?;
        Ok(out)
    };
    ask().map(|text| parse(&text)).unwrap_or_default()
}

/// Parses `show servers state` (format 1: a version line, a `#` header naming the columns).
pub fn parse(text: &str) -> Vec<ServerState> {
    let mut lines = text.lines();
    let header = lines.find(|l| l.starts_with("# "));
    let Some(header) = header else {
        return Vec::new();
    };
    let columns: Vec<&str> = header[2..].split_whitespace().collect();
    let at = |name: &str| columns.iter().position(|c| *c == name);
    let (Some(be), Some(srv), Some(addr), Some(op), Some(admin), Some(port)) = (
        at("be_name"),
        at("srv_name"),
        at("srv_addr"),
        at("srv_op_state"),
        at("srv_admin_state"),
        at("srv_port"),
    ) else {
        return Vec::new();
    };
    lines
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let admin: u32 = f.get(admin)?.parse().ok()?;
            Some(ServerState {
                backend: (*f.get(be)?).to_owned(),
                server: (*f.get(srv)?).to_owned(),
                address: (*f.get(addr)?).to_owned(),
                port: f.get(port)?.parse().ok()?,
                up: *f.get(op)? == "2",
                // SRV_ADMF_FMAINT, SRV_ADMF_IMAINT, SRV_ADMF_CMAINT (configured `disabled`).
                maintenance: admin & 0x07 != 0,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_runtime_api_answer() {
        let text = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state \
                    srv_uweight srv_iweight srv_time_since_last_change srv_check_status \
                    srv_check_result srv_check_health srv_check_state srv_agent_state \
                    bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord\n\
                    3 pool-a 1 m1 10.0.0.1 2 0 1 1 5 6 3 4 6 0 0 0 - 8080 -\n\
                    3 pool-a 2 m2 10.0.0.2 0 0 1 1 5 6 3 0 6 0 0 0 - 8080 -\n\
                    3 pool-a 3 m3 10.0.0.3 0 1 1 1 5 6 3 0 6 0 0 0 - 8080 -\n\n";
        let s = parse(text);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].backend.as_str(), s[0].server.as_str()),
            ("pool-a", "m1")
        );
        assert_eq!((s[0].address.as_str(), s[0].port), ("10.0.0.1", 8080));
        assert!(s[0].up && !s[0].maintenance);
        assert!(!s[1].up && !s[1].maintenance);
        assert!(s[2].maintenance);
        assert!(parse("").is_empty());
    }
}
