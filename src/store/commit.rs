//! Group commit through the journal: a batch of saves is appended to the journal in one write and made durable with
//! ONE fdatasync, and the waiters are answered. The checkpoints (session files, logs) are not written here: each
//! save joins its channel's unwritten checkpoint (`checkpoint`), written a little later with no sync of its own.

use super::checkpoint::Unwritten;
use super::journal::{self, JournalFile};
use super::log::LogLook;
use super::record::{RECORD_OVERHEAD, encode_events, encode_session, write_record};
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

/// One channel's part of a group commit.
pub(super) struct SaveItem<'a> {
    pub session: &'a Session,
    pub events: &'a [HistoryEvent],
}

/// What the store's writes share, behind its lock: the journal being appended to and what it covers.
#[derive(Debug)]
pub(super) struct Commits {
    pub(super) journal: JournalFile,
    /// The number the next save gets.
    pub(super) next_seq: u64,
    /// Where each channel's log ends once every event journaled for it is appended: the next record's `logAt`.
    pub(super) log_ends: HashMap<ChannelId, u64>,
    /// Saves journaled whose checkpoint is not written yet: per channel, its latest session and every event since
    /// its last written checkpoint.
    pub(super) unwritten: HashMap<ChannelId, Unwritten>,
    /// The channels of `unwritten` to write, oldest first, with when each was queued (a channel written on demand
    /// may linger here; skipped).
    pub(super) queue: VecDeque<(ChannelId, Instant)>,
    /// Channels whose checkpoint was written while the current journal was: what replacing it must sync.
    pub(super) written: HashSet<ChannelId>,
    /// What recovery found that a person should know; `load_all` reports it.
    pub problems: Vec<String>,
    /// Channels loaded at start whose log is read ahead, between batches, so that their first save (a burst of
    /// deadlines falling together after a restart) does not read it on the hot path.
    pub(super) to_look: VecDeque<ChannelId>,
    /// What reading ahead found, until the channel's first save takes it.
    pub(super) looked: HashMap<ChannelId, LogLook>,
    /// The last batch's journal lines: its room is reused by the next batch (a burst of 1,000 saves fills some
    /// 5 MB, which a fresh buffer would grow by doubling, each time into pages the kernel must first clear), and
    /// given back once the writer is idle.
    pub(super) batch: Vec<u8>,
    /// When starting a new journal last failed: it is not tried again at every batch meanwhile (see `rotation`).
    pub(super) rotation_failed_at: Option<Instant>,
}

/// One channel's save, encoded and numbered, for the journal and then the checkpoint.
pub(super) struct Prepared {
    pub channel: ChannelId,
    pub seq: u64,
    /// The session's compact JSON.
    pub session: Vec<u8>,
    /// Where `lines` go in the log.
    pub log_at: u64,
    /// The events for the log (any a crash kept out of it first), one JSON line each.
    pub lines: Vec<u8>,
}

impl Commits {
    pub(super) fn new(journal: JournalFile, next_seq: u64, problems: Vec<String>) -> Self {
        Commits {
            journal,
            next_seq,
            log_ends: HashMap::new(),
            unwritten: HashMap::new(),
            queue: VecDeque::new(),
            written: HashSet::new(),
            problems,
            to_look: VecDeque::new(),
            looked: HashMap::new(),
            batch: Vec::new(),
            rotation_failed_at: None,
        }
    }

    fn commit(&mut self, store: &Store, items: &[SaveItem<'_>], durable: impl FnOnce(Vec<Result<(), StoreError>>)) {
        let began = Instant::now();
        let mut results = Vec::with_capacity(items.len());
        let mut prepared = Vec::with_capacity(items.len());
        for item in items {
            match self.prepare(store, item) {
                Ok(save) => {
                    prepared.push(save);
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        batch.reserve(prepared.iter().map(|save| save.session.len() + save.lines.len() + RECORD_OVERHEAD).sum());
        for save in &prepared {
            journal::push_line_with(&mut batch, |json| {
                write_record(json, save.seq, save.channel, save.log_at, &save.lines, &save.session);
            });
        }
        let encoded = began.elapsed();
        if !batch.is_empty() {
            if let Err(e) = self.journal.append(&batch, &store.probe) {
                let failed = io("append to the journal", self.journal.path())(e);
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(failed.duplicate());
                }
                // Nothing of the batch counts. A channel with nothing unwritten has its log looked at again with
                // its next save, which then catches up the events its session holds.
                for save in prepared.drain(..) {
                    if !self.unwritten.contains_key(&save.channel) {
                        self.log_ends.remove(&save.channel);
                    }
                }
            }
        }
        let journaled = began.elapsed();
        durable(results);
        let saves = prepared.len();
        for save in prepared {
            // A save with no events for a log not looked at yet says nothing of where it ends.
            if !save.lines.is_empty() || self.log_ends.contains_key(&save.channel) {
                self.log_ends.insert(save.channel, save.log_at + save.lines.len() as u64);
            }
            self.queue_checkpoint(save);
        }
        tracing::debug!(
            saves,
            bytes = batch.len(),
            encoded_us = encoded.as_micros(),
            journaled_us = (journaled - encoded).as_micros(),
            "group commit"
        );
        self.batch = batch;
    }

    fn prepare(&mut self, store: &Store, item: &SaveItem<'_>) -> Result<Prepared, StoreError> {
        let channel = item.session.channel_id;
        let session = encode_session(item.session)?;
        let mut lines = encode_events(channel, item.events)?;
        let log_at = match self.log_ends.get(&channel) {
            Some(&end) => end,
            // Nothing for the log: it is looked at with the channel's first events.
            None if lines.is_empty() => 0,
            None => {
                let log = match self.looked.remove(&channel) {
                    Some(read_ahead) => read_ahead,
                    None => store.look_at_log(channel)?,
                };
                let look = log.first_look(item.session, item.events)?;
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
}

impl Store {
    /// Saves `items` (each channel at most once) in one group commit: one journal append and ONE fdatasync, then
    /// `durable` is told each item's result. A channel whose save cannot be encoded fails alone; a journal that
    /// cannot be written fails them all. The checkpoints wait for [`Store::write_checkpoints`].
    pub(super) fn commit(&self, items: &[SaveItem<'_>], durable: impl FnOnce(Vec<Result<(), StoreError>>)) {
        match self.recovered() {
            Ok(mut commits) => commits.commit(self, items, durable),
            Err(e) => durable(items.iter().map(|_| Err(e.duplicate())).collect()),
        }
    }

    /// How many fdatasyncs the journal has made, for the tests of group commit.
    #[cfg(test)]
    pub(super) fn journal_syncs(&self) -> u64 {
        self.probe.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }
}
