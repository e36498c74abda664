//! Persistence of sessions (spec 9): a write-ahead journal that makes a batch of saves durable with one fdatasync,
//! one JSON file per channel (its checkpoint, the format a person reads), a last good copy beside it, and an
//! append-only JSON-lines log of every history event.
//!
//! Layout under the state folder:
//! - `journal-<first seq>.jsonl`: the write-ahead journal, one per process at a time (two while the checkpoints of
//!   the older one are being synced). One record a line, `<crc32, 8 hex digits> <JSON>`: a channel's save, numbered
//!   (`seq`, growing across restarts), with its session, the events it adds to the log and where they go (`logAt`).
//!   A save is durable once its line is: the checkpoints below are written after it, unsynced.
//! - `channels/<channelId>.json`: the session, as [`Session`](crate::core::session::Session) serializes it, in
//!   compact JSON on one line, with the number of the save it holds first (`savedSeq`). Written after its save is
//!   journaled and answered, between the writer's batches, once the channel's first save not yet written has waited
//!   a second (saves meanwhile join it, so a busy channel's files are written once a second; with more than 2,000
//!   channels waiting, the oldest at once), 32 channels at a time: a second or a little more behind the journal. A
//!   load or a log read in this process writes its channel's first, so it never sees an answered save missing.
//! - `channels/<channelId>.prev.json`: the version before the last save.
//! - `channels/<channelId>.json.spare`: the version before that, overwritten by the next save and then swapped in
//!   (see `atomic`): no file is created or deleted per save. Never read.
//! - `channels/<channelId>.history.jsonl`: every event, one JSON object a line, never truncated; written with the
//!   session file.
//! - `channels/<channelId>.json.corrupt-<unix time>`, `journal-<n>.jsonl.corrupt-<unix time>`: a file that could not
//!   be read (or a journal with a damaged line in its middle), moved aside for a person to see.
//!
//! A journal is replaced once it passes 32 MiB or 5 seconds: a new one is started (the checkpoints still waiting
//! carried into it), the checkpoints written while the old one was current are synced on a thread of their own, then
//! the old one is deleted. A flush (a graceful stop) writes every checkpoint and leaves an empty journal. At start
//! the journals are replayed over the checkpoints (the newer session wins by number, events the log lacks are
//! appended, compared byte for byte so none twice), the result synced, and a fresh journal started.
//!
//! Parts:
//! - `journal`: the journal file: appending a batch with one fdatasync, reading it back up to its torn tail.
//! - `record`: what a journal line and a session file hold.
//! - `commit`: a group commit: the batch journaled, the waiters answered.
//! - `checkpoint`: the session files and logs brought up to the journal, about a millisecond's worth between batches
//!   once they have waited their delay, or on demand.
//! - `rotation`: replacing the journal, and [`Store::checkpoint`].
//! - `recover`: replaying the journals over the checkpoints at start.
//! - `atomic`: the file system steps (the spare copy written and swapped in keeping the previous version, syncs).
//! - `save`: saving from the calling thread ([`Store::save`], [`Store::save_many`]).
//! - [`writer`]: the thread that does every write of the running bot, batching saves ([`Writer`]).
//! - `log`: the JSON-lines log: appending (a torn tail cut first, events a crash lost caught up; the end of a
//!   running session's log read ahead after a start, so that its first save need not), reading it whole or its
//!   last events.
//! - `load`: reading the sessions back at start ([`Store::load_all`], [`Store::load_one`]).
//! - `validate`: what a session file must hold to be used.
//! - `parallel`: work spread over a few threads.
//!
//! One process per state folder: a [`Store`] (and its clones) is the only writer.

mod atomic;
mod checkpoint;
mod commit;
mod journal;
mod load;
mod log;
mod parallel;
mod record;
mod recover;
mod rotation;
mod save;
pub(crate) mod validate;
pub mod writer;

pub use atomic::{create_folder_durably, sync_folder};
pub use load::LoadReport;
pub use writer::Writer;

use crate::core::ids::ChannelId;
use commit::Commits;
use rotation::Rotation;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to {action} {}: {source}", path.display())]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("failed to encode the session of channel {channel}: {source}")]
    Encode { channel: ChannelId, source: serde_json::Error },
    #[error("the store's writer thread has stopped, so nothing more can be saved")]
    WriterStopped,
}

impl StoreError {
    /// The same error again, for a second waiter on one failed write (the sources are not `Clone`): same message,
    /// same I/O error kind.
    fn duplicate(&self) -> Self {
        match self {
            StoreError::Io { action, path, source } => StoreError::Io {
                action,
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            StoreError::Encode { channel, source } => {
                StoreError::Encode { channel: *channel, source: serde::ser::Error::custom(source) }
            }
            StoreError::WriterStopped => StoreError::WriterStopped,
        }
    }
}

fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { action, path: path.to_owned(), source }
}

/// The state folder. Cheap to clone; clones share the journal.
#[derive(Clone)]
pub struct Store {
    state_dir: PathBuf,
    channels_dir: PathBuf,
    /// `None` until the journal is recovered (at the first load or save). A load or a log read in this process
    /// takes it and writes its channel's waiting checkpoint first, so it never sees a file older than a save
    /// already answered.
    commits: Arc<Mutex<Option<Commits>>>,
    probe: Arc<journal::Probe>,
    rotation: Rotation,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("state_dir", &self.state_dir).finish_non_exhaustive()
    }
}

/// The store's writes, its journal recovered.
struct Recovered<'a>(MutexGuard<'a, Option<Commits>>);

impl std::ops::Deref for Recovered<'_> {
    type Target = Commits;
    fn deref(&self) -> &Commits {
        self.0.as_ref().expect("recovered before it is handed out")
    }
}

impl std::ops::DerefMut for Recovered<'_> {
    fn deref_mut(&mut self) -> &mut Commits {
        self.0.as_mut().expect("recovered before it is handed out")
    }
}

impl Store {
    /// Opens (and creates) the state folder. The journal is replayed at the first load or save.
    pub fn open(state_dir: &Path) -> Result<Self, StoreError> {
        let channels_dir = state_dir.join("channels");
        let synced =
            atomic::create_folder_durably(&channels_dir).map_err(io("create the state folder", &channels_dir))?;
        let probe = Arc::<journal::Probe>::default();
        #[cfg(test)]
        probe.folders_synced_at_open.lock().unwrap().extend(synced);
        #[cfg(not(test))]
        drop(synced);
        Ok(Self {
            state_dir: state_dir.to_owned(),
            channels_dir,
            commits: Arc::default(),
            probe,
            rotation: Rotation::default(),
        })
    }

    /// The same folder with another bound for replacing the journal (tests).
    #[cfg(test)]
    fn rotating(mut self, rotation: Rotation) -> Self {
        self.rotation = rotation;
        self
    }

    /// Waits for a batch being journaled, without recovering the journal.
    fn settled(&self) -> MutexGuard<'_, Option<Commits>> {
        self.commits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The store's writes, the journal replayed over the checkpoints first if this store has not done it yet.
    fn recovered(&self) -> Result<Recovered<'_>, StoreError> {
        let mut commits = self.settled();
        if commits.is_none() {
            *commits = Some(self.recover()?);
        }
        Ok(Recovered(commits))
    }

    pub fn session_path(&self, channel: ChannelId) -> PathBuf {
        self.channels_dir.join(format!("{channel}.json"))
    }

    fn previous_path(&self, channel: ChannelId) -> PathBuf {
        self.channels_dir.join(format!("{channel}.prev.json"))
    }

    pub fn log_path(&self, channel: ChannelId) -> PathBuf {
        self.channels_dir.join(format!("{channel}.history.jsonl"))
    }
}

#[cfg(test)]
mod tests;
