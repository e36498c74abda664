//! `turn-manager convert`: copies every session and its whole history from one store to the other (a state folder
//! or a Postgres database), to move a bot between them. Nothing is lost on the way: the destination must be empty,
//! or hold exactly what would be copied (then nothing is done: running it twice gives the same rows), or be
//! replaced on purpose (`--force`; a folder is then moved aside, never deleted). A store a bot is running on is
//! refused as either end (the folder's lock, the database's live leases).

use super::files::{FolderLock, LOCK_FILE};
use super::location::StoreLocation;
use super::postgres;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use crate::store::Store;
use anyhow::Context as _;
use std::path::{Path, PathBuf};

/// One channel as a store keeps it: its session and its whole history, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedChannel {
    pub session: Session,
    pub history: Vec<HistoryEvent>,
}

/// What a conversion did.
#[derive(Debug)]
pub struct Converted {
    pub sessions: usize,
    pub events: usize,
    pub before: Before,
    /// What a person should know about the source: files that could not be read, sessions lost before the copy.
    pub problems: Vec<String>,
    /// Channels of the source whose session could not be read at all: not copied.
    pub left_behind: usize,
}

/// What became of what the destination held.
#[derive(Debug, PartialEq, Eq)]
pub enum Before {
    /// It was empty.
    Empty,
    /// It held exactly the source's sessions and histories already: nothing was written.
    Identical,
    /// A folder's previous contents, moved aside here (`--force`).
    MovedAside(PathBuf),
    /// A database's previous sessions and events, deleted in the copy's transaction (`--force`).
    Replaced { sessions: i64, events: i64 },
}

/// Copies every session and history from `from` to `to`. `force` replaces a destination that holds other sessions.
pub async fn convert(from: &StoreLocation, to: &StoreLocation, force: bool) -> anyhow::Result<Converted> {
    if same_store(from, to) {
        anyhow::bail!("the source and the destination are the same store ({from}): nothing to copy");
    }
    if let (StoreLocation::Folder(a), StoreLocation::Folder(b)) = (from, to) {
        // Found by a review: `--to state/channels --force` moved the source's own sessions aside.
        let (a, b) = (resolved(a), resolved(b));
        if a.starts_with(&b) || b.starts_with(&a) {
            anyhow::bail!(
                "one of the folders is inside the other ({from}, {to}): give a destination outside the source"
            );
        }
    }
    if let StoreLocation::Folder(dir) = to {
        // Before the source is read, which may move its unreadable files aside (found by a review).
        let dir = dir.to_owned();
        if let Some(why) = tokio::task::spawn_blocking(move || not_a_state_folder(&dir)).await?? {
            anyhow::bail!(why);
        }
    }
    let (channels, problems, left_behind) = match from {
        StoreLocation::Folder(dir) => read_source_folder(dir).await?,
        StoreLocation::Postgres(url) => {
            let pool = postgres::connect(url, postgres::IDLE_IN_TRANSACTION_FOR_COPIES).await?;
            // A copy of a database bots are changing would be stale at once, and a bot started on the copy would
            // act in their channels beside them (found by a review: only the destination was checked).
            refuse_if_running(&pool, from).await?;
            postgres::copy::read_all(&pool).await.with_context(|| format!("reading {from}"))?
        }
    };
    let before = match to {
        StoreLocation::Folder(dir) => write_folder(dir, &channels, force).await?,
        StoreLocation::Postgres(url) => {
            let pool = postgres::connect(url, postgres::IDLE_IN_TRANSACTION_FOR_COPIES).await?;
            write_database(&pool, to, &channels, force).await.with_context(|| format!("writing {to}"))?
        }
    };
    let events = channels.iter().map(|c| c.history.len()).sum();
    Ok(Converted { sessions: channels.len(), events, before, problems, left_behind })
}

/// A folder's path with its links followed, for the part of it that exists (a destination may not yet).
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while existing.canonicalize().is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else { return absolute };
        rest.push(name.to_owned());
        existing = parent;
    }
    let mut path = existing.canonicalize().unwrap_or_else(|_| existing.to_owned());
    path.extend(rest.iter().rev());
    path
}

fn same_store(from: &StoreLocation, to: &StoreLocation) -> bool {
    match (from, to) {
        (StoreLocation::Folder(a), StoreLocation::Folder(b)) => resolved(a) == resolved(b),
        (StoreLocation::Postgres(a), StoreLocation::Postgres(b)) => a.expose() == b.expose(),
        _ => false,
    }
}

/// A state folder's sessions and logs, under its lock (so no bot changes them meanwhile), the problems met, and
/// how many channels had no readable session.
async fn read_source_folder(dir: &Path) -> anyhow::Result<(Vec<SavedChannel>, Vec<String>, usize)> {
    if !dir.is_dir() {
        anyhow::bail!("the source folder {} does not exist", dir.display());
    }
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || {
        let _lock = FolderLock::take(&dir)?;
        read_folder(&dir)
    })
    .await?
}

/// Why `dir` cannot receive a copy, if it holds files and is no state folder (no `channels/`): written into, it
/// got the copy beside its files, and with `--force` it was moved aside whole, the source with it when inside it
/// (found by a review). Said before anything is written there, whatever `--force` says.
fn not_a_state_folder(dir: &Path) -> anyhow::Result<Option<String>> {
    if dir.join("channels").is_dir() || !holds_anything(dir).with_context(|| format!("reading {}", dir.display()))? {
        return Ok(None);
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != LOCK_FILE)
        .collect();
    names.sort();
    let shown = names.iter().take(3).map(String::as_str).collect::<Vec<_>>().join(", ");
    let more = if names.len() > 3 { format!(" and {} more", names.len() - 3) } else { String::new() };
    Ok(Some(format!(
        "the destination folder {} is not a state folder (it holds {shown}{more}, and no channels/ folder): give a new \
         or empty folder, or a state folder; it is never moved aside, even with --force",
        dir.display()
    )))
}

/// Every session of a folder with its whole log. Reading is what a bot's start does (an unreadable file is moved
/// aside and its last good copy used); what it found is returned, said once.
fn read_folder(dir: &Path) -> anyhow::Result<(Vec<SavedChannel>, Vec<String>, usize)> {
    let store = Store::open(dir)?;
    let report = store.load_all().with_context(|| format!("reading the sessions of {}", dir.display()))?;
    let mut problems = report.problems;
    for channel in &report.lost {
        problems.push(format!("channel {channel}: no readable session, so it is not copied (its history log stays)"));
    }
    let mut channels = Vec::with_capacity(report.sessions.len());
    let mut left_behind = report.lost.len();
    for session in report.sessions {
        let (history, unread) = store.read_log_counted(session.channel_id)?;
        // Lines of the log this build reads as no event are not copied: said, and the run is no success for a script
        // that would delete the source next (found by a review: they were left out unsaid, exit 0).
        if unread > 0 {
            left_behind += 1;
            let channel = session.channel_id;
            problems.push(format!(
                "channel {channel}: {unread} line(s) of its history log are no event this build reads, so they are \
                 not copied"
            ));
        }
        channels.push(SavedChannel { session, history });
    }
    // A history log whose session an earlier run (or a bot's start) moved aside unreadable is left behind too: no
    // session file is ever deleted (found by a review: a second run found nothing amiss and exited 0).
    let copied: std::collections::HashSet<u64> = channels.iter().map(|c| c.session.channel_id.0).collect();
    for entry in std::fs::read_dir(dir.join("channels")).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".history.jsonl")).and_then(|n| n.parse().ok()) else {
            continue;
        };
        if !copied.contains(&id) && !report.lost.contains(&crate::core::ids::ChannelId(id)) {
            left_behind += 1;
            problems.push(format!("channel {id}: a history log but no readable session, so it is not copied"));
        }
    }
    Ok((channels, problems, left_behind))
}

/// Whether a folder holds anything besides its lock file.
fn holds_anything(dir: &Path) -> std::io::Result<bool> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            if holds_anything(&entry.path())? {
                return Ok(true);
            }
        } else if entry.file_name() != LOCK_FILE {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes the channels into a fresh folder beside `dir`, then puts it in place: a failure half-way leaves `dir` as
/// it was. What `dir` held is compared first, and moved aside with `force`. A mount point (a container's volume)
/// can be neither replaced nor moved: an empty one is written in place.
async fn write_folder(dir: &Path, channels: &[SavedChannel], force: bool) -> anyhow::Result<Before> {
    // A link to the folder is followed: replaced, the link itself would go, and the copy land beside it.
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let channels = channels.to_vec();
    tokio::task::spawn_blocking(move || {
        let lock = if dir.exists() { Some(FolderLock::take(&dir)?) } else { None };
        let full = holds_anything(&dir).with_context(|| format!("reading {}", dir.display()))?;
        let mounted = is_mount_point(&dir);
        if full {
            let (existing, ..) = read_folder(&dir)?;
            if existing == channels {
                return Ok(Before::Identical);
            }
            if mounted {
                anyhow::bail!(
                    "the destination folder {} is a mount point (a volume) that already holds other sessions ({} of \
                     them); it cannot be moved aside: empty it first, or convert into a folder inside it",
                    dir.display(),
                    existing.len()
                );
            }
            if !force {
                anyhow::bail!(
                    "the destination folder {} already holds other sessions ({} of them); add --force to move it \
                     aside (to {}.replaced-<time>) and copy into a new one",
                    dir.display(),
                    existing.len(),
                    dir.display()
                );
            }
        }
        if mounted {
            // Found by a review: the state volume of the container image could not be converted into.
            write_in_place(&dir, &channels)?;
            drop(lock);
            return Ok(Before::Empty);
        }
        let incoming = sibling(&dir, &format!("converting-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&incoming); // the leftover of an interrupted conversion
        let mut aside = None;
        // The lock is held until the copy is in place: a bot started meanwhile would run on the folder moved aside.
        let mut put_in_place = || -> anyhow::Result<Option<Before>> {
            write_channels(&incoming, &channels)?;
            if full {
                let to = sibling(&dir, &format!("replaced-{}", unix_time()));
                std::fs::rename(&dir, &to)
                    .with_context(|| format!("moving {} aside to {}", dir.display(), to.display()))?;
                aside = Some(to);
            } else if dir.exists() {
                match std::fs::remove_dir_all(&dir) {
                    // A mount point on the filesystem of its parent (a bind mount): written in place.
                    Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => return Ok(None),
                    result => result.with_context(|| format!("replacing the empty folder {}", dir.display()))?,
                }
            }
            std::fs::rename(&incoming, &dir)
                .with_context(|| format!("moving the copy {} to {}", incoming.display(), dir.display()))?;
            Ok(Some(aside.clone().map_or(Before::Empty, Before::MovedAside)))
        };
        let placed = put_in_place();
        if !matches!(placed, Ok(Some(_))) {
            // Nothing of a copy not put in place is left beside the folder (found by a review: they piled up), and
            // a folder moved aside goes back.
            let _ = std::fs::remove_dir_all(&incoming);
            if let Some(aside) = &aside {
                let _ = std::fs::rename(aside, &dir);
            }
        }
        let before = match placed? {
            Some(before) => before,
            None => {
                write_in_place(&dir, &channels)?;
                Before::Empty
            }
        };
        drop(lock);
        // The renames themselves durable: a power cut must not leave the destination missing.
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        crate::store::sync_folder(parent).with_context(|| format!("syncing {}", parent.display()))?;
        Ok(before)
    })
    .await?
}

/// Writes the channels into `dir`, empty but for its lock, in place (a mount point cannot be replaced). A failure
/// empties it again, so that no part of the copy is taken for sessions of its own; a kill half-way leaves the
/// channels written so far (a second run then says the folder holds other sessions).
fn write_in_place(dir: &Path, channels: &[SavedChannel]) -> anyhow::Result<()> {
    let written = write_channels(dir, channels);
    if written.is_err() {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_name() != LOCK_FILE {
                let path = entry.path();
                let _ = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            }
        }
    }
    written
}

/// Saves each channel's session and history into the state folder `dir`.
fn write_channels(dir: &Path, channels: &[SavedChannel]) -> anyhow::Result<()> {
    let store = Store::open(dir)?;
    for channel in channels {
        store.save(&channel.session, &channel.history)?;
    }
    Ok(())
}

/// Whether `dir` is a mount point: on another device than its parent.
fn is_mount_point(dir: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(canonical) = dir.canonicalize() else { return false };
        let Some(parent) = canonical.parent() else { return false };
        matches!((std::fs::metadata(&canonical), std::fs::metadata(parent)), (Ok(d), Ok(p)) if d.dev() != p.dev())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        false
    }
}

/// Writes the channels into the database in one transaction, unless a bot runs on it.
async fn write_database(
    pool: &sqlx::PgPool,
    to: &StoreLocation,
    channels: &[SavedChannel],
    force: bool,
) -> anyhow::Result<Before> {
    refuse_if_running(pool, to).await?;
    let (sessions, events) = postgres::copy::count(pool).await?;
    let full = sessions > 0 || events > 0;
    if full {
        let (there, unread, _) = postgres::copy::read_all(pool).await?;
        if unread.is_empty() && there == channels {
            return Ok(Before::Identical);
        }
        if !force {
            anyhow::bail!(
                "{to} already holds other sessions ({sessions} sessions, {events} history events); add --force to \
                 replace them (they are deleted in the same transaction as the copy is written)"
            );
        }
    }
    postgres::copy::write_all(pool, channels, full).await?;
    Ok(if full { Before::Replaced { sessions, events } } else { Before::Empty })
}

/// Refuses a database a bot is running on (a live lease), as either end of a copy.
async fn refuse_if_running(pool: &sqlx::PgPool, store: &StoreLocation) -> anyhow::Result<()> {
    let live = postgres::copy::live_leases(pool).await?;
    if live > 0 {
        anyhow::bail!(
            "a bot is running on {store} ({live} channel(s) have a live lease): stop every process that uses it \
             first (or wait for their leases to expire)"
        );
    }
    Ok(())
}

/// `<dir>.<suffix>`, beside `dir`.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "state".into());
    name.push(format!(".{suffix}"));
    dir.with_file_name(name)
}

fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    /// A container's volume is a mount point: written in place when empty, as it can be neither replaced nor moved.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_mount_point_is_told_from_an_ordinary_folder() {
        assert!(super::is_mount_point(std::path::Path::new("/proc")), "/proc is mounted");
        let folder = tempfile::tempdir().unwrap();
        std::fs::create_dir(folder.path().join("state")).unwrap();
        assert!(!super::is_mount_point(&folder.path().join("state")));
        assert!(!super::is_mount_point(&folder.path().join("missing")));
    }
}
