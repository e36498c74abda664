//! Choosing the store on the command line, as processes: `run --store` (or `TM_STORE`) refuses what is not a folder
//! or a Postgres URL, a second process on one state folder refuses to start, the URL's password never shows (not
//! even in `--help`), and `convert` between two folders says what it did, or why not.

use std::process::{Command, Output};
use turn_manager::core::ids::ChannelId;
use turn_manager::core::session::Session;
use turn_manager::core::session::history::{EventKind, HistoryEvent};
use turn_manager::sessions::files::FileSessions;
use turn_manager::store::Store;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");
/// Well formed, worthless anywhere.
const TOKEN: &str = "MTMxMjAwMDAwMDAwMDAwMDAwOQ.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB";

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BINARY);
    command.args(args).env("DISCORD_TOKEN", TOKEN).env_remove("TM_STORE").env_remove("TM_SHARDS");
    command.env_remove("TM_TOTAL_SHARDS").envs(env.iter().copied()).output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn run_refuses_a_store_that_is_neither_a_folder_nor_a_postgres_url_before_connecting() {
    let refused = run(&["run", "--store", "mysql://tm:hunter2@db/tm"], &[]);
    assert_eq!(refused.status.code(), Some(2));
    let error = stderr(&refused);
    assert!(error.contains("--store (TM_STORE): `mysql://` is not a store this bot knows"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    let from_env = run(&["run"], &[("TM_STORE", "redis://cache")]);
    assert_eq!(from_env.status.code(), Some(2), "{}", stderr(&from_env));
}

#[test]
fn help_never_shows_the_store_url_from_the_environment() {
    let help = run(&["run", "--help"], &[("TM_STORE", "postgres://tm:hunter2@db/tm")]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--store <FOLDER|URL>") && text.contains("TM_STORE"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn a_second_process_on_the_same_state_folder_refuses_to_start_and_names_the_folder() {
    let state = tempfile::tempdir().unwrap();
    let personas = tempfile::tempdir().unwrap();
    let pm = r#"{"id": "pm", "displayName": "PM", "discordUserId": "1312000000000000101"}"#;
    std::fs::write(personas.path().join("pm.json"), pm).unwrap();
    let _running = FileSessions::open(state.path()).unwrap();
    let folder = state.path().to_str().unwrap();
    let personas = personas.path().to_str().unwrap();
    let refused = run(&["run", "--api-base", "http://127.0.0.1:9", "--personas", personas, "--store", folder], &[]);
    assert_eq!(refused.status.code(), Some(1));
    let error = stderr(&refused);
    let expected = format!("another turn-manager process seems to be running on the state folder {folder}");
    assert!(error.contains(&expected), "{error}");
    assert!(error.contains("turn-manager.lock") && error.contains("--store postgres://"), "{error}");
}

#[test]
fn convert_copies_one_folder_to_another_once_and_refuses_to_overwrite_without_force() {
    let (from, to) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    Store::open(from.path()).unwrap().save(&Session::new(ChannelId(3)), &[]).unwrap();
    let (from, to_dir) = (from.path().to_str().unwrap(), to.path().join("state"));
    let to = to_dir.to_str().unwrap();
    let copied = run(&["convert", "--from", from, "--to", to], &[]);
    let said = String::from_utf8_lossy(&copied.stdout);
    assert!(copied.status.success(), "{said}{}", stderr(&copied));
    assert!(
        said.contains(&format!("Copied 1 session(s) and 0 history event(s) from the state folder {from}")),
        "{said}"
    );
    let again = run(&["convert", "--from", from, "--to", to], &[]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already holds the same 1 session(s)"));

    Store::open(&to_dir).unwrap().save(&Session::new(ChannelId(4)), &[]).unwrap();
    let refused = run(&["convert", "--from", from, "--to", to], &[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("already holds other sessions (2 of them); add --force"), "{}", stderr(&refused));
    let forced = run(&["convert", "--from", from, "--to", to, "--force"], &[]);
    assert!(String::from_utf8_lossy(&forced.stdout).contains("What the folder held before is in"));

    let missing = run(&["convert", "--from", "/nonexistent/state", "--to", to], &[]);
    assert!(stderr(&missing).contains("the source folder /nonexistent/state does not exist"), "{}", stderr(&missing));
    let bad = run(&["convert", "--from", from, "--to", "mysql://db"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--to: `mysql://` is not a store"), "{}", stderr(&bad));
}

/// Found by a review: a destination holding other files (a working folder) got the copy beside them, and with
/// `--force` was moved aside whole, the source inside it too; a destination inside the source (`state/channels`)
/// moved the source's own sessions aside; a channel left behind unread still exited 0.
#[test]
fn convert_refuses_a_folder_that_is_no_state_folder_or_inside_the_source_and_fails_when_a_channel_is_left() {
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("st");
    Store::open(&source).unwrap().save(&Session::new(ChannelId(3)), &[]).unwrap();
    std::fs::write(work.path().join("notes.txt"), "mine").unwrap();
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let (from, into_work) = (source.to_str().unwrap(), work.path().join("notes-folder"));
    std::fs::create_dir(&into_work).unwrap();
    std::fs::write(into_work.join("todo.md"), "mine").unwrap();
    for force in [false, true] {
        let mut args = vec!["convert", "--from", from, "--to", into_work.to_str().unwrap()];
        args.extend(force.then_some("--force"));
        let refused = run(&args, &[]);
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        assert!(stderr(&refused).contains("is not a state folder (it holds todo.md"), "{}", stderr(&refused));
        assert_eq!(listing(&into_work), ["todo.md"], "nothing written there");
    }
    for inside in [source.join("channels"), source.join("copy"), work.path().to_owned()] {
        let refused = run(&["convert", "--from", from, "--to", inside.to_str().unwrap(), "--force"], &[]);
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        assert!(stderr(&refused).contains("one of the folders is inside the other"), "{}", stderr(&refused));
    }
    assert_eq!(listing(work.path()), ["notes-folder", "notes.txt", "st"]);
    assert_eq!(Store::open(&source).unwrap().load_all().unwrap().sessions.len(), 1, "the source is as it was");

    // A channel whose session cannot be read: the others are copied, and the run fails saying so.
    let stopped = HistoryEvent { at: chrono::Utc::now(), round: 1, agent_id: None, kind: EventKind::SessionStopped {} };
    Store::open(&source).unwrap().save(&Session::new(ChannelId(4)), &[stopped]).unwrap();
    let channels = source.join("channels");
    std::fs::write(channels.join("4.json"), "{ torn").unwrap();
    let _ = std::fs::remove_file(channels.join("4.prev.json")); // no last good copy either
    for entry in std::fs::read_dir(&source).unwrap().map(Result::unwrap) {
        if entry.file_name().to_string_lossy().starts_with("journal") {
            std::fs::remove_file(entry.path()).unwrap(); // no copy of it left anywhere
        }
    }
    let to = work.path().join("copy");
    let copied = run(&["convert", "--from", from, "--to", to.to_str().unwrap()], &[]);
    assert_eq!(copied.status.code(), Some(1), "{}", stderr(&copied));
    assert!(String::from_utf8_lossy(&copied.stdout).contains("Copied 1 session(s)"));
    assert!(stderr(&copied).contains("1 channel(s) of the state folder"), "{}", stderr(&copied));
    assert!(stderr(&copied).contains("had no readable session, or history lines"), "{}", stderr(&copied));
    // Run again (the unreadable file was moved aside by the first): still left behind, still a failure.
    assert!(channels.join("4.history.jsonl").exists(), "its history log stays");
    let again = run(&["convert", "--from", from, "--to", work.path().join("copy2").to_str().unwrap()], &[]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(stderr(&again).contains("channel 4: a history log but no readable session"), "{}", stderr(&again));

    // A history line this build reads as no event (found by a review: left out unsaid, exit 0).
    let clean = work.path().join("clean");
    let store = Store::open(&clean).unwrap();
    let started = stopped_event();
    store.save(&Session::new(ChannelId(5)), &[started]).unwrap();
    drop(store);
    let log = clean.join("channels/5.history.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, format!("{text}{{\"not\": \"an event\"}}\n")).unwrap();
    let copied =
        run(&["convert", "--from", clean.to_str().unwrap(), "--to", work.path().join("copy3").to_str().unwrap()], &[]);
    assert_eq!(copied.status.code(), Some(1), "{}", stderr(&copied));
    assert!(stderr(&copied).contains("channel 5: 1 line(s) of its history log are no event"), "{}", stderr(&copied));
}

fn stopped_event() -> HistoryEvent {
    HistoryEvent { at: chrono::Utc::now(), round: 1, agent_id: None, kind: EventKind::SessionStopped {} }
}
