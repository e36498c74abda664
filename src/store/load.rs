//! Loading sessions back: all of them at start ([`Store::load_all`], parsed in parallel), or one channel's for an
//! actor spawned later ([`Store::load_one`]), the journal replayed over them first. A file that cannot be used is
//! moved aside, never overwritten, and the last good copy is used where there is one.

use super::record::saved_seq_in_head;
use super::validate::check_session;
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// At most this many threads read session files at start: the work is mostly parsing, bounded by the cores.
const LOAD_THREADS_MAX: usize = 8;
/// Fewer sessions than this per thread are not worth a thread.
const LOAD_SESSIONS_PER_THREAD_MIN: usize = 256;

/// What loading found: the sessions, and what a person should know about files that could not be used.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Ordered by channel id.
    pub sessions: Vec<Session>,
    pub problems: Vec<String>,
    /// Channels whose session file could not be read and had no readable last good copy: their session is lost
    /// (the unreadable files are kept aside), and the channel should be told so once.
    pub lost: Vec<ChannelId>,
}

/// Which of a channel's session files the folder listing showed, so that loading tries only those.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Listed {
    current: bool,
    previous: bool,
}

impl Store {
    /// Loads every saved session. Leftovers of interrupted saves are removed; a file that cannot be read is moved
    /// aside (never overwritten) and the last good copy is used where there is one.
    pub fn load_all(&self) -> Result<LoadReport, StoreError> {
        let mut commits = self.recovered()?;
        let recovery_problems = std::mem::take(&mut commits.problems);
        let channels = self.list_channels()?;
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(LOAD_THREADS_MAX)
            .min(channels.len() / LOAD_SESSIONS_PER_THREAD_MIN)
            .max(1);
        let chunk = channels.len().div_ceil(threads).max(1);
        let load_chunk = |chunk: &[(ChannelId, Listed)]| -> Result<(LoadReport, u64), StoreError> {
            let (mut report, mut newest_seq) = (LoadReport::default(), 0);
            for &(channel, listed) in chunk {
                if let Some((session, seq)) = self.load_listed(channel, listed, &mut report)? {
                    report.sessions.push(session);
                    newest_seq = newest_seq.max(seq);
                }
            }
            Ok((report, newest_seq))
        };
        // Chunks are consecutive runs of the sorted channels, so joining them in order keeps the order.
        let reports: Vec<Result<(LoadReport, u64), StoreError>> = std::thread::scope(|scope| {
            let mut chunks = channels.chunks(chunk);
            let first = chunks.next().unwrap_or_default();
            let others: Vec<_> = chunks.map(|c| scope.spawn(move || load_chunk(c))).collect();
            let mut reports = vec![load_chunk(first)];
            reports
                .extend(others.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))));
            reports
        });
        let mut all = LoadReport {
            sessions: Vec::with_capacity(channels.len()),
            problems: recovery_problems,
            ..LoadReport::default()
        };
        for report in reports {
            let (report, newest_seq) = report?;
            all.sessions.extend(report.sessions);
            all.problems.extend(report.problems);
            all.lost.extend(report.lost);
            // A file may hold a later save than any journal knows (copied from another state folder, a backup put
            // back): numbered below it, this process's saves would lose to it at a recovery.
            commits.next_seq = commits.next_seq.max(newest_seq + 1);
        }
        // Their logs are read ahead by the writer: a running session's next save likely adds events.
        commits.to_look.extend(all.sessions.iter().filter(|s| s.is_active()).map(|s| s.channel_id));
        Ok(all)
    }

    /// Loads one channel's session, `None` when it has none. What could not be used is logged and handled as
    /// [`Store::load_all`] does.
    pub fn load_one(&self, channel: ChannelId) -> Result<Option<Session>, StoreError> {
        let mut commits = self.recovered()?;
        if let Some(session) = commits.session_not_on_disk(self, channel) {
            return Ok(Some(session));
        }
        let loaded = self.load_listed(channel, Listed { current: true, previous: true }, &mut LoadReport::default())?;
        Ok(loaded.map(|(session, seq)| {
            commits.next_seq = commits.next_seq.max(seq + 1);
            session
        }))
    }

    /// The channels with a session file or a last good copy, from one listing of the folder; removes leftover
    /// temporary files of interrupted saves on the way.
    pub(super) fn list_channels(&self) -> Result<Vec<(ChannelId, Listed)>, StoreError> {
        let entries = std::fs::read_dir(&self.channels_dir).map_err(io("read the state folder", &self.channels_dir))?;
        let mut channels: BTreeMap<u64, Listed> = BTreeMap::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".tmp") {
                tracing::warn!(file = %entry.path().display(), "removing the leftover of an interrupted save");
                let _ = std::fs::remove_file(entry.path());
            } else if let Some(id) = name.strip_suffix(".prev.json").and_then(|s| s.parse::<u64>().ok()) {
                channels.entry(id).or_default().previous = true;
            } else if let Some(id) = name.strip_suffix(".json").and_then(|s| s.parse::<u64>().ok()) {
                channels.entry(id).or_default().current = true;
            }
        }
        Ok(channels.into_iter().map(|(id, listed)| (ChannelId(id), listed)).collect())
    }

    /// A channel's session, with the number of the save its file holds (0 when not known).
    fn load_listed(
        &self,
        channel: ChannelId,
        listed: Listed,
        report: &mut LoadReport,
    ) -> Result<Option<(Session, u64)>, StoreError> {
        let problems = &mut report.problems;
        let mut current_unreadable = false;
        let path = self.session_path(channel);
        let previous = self.previous_path(channel);
        if listed.current {
            match read_session(&path, channel)? {
                Ok(Some(session)) => return Ok(Some(session)),
                Ok(None) => {}
                Err(why) => {
                    current_unreadable = true;
                    let aside = move_aside(&path)?;
                    let message = format!(
                        "{} cannot be read ({why}); moved it to {} and kept it for inspection",
                        path.display(),
                        aside.display()
                    );
                    tracing::error!("{message}");
                    problems.push(message);
                }
            }
        }
        if !listed.previous {
            if current_unreadable {
                report.lost.push(channel);
            }
            return Ok(None);
        }
        match read_session(&previous, channel)? {
            Ok(Some(loaded)) => {
                let message = format!("channel {channel}: using the last good copy {}", previous.display());
                tracing::warn!("{message}");
                problems.push(message);
                // Make it the current file again, so the next start does not depend on the copy.
                self.restore_previous(channel)?;
                Ok(Some(loaded))
            }
            Ok(None) => {
                if current_unreadable {
                    report.lost.push(channel);
                }
                Ok(None)
            }
            Err(why) => {
                let message = format!(
                    "channel {channel}: the last good copy {} cannot be read either ({why}); the session is lost, its history log is kept",
                    previous.display()
                );
                tracing::error!("{message}");
                problems.push(message);
                report.lost.push(channel);
                Ok(None)
            }
        }
    }
}

/// Reads one session file, with the number of the save it holds: `Ok(None)` when it does not exist, `Err` with the
/// reason when its content cannot be used. A file that cannot be read at all (its permissions, an I/O error) is a
/// [`StoreError`]: its content may be the newest save, so it is neither moved aside nor replaced by an older copy.
fn read_session(path: &Path, channel: ChannelId) -> Result<Result<Option<(Session, u64)>, String>, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ok(None)),
        Err(e) => return Err(io("read the session file", path)(e)),
    };
    Ok(parsed(crate::files::without_byte_order_mark(&bytes), channel))
}

/// A session file's bytes as a session, with the number of the save it holds, or why they cannot be used.
fn parsed(bytes: &[u8], channel: ChannelId) -> Result<Option<(Session, u64)>, String> {
    let mut session = parse_session(bytes, channel)?;
    // Most sessions read at start-up stay idle, each holding its lists: none keeps the room the decoder left.
    session.shrink_to_fit();
    Ok(Some((session, saved_seq_in_head(bytes))))
}

/// A session file's bytes as a session `channel` can use (it parses and passes validation), or why not.
pub(super) fn parse_session(bytes: &[u8], channel: ChannelId) -> Result<Session, String> {
    let session: Session = serde_json::from_slice(bytes).map_err(|e| format!("invalid session JSON: {e}"))?;
    check_session(&session, channel)?;
    Ok(session)
}

impl Store {
    /// Makes the last good copy the session file again, byte for byte (its save number with it), durably.
    fn restore_previous(&self, channel: ChannelId) -> Result<(), StoreError> {
        let (path, previous) = (self.session_path(channel), self.previous_path(channel));
        let bytes = std::fs::read(&previous).map_err(io("read the last good copy", &previous))?;
        super::atomic::write_atomically(&path, &previous, &bytes).map_err(io("restore the session", &path))
    }
}

/// Renames an unreadable file to `<name>.corrupt-<unix time>` (with a counter if taken), for a person to look at.
pub(super) fn move_aside(path: &Path) -> Result<PathBuf, StoreError> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut aside = PathBuf::from(format!("{}.corrupt-{stamp}", path.display()));
    let mut n = 1;
    while aside.exists() {
        aside = PathBuf::from(format!("{}.corrupt-{stamp}-{n}", path.display()));
        n += 1;
    }
    std::fs::rename(path, &aside).map_err(io("move aside the unreadable file", path))?;
    Ok(aside)
}
