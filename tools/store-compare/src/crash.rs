//! Recovery after a crash: a child process (this program, run as `crash-child`) commits batches to an existing
//! store until it is killed with SIGKILL, most likely in the middle of a commit; then the store is opened and read
//! with its files out of the page cache. A killed process, not a power cut: what it wrote but did not sync is still
//! in the page cache and survives.

use crate::run::{self, Settings};
use crate::store::{Kind, Result};
use crate::workload::Workload;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const CHILD: &str = "crash-child";

/// The recovery after a crash: how long it took, how many sessions it found.
#[derive(Clone, Copy, Debug)]
pub struct Crashed {
    pub recovery: Duration,
    pub sessions: usize,
}

/// Runs a child committing batches of `batch` to the store in `dir`, kills it after `run_for`, then recovers.
pub fn crash_and_recover(
    kind: Kind,
    dir: &Path,
    batch: usize,
    settings: &Settings,
    run_for: Duration,
) -> Result<Crashed> {
    let args = [
        dir.display().to_string(),
        settings.channels.to_string(),
        batch.to_string(),
        settings.rotate_bytes.to_string(),
    ];
    let mut child = Command::new(std::env::current_exe()?).args([CHILD, kind.name()]).args(args).spawn()?;
    std::thread::sleep(run_for);
    if let Some(status) = child.try_wait()? {
        return Err(format!("the crash child ended by itself ({status})").into());
    }
    child.kill()?;
    child.wait()?;
    let (recovery, sessions) = run::recover_cold(kind, dir)?;
    Ok(Crashed { recovery, sessions })
}

/// The child: `crash-child STORE DIR CHANNELS BATCH ROTATE_BYTES`. Commits until killed.
pub fn child(args: &[String]) -> Result<()> {
    let [kind, dir, channels, batch, rotate_bytes] = args else {
        return Err(format!("usage: {CHILD} STORE DIR CHANNELS BATCH ROTATE_BYTES").into());
    };
    let kind = Kind::parse(kind).ok_or("unknown store")?;
    let mut store = kind.open(&PathBuf::from(dir), rotate_bytes.parse()?)?;
    let mut work = Workload::resumed(channels.parse()?);
    let batch: usize = batch.parse()?;
    loop {
        store.commit(&work.batch(batch))?;
    }
}
