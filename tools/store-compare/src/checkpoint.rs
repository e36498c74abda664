//! The journal's checkpoints, off the hot path: each session to `channels/<id>.json` (temporary file, rename, no
//! fsync) and its events appended to `channels/<id>.history.jsonl` (no fsync). Before the journal may be cut, the
//! checkpoint must be made durable: by one `syncfs`, or by an `fdatasync` of each dirty file and one of the folder.

use crate::disk;
use crate::workload::Save;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub struct Checkpoint {
    channels: PathBuf,
}

impl Checkpoint {
    pub fn open(dir: &Path) -> io::Result<Checkpoint> {
        let channels = dir.join("channels");
        fs::create_dir_all(&channels)?;
        Ok(Checkpoint { channels })
    }

    /// Writes the batch's session files and appends its events, syncing nothing.
    pub fn write(&self, batch: &[Save]) -> io::Result<()> {
        for save in batch {
            let path = self.channels.join(format!("{}.json", save.channel));
            let tmp = path.with_extension("json.tmp");
            let mut file = File::create(&tmp)?;
            file.write_all(save.session.as_bytes())?;
            file.write_all(b"\n")?;
            drop(file);
            fs::rename(&tmp, &path)?;

            let mut lines = Vec::with_capacity(save.events.iter().map(|(_, e)| e.len() + 1).sum());
            for (_, event) in &save.events {
                lines.extend_from_slice(event.as_bytes());
                lines.push(b'\n');
            }
            let log = self.channels.join(format!("{}.history.jsonl", save.channel));
            OpenOptions::new().create(true).append(true).open(log)?.write_all(&lines)?;
        }
        Ok(())
    }

    /// Makes the checkpoint durable with one `syncfs` of the file system (which also writes back whatever else is
    /// dirty on it: on a shared disk, other processes' files too).
    pub fn sync_fs(&self) -> io::Result<()> {
        disk::syncfs(&self.channels)
    }

    /// Makes the checkpoint durable file by file: an `fdatasync` of every file in `channels/`, then of the folder.
    pub fn sync_each(&self) -> io::Result<()> {
        for entry in fs::read_dir(&self.channels)? {
            File::open(entry?.path())?.sync_data()?;
        }
        disk::sync_folder(&self.channels)
    }
}

/// Every session file under `dir/channels` (`<id>.json`, not `<id>.prev.json`): (channel id, bytes).
pub fn read_sessions(dir: &Path) -> io::Result<Vec<(String, Vec<u8>)>> {
    let channels = dir.join("channels");
    let entries = match fs::read_dir(&channels) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut sessions = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let channel = name.strip_suffix(".json").filter(|id| id.bytes().all(|b| b.is_ascii_digit()));
        if let Some(channel) = channel {
            sessions.push((channel.to_owned(), fs::read(&path)?));
        }
    }
    Ok(sessions)
}
