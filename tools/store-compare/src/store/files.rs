//! What the bot does today (`src/store/save.rs`), for reference: per save, a temporary file written and fsynced,
//! the old file kept as a hard link `<id>.prev.json`, the rename; one fsync of the folder; then each channel's events
//! appended to its `<id>.history.jsonl` and fdatasynced. The per-file steps are spread over up to 8 threads, at least
//! 4 files each, as the bot spreads them. 2·B + 1 syncs a batch.

use super::{Result, Store, parse_session};
use crate::checkpoint;
use crate::disk;
use crate::workload::Save;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const THREADS: usize = 8;
const PER_THREAD_MIN: usize = 4;

pub struct Files {
    channels: PathBuf,
}

impl Files {
    pub fn open(dir: &Path) -> Result<Files> {
        let channels = dir.join("channels");
        fs::create_dir_all(&channels)?;
        Ok(Files { channels })
    }

    fn session_path(&self, channel: u64) -> PathBuf {
        self.channels.join(format!("{channel}.json"))
    }

    /// The temporary file, written and synced, then put in place keeping the old one as `.prev.json`.
    fn install(&self, save: &Save) -> io::Result<()> {
        let path = self.session_path(save.channel);
        let tmp = path.with_extension("json.tmp");
        let mut file = File::create(&tmp)?;
        file.write_all(save.session.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        let previous = self.channels.join(format!("{}.prev.json", save.channel));
        match fs::hard_link(&path, &previous) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fs::remove_file(&previous)?;
                fs::hard_link(&path, &previous)?;
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        fs::rename(&tmp, &path)
    }

    fn append_events(&self, save: &Save) -> io::Result<()> {
        let mut lines = Vec::new();
        for (_, event) in &save.events {
            lines.extend_from_slice(event.as_bytes());
            lines.push(b'\n');
        }
        let log = self.channels.join(format!("{}.history.jsonl", save.channel));
        let mut file = OpenOptions::new().create(true).append(true).open(log)?;
        file.write_all(&lines)?;
        file.sync_data()
    }
}

impl Store for Files {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        in_parallel(batch, |save| self.install(save))?;
        disk::sync_folder(&self.channels)?;
        in_parallel(batch, |save| self.append_events(save))?;
        Ok(())
    }
}

/// `step` on every save, on up to [`THREADS`] scoped threads.
fn in_parallel(batch: &[Save], step: impl Fn(&Save) -> io::Result<()> + Sync) -> io::Result<()> {
    let threads = (batch.len() / PER_THREAD_MIN).clamp(1, THREADS);
    if threads == 1 {
        return batch.iter().try_for_each(step);
    }
    let step = &step;
    std::thread::scope(|scope| {
        let handles: Vec<_> = batch
            .chunks(batch.len().div_ceil(threads))
            .map(|part| scope.spawn(move || part.iter().try_for_each(step)))
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Reads and parses every session file.
pub fn recover(dir: &Path) -> Result<usize> {
    let sessions = checkpoint::read_sessions(dir)?;
    for (_, json) in &sessions {
        parse_session(json)?;
    }
    Ok(sessions.len())
}
