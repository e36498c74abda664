//! Replacing the journal so it stays small: once it passes [`Rotation::bytes`] or [`Rotation::age`], a new journal
//! is started ([`Store::rotate_if_due`]); the checkpoints still waiting are carried into it, and the old one is
//! deleted once every checkpoint written while it was current is synced ([`Retired::finish`], off the hot path).
//! A crash at any point leaves either journal, or both, and recovery replays whatever is there.

use super::atomic::{sync_file, sync_folder};
use super::commit::Commits;
use super::journal::{self, JournalFile, journal_path};
use super::parallel::in_parallel;
use super::record::encode_record;
use super::{Store, StoreError, io};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// When a new journal is started: the current one has grown past `bytes`, or holds records and is older than `age`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rotation {
    pub bytes: u64,
    pub age: Duration,
}

impl Default for Rotation {
    /// About 8,000 saves of 4 KB, a few seconds of 1,000 busy channels: recovery after a crash reads at most that
    /// (370 ms for a 31 MB journal over 1,000 channels on the development machine, their files written and synced;
    /// 170 ms for 8 MB), and their checkpoints are synced once per journal, not at every save. At
    /// 8 MiB a busy bot replaced its journal several times a second, and syncing took 13% of its CPU (`perf`).
    fn default() -> Self {
        Rotation { bytes: 32 * 1024 * 1024, age: Duration::from_secs(5) }
    }
}

/// How long after a failed start of a new journal (a full disk, no inodes left) the next is tried: each try costs
/// the failed checkpoints' writes and a file made, synced and removed, which must not be paid at every batch.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

impl Commits {
    fn rotation_due(&self, when: Rotation) -> bool {
        if self.rotation_failed_at.is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE) {
            return false;
        }
        let len = self.journal.len();
        len >= when.bytes || (len > 0 && self.journal.began().elapsed() >= when.age)
    }

    /// Starts a new journal; gives the old one with the checkpoint files to sync before it may go. `None` when
    /// nothing was journaled since the current one began.
    fn rotate(&mut self, store: &Store) -> Result<Option<Retired>, StoreError> {
        self.retry_failed(store);
        let first = self.next_seq;
        if journal_path(&store.state_dir, first) == self.journal.path() {
            return Ok(None);
        }
        let mut journal =
            JournalFile::create(&store.state_dir, first).map_err(io("start a new journal", &store.state_dir))?;
        // The checkpoints still waiting go on in the new journal, so the old one can go once the written ones are
        // synced.
        let mut carried = Vec::new();
        let mut renumbered = Vec::new();
        for (&channel, unwritten) in &self.unwritten {
            let seq = first + renumbered.len() as u64;
            let record = encode_record(seq, channel, unwritten.log_at, &unwritten.lines, &unwritten.session);
            journal::push_line(&mut carried, &record);
            renumbered.push((channel, seq));
        }
        if !carried.is_empty() {
            if let Err(e) = journal.append(&carried, &store.probe) {
                // The carried records stay in the file if it cannot be deleted either, to be replayed after a crash:
                // their numbers are never given again, so recovery, which orders a channel's records by number,
                // puts these copies before every later save.
                self.next_seq = first + renumbered.len() as u64;
                let path = journal.path().to_owned();
                drop(journal);
                let _ = std::fs::remove_file(&path);
                return Err(io("carry the unwritten checkpoints into a new journal", &path)(e));
            }
        }
        for (channel, seq) in renumbered {
            if let Some(unwritten) = self.unwritten.get_mut(&channel) {
                unwritten.seq = seq;
            }
            self.next_seq = seq + 1;
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
        let began = Instant::now();
        for synced in in_parallel(&self.files, |path| sync_file(path).map_err(io("sync the checkpoint", path))) {
            synced?;
        }
        sync_folder(&self.channels_dir).map_err(io("sync the state folder", &self.channels_dir))?;
        match std::fs::remove_file(&self.journal) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("delete the old journal", &self.journal)(e));
            }
            _ => {}
        }
        tracing::debug!(files = self.files.len(), took_ms = began.elapsed().as_millis(), "checkpoints synced");
        Ok(())
    }
}

impl Store {
    /// Starts a new journal when the current one is due, giving the old one to [`Retired::finish`]. A failure is
    /// logged and the current journal goes on; the next try comes [`RETRY_AFTER_FAILURE`] later.
    pub(super) fn rotate_if_due(&self) -> Option<Retired> {
        let mut commits = self.recovered().ok()?;
        if !commits.rotation_due(self.rotation) {
            return None;
        }
        let rotated = commits.rotate(self);
        commits.rotation_failed_at = rotated.is_err().then(Instant::now);
        rotated.unwrap_or_else(|e| {
            tracing::error!(
                "could not start a new journal, going on with the current one (trying again in \
                 {RETRY_AFTER_FAILURE:?}): {e}"
            );
            None
        })
    }

    /// Writes every waiting checkpoint, makes them all durable and starts an empty journal: a start after this
    /// replays nothing (except checkpoints that cannot be written, carried into the new journal).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let retired = {
            let mut commits = self.recovered()?;
            commits.write_some(self, Duration::MAX, Duration::ZERO);
            commits.rotate(self)?
        };
        retired.map_or(Ok(()), Retired::finish)
    }
}
