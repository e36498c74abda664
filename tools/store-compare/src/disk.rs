//! File-system steps the stores share: durable appends to a rotating file, a folder fsync, `syncfs`, evicting a
//! folder's files from the page cache, its size on disk, and the machine's load.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An append-only file made durable by one `fdatasync` per append. Past `max_bytes` it starts a new generation
/// (`<prefix>-<n>.log`, its folder entry synced) and removes the old one, so a long run does not fill the disk.
pub struct AppendFile {
    dir: PathBuf,
    prefix: &'static str,
    generation: u64,
    file: File,
    len: u64,
    max_bytes: u64,
}

impl AppendFile {
    /// Opens the newest generation in `dir` for appending, or creates the first one.
    pub fn open(dir: &Path, prefix: &'static str, max_bytes: u64) -> io::Result<Self> {
        let generation = generations(dir, prefix)?.last().map_or(0, |(n, _)| *n);
        let path = generation_path(dir, prefix, generation);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        sync_folder(dir)?;
        let len = file.metadata()?.len();
        Ok(AppendFile { dir: dir.to_owned(), prefix, generation, file, len, max_bytes })
    }

    /// Appends `bytes` in one `write` and makes them durable with one `fdatasync`.
    pub fn append_durably(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.len >= self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let old = generation_path(&self.dir, self.prefix, self.generation);
        self.generation += 1;
        self.file = OpenOptions::new().create(true).append(true).open(generation_path(
            &self.dir,
            self.prefix,
            self.generation,
        ))?;
        sync_folder(&self.dir)?;
        self.len = 0;
        fs::remove_file(old)
    }
}

/// The generations of `prefix` in `dir`, oldest first.
pub fn generations(dir: &Path, prefix: &str) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let number = name.strip_prefix(prefix).and_then(|n| n.strip_prefix('-')).and_then(|n| n.strip_suffix(".log"));
        if let Some(n) = number.and_then(|n| n.parse().ok()) {
            found.push((n, path));
        }
    }
    found.sort();
    Ok(found)
}

fn generation_path(dir: &Path, prefix: &str, generation: u64) -> PathBuf {
    dir.join(format!("{prefix}-{generation:06}.log"))
}

/// Makes a folder's entries (new files, renames) durable.
pub fn sync_folder(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `syncfs(2)` on the file system holding `dir`: every dirty page of that file system, whoever wrote it.
pub fn syncfs(dir: &Path) -> io::Result<()> {
    let folder = File::open(dir)?;
    // SAFETY: the descriptor is open for the whole call.
    if unsafe { libc::syncfs(folder.as_raw_fd()) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Every file under `dir`, recursively.
pub fn files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            found.extend(files(&entry.path())?);
        } else {
            found.push(entry.path());
        }
    }
    Ok(found)
}

/// Bytes the files under `dir` take on disk (allocated blocks, not apparent length).
pub fn size_on_disk(dir: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    files(dir)?.iter().try_fold(0, |sum, path| Ok(sum + fs::metadata(path)?.blocks() * 512))
}

/// Drops the files under `dir` from the page cache (synced first, since only clean pages can be dropped), so that
/// reading them next goes to the disk. Only these files: the rest of the machine keeps its cache.
pub fn evict(dir: &Path) -> io::Result<()> {
    for path in files(dir)? {
        let file = File::open(&path)?;
        file.sync_all()?;
        // SAFETY: the descriptor is open for the whole call.
        let status = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if status != 0 {
            return Err(io::Error::from_raw_os_error(status));
        }
    }
    Ok(())
}

/// The one-minute load average, as `uptime` shows it.
pub fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}
