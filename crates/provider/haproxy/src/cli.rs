//! haproxy's command sockets: the runtime API (the stats socket of the current worker) and the
//! master CLI. One command per connection: written, half-closed, answered, closed.

use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `command` (several may be joined with `;`) and returns the whole answer.
pub(crate) async fn command(socket: &Path, command: &str) -> std::io::Result<String> {
    let exchange = async {
        let mut stream = UnixStream::connect(socket).await?;
        stream.write_all(command.as_bytes()).await?;
        stream.write_all(b"\n").await?;
        // The master CLI answers once the client has finished writing.
        stream.shutdown().await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok(answer)
    };
    match tokio::time::timeout(TIMEOUT, exchange).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer from {} within {TIMEOUT:?}", socket.display()),
        )),
    }
}

/// The master's reload count and failed-reload count, from `show proc`.
pub(crate) fn master_reloads(show_proc: &str) -> Option<(u64, u64)> {
    let line = show_proc
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("master"))?;
    let mut words = line.split_whitespace().skip(2);
    let reloads = words.next()?.parse().ok()?;
    let failed = line.split("failed:").nth(1)?.trim_start();
    let failed = failed
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((reloads, failed))
}

/// The master's PID, from `show proc`.
pub(crate) fn master_pid(show_proc: &str) -> Option<i32> {
    let line = show_proc
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("master"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_proc_gives_the_master_reload_counts() {
        let text = "#<PID>          <type>          <reloads>       <uptime>        <version>\n\
                    8006            master          3 [failed: 1]   0d00h00m07s     2.6.12\n\
                    # workers\n8009            worker          0               0d00h00m07s     2.6.12\n";
        assert_eq!(master_reloads(text), Some((3, 1)));
        assert_eq!(master_pid(text), Some(8006));
        assert_eq!(master_pid("garbage"), None);
        assert_eq!(master_reloads("garbage"), None);
    }
}
