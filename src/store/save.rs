//! Saving sessions: one ([`Store::save`]) or many in one group commit ([`Store::save_batch`], used by the
//! writer thread). In both, the session file is durable before its events are appended to the log, so the log never
//! records a transition that a crash could undo; the events a crash kept out of the log are still in the session's
//! history, and the channel's next save appends them first.

use super::atomic::{install, sync_folder, write_temporary};
use super::log::{OpenLog, encode_events, missing_from_log};
use super::{Store, StoreError, io};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::path::PathBuf;

/// One channel's part of a group commit.
pub(super) struct SaveItem<'a> {
    pub session: &'a Session,
    pub events: &'a [HistoryEvent],
}

/// The session file's bytes: compact JSON and a final newline.
pub(super) fn encode_session(session: &Session) -> Result<Vec<u8>, StoreError> {
    let mut json =
        serde_json::to_vec(session).map_err(|source| StoreError::Encode { channel: session.channel_id, source })?;
    json.push(b'\n');
    Ok(json)
}

/// How far one channel of a batch got.
enum Step {
    /// The temporary file is written and synced.
    Written(PathBuf),
    /// The session file is in place (durable after the folder fsync).
    Installed,
    Failed(StoreError),
}

impl Store {
    /// Saves a session after a transition: the session file is replaced atomically and durably, then its new events
    /// are appended to the log and synced.
    pub fn save(&self, session: &Session, new_events: &[HistoryEvent]) -> Result<(), StoreError> {
        let mut results = self.save_batch(&[SaveItem { session, events: new_events }]);
        results.pop().unwrap_or(Ok(()))
    }

    /// Saves many channels (each at most once) in one group commit: every temporary file written and synced, every
    /// rename, ONE folder fsync, then each channel's events appended to its log and synced. Gives one result per
    /// item, in order; a failure of one channel leaves the others alone (except a failed folder fsync, which fails
    /// every channel not failed already).
    pub(super) fn save_batch(&self, items: &[SaveItem<'_>]) -> Vec<Result<(), StoreError>> {
        let mut logs: Vec<Option<Vec<u8>>> = Vec::with_capacity(items.len());
        let mut steps: Vec<Step> = items
            .iter()
            .map(|item| {
                let channel = item.session.channel_id;
                let encoded = encode_session(item.session).and_then(|json| {
                    let lines = if item.events.is_empty() { None } else { Some(encode_events(channel, item.events)?) };
                    Ok((json, lines))
                });
                let (json, lines) = match encoded {
                    Ok(encoded) => encoded,
                    Err(e) => {
                        logs.push(None);
                        return Step::Failed(e);
                    }
                };
                logs.push(lines);
                let path = self.session_path(channel);
                match write_temporary(&path, &json) {
                    Ok(tmp) => Step::Written(tmp),
                    Err(e) => Step::Failed(io("save the session", &path)(e)),
                }
            })
            .collect();

        for (item, step) in items.iter().zip(&mut steps) {
            if let Step::Written(tmp) = step {
                let channel = item.session.channel_id;
                let path = self.session_path(channel);
                *step = match install(tmp, &path, &self.previous_path(channel)) {
                    Ok(()) => Step::Installed,
                    Err(e) => {
                        let _ = std::fs::remove_file(&*tmp);
                        Step::Failed(io("save the session", &path)(e))
                    }
                };
            }
        }

        // Logs are opened (created, their torn tails cut) before the folder fsync, so a new log's folder entry is
        // made durable by the same fsync as the renames. Nothing is appended yet.
        let mut open_logs = Vec::with_capacity(items.len());
        for ((item, step), lines) in items.iter().zip(&mut steps).zip(&mut logs) {
            let log = match (&*step, lines.as_mut()) {
                (Step::Installed, Some(lines)) => match self.open_log_catching_up(item, lines) {
                    Ok(log) => Some(log),
                    Err(e) => {
                        *step = Step::Failed(e);
                        None
                    }
                },
                _ => None,
            };
            open_logs.push(log);
        }

        if steps.iter().any(|s| matches!(s, Step::Installed)) {
            if let Err(e) = sync_folder(&self.channels_dir) {
                let failed = io("sync the state folder", &self.channels_dir)(e);
                for step in &mut steps {
                    if matches!(step, Step::Installed) {
                        *step = Step::Failed(failed.duplicate());
                    }
                }
            }
        }

        let results = items.iter().zip(steps).zip(open_logs).zip(&logs).map(|(((item, step), log), lines)| {
            let channel = item.session.channel_id;
            let result = match (step, log, lines) {
                (Step::Failed(e), _, _) => Err(e),
                (Step::Installed, Some(mut log), Some(lines)) => self.append_log(channel, &mut log, lines),
                _ => Ok(()),
            };
            if result.is_err() {
                self.forget_log_check(channel);
            }
            result
        });
        results.collect()
    }

    /// Opens the log of `item`'s channel; the first time, puts before `lines` the events its session file holds
    /// but the log lacks (a crash, or a failed save, between the session file and the log).
    fn open_log_catching_up(&self, item: &SaveItem<'_>, lines: &mut Vec<u8>) -> Result<OpenLog, StoreError> {
        let channel = item.session.channel_id;
        let log = self.open_log(channel)?;
        if let Some(last) = &log.first_look {
            let missing = missing_from_log(&item.session.history, item.events, last);
            if !missing.is_empty() {
                tracing::warn!(
                    %channel,
                    events = missing.len(),
                    "the history log lacks events its session file holds (a crash or a failed save between the two); \
                     appending them first"
                );
                let mut caught_up = encode_events(channel, &missing)?;
                caught_up.append(lines);
                *lines = caught_up;
            }
        }
        Ok(log)
    }

    /// Writes a session file on its own, for restoring the last good copy at load.
    pub(super) fn write_session_file(&self, channel: ChannelId, session: &Session) -> Result<(), StoreError> {
        let path = self.session_path(channel);
        let json = encode_session(session)?;
        super::atomic::write_atomically(&path, &self.previous_path(channel), &json)
            .map_err(io("restore the session", &path))
    }
}
