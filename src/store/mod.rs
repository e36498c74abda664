//! Persistence of sessions (spec 9): one JSON file per channel, written atomically and durably, a last good copy
//! beside it, and an append-only JSON-lines log of every history event.
//!
//! Layout under the state folder:
//! - `channels/<channelId>.json`: the session, as [`Session`](crate::core::session::Session) serializes it, in
//!   compact JSON on one line.
//! - `channels/<channelId>.prev.json`: the version before the last save (a hard link, so it costs no copy).
//! - `channels/<channelId>.history.jsonl`: every event, one JSON object a line, never truncated.
//! - `channels/<channelId>.json.corrupt-<unix time>`: a file that could not be read, moved aside for a person to see.
//!
//! Parts:
//! - `atomic`: the file system steps (temporary file, rename keeping the previous version, folder fsync).
//! - `save`: saving one session ([`Store::save`]) or many in one group commit; the session file before the log.
//! - [`writer`]: the thread that does every write of the running bot, batching saves ([`Writer`]).
//! - `log`: the JSON-lines log: appending (a torn tail cut first, events a crash lost caught up), reading it whole
//!   or its last events.
//! - `load`: reading the sessions back at start ([`Store::load_all`], [`Store::load_one`]).
//! - `validate`: what a session file must hold to be used.

mod atomic;
mod load;
mod log;
mod save;
mod validate;
pub mod writer;

pub use load::LoadReport;
pub use writer::Writer;

use crate::core::ids::ChannelId;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// The state folder. Cheap to clone; clones share what this process knows of the logs.
#[derive(Clone, Debug)]
pub struct Store {
    channels_dir: PathBuf,
    /// Channels whose log this process has checked for a torn tail (and cut it) since it last failed to append.
    logs_checked: Arc<Mutex<HashSet<ChannelId>>>,
}

impl Store {
    /// Opens (and creates) the state folder.
    pub fn open(state_dir: &Path) -> Result<Self, StoreError> {
        let channels_dir = state_dir.join("channels");
        std::fs::create_dir_all(&channels_dir).map_err(io("create the state folder", &channels_dir))?;
        Ok(Self { channels_dir, logs_checked: Arc::default() })
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
