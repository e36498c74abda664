//! Choosing the store on the command line, as processes: `run --store` (or `TM_STORE`) refuses what is not a folder
//! or a Postgres URL, a second process on one state folder refuses to start, the URL's password never shows (not
//! even in `--help`), and `convert` between two folders says what it did, or why not.

use std::process::{Command, Output};
use turn_manager::core::ids::ChannelId;
use turn_manager::core::session::Session;
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
