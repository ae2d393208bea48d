//! The writer: each thread that logs hands its records ([`super::record`], each a buffer of its
//! own) to a queue of its own (a mutex only the writer thread ever contends for, once per
//! wake-up), and a thread wakes every [`WAKE_EVERY`], takes each queue, formats the records as
//! JSON lines [`SLICE`] at a time, writes each slice with one `write` and yields its core
//! before the next, and gives the emptied buffers back to their thread's queue for its next
//! records. The writer runs at a lower priority ([`NICE`]) than the proxy's threads: where it
//! shares a core with them (a process pinned to one core), it takes what they leave and gives
//! the core back after each slice (a 50 ms batch formatted in one burst at the same priority
//! could hold the proxy's thread for milliseconds: the suspect for its p99 above nginx's in
//! `bench/access-log.sh`). A record is moved, never copied; a request neither
//! allocates for the queue (once its thread has buffers to reuse) nor wakes anyone (a
//! wake-up per line costs a futex call and a context switch per request, half of the proxy's
//! own CPU per request in `bench/access-log.sh`; a channel send per line cost a few per cent
//! more); a buffer that holds [`BUFFER_CAP`] already drops the line and counts it, rather than
//! slow traffic. Lines of one thread keep their order; a connection is served by one thread.

use super::record::{self, Clock, Record};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::cell::RefCell;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// Record bytes a thread's queue holds at most between two wake-ups; beyond that records are
/// dropped (at one wake-up per 10 ms, 400 MB a second per thread: about 2,000,000 records).
const BUFFER_CAP: usize = 4 << 20;
/// How often the writer takes the queues.
const WAKE_EVERY: Duration = Duration::from_millis(10);
/// Records formatted and written at a time (about 30 KB of lines, a tenth of a millisecond of
/// formatting); the writer yields its core between two.
const SLICE: usize = 128;
/// The writer thread's nice value (the proxy's threads keep 0): 5 weighs about a quarter of a
/// core against a saturated proxy thread on it (the scheduler's weights 335 against 1,024),
/// above the ~15 % the writer needs at saturation (its ~2,800 instructions a line against the
/// request's ~16,000), so lines are not dropped for it, and a waking writer rarely preempts the
/// proxy's thread. (At 10, a tenth of the core, a saturated proxy pinned to one core dropped
/// 7 % of its lines.)
const NICE: i32 = 5;

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

/// Alive while a handle is: the writer thread drains once more and ends when it is gone.
#[derive(Debug)]
struct Sink {
    buffers: Arc<Buffers>,
    dropped: Counter,
}

/// Every logging thread's queue, shared by the handles and the writer thread.
#[derive(Debug, Default)]
struct Buffers {
    /// Tells this log's queues apart from another's in a thread's list.
    id: usize,
    all: Mutex<Vec<Buffer>>,
}

/// One thread's records waiting for the writer, and the buffers the writer gave back.
#[derive(Debug, Default)]
struct Queue {
    records: Vec<Record>,
    /// The records' bytes.
    bytes: usize,
    spare: Vec<Vec<u8>>,
}

type Buffer = Arc<Mutex<Queue>>;

/// Buffers a queue keeps for reuse at most, and the largest it keeps.
const SPARE_BUFFERS: usize = 4096;
const SPARE_CAPACITY: usize = 4096;
/// A new record buffer's capacity (a usual record fits).
const RECORD: usize = 320;

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's queue in each log it wrote to, by [`Buffers::id`].
    static MINE: RefCell<Vec<(usize, Buffer)>> = const { RefCell::new(Vec::new()) };
    /// Record buffers this thread took from its queues' spares, for its next records (a
    /// batch at a time: one lock per [`BATCH`] records, not one per record).
    static STASH: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Spare buffers taken from a queue at once.
const BATCH: usize = 64;

impl Buffers {
    /// Runs `f` on this thread's queue, registered at its first use.
    fn with_mine<T>(&self, f: impl FnOnce(&mut Queue) -> T) -> T {
        MINE.with(|mine| {
            let mut mine = mine.borrow_mut();
            if let Some((_, buffer)) = mine.iter().find(|(id, _)| *id == self.id) {
                return f(&mut lock(buffer));
            }
            let buffer = Arc::new(Mutex::new(Queue::default()));
            lock(&self.all).push(buffer.clone());
            mine.push((self.id, buffer.clone()));
            f(&mut lock(&buffer))
        })
    }

    /// Queues a record; false (and the record dropped) when the queue is full.
    fn append(&self, record: Record) -> bool {
        self.with_mine(|queue| {
            if queue.bytes + record.bytes.len() > BUFFER_CAP {
                return false;
            }
            queue.bytes += record.bytes.len();
            queue.records.push(record);
            true
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AccessLog {
    /// No access log: nothing is formatted.
    pub fn off() -> Self {
        AccessLog::default()
    }

    /// Opens `destination` and starts its writer thread, which ends once every clone of the
    /// handle is dropped and the buffers are written. Registers
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
        let sink = Arc::new(Sink::new(dropped.clone()));
        let (alive, buffers) = (Arc::downgrade(&sink), sink.buffers.clone());
        std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || {
                lower_priority();
                write_lines(&alive, &buffers, out, &dropped);
            })?;
        Ok(AccessLog { sink: Some(sink) })
    }

    /// Whether lines are written: when not, requests format nothing.
    pub fn is_on(&self) -> bool {
        self.sink.is_some()
    }

    /// Adds a whole line (ending with `\n`, made elsewhere: haproxy's) to this thread's
    /// queue without waiting: a full queue drops it.
    pub fn send_line(&self, line: &[u8]) {
        if self.is_on() {
            let mut bytes = self.buffer();
            super::record::line(&mut bytes, line);
            let now = std::time::Instant::now();
            self.send(Record {
                bytes,
                pool: None,
                started: now,
                ended: now,
            });
        }
    }

    /// An empty buffer for a record: one the writer gave back to this thread, else a new one.
    pub(crate) fn buffer(&self) -> Vec<u8> {
        let Some(sink) = &self.sink else {
            return Vec::new();
        };
        STASH.with(|stash| {
            let mut stash = stash.borrow_mut();
            if let Some(buffer) = stash.pop() {
                return buffer;
            }
            sink.buffers.with_mine(|queue| {
                let from = queue.spare.len().saturating_sub(BATCH);
                stash.extend(queue.spare.drain(from..));
            });
            stash.pop().unwrap_or_else(|| Vec::with_capacity(RECORD))
        })
    }

    /// Queues one record (made by [`super::record`]) for the writer without waiting: a full
    /// queue drops it.
    pub(crate) fn send(&self, record: Record) {
        let Some(sink) = &self.sink else { return };
        if !sink.buffers.append(record) {
            sink.dropped.inc();
        }
    }
}

impl Sink {
    fn new(dropped: Counter) -> Sink {
        let buffers = Buffers {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            all: Mutex::default(),
        };
        Sink {
            buffers: Arc::new(buffers),
            dropped,
        }
    }
}

/// Lowers the calling thread's priority to [`NICE`] (on Linux a nice value is a thread's);
/// where that is refused the writer runs at the process's priority.
fn lower_priority() {
    if let Err(error) = rustix::process::setpriority_process(None, NICE) {
        tracing::debug!(%error, "access log writer: priority not lowered");
    }
}

/// The writer thread's loop, until every handle is gone and the buffers are written; a
/// failed write counts its lines as dropped and goes on, and so does a damaged record.
fn write_lines(
    alive: &Weak<Sink>,
    buffers: &Buffers,
    mut out: Box<dyn Write + Send>,
    failed: &Counter,
) {
    let mut taken: Vec<Record> = Vec::new();
    let mut lines: Vec<u8> = Vec::with_capacity(SLICE * 512);
    loop {
        std::thread::sleep(WAKE_EVERY);
        // Read before draining: the last handle's records are in the queues by then.
        let ended = alive.strong_count() == 0;
        let all: Vec<Buffer> = lock(&buffers.all).clone();
        let clock = Clock::now();
        for buffer in all {
            {
                let mut queue = lock(&buffer);
                std::mem::swap(&mut queue.records, &mut taken);
                queue.bytes = 0;
            }
            write_slices(&taken, clock, &mut lines, &mut out, failed);
            give_back(&buffer, &mut taken);
        }
        let _ = out.flush();
        if ended {
            return;
        }
    }
}

/// Formats and writes `records` [`SLICE`] at a time, each slice's lines in one write, yielding
/// the core between two slices.
fn write_slices(
    records: &[Record],
    clock: Clock,
    lines: &mut Vec<u8>,
    out: &mut dyn Write,
    failed: &Counter,
) {
    for (i, slice) in records.chunks(SLICE).enumerate() {
        if i > 0 {
            std::thread::yield_now();
        }
        let bad = record::format_all(slice, clock, lines);
        failed.inc_by(u64::try_from(bad).unwrap_or(u64::MAX));
        if !lines.is_empty() && out.write_all(lines).is_err() {
            let count = lines.iter().filter(|&&b| b == b'\n').count();
            failed.inc_by(u64::try_from(count).unwrap_or(u64::MAX));
        }
        lines.clear();
    }
}

/// Gives the buffers of `taken` back to their thread's queue, emptied (some: see
/// [`SPARE_BUFFERS`]); `taken` is left empty.
fn give_back(buffer: &Mutex<Queue>, taken: &mut Vec<Record>) {
    let mut queue = lock(buffer);
    let room = SPARE_BUFFERS.saturating_sub(queue.spare.len());
    let kept = (taken.drain(..).map(|r| r.bytes)).filter(|b| b.capacity() <= SPARE_CAPACITY);
    queue.spare.extend(kept.take(room).map(|mut b| {
        b.clear();
        b
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The paths of the lines in `text`, in order.
    fn paths(text: &str) -> Vec<String> {
        (text.lines())
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| v["path"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn lines_reach_the_file_within_a_wake_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let mut registry = Registry::default();
        let log = AccessLog::start(&Destination::File(path.clone()), &mut registry).unwrap();
        log.send(record::sample(b"/1"));
        log.send(record::sample(b"/2"));
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().count() == 2 && paths(&text) == ["/1", "/2"] {
                break;
            }
            assert!(Instant::now() < deadline, "{text:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_full_buffer_drops_lines_and_counts_them() {
        // No writer thread: nothing drains the buffer.
        let log = AccessLog {
            sink: Some(Arc::new(Sink::new(Counter::default()))),
        };
        for _ in 0..4 {
            log.send(record::sample(&vec![b'x'; BUFFER_CAP / 2 - 200]));
        }
        assert_eq!(log.sink.as_ref().unwrap().dropped.get(), 2);
    }

    #[test]
    fn each_thread_has_its_buffer_and_every_line_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let mut registry = Registry::default();
        let log = AccessLog::start(&Destination::File(path.clone()), &mut registry).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        log.send(record::sample(format!("{t} {i}").as_bytes()));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(
            log.sink.as_ref().unwrap().buffers.all.lock().unwrap().len(),
            4
        );
        drop(log);
        let deadline = Instant::now() + Duration::from_secs(5);
        let text = loop {
            let text = std::fs::read_to_string(&path).unwrap();
            if text.lines().count() >= 4000 || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // Each thread's lines in its order, none lost or doubled.
        let mut next = [0; 4];
        for line in paths(&text) {
            let (t, i) = line.split_once(' ').unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(i.parse::<usize>().unwrap(), next[t], "{line}");
            next[t] += 1;
        }
        assert_eq!(next, [1000; 4]);
    }

    /// Each write's bytes, in order.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn records_are_written_a_slice_at_a_time_each_in_one_write() {
        let records: Vec<Record> = (0..SLICE * 2 + 44)
            .map(|i| record::sample(format!("/{i}").as_bytes()))
            .collect();
        let writes = Writes::default();
        let mut out = writes.clone();
        let failed = Counter::default();
        let mut lines = Vec::new();
        write_slices(&records, Clock::now(), &mut lines, &mut out, &failed);
        let writes = writes.0.lock().unwrap();
        let counts: Vec<usize> = (writes.iter())
            .map(|w| String::from_utf8_lossy(w).lines().count())
            .collect();
        assert_eq!(counts, [SLICE, SLICE, 44]);
        assert!(writes.iter().all(|w| w.ends_with(b"\n")));
        let text = String::from_utf8(writes.concat()).unwrap();
        let expected: Vec<String> = (0..SLICE * 2 + 44).map(|i| format!("/{i}")).collect();
        assert_eq!(paths(&text), expected);
        assert_eq!(failed.get(), 0);
    }

    /// The nice values of this process's threads named `name`, and of the calling thread.
    fn nice_values(name: &str) -> (Vec<i64>, i64) {
        let nice = |stat: &str| -> i64 {
            // The fields after the command's closing parenthesis: state is the 3rd, nice the 19th.
            let rest = &stat[stat.rfind(')').unwrap() + 1..];
            rest.split_whitespace().nth(16).unwrap().parse().unwrap()
        };
        let mut named = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let dir = task.unwrap().path();
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() == name
                && let Ok(stat) = std::fs::read_to_string(dir.join("stat"))
            {
                named.push(nice(&stat));
            }
        }
        let own = nice(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
        (named, own)
    }

    #[test]
    fn the_writer_runs_at_a_lower_priority_than_the_threads_that_log() {
        let (_, before) = nice_values("access-log");
        let dir = tempfile::tempdir().unwrap();
        let mut registry = Registry::default();
        let path = dir.path().join("access.log");
        let log = AccessLog::start(&Destination::File(path), &mut registry).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (writers, own) = nice_values("access-log");
            // This thread (and so the proxy's threads) keeps its priority.
            assert_eq!(own, before);
            if writers.contains(&i64::from(NICE)) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "writers' nice values: {writers:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(log);
    }

    #[test]
    fn off_formats_and_sends_nothing() {
        let mut registry = Registry::default();
        let log = AccessLog::start(&Destination::Off, &mut registry).unwrap();
        assert!(!log.is_on());
        log.send(record::sample(b"/"));
    }
}
