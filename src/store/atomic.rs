//! Durable file writes: replace a file atomically (keeping the old version as a hard link), and append to a log.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes` so that a crash at any instant leaves the old or the new file, never a torn one:
/// temporary file in the same folder, fsync, keep the old version as `previous`, rename, fsync the folder.
pub fn write_atomically(path: &Path, previous: &Path, bytes: &[u8]) -> io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("json.tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    if path.exists() {
        match fs::remove_file(previous) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        if fs::hard_link(path, previous).is_err() {
            fs::copy(path, previous)?;
        }
    }
    fs::rename(&tmp, path)?;
    sync_folder(folder)
}

/// Appends `bytes` to `path` (created if missing) and syncs it to disk.
pub fn append_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let created = !path.exists();
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    if created {
        sync_folder(path.parent().unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

#[cfg(unix)]
fn sync_folder(folder: &Path) -> io::Result<()> {
    File::open(folder)?.sync_all()
}

#[cfg(not(unix))]
fn sync_folder(_folder: &Path) -> io::Result<()> {
    Ok(())
}
