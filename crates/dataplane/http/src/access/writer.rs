//! The writer: a bounded queue of formatted lines and a thread that wakes every 50 ms, writes
//! what the queue holds through a `BufWriter` and flushes once the queue is empty. Requests
//! never wake it (a wake-up per line costs a futex call and a context switch per request,
//! half of the proxy's own CPU per request in `bench/access-log.sh`); a full queue drops
//! the line and counts it, rather than slow traffic.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::time::Duration;

/// Lines waiting for the writer; beyond that they are dropped (at one wake-up per 50 ms, that
/// is 320,000 lines a second).
const QUEUE: usize = 16 * 1024;
const BUFFER: usize = 64 * 1024;
const WAKE_EVERY: Duration = Duration::from_millis(50);

/// Where access log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Off,
    Stdout,
    /// A file, appended to (created with mode 0644 when missing).
    File(PathBuf),
}

/// A handle on the access log; cheap to clone, and off when made by [`AccessLog::off`].
#[derive(Debug, Clone, Default)]
pub struct AccessLog {
    sink: Option<Arc<Sink>>,
}

#[derive(Debug)]
struct Sink {
    lines: SyncSender<Vec<u8>>,
    dropped: Counter,
}

impl AccessLog {
    /// No access log: nothing is formatted.
    pub fn off() -> Self {
        AccessLog::default()
    }

    /// Opens `destination` and starts its writer thread, which ends once every clone of the
    /// handle is dropped and the queue is written. Registers
    /// `portico_access_log_dropped_lines_total` into `registry`.
    pub fn start(destination: &Destination, registry: &mut Registry) -> std::io::Result<Self> {
        let out: Box<dyn Write + Send> = match destination {
            Destination::Off => return Ok(AccessLog::off()),
            Destination::Stdout => Box::new(std::io::stdout()),
            Destination::File(path) => {
                Box::new(OpenOptions::new().create(true).append(true).open(path)?)
            }
        };
        let dropped = Counter::default();
        let help = "Access log lines dropped because the writer fell behind or failed";
        registry.register("portico_access_log_dropped_lines", help, dropped.clone());
        let (lines, queue) = sync_channel(QUEUE);
        let failed = dropped.clone();
        std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || write_lines(&queue, BufWriter::with_capacity(BUFFER, out), &failed))?;
        let sink = Arc::new(Sink { lines, dropped });
        Ok(AccessLog { sink: Some(sink) })
    }

    /// Whether lines are written: when not, requests format nothing.
    pub fn is_on(&self) -> bool {
        self.sink.is_some()
    }

    /// Queues one line (ending with `\n`) without waiting: a full queue drops it.
    pub fn send(&self, line: Vec<u8>) {
        let Some(sink) = &self.sink else { return };
        match sink.lines.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                sink.dropped.inc();
            }
        }
    }
}

/// The writer thread's loop, until every sender is gone and the queue is written; write
/// errors count the line as dropped and go on.
fn write_lines(
    queue: &Receiver<Vec<u8>>,
    mut out: BufWriter<Box<dyn Write + Send>>,
    failed: &Counter,
) {
    loop {
        std::thread::sleep(WAKE_EVERY);
        let ended = loop {
            match queue.try_recv() {
                Ok(line) => {
                    if out.write_all(&line).is_err() {
                        failed.inc();
                    }
                }
                Err(TryRecvError::Empty) => break false,
                Err(TryRecvError::Disconnected) => break true,
            }
        };
        let _ = out.flush();
        if ended {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn lines_reach_the_file_once_the_queue_runs_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let mut registry = Registry::default();
        let log = AccessLog::start(&Destination::File(path.clone()), &mut registry).unwrap();
        log.send(b"{\"a\":1}\n".to_vec());
        log.send(b"{\"a\":2}\n".to_vec());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text == "{\"a\":1}\n{\"a\":2}\n" {
                break;
            }
            assert!(Instant::now() < deadline, "{text:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_full_queue_drops_lines_and_counts_them() {
        let (lines, _queue) = sync_channel(1);
        let log = AccessLog {
            sink: Some(Arc::new(Sink {
                lines,
                dropped: Counter::default(),
            })),
        };
        for _ in 0..3 {
            log.send(b"x\n".to_vec());
        }
        assert_eq!(log.sink.as_ref().unwrap().dropped.get(), 2);
    }

    #[test]
    fn off_formats_and_sends_nothing() {
        let mut registry = Registry::default();
        let log = AccessLog::start(&Destination::Off, &mut registry).unwrap();
        assert!(!log.is_on());
        log.send(b"x\n".to_vec());
    }
}
