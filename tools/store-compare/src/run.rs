//! The measurements, each in fresh folders: the stores' batch commits timed (interleaved, or one store at a time),
//! then each store's size on disk and start-up read; the journal's checkpoint writes and syncs.

use crate::checkpoint::Checkpoint;
use crate::disk;
use crate::stats::Summary;
use crate::store::{Kind, Result, journal};
use crate::workload::{Save, Workload};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Settings {
    pub channels: usize,
    /// Busy time of commits per configuration, unless `count` is given.
    pub seconds: f64,
    /// Batches per configuration, instead of `seconds`.
    pub count: Option<usize>,
    pub rotate_bytes: u64,
    pub recovery: bool,
}

/// A store's figures at one batch size.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub commits: Summary,
    pub size: u64,
    pub recovery: Option<Recovery>,
    /// The journal's start-up in parts (files out of the page cache).
    pub replay: Option<journal::Replay>,
}

/// Start-up: open the store and read every session, with the files in the page cache (warm) and out of it (cold).
#[derive(Clone, Copy, Debug)]
pub struct Recovery {
    pub warm: Duration,
    pub cold: Duration,
    pub sessions: usize,
}

/// Commits the same batches of `batch` saves to every store (`kinds[i]` in `dirs[i]`), in turn: each cycle commits
/// one batch to every store, starting one store further on each cycle, so that whatever else the machine does falls
/// on all of them alike. Each store first takes one untimed batch of every channel, so that every session exists.
/// Then the stores are closed, measured and read back.
pub fn commits(kinds: &[Kind], batch: usize, dirs: &[PathBuf], settings: &Settings) -> Result<Vec<Outcome>> {
    let mut work = Workload::new(settings.channels);
    let first = work.batch(work.channels());
    let mut stores = Vec::new();
    for (&kind, dir) in kinds.iter().zip(dirs) {
        std::fs::create_dir_all(dir)?;
        let mut store = kind.open(dir, settings.rotate_bytes)?;
        store.commit(&first)?;
        if kind == Kind::Journal {
            // What start-up finds besides the journal: a checkpoint of every channel. (The checkpointed journal
            // writes its own, on its own thread.)
            let checkpoint = Checkpoint::open(dir)?;
            checkpoint.write(&first)?;
            checkpoint.sync_fs()?;
        }
        stores.push(store);
    }
    let mut latencies = vec![Vec::new(); stores.len()];
    let mut busy = Duration::ZERO;
    let budget = settings.seconds * stores.len() as f64;
    let mut cycle = 0;
    while settings.count.map_or(busy.as_secs_f64() < budget, |n| cycle < n) {
        let saves = work.batch(batch);
        for i in 0..stores.len() {
            let at = (cycle + i) % stores.len();
            let start = Instant::now();
            stores[at].commit(&saves)?;
            let took = start.elapsed();
            busy += took;
            latencies[at].push(took);
        }
        cycle += 1;
    }
    drop(stores);
    let mut outcomes = Vec::new();
    for ((&kind, dir), latencies) in kinds.iter().zip(dirs).zip(latencies) {
        outcomes.push(finish(kind, dir, Summary::of(latencies), settings)?);
    }
    Ok(outcomes)
}

/// A closed store's size and start-up.
fn finish(kind: Kind, dir: &Path, commits: Summary, settings: &Settings) -> Result<Outcome> {
    let size = disk::size_on_disk(dir)?;
    let recovery = if settings.recovery { recover(kind, dir)? } else { None };
    let replay = match kind {
        Kind::Journal | Kind::JournalCheckpointed if settings.recovery => {
            disk::evict(dir)?;
            Some(journal::recover(dir)?)
        }
        _ => None,
    };
    Ok(Outcome { commits, size, recovery, replay })
}

/// Opens and reads the store twice: as it is, then with its files dropped from the page cache.
pub fn recover(kind: Kind, dir: &Path) -> Result<Option<Recovery>> {
    let start = Instant::now();
    let Some(sessions) = kind.recover(dir)? else { return Ok(None) };
    let warm = start.elapsed();
    let (cold, again) = recover_cold(kind, dir)?;
    if again != sessions {
        return Err(format!("{}: read {sessions} sessions, then {again}", kind.name()).into());
    }
    Ok(Some(Recovery { warm, cold, sessions }))
}

/// Drops the store's files from the page cache, then opens and reads it: how long, and how many sessions.
pub fn recover_cold(kind: Kind, dir: &Path) -> Result<(Duration, usize)> {
    disk::evict(dir)?;
    let start = Instant::now();
    let sessions = kind.recover(dir)?.unwrap_or(0);
    Ok((start.elapsed(), sessions))
}

/// The journal's checkpoint writes (temporary file and rename per session, events appended, nothing synced): the
/// time to write one batch of `batch` channels.
pub fn checkpoints(batch: usize, dir: &Path, settings: &Settings) -> Result<Summary> {
    std::fs::create_dir_all(dir)?;
    let mut work = Workload::new(settings.channels);
    let checkpoint = Checkpoint::open(dir)?;
    checkpoint.write(&work.batch(work.channels()))?;
    checkpoint.sync_fs()?;
    timed_batches(&mut work, batch, settings, |saves| Ok(checkpoint.write(saves)?))
}

/// What making a checkpoint of every channel durable costs: each try writes all the channels, then times one
/// `syncfs` (`Sync::Fs`) or an `fdatasync` of each file and the folder (`Sync::Each`).
pub fn checkpoint_sync(dir: &Path, settings: &Settings, tries: usize) -> Result<Vec<(&'static str, Duration)>> {
    std::fs::create_dir_all(dir)?;
    let mut work = Workload::new(settings.channels);
    let checkpoint = Checkpoint::open(dir)?;
    checkpoint.write(&work.batch(work.channels()))?;
    checkpoint.sync_fs()?;
    let mut timings = Vec::new();
    for _ in 0..tries {
        for (name, each) in [("syncfs", false), ("fdatasync each file + folder", true)] {
            checkpoint.write(&work.batch(work.channels()))?;
            let start = Instant::now();
            if each {
                checkpoint.sync_each()?
            } else {
                checkpoint.sync_fs()?
            }
            timings.push((name, start.elapsed()));
        }
    }
    Ok(timings)
}

/// Makes batches (untimed) and times `commit` on each, for the settings' busy time or count of batches.
fn timed_batches(
    work: &mut Workload,
    batch: usize,
    settings: &Settings,
    mut commit: impl FnMut(&[Save]) -> Result<()>,
) -> Result<Summary> {
    let mut latencies = Vec::new();
    let mut busy = Duration::ZERO;
    while settings.count.map_or(busy.as_secs_f64() < settings.seconds, |n| latencies.len() < n) {
        let saves = work.batch(batch);
        let start = Instant::now();
        commit(&saves)?;
        let took = start.elapsed();
        busy += took;
        latencies.push(took);
    }
    Ok(Summary::of(latencies))
}
