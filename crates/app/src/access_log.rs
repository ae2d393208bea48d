//! The access log of both providers: the built-in proxy writes its lines itself; haproxy
//! sends its own (already JSON, in the same keys) to a unix datagram socket that Portico
//! reads here and hands to the same writer, so both go to one destination in whole lines.

use portico_dataplane_http::AccessLog;
use std::path::{Path, PathBuf};
use tokio::net::UnixDatagram;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The socket's path under the state directory: one per process, so that two Portico
/// processes sharing a state directory do not take each other's lines. When that path is too
/// long for a unix socket, a short alias of the state directory stands in
/// (`portico_statedir::socket_path`).
pub(crate) fn socket_path(state_dir: &Path) -> PathBuf {
    let name = socket_name();
    portico_statedir::socket_path(state_dir, &name).unwrap_or_else(|| state_dir.join(name))
}

fn socket_name() -> String {
    format!("access-log.{}.sock", std::process::id())
}

/// Creates the state directory and, when the socket's path needs one, its short alias.
pub(crate) fn prepare(state_dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .create(state_dir)?;
    portico_statedir::make_socket_alias(state_dir, &socket_name())
}

/// Binds `path` (replacing a stale file of this process id) and forwards every datagram to
/// `log` as one line until `shutdown`; then removes the socket.
pub(crate) fn forward(
    path: PathBuf,
    log: AccessLog,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    let _ = std::fs::remove_file(&path);
    let socket = UnixDatagram::bind(&path)?;
    Ok(tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            tokio::select! {
                received = socket.recv(&mut buf) => match received {
                    Ok(len) => log.send_line(&line(&buf[..len])),
                    Err(error) => tracing::warn!(%error, "reading haproxy's access log failed"),
                },
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        let _ = std::fs::remove_file(&path);
    }))
}

/// One datagram as one line: trailing line breaks trimmed, one `\n` added; a line break
/// inside (haproxy escapes them in the values it logs) cannot split it.
fn line(datagram: &[u8]) -> Vec<u8> {
    let end = datagram
        .iter()
        .rposition(|b| !matches!(b, b'\n' | b'\r'))
        .map_or(0, |i| i + 1);
    let mut line: Vec<u8> = datagram[..end]
        .iter()
        .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_becomes_exactly_one_line() {
        assert_eq!(line(b"{\"a\":1}\n"), b"{\"a\":1}\n");
        assert_eq!(line(b"{\"a\":1}"), b"{\"a\":1}\n");
        assert_eq!(line(b"a\nb\r\n"), b"a b\n");
        assert_eq!(line(b""), b"\n");
    }
}
