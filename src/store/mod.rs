//! Persistence of sessions (spec 9): one JSON file per channel, written atomically and durably, a last good copy
//! beside it, and an append-only JSON-lines log of every history event.
//!
//! Layout under the state folder:
//! - `channels/<channelId>.json`: the session, as [`Session`] serializes it.
//! - `channels/<channelId>.prev.json`: the version before the last save (a hard link, so it costs no copy).
//! - `channels/<channelId>.history.jsonl`: every event, one JSON object a line, never truncated.
//! - `channels/<channelId>.json.corrupt-<unix time>`: a file that could not be read, moved aside for a person to see.

mod atomic;

use crate::core::ids::ChannelId;
use crate::core::session::history::HistoryEvent;
use crate::core::session::{SESSION_FORMAT_VERSION, Session};
use atomic::{append_durably, write_atomically};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to {action} {}: {source}", path.display())]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("failed to encode the session of channel {channel}: {source}")]
    Encode { channel: ChannelId, source: serde_json::Error },
}

fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { action, path: path.to_owned(), source }
}

/// What loading found: the sessions, and what a person should know about files that could not be used.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub sessions: Vec<Session>,
    pub problems: Vec<String>,
}

/// The state folder.
#[derive(Clone, Debug)]
pub struct Store {
    channels_dir: PathBuf,
}

impl Store {
    /// Opens (and creates) the state folder.
    pub fn open(state_dir: &Path) -> Result<Self, StoreError> {
        let channels_dir = state_dir.join("channels");
        std::fs::create_dir_all(&channels_dir).map_err(io("create the state folder", &channels_dir))?;
        Ok(Self { channels_dir })
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

    /// Saves a session after a transition: its new events go to the log first, so nothing the bounded history in
    /// the session file drops is ever lost; then the session file is replaced atomically.
    pub fn save(&self, session: &Session, new_events: &[HistoryEvent]) -> Result<(), StoreError> {
        let channel = session.channel_id;
        if !new_events.is_empty() {
            let mut lines = String::new();
            for event in new_events {
                let line = serde_json::to_string(event).map_err(|source| StoreError::Encode { channel, source })?;
                lines.push_str(&line);
                lines.push('\n');
            }
            let log = self.log_path(channel);
            append_durably(&log, lines.as_bytes()).map_err(io("append to the history log", &log))?;
        }
        let mut json = serde_json::to_vec_pretty(session).map_err(|source| StoreError::Encode { channel, source })?;
        json.push(b'\n');
        let path = self.session_path(channel);
        write_atomically(&path, &self.previous_path(channel), &json).map_err(io("save the session", &path))
    }

    /// Loads every saved session. Leftovers of interrupted saves are removed; a file that cannot be read is moved
    /// aside (never overwritten) and the last good copy is used where there is one.
    pub fn load_all(&self) -> Result<LoadReport, StoreError> {
        let mut report = LoadReport::default();
        let entries = std::fs::read_dir(&self.channels_dir).map_err(io("read the state folder", &self.channels_dir))?;
        let mut channels = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                tracing::warn!(file = %entry.path().display(), "removing the leftover of an interrupted save");
                let _ = std::fs::remove_file(entry.path());
                continue;
            }
            let stem = name.strip_suffix(".prev.json").or_else(|| name.strip_suffix(".json"));
            if let Some(id) = stem.and_then(|s| s.parse::<u64>().ok()) {
                if !channels.contains(&id) {
                    channels.push(id);
                }
            }
        }
        channels.sort_unstable();
        for channel in channels.into_iter().map(ChannelId) {
            if let Some(session) = self.load_one(channel, &mut report.problems)? {
                report.sessions.push(session);
            }
        }
        Ok(report)
    }

    fn load_one(&self, channel: ChannelId, problems: &mut Vec<String>) -> Result<Option<Session>, StoreError> {
        let path = self.session_path(channel);
        let previous = self.previous_path(channel);
        let current = match read_session(&path, channel) {
            Ok(found) => found,
            Err(why) => {
                let aside = self.move_aside(&path)?;
                let message = format!(
                    "{} cannot be read ({why}); moved it to {} and kept it for inspection",
                    path.display(),
                    aside.display()
                );
                tracing::error!("{message}");
                problems.push(message);
                None
            }
        };
        if current.is_some() {
            return Ok(current);
        }
        match read_session(&previous, channel) {
            Ok(Some(session)) => {
                let message = format!("channel {channel}: using the last good copy {}", previous.display());
                tracing::warn!("{message}");
                problems.push(message);
                // Make it the current file again, so the next start does not depend on the copy.
                let mut json =
                    serde_json::to_vec_pretty(&session).map_err(|source| StoreError::Encode { channel, source })?;
                json.push(b'\n');
                write_atomically(&path, &previous, &json).map_err(io("restore the session", &path))?;
                Ok(Some(session))
            }
            Ok(None) => Ok(None),
            Err(why) => {
                let message = format!(
                    "channel {channel}: the last good copy {} cannot be read either ({why}); the session is lost, its history log is kept",
                    previous.display()
                );
                tracing::error!("{message}");
                problems.push(message);
                Ok(None)
            }
        }
    }

    fn move_aside(&self, path: &Path) -> Result<PathBuf, StoreError> {
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

    /// Every event ever recorded for a channel, oldest first. A torn last line (a crash mid-append) is skipped.
    pub fn read_log(&self, channel: ChannelId) -> Result<Vec<HistoryEvent>, StoreError> {
        let path = self.log_path(channel);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("read the history log", &path)(e)),
        };
        Ok(text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
    }
}

/// Reads one session file: `Ok(None)` when it does not exist, `Err` with the reason when it cannot be used.
fn read_session(path: &Path, channel: ChannelId) -> Result<Option<Session>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let session: Session = serde_json::from_slice(&bytes).map_err(|e| format!("invalid session JSON: {e}"))?;
    if session.channel_id != channel {
        return Err(format!("it holds channel {} instead", session.channel_id));
    }
    if session.version > SESSION_FORMAT_VERSION {
        return Err(format!("format version {} is newer than this build understands", session.version));
    }
    if session.is_active() && !session.active_agent.as_ref().is_some_and(|a| session.roster.contains(a)) {
        return Err("its active persona is not in its roster".into());
    }
    Ok(Some(session))
}

#[cfg(test)]
mod tests;
