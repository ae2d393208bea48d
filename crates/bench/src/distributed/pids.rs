//! The processes this run started, one `PID EXE` line each in a file, so that the calling
//! script's exit trap can stop exactly them (and only while `/proc/PID/exe` is still that
//! executable) even if the bench itself is killed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Pids {
    file: PathBuf,
}

impl Pids {
    pub fn new(file: &Path) -> Self {
        Pids {
            file: file.to_owned(),
        }
    }

    /// Appends `pid` and the executable it runs now.
    pub fn record(&self, pid: u32) -> std::io::Result<()> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)?;
        writeln!(f, "{pid} {}", exe.display())
    }
}
