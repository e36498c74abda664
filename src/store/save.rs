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
        // Each temporary file is written and fsync'd on its own; spread over a few threads, the disk serves the
        // fsyncs together instead of one after another.
        let (mut steps, mut logs): (Vec<Step>, Vec<Option<Vec<u8>>>) = in_parallel(items, |item| {
            let channel = item.session.channel_id;
            let encoded = encode_session(item.session).and_then(|json| {
                let lines = if item.events.is_empty() { None } else { Some(encode_events(channel, item.events)?) };
                Ok((json, lines))
            });
            let (json, lines) = match encoded {
                Ok(encoded) => encoded,
                Err(e) => return (Step::Failed(e), None),
            };
            let path = self.session_path(channel);
            match write_temporary(&path, &json) {
                Ok(tmp) => (Step::Written(tmp), lines),
                Err(e) => (Step::Failed(io("save the session", &path)(e)), lines),
            }
        })
        .into_iter()
        .unzip();

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

        let work: Vec<_> = items.iter().zip(steps).zip(open_logs).zip(&logs).collect();
        // The appends' fsyncs are independent too.
        in_parallel_owned(work, |(((item, step), log), lines)| {
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
        })
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

/// How many threads a batch's fsyncs are spread over; a small batch stays on the writer thread.
const SYNC_THREADS: usize = 8;
const PER_THREAD_MIN: usize = 4;

/// `f` over `items` on up to [`SYNC_THREADS`] scoped threads, the results in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = (items.len() / PER_THREAD_MIN).clamp(1, SYNC_THREADS);
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> =
            items.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// [`in_parallel`] for items given away to `f`.
fn in_parallel_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        items.into_iter().map(|item| std::sync::Mutex::new(Some(item))).collect();
    in_parallel(&slots, |slot| f(slot.lock().expect("slot lock").take().expect("each item is taken once")))
}

#[cfg(test)]
mod tests {
    use super::{in_parallel, in_parallel_owned};

    #[test]
    fn work_spread_over_threads_comes_back_in_the_items_order() {
        let items: Vec<u32> = (0..103).collect();
        assert_eq!(in_parallel(&items, |n| n * 2), items.iter().map(|n| n * 2).collect::<Vec<_>>());
        let owned: Vec<String> = items.iter().map(u32::to_string).collect();
        assert_eq!(
            in_parallel_owned(owned.clone(), |s| s + "!"),
            owned.iter().map(|s| format!("{s}!")).collect::<Vec<_>>()
        );
        assert_eq!(in_parallel(&[7u32], |n| n + 1), vec![8], "a lone item stays on the calling thread");
    }
}
