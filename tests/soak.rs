//! The soak command as a process, briefly: 10 SIGKILLs of `turn-manager run` at random instants while scripted agents
//! talk in three channels of the local server, and not one broken promise.

use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

/// The figure of a row of the soak's table ("violations  0"), by its first words.
fn figure(table: &str, row: &str) -> Option<u64> {
    table
        .lines()
        .find(|line| line.starts_with(row) && line[row.len()..].starts_with("  "))
        .and_then(|line| line[row.len()..].split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Runs `turn-manager soak` with `extra` arguments; its standard output, and everything to show on a failure.
fn soak(folder: &std::path::Path, extra: &[&str]) -> (std::process::Output, String, String) {
    let output = Command::new(BINARY)
        .args(["soak", "--kills", "10", "--seed", "20261122", "--keep", "--work-dir"])
        .arg(folder)
        .args(extra)
        // A shell set up for production (found by a review: the soak's bots took its store and shards, and found
        // the soak's own sessions in none of them).
        .env("TM_STORE", "postgres://127.0.0.1:1/none")
        .env("TM_SHARDS", "1-1")
        .env("TM_TOTAL_SHARDS", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = std::fs::read_to_string(folder.join("bot.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    let report = format!(
        "{stdout}\n{stderr}\nthe bot's log ends with:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    (output, stdout, report)
}

#[test]
fn a_short_soak_of_ten_kills_finds_no_violation() {
    let work = tempfile::tempdir().unwrap();
    let folder = work.path().join("soak");
    let (output, stdout, report) = soak(&folder, &[]);
    assert!(output.status.success(), "{report}");
    assert_eq!(figure(&stdout, "violations"), Some(0), "{report}");
    assert_eq!(figure(&stdout, "kills (SIGKILL)"), Some(10), "{report}");
    assert_eq!(figure(&stdout, "restarts"), Some(11), "{report}");
    assert!(figure(&stdout, "turns").is_some_and(|n| n >= 10), "the agents kept talking: {report}");
    assert!(folder.join("state").join("channels").is_dir(), "the bot ran against this folder");
}

#[test]
fn a_short_soak_with_every_fault_group_injects_faults_and_finds_no_violation() {
    let work = tempfile::tempdir().unwrap();
    let folder = work.path().join("soak");
    let (output, stdout, report) = soak(&folder, &["--faults", "all"]);
    assert!(output.status.success(), "{report}");
    assert_eq!(figure(&stdout, "violations"), Some(0), "{report}");
    assert!(figure(&stdout, "faults injected").is_some_and(|n| n >= 1), "faults were injected: {report}");
}
