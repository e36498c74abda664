//! Checkpoints: each channel's session file and log brought up to its journaled saves, with no sync of their own.
//!
//! A journaled save waits here, merged with the channel's others (its latest session, every event since its last
//! written checkpoint), until the writer thread writes it between batches ([`Store::write_checkpoints`], about a
//! millisecond's worth at a time, so new saves are not held up behind them, and only once it has waited its delay,
//! so that a busy channel is written once per delay, not once per save), or until something in this process reads
//! the channel (its checkpoint is written first).
//!
//! A checkpoint that cannot be written does not fail its save (the journal holds it): it waits, flagged, is tried
//! again with the channel's next save, on demand and when the journal is replaced, and is carried into each new
//! journal until it is written.

use super::atomic::replace_unsynced;
use super::commit::{Commits, Prepared};
use super::log::append_log_at;
use super::record::checkpoint_bytes;
use super::{Store, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use std::collections::hash_map::Entry;
use std::time::{Duration, Instant};

/// At most this many channels' checkpoints wait for their delay (some 3 to 5 KB each): past it the oldest are written
/// without waiting for it, round after round between batches, so that a burst of saves over many channels (a
/// start-up's catch-ups over 10,000) is not all held in memory until its delay is over.
pub(super) const WAITING_MAX: usize = 2_000;

/// A channel's journaled saves whose checkpoint is not written yet.
#[derive(Debug)]
pub(super) struct Unwritten {
    /// The number of its latest save.
    pub seq: u64,
    /// Its latest session's compact JSON.
    pub session: Vec<u8>,
    /// Where `lines` go in the log.
    pub log_at: u64,
    /// Every event journaled since the log was last written, one JSON line each.
    pub lines: Vec<u8>,
    /// Its last try failed: the writer's rounds leave it out until the channel is saved again.
    pub failed: bool,
    /// When its first save not yet written was journaled (or, after a failure, its next save): its place in the
    /// queue.
    pub queued_at: Instant,
}

impl Commits {
    /// Merges a journaled save into its channel's unwritten checkpoint.
    pub(super) fn queue_checkpoint(&mut self, save: Prepared) {
        match self.unwritten.entry(save.channel) {
            Entry::Occupied(entry) => {
                let unwritten = entry.into_mut();
                if unwritten.lines.is_empty() {
                    unwritten.log_at = save.log_at;
                }
                debug_assert!(save.lines.is_empty() || unwritten.log_at + unwritten.lines.len() as u64 == save.log_at);
                unwritten.lines.extend(save.lines);
                unwritten.seq = save.seq;
                unwritten.session = save.session;
                if std::mem::take(&mut unwritten.failed) {
                    unwritten.queued_at = Instant::now();
                    self.queue.push_back((save.channel, unwritten.queued_at));
                }
            }
            Entry::Vacant(entry) => {
                let Prepared { seq, session, log_at, lines, .. } = save;
                let queued_at = Instant::now();
                entry.insert(Unwritten { seq, session, log_at, lines, failed: false, queued_at });
                self.queue.push_back((save.channel, queued_at));
            }
        }
    }

    /// Writes the checkpoints that have waited `delay`, oldest first, for about `budget` of the writer's time (at
    /// least one); past [`WAITING_MAX`] waiting, the oldest are due at once. Answers when the next one still waiting
    /// is due, if any (already, when the budget ran out first: the writer comes back between two batches).
    pub(super) fn write_some(&mut self, store: &Store, budget: Duration, delay: Duration) -> Option<Instant> {
        let now = Instant::now();
        let mut written = 0;
        while let Some(&(channel, queued_at)) = self.queue.front() {
            // An entry whose channel was written since (on demand) and queued again further back is stale.
            let current = self.unwritten.get(&channel).is_some_and(|u| !u.failed && u.queued_at == queued_at);
            // Past the bound, the oldest go before their delay is over.
            let due = if self.unwritten.len() > WAITING_MAX { now } else { queued_at + delay };
            let spent = written > 0 && now.elapsed() >= budget;
            if current && (due > now || spent) {
                return Some(due);
            }
            self.queue.pop_front();
            if current {
                self.write_channel(store, channel);
                written += 1;
            }
        }
        None
    }

    /// Writes a channel's checkpoint now, if it has one waiting: the session file swapped in, the events appended to
    /// the log. False if it could not be written (it stays waiting, flagged).
    pub(super) fn write_channel(&mut self, store: &Store, channel: ChannelId) -> bool {
        let Some(unwritten) = self.unwritten.get_mut(&channel) else { return true };
        let path = store.session_path(channel);
        let bytes = checkpoint_bytes(unwritten.seq, &unwritten.session);
        let session_written =
            replace_unsynced(&path, &store.previous_path(channel), &bytes).map_err(io("write the session file", &path));
        let log_written = if unwritten.lines.is_empty() {
            Ok(())
        } else {
            let log = store.log_path(channel);
            match append_log_at(&log, unwritten.log_at, &unwritten.lines) {
                Ok(end) => {
                    unwritten.log_at = end;
                    unwritten.lines.clear();
                    Ok(())
                }
                Err(e) => Err(io("append to the history log", &log)(e)),
            }
        };
        let log_end = unwritten.log_at;
        self.written.insert(channel);
        store.probe.checkpoints.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match session_written.and(log_written) {
            Ok(()) => {
                if self.unwritten.remove(&channel).is_some_and(|u| u.failed) {
                    tracing::info!(%channel, "the channel's checkpoint is written again");
                }
                if self.log_ends.contains_key(&channel) {
                    self.log_ends.insert(channel, log_end);
                }
                true
            }
            Err(e) => {
                if !std::mem::replace(&mut unwritten.failed, true) {
                    tracing::error!(
                        %channel,
                        "could not write the channel's checkpoint; its save is in the journal, so nothing is lost, \
                         and the checkpoint is tried again with its next save: {e}"
                    );
                }
                false
            }
        }
    }

    /// The channel's latest session, for a load: its checkpoint written first; if that cannot be done, the session
    /// the journal holds (the file on disk is older). `None` when nothing of it waits.
    pub(super) fn session_not_on_disk(&mut self, store: &Store, channel: ChannelId) -> Option<Session> {
        if self.write_channel(store, channel) {
            return None;
        }
        let unwritten = self.unwritten.get(&channel)?;
        serde_json::from_slice(&unwritten.session).ok()
    }

    /// Tries again the checkpoints that could not be written.
    pub(super) fn retry_failed(&mut self, store: &Store) {
        let failed: Vec<ChannelId> = self.unwritten.iter().filter(|(_, u)| u.failed).map(|(&c, _)| c).collect();
        for channel in failed {
            self.write_channel(store, channel);
        }
    }
}

impl Commits {
    /// Gives back the room of the tables a burst of saves grew (10,000 channels saved at start-up leave some 2.5 MB
    /// of empty buckets): for a writer with nothing left to do. Where each channel's log ends is kept.
    pub(super) fn shrink_to_fit(&mut self) {
        self.unwritten.shrink_to_fit();
        self.queue.shrink_to_fit();
        self.written.shrink_to_fit();
        self.log_ends.shrink_to_fit();
        self.to_look.shrink_to_fit();
        self.looked.shrink_to_fit();
        self.batch = Vec::new();
    }
}

impl Store {
    /// Shrinks the journal's tables to what they hold, once the writer has nothing left to do.
    pub(super) fn shrink_to_fit(&self) {
        if let Some(commits) = self.settled().as_mut() {
            commits.shrink_to_fit();
        }
    }

    /// Writes waiting checkpoints that have waited `delay`, oldest first, for about `budget` (see
    /// [`Commits::write_some`]). Answers when the next one still waiting is due, if any.
    pub(super) fn write_checkpoints(&self, budget: Duration, delay: Duration) -> Option<Instant> {
        self.settled().as_mut().and_then(|commits| commits.write_some(self, budget, delay))
    }

    /// Waits for a batch being journaled and writes `channel`'s waiting checkpoint, so that what a reader then finds
    /// on disk is not older than a save already answered. (A checkpoint that cannot be written leaves the file
    /// older; [`Store::load_one`] then takes the session from the journal.)
    pub(super) fn settled_for(&self, channel: ChannelId) -> std::sync::MutexGuard<'_, Option<Commits>> {
        let mut commits = self.settled();
        if let Some(commits) = commits.as_mut() {
            commits.write_channel(self, channel);
        }
        commits
    }
}
