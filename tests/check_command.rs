//! `turn-manager check` as a process: the shipped personas pass; bad files are all named and the exit is non-zero.

use std::path::Path;
use std::process::{Command, Output};

fn check(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turn-manager"))
        .arg("check")
        .args(args)
        .env_remove("TM_STORE")
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_shipped_personas_pass_and_are_listed() {
    let out = check(Path::new(env!("CARGO_MANIFEST_DIR")), &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {}", text(&out.stderr));
    for row in ["pm      PM", "dev     Developer", "critic  Critic", "1312000000000000002", "120s"] {
        assert!(stdout.contains(row), "missing {row:?} in:\n{stdout}");
    }
    assert!(stdout.contains("default timeout    60s"));
    assert!(stdout.contains("OK: 3 personas ready."));
}

#[test]
fn a_folder_with_two_bad_files_names_both_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let personas = dir.path().join("personas");
    std::fs::create_dir(&personas).unwrap();
    std::fs::write(personas.join("good.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    std::fs::write(personas.join("bad-id.json"), "{\n  \"id\": \"Critic!\",\n  \"discordUserId\": \"2\"\n}").unwrap();
    std::fs::write(
        personas.join("bad-timeout.json"),
        "{\n  \"id\": \"dev\",\n  \"discordUserId\": \"3\",\n  \"turnBehavior\": {\"timeoutSeconds\": -5}\n}",
    )
    .unwrap();
    let out = check(dir.path(), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("personas/bad-id.json:2: field \"id\""), "{stderr}");
    assert!(
        stderr.contains(
            "personas/bad-timeout.json:4: field \"turnBehavior.timeoutSeconds\" must be between 1 and 86400, found -5"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("2 errors found"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is reported as fine");
}

/// Found by a newcomer: `check` run elsewhere than the folder holding `personas/` said only that it cannot be read.
#[test]
fn a_missing_default_persona_folder_says_where_it_is_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(dir.path(), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("error: personas: cannot be read as a folder: "), "{stderr}");
    assert!(stderr.contains("run it from the folder holding personas/, or pass --personas DIR"), "{stderr}");
    // A folder named on the command line is looked for where it says: no such hint.
    let out = check(dir.path(), &["--personas", "agents"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("agents: cannot be read as a folder") && !stderr.contains("--personas"), "{stderr}");
}

#[test]
fn warnings_do_not_fail_the_check_but_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pm.json"), r#"{"id": "pm", "discordUserId": "1", "displayNme": "PM"}"#).unwrap();
    let out = check(dir.path(), &["--personas", "."]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("did you mean \"displayName\"?"), "{stdout}");
}

#[test]
fn a_bad_configuration_file_is_reported_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("personas")).unwrap();
    std::fs::write(dir.path().join("personas/pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    std::fs::write(dir.path().join("turn-manager.json"), "{\n  \"outOfTurn\": \"delete\"\n}").unwrap();
    let out = check(dir.path(), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("turn-manager.json:2: field \"outOfTurn\" is \"delete\"; use one of \"remove\", \"allow\""),
        "{stderr}"
    );
}

#[test]
fn a_bad_rule_and_a_rule_naming_an_unknown_persona_are_reported_together() {
    let dir = tempfile::tempdir().unwrap();
    let personas = dir.path().join("personas");
    std::fs::create_dir(&personas).unwrap();
    std::fs::write(personas.join("pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    let config = "{\"signals\": {\"rules\": [\n  {\"name\": \"A\", \"pattern\": \"(\", \"action\": \"complete\"},\n  \
                  {\"name\": \"B\", \"pattern\": \"B\", \"action\": \"handoff\", \"to\": \"ghost\"}\n]}}";
    std::fs::write(dir.path().join("turn-manager.json"), config).unwrap();
    let out = check(dir.path(), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("turn-manager.json:2: field \"signals.rules[0].pattern\" does not compile"), "{stderr}");
    assert!(stderr.contains("turn-manager.json:3: field \"signals.rules[1].to\" names \"ghost\""), "{stderr}");
    assert!(stderr.contains("2 errors found"), "{stderr}");
}

/// Found by a newcomer: with `unknownPattern` null or empty, which turn unknown-signal detection off, the report
/// still said that 3 in a row end the turn.
#[test]
fn unknown_signals_turned_off_are_reported_off() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("personas")).unwrap();
    std::fs::write(dir.path().join("personas/pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    let report = |signals: &str| {
        std::fs::write(dir.path().join("turn-manager.json"), format!(r#"{{"signals": {signals}}}"#)).unwrap();
        let out = check(dir.path(), &[]);
        assert!(out.status.success(), "{signals}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    for off in [r#"{"unknownPattern": null}"#, r#"{"unknownPattern": ""}"#] {
        let stdout = report(off);
        assert!(stdout.contains("unknown signals: off (unknownPattern"), "{off}: {stdout}");
        assert!(!stdout.contains("in a row"), "{off}: {stdout}");
    }
    let stdout = report(r#"{"unknownLimit": 0}"#);
    assert!(stdout.contains("unknown signals: off (unknownLimit is 0);"), "{stdout}");
    assert!(report("{}").contains("unknown signals: 3 in a row end the turn;"));
}

#[test]
fn a_route_back_to_a_persona_that_may_send_it_is_a_warning_and_one_limited_by_from_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let personas = dir.path().join("personas");
    std::fs::create_dir(&personas).unwrap();
    std::fs::write(personas.join("pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    std::fs::write(personas.join("dev.json"), r#"{"id": "dev", "discordUserId": "2"}"#).unwrap();
    let config = "{\"signals\": {\"rules\": [\n  {\"name\": \"AGAIN\", \"pattern\": \"AGAIN: (?P<task>\\\\S+)\", \"action\": \"route\", \
                  \"to\": \"pm\"},\n  {\"name\": \"BACK\", \"pattern\": \"BACK: (?P<task>\\\\S+)\", \"action\": \"route\", \"to\": \"pm\", \
                  \"from\": [\"dev\"]},\n  {\"name\": \"TO_PM\", \"pattern\": \"TO_PM\", \"action\": \"handoff\", \
                  \"to\": \"pm\"}\n]}}";
    std::fs::write(dir.path().join("turn-manager.json"), config).unwrap();
    let out = check(dir.path(), &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "a warning only: {}", text(&out.stderr));
    assert!(
        stdout.contains("turn-manager.json:2: field \"signals.rules[0].to\" \"pm\" may send AGAIN itself"),
        "{stdout}"
    );
    assert!(!stdout.contains("rules[1]"), "BACK is dev's only: {stdout}");
    assert!(
        stdout.contains("rules[2].to\" \"pm\" may send TO_PM itself: each time it does, the handoff is refused"),
        "{stdout}"
    );
}

#[test]
fn help_never_shows_the_value_of_an_environment_variable_that_may_hold_a_password() {
    let out = Command::new(env!("CARGO_BIN_EXE_turn-manager"))
        .args(["run", "--help"])
        .env("DISCORD_API_BASE", "http://proxyuser:s3cretpw@127.0.0.1:1")
        .env("TM_STORE", "postgres://tm:hunter2@db/tm")
        .output()
        .expect("the binary runs");
    let help = text(&out.stdout);
    assert!(out.status.success() && help.contains("DISCORD_API_BASE"), "{help}");
    assert!(!help.contains("s3cretpw") && !help.contains("hunter2"), "{help}");
}

/// Found by a review: `check` said OK to a state folder that is a file, which `run` then refused.
#[test]
fn a_state_folder_that_is_a_file_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pm.json"), r#"{"id": "pm", "discordUserId": "1"}"#).unwrap();
    std::fs::write(dir.path().join("state"), "not a folder").unwrap();
    let out = check(dir.path(), &["--personas", ".", "--state", "state"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("state: is not a folder"), "{stderr}");
    // The sessions kept elsewhere (TM_STORE, which `run` reads): the folder is not looked at.
    let elsewhere = Command::new(env!("CARGO_BIN_EXE_turn-manager"))
        .args(["check", "--personas", ".", "--state", "state"])
        .env("TM_STORE", "postgres://tm@db/tm")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(elsewhere.status.success(), "{}", text(&elsewhere.stderr));
}
