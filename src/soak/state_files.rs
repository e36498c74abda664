//! The bot's state folder read from outside, as a person (or a crash) would find it: every session file and its last
//! good copy must parse, every whole line of a history log must be an event (a torn last line is allowed: the bot
//! cuts it before its next append), and no file may have been moved aside as unreadable.

use super::invariants::Violation;
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;
use std::collections::BTreeMap;
use std::path::Path;

/// What the state folder holds now.
#[derive(Debug, Default)]
pub struct StateView {
    /// Channel -> its session file.
    pub sessions: BTreeMap<u64, Session>,
    /// Channel -> its history log, whole lines only.
    pub logs: BTreeMap<u64, Vec<HistoryEvent>>,
    pub problems: Vec<Violation>,
}

impl StateView {
    /// The channel's log, with the events its session file holds that the log does not have yet (a crash between the
    /// two writes: the bot appends them with its next event). What the bot has decided, whether logged or not.
    pub fn decided(&self, channel: u64) -> Vec<HistoryEvent> {
        let mut events = self.logs.get(&channel).cloned().unwrap_or_default();
        let Some(session) = self.sessions.get(&channel) else { return events };
        let recent = events.len().saturating_sub(2 * session.history.len());
        let missing: Vec<HistoryEvent> =
            session.history.iter().filter(|e| !events[recent..].contains(e)).cloned().collect();
        events.extend(missing);
        events
    }
}

/// Reads `<state>/channels`. A folder that does not exist yet is empty.
pub fn read(state_dir: &Path) -> StateView {
    let mut view = StateView::default();
    let dir = state_dir.join("channels");
    let Ok(entries) = std::fs::read_dir(&dir) else { return view };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let shown = path.display().to_string();
        let channel = name.split('.').next().and_then(|c| c.parse::<u64>().ok());
        if name.contains(".corrupt-") {
            view.problems.push(Violation::CorruptFile { path: shown });
            continue;
        }
        let Some(channel) = channel else { continue };
        if name.ends_with(".history.jsonl") {
            match read_log(&path) {
                Ok(events) => {
                    view.logs.insert(channel, events);
                }
                Err(why) => view.problems.push(Violation::TornFile { path: shown, why }),
            }
        } else if name.ends_with(".json") {
            // The session file and its last good copy alike: a rename installs either whole, or not at all.
            let parsed = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| serde_json::from_slice::<Session>(&bytes).map_err(|e| e.to_string()));
            match parsed {
                Ok(session) if !name.ends_with(".prev.json") => {
                    view.sessions.insert(channel, session);
                }
                Ok(_) => {}
                // Gone between the listing and the read: replaced by a rename, which is fine.
                Err(why) if !path.exists() => tracing::debug!("{shown} went away while read: {why}"),
                Err(why) => view.problems.push(Violation::TornFile { path: shown, why }),
            }
        }
    }
    view
}

/// A log's events; an error names the first whole line that is not one (a line glued to a torn one).
fn read_log(path: &Path) -> Result<Vec<HistoryEvent>, String> {
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let whole = match text.iter().rposition(|&b| b == b'\n') {
        Some(end) => &text[..=end],
        None => &text[..0],
    };
    let whole = std::str::from_utf8(whole).map_err(|e| format!("not UTF-8: {e}"))?;
    whole
        .lines()
        .enumerate()
        .map(|(i, line)| serde_json::from_str(line).map_err(|e| format!("line {}: {e}: {line:.120}", i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::ChannelId;

    #[test]
    fn a_torn_session_file_or_a_glued_log_line_is_reported_and_a_torn_last_line_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let channels = dir.path().join("channels");
        std::fs::create_dir_all(&channels).unwrap();
        let session = serde_json::to_string(&Session::new(ChannelId(5))).unwrap();
        std::fs::write(channels.join("5.json"), &session).unwrap();
        std::fs::write(channels.join("6.json"), &session[..session.len() / 2]).unwrap();
        let event = r#"{"at":"2026-01-01T00:00:00Z","round":1,"event":"session_stopped","details":{}}"#;
        std::fs::write(channels.join("5.history.jsonl"), format!("{event}\n{}", &event[..20])).unwrap();
        std::fs::write(channels.join("6.history.jsonl"), format!("{}{event}\n", &event[..20])).unwrap();

        let view = read(dir.path());
        assert_eq!(view.sessions.keys().copied().collect::<Vec<_>>(), vec![5]);
        assert_eq!(view.logs[&5].len(), 1, "the torn last line is left for the bot to cut");
        let mut torn: Vec<String> = view
            .problems
            .iter()
            .map(|p| match p {
                Violation::TornFile { path, .. } => path.rsplit('/').next().unwrap().to_owned(),
                other => panic!("{other}"),
            })
            .collect();
        torn.sort();
        assert_eq!(torn, vec!["6.history.jsonl", "6.json"]);
    }
}
