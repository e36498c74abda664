//! Saving and loading sessions: compact files, interrupted saves, unreadable or impossible files moved aside and the
//! last good copy used, loading one channel, loading many.

use super::*;
use crate::core::ids::ChannelId;
use crate::core::ids::MessageId;
use crate::core::session::{IncomingMessage, SessionStatus};

#[test]
fn a_saved_session_loads_back_identical() {
    let (dir, store) = open_store();
    let (session, events) = started();
    store.save(&session, &events).unwrap();
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, [session]);
    assert!(report.problems.is_empty());
    let text = std::fs::read_to_string(dir.path().join("channels/42.json")).unwrap();
    assert!(text.contains("\"activeAgent\":\"pm\"") && text.contains("\"turnTimeoutAt\":\"2026-03-01T10:01:30Z\""));
}

#[test]
fn session_files_are_compact_json_on_one_line_and_small_with_a_twenty_event_history() {
    let (dir, store) = open_store();
    let config = Config { history_limit: 20, ..Config::default() };
    let (mut session, _) = started();
    skips(&mut session, &config, 30);
    assert_eq!(session.history.len(), 20);
    store.save(&session, &[]).unwrap();
    let bytes = std::fs::read(dir.path().join("channels/42.json")).unwrap();
    // The number of the save first, then the session's own fields, compact, not pretty.
    let fields = &serde_json::to_vec(&session).unwrap()[1..];
    assert_eq!(bytes, [b"{\"savedSeq\":1,".as_slice(), fields, b"\n"].concat());
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    assert!(bytes.len() < 4096, "a started session with 20 events takes {} bytes", bytes.len());
}

#[test]
fn a_stray_temporary_file_from_an_interrupted_save_is_ignored_and_removed() {
    let (dir, store) = open_store();
    let (session, events) = started();
    store.save(&session, &events).unwrap();
    // The crash came after the temporary file was written but before the rename.
    let tmp = dir.path().join("channels/42.json.tmp");
    std::fs::write(&tmp, "{\"version\": 1, \"chan").unwrap();
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, [session]);
    assert!(!tmp.exists());
}

#[test]
fn a_torn_session_file_is_moved_aside_and_the_last_good_copy_is_used() {
    let (dir, store) = open_store();
    let (config, personas) = (Config::default(), catalog());
    let ctx = Context { personas: &personas, config: &config };
    let (mut session, events) = started();
    store.save(&session, &events).unwrap();
    let first = session.clone();
    let message = IncomingMessage {
        id: MessageId(9),
        author: UserId(1),
        text: "ok TURN_COMPLETE".into(),
        edited: false,
        written_at: t0() + TimeDelta::seconds(5),
        edited_at: None,
        has_files: false,
        flags: Default::default(),
        mentions: None,
    };
    let t = session.handle_message(&message, t0() + TimeDelta::seconds(5), ctx);
    store.save(&session, &t.events).unwrap();

    let path = dir.path().join("channels/42.json");
    let torn = std::fs::read(&path).unwrap()[..40].to_vec();
    std::fs::write(&path, &torn).unwrap();

    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, std::slice::from_ref(&first), "the version before the last save is used");
    assert!(report.lost.is_empty(), "restored, not lost");
    assert!(
        report.problems.iter().any(|p| p.contains("cannot be read") && p.contains("moved it to")),
        "{:?}",
        report.problems
    );
    let aside = corrupt_files(dir.path());
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(&aside[0]).unwrap(), torn, "the corrupt file is kept as it was, not overwritten");
    // The good copy became the current file again, and stays the last good copy too.
    assert_eq!(std::fs::read(dir.path().join("channels/42.prev.json")).unwrap(), std::fs::read(&path).unwrap());
    assert_eq!(store.load_all().unwrap().sessions, [first]);
}

fn corrupt_files(state: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(state.join("channels"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .map(|e| e.path())
        .collect()
}

#[test]
fn a_session_file_that_cannot_be_read_at_all_stops_the_load_naming_it_and_nothing_is_moved_or_replaced() {
    let (dir, store) = open_store();
    let (session, events) = started();
    store.save(&session, &events).unwrap();
    store.save(&session, &[]).unwrap(); // a last good copy beside it
    store.checkpoint().unwrap();
    // Its content is unknown (an I/O error; a directory stands in for it here, as permissions do not stop root): it
    // may hold the newest save, so the older copy must not take its place.
    let file = dir.path().join("channels/42.json");
    let kept = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let error = open_at(dir.path()).load_all().unwrap_err().to_string();
    assert!(error.contains("42.json"), "the file is named: {error}");
    assert!(file.is_dir() && corrupt_files(dir.path()).is_empty(), "nothing moved aside");
    std::fs::remove_dir(&file).unwrap();
    std::fs::write(&file, kept).unwrap();
    assert_eq!(open_at(dir.path()).load_all().unwrap().sessions, [session]);
}

#[test]
fn a_corrupt_file_without_a_good_copy_is_reported_and_kept() {
    let (dir, store) = open_store();
    std::fs::write(dir.path().join("channels/77.json"), "not json at all").unwrap();
    let report = store.load_all().unwrap();
    assert!(report.sessions.is_empty());
    assert_eq!(report.lost, [ChannelId(77)], "the channel is to be told its session is lost");
    assert!(report.problems.iter().any(|p| p.contains("77.json cannot be read")));
    assert!(!dir.path().join("channels/77.json").exists());
    let kept = std::fs::read_dir(dir.path().join("channels")).unwrap().count();
    assert_eq!(kept, 1, "the unreadable file is moved aside, not deleted");
}

#[test]
fn a_file_holding_another_channel_is_refused() {
    let (dir, store) = open_store();
    let (session, _) = started();
    std::fs::write(dir.path().join("channels/43.json"), serde_json::to_vec(&session).unwrap()).unwrap();
    let report = store.load_all().unwrap();
    assert!(report.sessions.is_empty());
    assert!(report.problems[0].contains("holds channel 42 instead"));
}

/// Sessions the engine could not have written, each with the words its refusal must give.
fn impossible_sessions() -> Vec<(&'static str, Session, &'static str)> {
    let (running, _) = started();
    let mut paused = running.clone();
    paused.status = SessionStatus::Paused;
    paused.paused_remaining_ms = Some(30_000);
    paused.turn_timeout_at = None;
    let mut cases = Vec::new();
    let mut s = running.clone();
    s.turn_timeout_at = None;
    cases.push(("running without a deadline", s, "no turnTimeoutAt"));
    let mut s = running.clone();
    s.turn_started_at = None;
    cases.push(("running without a start", s, "no turnStartedAt"));
    let mut s = paused.clone();
    s.paused_remaining_ms = None;
    cases.push(("paused without its remaining time", s, "no pausedRemainingMs"));
    let mut s = running.clone();
    s.active_agent = Some(PersonaId::parse("ghost").unwrap());
    cases.push(("running, the floor held outside the roster", s, "not in its roster"));
    let mut s = paused.clone();
    s.active_agent = None;
    cases.push(("paused, nobody holding the floor", s, "not in its roster"));
    // Hand-edited values that would overflow the engine's arithmetic (a resume panicked on this one).
    let mut s = paused.clone();
    s.paused_remaining_ms = Some(9_000_000_000_000_000_000);
    cases.push(("paused for longer than a calendar holds", s, "pausedRemainingMs"));
    let mut s = paused;
    s.paused_remaining_ms = Some(i64::MIN);
    cases.push(("paused with less than any calendar holds", s, "pausedRemainingMs"));
    let mut s = running.clone();
    s.turn_extended_seconds = u64::MAX;
    cases.push(("extended past any calendar", s, "turnExtendedSeconds"));
    let mut s = running.clone();
    s.turn_paused_ms = i64::MAX;
    cases.push(("paused within its turn past any calendar", s, "turnPausedMs"));
    let mut s = running.clone();
    s.round = u32::MAX;
    cases.push(("at the last round a number holds", s, "round"));
    let mut s = running;
    s.roster.push(PersonaId::parse("pm").unwrap());
    cases.push(("a persona twice in the roster", s, "lists pm twice"));
    cases
}

#[test]
fn each_impossible_session_is_refused_at_load_and_the_last_good_copy_is_used() {
    for (case, bad, reason) in impossible_sessions() {
        let (dir, store) = open_store();
        let (good, events) = started();
        store.save(&good, &events).unwrap();
        store.save(&bad, &[]).unwrap();
        let report = store.load_all().unwrap();
        assert_eq!(report.sessions, std::slice::from_ref(&good), "{case}: the last good copy is used");
        assert!(report.problems.iter().any(|p| p.contains(reason) && p.contains("moved it to")), "{case}: {report:?}");
        assert_eq!(corrupt_files(dir.path()).len(), 1, "{case}: the refused file is kept aside");
    }
}

#[test]
fn the_sessions_the_engine_writes_pass_validation() {
    let (running, _) = started();
    let config = Config::default();
    let personas = catalog();
    let ctx = Context { personas: &personas, config: &config };
    let mut paused = running.clone();
    paused.handle_command(&Command::Pause, None, t0() + TimeDelta::seconds(3), ctx).unwrap();
    assert_eq!(paused.status, SessionStatus::Paused);
    let mut stopped = running.clone();
    stopped.handle_command(&Command::Stop, None, t0() + TimeDelta::seconds(3), ctx).unwrap();
    for session in [Session::new(CHANNEL), running, paused, stopped] {
        assert_eq!(validate::check_session(&session, CHANNEL), Ok(()), "{session:?}");
    }
}

#[test]
fn load_one_reads_one_channel_and_falls_back_to_its_last_good_copy() {
    let (dir, store) = open_store();
    let (session, events) = started();
    store.save(&session, &events).unwrap();
    assert_eq!(store.load_one(CHANNEL).unwrap(), Some(session.clone()));
    assert_eq!(store.load_one(ChannelId(5)).unwrap(), None, "a channel never saved has no session");

    let mut later = session.clone();
    later.round = 3;
    store.save(&later, &[]).unwrap();
    std::fs::write(dir.path().join("channels/42.json"), "{\"torn").unwrap();
    assert_eq!(store.load_one(CHANNEL).unwrap(), Some(session.clone()));
    assert_eq!(corrupt_files(dir.path()).len(), 1);
    assert_eq!(store.load_one(CHANNEL).unwrap(), Some(session), "the good copy is the current file again");
}

#[test]
fn loading_many_channels_returns_every_session_ordered_by_channel() {
    let (dir, store) = open_store();
    // Enough channels for the parallel load to split them; written plainly, since only loading is tested here.
    let ids: Vec<u64> = (1..=700).rev().map(|i| i * 1_000_003).collect();
    let mut expected = Vec::new();
    for &id in &ids {
        let (session, _) = started_in(ChannelId(id));
        std::fs::write(dir.path().join(format!("channels/{id}.json")), serde_json::to_vec(&session).unwrap()).unwrap();
        expected.push(session);
    }
    // One more with only its last good copy left.
    let (previous_only, _) = started_in(ChannelId(999));
    std::fs::write(dir.path().join("channels/999.prev.json"), serde_json::to_vec(&previous_only).unwrap()).unwrap();
    expected.push(previous_only);
    expected.sort_by_key(|s| s.channel_id);

    let report = store.load_all().unwrap();
    assert_eq!(report.sessions.len(), expected.len());
    assert!(report.sessions == expected, "every session, in channel order");
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].contains("using the last good copy"));
}

#[test]
fn a_state_folder_made_at_open_is_made_durable_in_its_parent_as_each_folder_above_it_made_too() {
    let dir = tempfile::tempdir().unwrap();
    let above = dir.path().join("srv");
    std::fs::create_dir(&above).unwrap();
    let state = above.join("bot").join("state");
    let store = Store::open(&state).unwrap();
    let synced = store.probe.folders_synced_at_open.lock().unwrap().clone();
    assert_eq!(synced, [above.clone(), above.join("bot"), state.clone()], "each new folder's parent, from the top");
    assert!(state.join("channels").is_dir());
    let again = Store::open(&state).unwrap();
    assert!(again.probe.folders_synced_at_open.lock().unwrap().is_empty(), "nothing made, nothing synced");
}

#[test]
fn a_session_file_saved_with_a_byte_order_mark_by_an_editor_is_read_as_it_is() {
    let (dir, store) = open_store();
    let config = Config::default();
    let (mut session, events) = started();
    store.save(&session, &events).unwrap();
    let skipped = skips(&mut session, &config, 1).concat();
    store.save(&session, &skipped).unwrap();
    store.checkpoint().unwrap();
    drop(store);
    let path = dir.path().join("channels/42.json");
    let text = std::fs::read(&path).unwrap();
    std::fs::write(&path, [b"\xEF\xBB\xBF".as_slice(), &text].concat()).unwrap();

    // Read at recovery (the journal still holds the saves) and at load, neither taking it for corrupt.
    let store = open_at(dir.path());
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, [session]);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(corrupt_files(dir.path()).is_empty(), "nothing moved aside");
}
