//! The history log (`<channelId>.history.jsonl`): appending events where the journal says they go (cutting a torn
//! tail first, and, the first time, noting which events the session file holds that the log lacks), and reading it
//! back whole or only its last events (read from the end, so a long log costs no more than its tail).

use super::record::encode_events;
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
#[cfg(test)]
use std::sync::atomic::Ordering::SeqCst;

/// How much of the log is read at a time when reading it from the end.
const TAIL_BLOCK_BYTES: usize = 16 * 1024;
/// Enough for the last event in one read, most of the time (a line is a few hundred bytes).
const LAST_EVENT_BLOCK_BYTES: usize = 1024;

/// The newest event in a log.
#[derive(Debug, PartialEq)]
pub(super) enum LastLogged {
    /// The log is empty or was just created.
    Nothing,
    /// A hash of the event's JSON: small enough to keep while it waits (read ahead for a channel that may not save
    /// for long).
    Event(u64),
    /// Its last line cannot be read: better not to guess.
    Unknown,
}

/// A hash of the event's JSON: equal events, equal hashes (an event has no floats and no maps).
fn hash_of(event: &HistoryEvent) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(event).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

/// The events a crash (or a failed save) kept out of the log although the session file holds them: the events of
/// `history` before the `new` ones (which end it) that come after the newest logged one. Nothing when the log is
/// ahead of the session (its last good copy was used) or when it cannot be told.
pub(super) fn missing_from_log(
    history: &VecDeque<HistoryEvent>,
    new: &[HistoryEvent],
    last: &LastLogged,
) -> Vec<HistoryEvent> {
    let Some(older) = history.len().checked_sub(new.len()) else { return Vec::new() };
    if !history.iter().skip(older).eq(new) {
        return Vec::new();
    }
    let older: Vec<&HistoryEvent> = history.iter().take(older).collect();
    let from = match last {
        LastLogged::Nothing => 0,
        LastLogged::Event(hash) => match older.iter().rposition(|e| hash_of(e) == *hash) {
            Some(at) => at + 1,
            None => return Vec::new(),
        },
        LastLogged::Unknown => return Vec::new(),
    };
    older[from..].iter().map(|&e| e.clone()).collect()
}

/// Where a channel's log stands when this process first appends to it: its length (a torn last line cut first)
/// and, as log lines, the events its session holds that the log lacks.
pub(super) struct FirstLook {
    pub len: u64,
    pub missing: Vec<u8>,
}

/// What reading a channel's log found: its length (a torn last line cut) and its newest event. Read ahead for the
/// channels loaded at start (`Store::look_ahead`), or at the channel's first save.
#[derive(Debug)]
pub(super) struct LogLook {
    len: u64,
    last: LastLogged,
}

impl LogLook {
    /// The first look of a save of `session` adding `new` events: the events its session holds that the log lacks
    /// go before them.
    pub(super) fn first_look(self, session: &Session, new: &[HistoryEvent]) -> Result<FirstLook, StoreError> {
        let channel = session.channel_id;
        let missing = missing_from_log(&session.history, new, &self.last);
        if !missing.is_empty() {
            tracing::warn!(
                %channel,
                events = missing.len(),
                "the history log lacks events its session file holds (a crash or a failed save between the two); \
                 appending them first"
            );
        }
        Ok(FirstLook { len: self.len, missing: encode_events(channel, &missing)? })
    }
}

/// Appends `lines` to the log at `path`, which should end at `at` bytes. What an append that failed partway left
/// past `at` is the start of `lines` (they are tried again whole): only the rest is appended. Anything else past
/// `at` is not this process's (changed by hand?): it is kept, a torn last line cut so nothing is glued to it, and
/// `lines` go after it. Gives the log's new length.
pub(super) fn append_log_at(path: &Path, at: u64, lines: &[u8]) -> std::io::Result<u64> {
    let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
    let mut len = file.metadata()?.len();
    let mut held = 0;
    if len > at {
        let mut past = vec![0; usize::try_from(len - at).unwrap_or(usize::MAX).min(lines.len() + 1)];
        file.seek(SeekFrom::Start(at))?;
        file.read_exact(&mut past)?;
        if lines.starts_with(&past) {
            held = past.len();
        } else {
            tracing::warn!(
                file = %path.display(),
                expected = at,
                found = len,
                "the history log holds more than this process wrote (changed by hand?); appending after it"
            );
            cut_torn_tail(&mut file, path)?;
            len = file.metadata()?.len();
        }
    } else if len < at {
        tracing::warn!(
            file = %path.display(),
            expected = at,
            found = len,
            "the history log is shorter than this process left it (changed by hand?); appending at its end"
        );
    }
    file.write_all(&lines[held..])?;
    Ok(len + (lines.len() - held) as u64)
}

impl Store {
    /// Reads a channel's log before this process first appends to it: cuts a torn last line (a crash mid-append,
    /// before the journal) and finds its newest event, from which [`LogLook::first_look`] tells the events the
    /// session holds that the log lacks (a crash, or a failed save, between the two before the journal).
    ///
    /// A log that exists but cannot be opened (its permissions, an I/O error) is taken as it stands, by its length,
    /// its newest event unknown: the channel's saves go to the journal as ever, and its events are appended once the
    /// log can be written (the checkpoint is retried and carried meanwhile), rather than every save of the channel
    /// failing until someone mends the file (found by a review). Not a folder in its place: that is no log.
    pub(super) fn look_at_log(&self, channel: ChannelId) -> Result<LogLook, StoreError> {
        self.probe.log_looks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.log_path(channel);
        let (len, last) = match self.open_log(&path) {
            Ok(mut file) => {
                cut_torn_tail(&mut file, &path).map_err(io("repair the torn end of the history log", &path))?;
                let last = last_logged(&mut file).map_err(io("read the history log", &path))?;
                (file.metadata().map_err(io("read the history log", &path))?.len(), last)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, LastLogged::Nothing),
            Err(e) => match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    tracing::warn!(
                        file = %path.display(),
                        "cannot open the history log ({e}); saving on, its events wait in the journal until it can"
                    );
                    (meta.len(), LastLogged::Unknown)
                }
                _ => return Err(io("open the history log", &path)(e)),
            },
        };
        Ok(LogLook { len, last })
    }

    fn open_log(&self, path: &Path) -> std::io::Result<File> {
        #[cfg(test)]
        if self.probe.failing_log_opens.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        }
        OpenOptions::new().read(true).append(true).open(path)
    }

    /// Reads ahead the logs of at most `limit` channels loaded at start (see `Commits::to_look`); answers whether
    /// some are left. A log that cannot be read now is read again at its channel's first save.
    pub(super) fn look_ahead(&self, limit: usize) -> bool {
        let mut settled = self.settled();
        let Some(commits) = settled.as_mut() else { return false };
        for _ in 0..limit {
            let Some(channel) = commits.to_look.pop_front() else { break };
            if commits.log_ends.contains_key(&channel) || commits.looked.contains_key(&channel) {
                continue; // Saved already, or listed twice.
            }
            match self.look_at_log(channel) {
                Ok(look) => {
                    commits.looked.insert(channel, look);
                }
                Err(e) => tracing::debug!(%channel, "could not read the history log ahead; its first save will: {e}"),
            }
        }
        !commits.to_look.is_empty()
    }

    /// Every event ever recorded for a channel, oldest first. A torn last line (a crash mid-append) is skipped; lines
    /// that are no event are left out with a warning.
    pub fn read_log(&self, channel: ChannelId) -> Result<Vec<HistoryEvent>, StoreError> {
        let (events, unread) = self.read_log_counted(channel)?;
        unread_lines(channel, &self.log_path(channel), unread);
        Ok(events)
    }

    /// [`Store::read_log`], and how many lines (neither blank nor the torn last one) were no event, unsaid.
    pub fn read_log_counted(&self, channel: ChannelId) -> Result<(Vec<HistoryEvent>, usize), StoreError> {
        let _settled = self.settled_for(channel);
        let path = self.log_path(channel);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(io("read the history log", &path)(e)),
        };
        let (mut events, mut unread) = (Vec::new(), 0);
        for line in text.split_inclusive('\n') {
            match serde_json::from_str(line) {
                Ok(event) => events.push(event),
                // A torn last line (no newline after it) is a crash mid-append, not a line to warn of.
                Err(_) if !line.ends_with('\n') || line.trim().is_empty() => {}
                Err(_) => unread += 1,
            }
        }
        Ok((events, unread))
    }

    /// The last `n` events recorded for a channel, oldest first, read from the end of the log. A torn last line
    /// and lines that cannot be read are skipped, as [`Store::read_log`] does.
    pub fn read_log_tail(&self, channel: ChannelId, n: usize) -> Result<Vec<HistoryEvent>, StoreError> {
        self.read_log_tail_in_blocks(channel, n, TAIL_BLOCK_BYTES)
    }

    pub(super) fn read_log_tail_in_blocks(
        &self,
        channel: ChannelId,
        n: usize,
        block: usize,
    ) -> Result<Vec<HistoryEvent>, StoreError> {
        let _settled = self.settled_for(channel);
        let path = self.log_path(channel);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read the history log", &path)(e)),
        };
        let (events, unread) = read_tail(&mut file, n, block).map_err(io("read the history log", &path))?;
        unread_lines(channel, &path, unread);
        Ok(events)
    }
}

/// Lines of the log that are no event this build reads (edited by hand and broken, or written by a newer build) are
/// left out of what is read, with a warning saying how many: before, they were left out unsaid, and `history` showed
/// fewer events than were recorded.
fn unread_lines(channel: ChannelId, path: &Path, count: usize) {
    if count > 0 {
        tracing::warn!(
            %channel,
            "{count} line(s) of {} are no history event this build reads (edited and broken, or written by a newer \
             build): left out of what was read",
            path.display()
        );
    }
}

/// Reads whole lines backwards from the end of `file`, newest first, until `wanted` returns false. The bytes after
/// the last newline (nothing, or a torn line) are never given.
fn lines_backwards(file: &mut File, block: usize, mut wanted: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
    let block = block.max(1);
    let mut pos = file.metadata()?.len();
    // The bytes from `pos` to the start of the part already split into lines, not yet known to be a whole line.
    let mut carry: Vec<u8> = Vec::new();
    let mut tail_skipped = false;
    while pos > 0 {
        let start = pos.saturating_sub(block as u64);
        let mut region = vec![0; (pos - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut region)?;
        region.extend_from_slice(&carry);
        pos = start;
        let mut end = region.len();
        while let Some(newline) = region[..end].iter().rposition(|&b| b == b'\n') {
            let line = &region[newline + 1..end];
            end = newline;
            if !std::mem::replace(&mut tail_skipped, true) {
                continue;
            }
            if !wanted(line) {
                return Ok(());
            }
        }
        region.truncate(end);
        carry = region;
    }
    // The first line of the file, unless the file has no newline at all (then it is all torn tail).
    if tail_skipped {
        wanted(&carry);
    }
    Ok(())
}

/// The newest event of a log whose tail is whole.
fn last_logged(file: &mut File) -> std::io::Result<LastLogged> {
    let mut last = LastLogged::Nothing;
    lines_backwards(file, LAST_EVENT_BLOCK_BYTES, |line| {
        if line.is_empty() {
            return true;
        }
        last = serde_json::from_slice(line).map_or(LastLogged::Unknown, |e| LastLogged::Event(hash_of(&e)));
        false
    })?;
    Ok(last)
}

/// The last `n` events of the log, oldest first, and how many lines passed on the way were no event.
fn read_tail(file: &mut File, n: usize, block: usize) -> std::io::Result<(Vec<HistoryEvent>, usize)> {
    let mut newest_first = Vec::new();
    let mut unread = 0;
    if n > 0 {
        lines_backwards(file, block, |line| {
            match serde_json::from_slice(line) {
                Ok(event) => newest_first.push(event),
                Err(_) if line.trim_ascii().is_empty() => {}
                Err(_) => unread += 1,
            }
            newest_first.len() < n
        })?;
    }
    newest_first.reverse();
    Ok((newest_first, unread))
}

/// Cuts the file back to its last newline when it does not end with one: a crash mid-append left a torn line.
pub(super) fn cut_torn_tail(file: &mut File, path: &Path) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    let mut keep = 0;
    let mut found = false;
    let mut pos = len;
    while pos > 0 && !found {
        let start = pos.saturating_sub(TAIL_BLOCK_BYTES as u64);
        let mut block = vec![0; (pos - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        if let Some(newline) = block.iter().rposition(|&b| b == b'\n') {
            keep = start + newline as u64 + 1;
            found = true;
        }
        pos = start;
    }
    tracing::warn!(
        file = %path.display(),
        cut_bytes = len - keep,
        "the history log ends with a torn line (a crash while appending); cutting it before appending"
    );
    file.set_len(keep)?;
    file.sync_data()
}
