//! File steps: a temporary file written (and synced, for a durable write), put in place keeping the old version as a
//! hard link, and the folder synced so the renames survive a crash.
//!
//! A checkpoint (the journal holds the save) skips the syncs: the rename alone keeps a reader from seeing half a file,
//! and the syncs come later, for many files at once, before the journal that covers them is dropped.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temporary file a save of `path` writes first.
pub fn temporary_path(path: &Path) -> PathBuf {
    path.with_extension("json.tmp")
}

/// Writes `bytes` to the temporary file of `path`, synced when `durable`, so that the rename that follows never
/// exposes a torn file, even after a power cut.
fn write_temporary(path: &Path, bytes: &[u8], durable: bool) -> io::Result<PathBuf> {
    let tmp = temporary_path(path);
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    if durable {
        file.sync_all()?;
    }
    Ok(tmp)
}

/// Puts the synced temporary file in place of `path`, keeping the old `path` as `previous` (a hard link, or a
/// copy where links are not supported). Durable only once the folder is synced.
fn install(tmp: &Path, path: &Path, previous: &Path) -> io::Result<()> {
    keep_previous(path, previous)?;
    fs::rename(tmp, path)
}

/// Keeps the current version of `path` as `previous`. When there is no `path` (a first save, or a restore after the
/// file was moved aside), `previous` is left as it is.
fn keep_previous(path: &Path, previous: &Path) -> io::Result<()> {
    let linked = match fs::hard_link(path, previous) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(previous)?;
            fs::hard_link(path, previous)
        }
        other => other,
    };
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        // A file system without hard links: copy instead.
        Err(_) => fs::copy(path, previous).map(drop),
    }
}

/// Replaces `path` with `bytes` so that a crash at any instant leaves the old or the new file, never a torn one.
pub fn write_atomically(path: &Path, previous: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, previous, bytes, true)?;
    sync_folder(path.parent().unwrap_or(Path::new(".")))
}

/// Replaces `path` with `bytes` by a rename, keeping the old version as `previous`: a reader (or a killed process)
/// sees the old file or the new one. Nothing is synced: for checkpoints, whose save the journal holds.
pub fn replace_unsynced(path: &Path, previous: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, previous, bytes, false)
}

fn replace(path: &Path, previous: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let tmp = write_temporary(path, bytes, durable)?;
    install(&tmp, path, previous).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// Makes what was written to `path` durable (its data and size); a file that is not there is nothing to sync.
pub fn sync_file(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes the folder's entries (renames, new files) durable.
#[cfg(unix)]
pub fn sync_folder(folder: &Path) -> io::Result<()> {
    File::open(folder)?.sync_all()
}

#[cfg(not(unix))]
pub fn sync_folder(_folder: &Path) -> io::Result<()> {
    Ok(())
}
