//! Store tests: durable saves, interrupted saves, corrupt files moved aside, the full history log.

use super::*;
use crate::core::config::Config;
use crate::core::ids::MessageId;
use crate::core::ids::{PersonaId, UserId};
use crate::core::persona::{Persona, PersonaCatalog};
use crate::core::session::{Command, Context, IncomingMessage};
use chrono::{DateTime, TimeDelta, Utc};

const CHANNEL: ChannelId = ChannelId(42);

fn catalog() -> PersonaCatalog {
    let persona = |id: &str, user: u64| Persona {
        id: PersonaId::parse(id).unwrap(),
        display_name: id.into(),
        discord_user_id: UserId(user),
        avatar_url: None,
        timeout_seconds: Some(90),
        order: Some(user as i64),
        source: String::new(),
    };
    PersonaCatalog::new(vec![persona("pm", 1), persona("dev", 2)])
}

fn t0() -> DateTime<Utc> {
    "2026-03-01T10:00:00Z".parse().unwrap()
}

/// A started session and the events of its start.
fn started(config: &Config, personas: &PersonaCatalog) -> (Session, Vec<HistoryEvent>) {
    let mut session = Session::new(CHANNEL);
    let ctx = Context { personas, config };
    let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
    (session, t.events)
}

#[test]
fn a_saved_session_loads_back_identical() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let (session, events) = started(&config, &personas);
    store.save(&session, &events).unwrap();
    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, [session]);
    assert!(report.problems.is_empty());
    let text = std::fs::read_to_string(dir.path().join("channels/42.json")).unwrap();
    assert!(text.contains("\"activeAgent\": \"pm\"") && text.contains("\"turnTimeoutAt\": \"2026-03-01T10:01:30Z\""));
}

#[test]
fn a_stray_temporary_file_from_an_interrupted_save_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let (session, events) = started(&config, &personas);
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
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let ctx = Context { personas: &personas, config: &config };
    let (mut session, events) = started(&config, &personas);
    store.save(&session, &events).unwrap();
    let first = session.clone();
    let message = IncomingMessage {
        id: MessageId(9),
        author: UserId(1),
        text: "ok TURN_COMPLETE".into(),
        edited: false,
        written_at: t0() + TimeDelta::seconds(5),
    };
    let t = session.handle_message(&message, t0() + TimeDelta::seconds(5), ctx);
    store.save(&session, &t.events).unwrap();

    let path = dir.path().join("channels/42.json");
    let torn = std::fs::read(&path).unwrap()[..40].to_vec();
    std::fs::write(&path, &torn).unwrap();

    let report = store.load_all().unwrap();
    assert_eq!(report.sessions, std::slice::from_ref(&first), "the version before the last save is used");
    assert!(
        report.problems.iter().any(|p| p.contains("cannot be read") && p.contains("moved it to")),
        "{:?}",
        report.problems
    );
    let aside: Vec<_> = std::fs::read_dir(dir.path().join("channels"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), torn, "the corrupt file is kept as it was, not overwritten");
    // The good copy became the current file again.
    assert_eq!(store.load_all().unwrap().sessions, [first]);
}

#[test]
fn a_corrupt_file_without_a_good_copy_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    std::fs::write(dir.path().join("channels/77.json"), "not json at all").unwrap();
    let report = store.load_all().unwrap();
    assert!(report.sessions.is_empty());
    assert!(report.problems.iter().any(|p| p.contains("77.json cannot be read")));
    assert!(!dir.path().join("channels/77.json").exists());
    let kept = std::fs::read_dir(dir.path().join("channels")).unwrap().count();
    assert_eq!(kept, 1, "the unreadable file is moved aside, not deleted");
}

#[test]
fn a_file_holding_another_channel_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let (session, _) = started(&config, &personas);
    std::fs::write(dir.path().join("channels/43.json"), serde_json::to_vec(&session).unwrap()).unwrap();
    let report = store.load_all().unwrap();
    assert!(report.sessions.is_empty());
    assert!(report.problems[0].contains("holds channel 42 instead"));
}

#[test]
fn the_log_keeps_every_event_that_the_bounded_history_drops() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let config = Config { history_limit: 2, ..Config::default() };
    let personas = catalog();
    let ctx = Context { personas: &personas, config: &config };
    let (mut session, events) = started(&config, &personas);
    store.save(&session, &events).unwrap();
    for i in 1..=5 {
        let t = session.handle_command(&Command::Skip, None, t0() + TimeDelta::seconds(i), ctx).unwrap();
        store.save(&session, &t.events).unwrap();
    }
    let loaded = &store.load_all().unwrap().sessions[0];
    assert_eq!(loaded.history.len(), 2);
    let log = store.read_log(CHANNEL).unwrap();
    assert_eq!(log.len(), 6);
    assert_eq!(log[0].kind.name(), "session_started");
    assert_eq!(&log[4..], loaded.history.iter().cloned().collect::<Vec<_>>().as_slice());
}

#[test]
fn a_torn_last_log_line_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let (session, events) = started(&config, &personas);
    store.save(&session, &events).unwrap();
    let log = dir.path().join("channels/42.history.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{\"at\":\"2026-03-01T10:0");
    std::fs::write(&log, text).unwrap();
    assert_eq!(store.read_log(CHANNEL).unwrap(), events);
}

#[test]
fn saving_keeps_the_previous_version_beside_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (config, personas) = (Config::default(), catalog());
    let (mut session, events) = started(&config, &personas);
    store.save(&session, &events).unwrap();
    let before = std::fs::read(dir.path().join("channels/42.json")).unwrap();
    session.round = 7;
    store.save(&session, &[]).unwrap();
    assert_eq!(std::fs::read(dir.path().join("channels/42.prev.json")).unwrap(), before);
    assert_ne!(std::fs::read(dir.path().join("channels/42.json")).unwrap(), before);
}
