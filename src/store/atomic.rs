//! File steps for replacing a session file so that a reader (or a killed process) always finds the old file or the
//! new one, never half of one, keeping the version before it; and the syncs that make files and renames durable.
//!
//! Each session file has a spare copy, `<channelId>.json.spare`: a save writes the new version into it in place,
//! then exchanges names atomically twice (spare and current, then spare and previous), so the spare ends up holding
//! the oldest version, ready for the next save. No file is created or deleted per save: on ext4, deleting a file
//! whose pages are still being written out, or renaming over one (which starts writing out the new one), waits for
//! the disk, about 1 ms a file here, against some 30 µs for the exchanges.
//!
//! A checkpoint (the journal holds the save) skips the syncs; they come later, for many files at once, before the
//! journal that covers them is deleted. Where names cannot be exchanged (not Linux or macOS, or a file system that
//! refuses the exchange: OpenZFS before 2.2, NFS, some FUSE mounts), a temporary file is renamed over the current
//! one, the old version kept as a hard link.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The spare copy of a session file: the next save is written into it.
pub fn spare_path(path: &Path) -> PathBuf {
    path.with_extension("json.spare")
}

/// Replaces `path` with `bytes` so that a crash at any instant leaves the old or the new file, never a torn one,
/// even after a power cut: the new version is synced before it is swapped in, the folder after.
pub fn write_atomically(path: &Path, previous: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, previous, bytes, true)?;
    sync_folder(path.parent().unwrap_or(Path::new(".")))
}

/// Replaces `path` with `bytes`, keeping the old version as `previous`: a reader (or a killed process) sees the old
/// file or the new one. Nothing is synced: for checkpoints, whose save the journal holds.
pub fn replace_unsynced(path: &Path, previous: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, previous, bytes, false)
}

/// The state folder's file system refused to exchange two names (found at the first save that tried): every save
/// since replaces files by a rename.
#[cfg(all(any(target_os = "linux", target_os = "macos"), not(test)))]
static EXCHANGE_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(test)]
thread_local! {
    /// A test's file system refuses the exchange, and what was learnt of it: on this thread only, so that no other
    /// test's saves change way.
    static EXCHANGE_REFUSED_IN_TEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static EXCHANGE_REFUSED_LEARNT_IN_TEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn exchange_refused() -> bool {
    #[cfg(test)]
    return EXCHANGE_REFUSED_LEARNT_IN_TEST.with(std::cell::Cell::get);
    #[cfg(not(test))]
    EXCHANGE_REFUSED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn learn_exchange_refused() {
    #[cfg(test)]
    EXCHANGE_REFUSED_LEARNT_IN_TEST.with(|learnt| learnt.set(true));
    #[cfg(not(test))]
    EXCHANGE_REFUSED.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn replace(path: &Path, previous: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    if exchange_refused() {
        return replace_by_rename(path, previous, bytes, durable);
    }
    let spare = spare_path(path);
    // The error names the spare, which the caller's (the session file's) does not.
    write_in_place(&spare, bytes, durable)
        .map_err(|e| io::Error::new(e.kind(), format!("writing its spare copy {}: {e}", spare.display())))?;
    match swap(&spare, path)? {
        // The spare holds the version just replaced.
        Swapped::Exchanged => swap(&spare, previous).map(drop),
        Swapped::Renamed => Ok(()),
        Swapped::Refused(errno) => {
            tracing::warn!(
                folder = %path.parent().unwrap_or(Path::new(".")).display(),
                "this file system cannot exchange two file names atomically ({errno}): session files are replaced by \
                 a rename from now on (a little slower)"
            );
            learn_exchange_refused();
            let _ = std::fs::remove_file(&spare);
            replace_by_rename(path, previous, bytes, durable)
        }
    }
}

/// Writes `bytes` over the file at `path` (created if missing). A file with another name too (a hard link left by
/// an older build between a session file and its previous version) is not written into but replaced by a new one.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn write_in_place(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut file = match OpenOptions::new().write(true).open(path) {
        Ok(file) if file.metadata()?.nlink() == 1 => file,
        Ok(_) => {
            std::fs::remove_file(path)?;
            File::create(path)?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => File::create(path)?,
        Err(e) => return Err(e),
    };
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)?;
    if durable {
        file.sync_all()?;
    }
    Ok(())
}

/// What [`swap`] did.
#[cfg(any(target_os = "linux", target_os = "macos"))]
enum Swapped {
    Exchanged,
    /// There was no `b`: `a` was renamed to it.
    Renamed,
    /// The file system does not exchange names (nothing was changed).
    Refused(rustix::io::Errno),
}

/// Exchanges the names `a` and `b` atomically; renames `a` to `b` when there is no `b`.
#[cfg(any(target_os = "linux", target_os = "macos"))]
fn swap(a: &Path, b: &Path) -> io::Result<Swapped> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use rustix::io::Errno;
    #[cfg(test)]
    if EXCHANGE_REFUSED_IN_TEST.with(std::cell::Cell::get) {
        return Ok(Swapped::Refused(Errno::INVAL));
    }
    match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(Swapped::Exchanged),
        Err(Errno::NOENT) if a.exists() => std::fs::rename(a, b).map(|()| Swapped::Renamed),
        // NOTSUP is OPNOTSUPP on Linux, not on macOS.
        Err(errno) if [Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP, Errno::NOTSUP].contains(&errno) => {
            Ok(Swapped::Refused(errno))
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes `bytes` to a temporary file renamed over `path`, the version it replaces kept as `previous`.
fn replace_by_rename(path: &Path, previous: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(bytes)?;
    if durable {
        file.sync_all()?;
    }
    let installed = keep_previous(path, previous).and_then(|()| std::fs::rename(&tmp, path));
    installed.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn replace(path: &Path, previous: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    replace_by_rename(path, previous, bytes, durable)
}

/// Keeps the current version of `path` as `previous` (a hard link, or a copy where links are not supported). When
/// there is no `path`, `previous` is left as it is.
fn keep_previous(path: &Path, previous: &Path) -> io::Result<()> {
    let linked = match std::fs::hard_link(path, previous) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(previous)?;
            std::fs::hard_link(path, previous)
        }
        other => other,
    };
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => std::fs::copy(path, previous).map(drop),
    }
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

/// Creates `folder` and any missing folder above it, and makes each new folder's entry durable (its parent synced):
/// else a power cut soon after a first start could take the whole state folder, journal and all, with it. Answers
/// the folders synced, parents first.
pub fn create_folder_durably(folder: &Path) -> io::Result<Vec<PathBuf>> {
    let missing: Vec<&Path> =
        folder.ancestors().take_while(|dir| !dir.as_os_str().is_empty() && !dir.exists()).collect();
    std::fs::create_dir_all(folder)?;
    let mut synced = Vec::new();
    for dir in missing.iter().rev() {
        let parent = match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        sync_folder(parent)?;
        synced.push(parent.to_owned());
    }
    Ok(synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_save_keeps_the_version_before_it_and_reuses_the_spare() {
        let dir = tempfile::tempdir().unwrap();
        let (path, previous) = (dir.path().join("1.json"), dir.path().join("1.prev.json"));
        for (n, text) in ["first", "second, longer", "third", "4"].iter().enumerate() {
            replace_unsynced(&path, &previous, text.as_bytes()).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), *text, "save {n}");
            if n > 0 {
                let before = ["first", "second, longer", "third"][n - 1];
                assert_eq!(std::fs::read_to_string(&previous).unwrap(), before, "save {n}");
            }
        }
        assert!(spare_path(&path).exists(), "the oldest version waits in the spare for the next save");
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn a_file_system_that_cannot_exchange_names_gets_each_version_by_a_rename_keeping_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let (path, previous) = (dir.path().join("1.json"), dir.path().join("1.prev.json"));
        replace_unsynced(&path, &previous, b"first").unwrap();
        replace_unsynced(&path, &previous, b"second").unwrap();
        // Moved to a file system that refuses RENAME_EXCHANGE with EINVAL (the exchange worked until now).
        EXCHANGE_REFUSED_IN_TEST.with(|refused| refused.set(true));
        for (text, before) in [("third", "second"), ("fourth, longer", "third"), ("5", "fourth, longer")] {
            write_atomically(&path, &previous, text.as_bytes()).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            assert_eq!(std::fs::read_to_string(&previous).unwrap(), before);
        }
        EXCHANGE_REFUSED_IN_TEST.with(|refused| refused.set(false));
        assert!(exchange_refused(), "learnt once, not tried again");
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["1.json", "1.prev.json"], "no spare nor temporary file left behind");
    }

    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn a_spare_linked_to_the_previous_version_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let (path, previous) = (dir.path().join("1.json"), dir.path().join("1.prev.json"));
        // As an older build left them: the previous version a hard link to the current one.
        std::fs::write(&path, "old").unwrap();
        std::fs::hard_link(&path, &previous).unwrap();
        for text in ["new", "newer", "newest"] {
            let before = std::fs::read_to_string(&path).unwrap();
            replace_unsynced(&path, &previous, text.as_bytes()).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            assert_eq!(std::fs::read_to_string(&previous).unwrap(), before);
        }
    }
}
