//! The floor: what the disk allows for one durable append. The batch's bytes go to one file in one `write`, then
//! one `fdatasync`; and the raw rate of 4 KiB appends (and of 4 KiB overwrites of a preallocated file, where
//! `fdatasync` has no file size to record).

use super::{Result, Store};
use crate::disk::AppendFile;
use crate::stats::Summary;
use crate::workload::Save;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Floor {
    file: AppendFile,
}

impl Floor {
    pub fn open(dir: &Path, rotate_bytes: u64) -> Result<Floor> {
        Ok(Floor { file: AppendFile::open(dir, "floor", rotate_bytes)? })
    }
}

impl Store for Floor {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        let mut bytes = Vec::with_capacity(batch.iter().map(|s| s.bytes() + 3).sum());
        for save in batch {
            bytes.extend_from_slice(save.session.as_bytes());
            bytes.push(b'\n');
            for (_, event) in &save.events {
                bytes.extend_from_slice(event.as_bytes());
                bytes.push(b'\n');
            }
        }
        Ok(self.file.append_durably(&bytes)?)
    }
}

/// A raw test: `(folder, seconds, count)` to the latencies of its `fdatasync`ed writes.
pub type RawTest = fn(&Path, f64, Option<usize>) -> Result<Summary>;

const PAGE: usize = 4096;
/// The preallocated file of the overwrite test; wraps around when a run goes past it.
const PREALLOCATED: u64 = 64 << 20;

/// 4 KiB appends, each followed by `fdatasync`, for `seconds` (or `count` appends).
pub fn append_4k(dir: &Path, seconds: f64, count: Option<usize>) -> Result<Summary> {
    let mut file = AppendFile::open(dir, "raw-append", PREALLOCATED)?;
    let page = [b'x'; PAGE];
    timed(seconds, count, || Ok(file.append_durably(&page)?))
}

/// 4 KiB writes over a preallocated, synced file, each followed by `fdatasync`.
pub fn overwrite_4k(dir: &Path, seconds: f64, count: Option<usize>) -> Result<Summary> {
    let path = dir.join("raw-overwrite.bin");
    let mut file = OpenOptions::new().create(true).read(true).write(true).truncate(true).open(&path)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(PREALLOCATED >> 20) {
        file.write_all(&zeros)?;
    }
    file.sync_all()?;
    let page = [b'y'; PAGE];
    let mut at = 0;
    let summary = timed(seconds, count, || {
        file.seek(SeekFrom::Start(at))?;
        file.write_all(&page)?;
        file.sync_data()?;
        at = (at + PAGE as u64) % PREALLOCATED;
        Ok(())
    });
    std::fs::remove_file(path)?;
    summary
}

fn timed(seconds: f64, count: Option<usize>, mut step: impl FnMut() -> Result<()>) -> Result<Summary> {
    let mut latencies = Vec::new();
    let mut busy = Duration::ZERO;
    while count.map_or(busy.as_secs_f64() < seconds, |n| latencies.len() < n) {
        let start = Instant::now();
        step()?;
        let took = start.elapsed();
        busy += took;
        latencies.push(took);
    }
    Ok(Summary::of(latencies))
}
