//! Group commit through the journal: a batch of saves is appended to the journal in one write and made durable with
//! ONE fdatasync, the waiters are answered, and only then is each channel's checkpoint written (its session file
//! replaced by a rename, its new events appended to its log) with no sync of its own.
//!
//! The checkpoints become durable later, many at once: when the journal passes [`Rotation::bytes`] or
//! [`Rotation::age`], a new journal is started ([`Store::rotate_if_due`]) and the old one is deleted only once every
//! checkpoint written while it was current is synced ([`Retired::finish`], off the hot path). A checkpoint that
//! cannot be written does not fail its save (the journal holds it): it is tried again with the channel's next save
//! and at the next rotation, and until it is written its latest save is carried into each new journal.

use super::atomic::{replace_unsynced, sync_file, sync_folder};
use super::journal::{self, JournalFile, journal_path};
use super::log::append_log_at;
use super::parallel::in_parallel;
use super::record::{checkpoint_bytes, encode_events, encode_record, encode_session};
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

/// When a new journal is started: the current one has grown past `bytes`, or holds records and is older than `age`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rotation {
    pub bytes: u64,
    pub age: Duration,
}

impl Default for Rotation {
    /// About 2,000 saves of 4 KB: recovery reads at most that (tens of milliseconds), and a busy state folder
    /// syncs its checkpoints at most every few seconds instead of at every save.
    fn default() -> Self {
        Rotation { bytes: 8 * 1024 * 1024, age: Duration::from_secs(5) }
    }
}

/// One channel's part of a group commit.
pub(super) struct SaveItem<'a> {
    pub session: &'a Session,
    pub events: &'a [HistoryEvent],
}

/// What the store's writes share, behind its lock: the journal being appended to and what it covers.
#[derive(Debug)]
pub(super) struct Commits {
    journal: JournalFile,
    /// The number the next save gets.
    next_seq: u64,
    /// Where each log this process appended to ends, and what it still lacks.
    logs: HashMap<ChannelId, LogCursor>,
    /// Channels whose checkpoint was written while the current journal was: what a rotation must sync.
    written: HashSet<ChannelId>,
    /// Channels whose checkpoint could not be written: their latest save, carried into every new journal until
    /// it is written.
    behind: HashMap<ChannelId, Behind>,
    /// What recovery found that a person should know; `load_all` reports it.
    pub problems: Vec<String>,
}

#[derive(Debug)]
struct LogCursor {
    /// The log's length: every event journaled for the channel is in it up to here, except `unlogged`.
    len: u64,
    /// Events journaled whose append failed, as log lines: they go at `len`, before the channel's next events.
    unlogged: Vec<u8>,
}

#[derive(Debug)]
struct Behind {
    seq: u64,
    session: Vec<u8>,
}

/// One channel's save, encoded and numbered, on its way to the journal and then the checkpoint.
struct Prepared {
    channel: ChannelId,
    seq: u64,
    /// The session's compact JSON.
    session: Vec<u8>,
    /// Where `lines` go in the log.
    log_at: u64,
    /// The events for the log: any held back by a failed append, any a crash kept out of it, the new ones.
    lines: Vec<u8>,
}

impl Commits {
    pub(super) fn new(journal: JournalFile, next_seq: u64, problems: Vec<String>) -> Self {
        Commits { journal, next_seq, logs: HashMap::new(), written: HashSet::new(), behind: HashMap::new(), problems }
    }

    fn commit(&mut self, store: &Store, items: &[SaveItem<'_>], durable: impl FnOnce(Vec<Result<(), StoreError>>)) {
        let mut results = Vec::with_capacity(items.len());
        let mut prepared = Vec::with_capacity(items.len());
        let mut batch = Vec::new();
        for item in items {
            match self.prepare(store, item) {
                Ok(save) => {
                    let record = encode_record(save.seq, save.channel, save.log_at, &save.lines, &save.session);
                    batch.extend(journal::line(&record));
                    prepared.push(save);
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if !batch.is_empty() {
            if let Err(e) = self.journal.append(&batch, &store.probe) {
                let failed = io("append to the journal", self.journal.path())(e);
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(failed.duplicate());
                }
                // Nothing of the batch counts. The log is looked at again with the channel's next save, which then
                // catches up the events its session holds (unless events are held back: those come first anyway).
                for save in prepared.drain(..) {
                    if self.logs.get(&save.channel).is_some_and(|c| c.unlogged.is_empty()) {
                        self.logs.remove(&save.channel);
                    }
                }
            }
        }
        durable(results);
        for save in prepared {
            self.checkpoint(store, save);
        }
    }

    fn prepare(&mut self, store: &Store, item: &SaveItem<'_>) -> Result<Prepared, StoreError> {
        let channel = item.session.channel_id;
        let session = encode_session(item.session)?;
        let mut lines = encode_events(channel, item.events)?;
        let log_at = match self.logs.get(&channel) {
            Some(cursor) => {
                if !cursor.unlogged.is_empty() {
                    lines = [cursor.unlogged.as_slice(), &lines].concat();
                }
                cursor.len
            }
            // Nothing for the log: it is looked at with the channel's first events.
            None if lines.is_empty() => 0,
            None => {
                let look = store.first_look(item.session, item.events)?;
                if !look.missing.is_empty() {
                    lines = [look.missing, lines].concat();
                }
                look.len
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(Prepared { channel, seq, session, log_at, lines })
    }

    /// Writes a journaled save's checkpoint: the session file (by rename) and the events appended to the log, not
    /// synced.
    fn checkpoint(&mut self, store: &Store, save: Prepared) {
        let Prepared { channel, seq, session, log_at, lines } = save;
        let path = store.session_path(channel);
        let session_written = replace_unsynced(&path, &store.previous_path(channel), &checkpoint_bytes(seq, &session))
            .map_err(io("write the session file", &path));
        let log_written = if lines.is_empty() {
            Ok(())
        } else {
            let log = store.log_path(channel);
            let cursor = self.logs.entry(channel).or_insert(LogCursor { len: log_at, unlogged: Vec::new() });
            match append_log_at(&log, log_at, &lines) {
                Ok(end) => {
                    cursor.len = end;
                    cursor.unlogged.clear();
                    Ok(())
                }
                Err(e) => {
                    cursor.len = log_at;
                    cursor.unlogged = lines;
                    Err(io("append to the history log", &log)(e))
                }
            }
        };
        self.written.insert(channel);
        match session_written.and(log_written) {
            Ok(()) => {
                if self.behind.remove(&channel).is_some() {
                    tracing::info!(%channel, "the channel's checkpoint is written again");
                }
            }
            Err(e) => {
                if self.behind.insert(channel, Behind { seq, session }).is_none() {
                    tracing::error!(
                        %channel,
                        "could not write the channel's checkpoint; its save is in the journal, so nothing is lost, \
                         and the checkpoint is tried again with its next save: {e}"
                    );
                }
            }
        }
    }

    /// Tries again the checkpoints that could not be written.
    fn retry_behind(&mut self, store: &Store) {
        let channels: Vec<ChannelId> = self.behind.keys().copied().collect();
        for channel in channels {
            let Some(Behind { seq, session }) = self.behind.remove(&channel) else { continue };
            let (log_at, lines) = self.logs.get(&channel).map_or((0, Vec::new()), |c| (c.len, c.unlogged.clone()));
            self.checkpoint(store, Prepared { channel, seq, session, log_at, lines });
            if self.behind.contains_key(&channel) {
                tracing::debug!(%channel, "the channel's checkpoint still cannot be written");
            }
        }
    }

    fn rotation_due(&self, when: Rotation) -> bool {
        let len = self.journal.len();
        len >= when.bytes || (len > 0 && self.journal.began().elapsed() >= when.age)
    }

    /// Starts a new journal; gives the old one with the checkpoint files to sync before it may go. `None` when the
    /// journal holds nothing.
    fn rotate(&mut self, store: &Store) -> Result<Option<Retired>, StoreError> {
        self.retry_behind(store);
        let first = self.next_seq;
        if journal_path(&store.state_dir, first) == self.journal.path() {
            return Ok(None); // Nothing was journaled since it began.
        }
        let mut journal =
            JournalFile::create(&store.state_dir, first).map_err(io("start a new journal", &store.state_dir))?;
        let mut carried = Vec::new();
        for (&channel, behind) in &mut self.behind {
            let (log_at, lines) = self.logs.get(&channel).map_or((0, &[][..]), |c| (c.len, c.unlogged.as_slice()));
            behind.seq = self.next_seq;
            self.next_seq += 1;
            carried.extend(journal::line(&encode_record(behind.seq, channel, log_at, lines, &behind.session)));
        }
        if !carried.is_empty() {
            if let Err(e) = journal.append(&carried, &store.probe) {
                let path = journal.path().to_owned();
                drop(journal);
                let _ = std::fs::remove_file(&path);
                return Err(io("carry the unwritten checkpoints into a new journal", &path)(e));
            }
        }
        let old = std::mem::replace(&mut self.journal, journal);
        let files = self.written.drain().flat_map(|c| [store.session_path(c), store.log_path(c)]).collect();
        Ok(Some(Retired { journal: old.path().to_owned(), files, channels_dir: store.channels_dir.clone() }))
    }
}

/// A journal replaced by a new one: it may be deleted once the checkpoints written while it was current are durable.
#[derive(Debug)]
pub(super) struct Retired {
    journal: PathBuf,
    files: Vec<PathBuf>,
    channels_dir: PathBuf,
}

impl Retired {
    /// Syncs the checkpoint files and their folder, then deletes the journal. On failure the journal stays (and is
    /// replayed at the next start, which is harmless: what it holds is in the checkpoints or newer).
    pub(super) fn finish(self) -> Result<(), StoreError> {
        for synced in in_parallel(&self.files, |path| sync_file(path).map_err(io("sync the checkpoint", path))) {
            synced?;
        }
        sync_folder(&self.channels_dir).map_err(io("sync the state folder", &self.channels_dir))?;
        match std::fs::remove_file(&self.journal) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("delete the old journal", &self.journal)(e)),
            _ => Ok(()),
        }
    }
}

impl Store {
    /// Saves `items` (each channel at most once) in one group commit: one journal append and ONE fdatasync, then
    /// `durable` is told each item's result, then the checkpoints are written. A channel whose save cannot be
    /// encoded fails alone; a journal that cannot be written fails them all.
    pub(super) fn commit(&self, items: &[SaveItem<'_>], durable: impl FnOnce(Vec<Result<(), StoreError>>)) {
        match self.recovered() {
            Ok(mut commits) => commits.commit(self, items, durable),
            Err(e) => durable(items.iter().map(|_| Err(e.duplicate())).collect()),
        }
    }

    /// Starts a new journal when the current one is due, giving the old one to [`Retired::finish`]. A failure is
    /// logged and the current journal goes on.
    pub(super) fn rotate_if_due(&self) -> Option<Retired> {
        let mut commits = self.recovered().ok()?;
        if !commits.rotation_due(self.rotation) {
            return None;
        }
        commits.rotate(self).unwrap_or_else(|e| {
            tracing::error!("could not start a new journal, going on with the current one: {e}");
            None
        })
    }

    /// Makes every checkpoint durable and starts an empty journal: a start after this replays nothing.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let retired = self.recovered()?.rotate(self)?;
        retired.map_or(Ok(()), Retired::finish)
    }

    /// How many fdatasyncs the journal has made, for the tests of group commit.
    #[cfg(test)]
    pub(super) fn journal_syncs(&self) -> u64 {
        self.probe.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }
}
