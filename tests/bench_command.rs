//! `turn-manager bench` as a process, with tiny numbers: it runs every part against this build and prints every
//! figure. Timings are never asserted: only that each figure was measured.

use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

#[test]
fn a_tiny_bench_runs_every_part_and_prints_every_figure() {
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(BINARY)
        .args(["bench", "--quick", "--channels", "3", "--active", "2", "--sessions", "10", "--messages", "3"])
        .args(["--turn-seconds", "1", "--window-ms", "300", "--work-dir"])
        .arg(work.path().join("bench"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for figure in [
        "| handoff, 1 channel, p50 / p99 / max |",
        "| handoff, 2 channels active, p50 / p99 / max |",
        "| handoff, 3 channels active, p50 / p99 / max |",
        "| completed turns/s, 3 channels |",
        "| non-signal messages/s, 3 channels |",
        "| timeout lateness, 3 channels, p50 / p99 / max |",
        "| REST calls per completed turn |",
        "| RSS per idle session, 10 saved sessions |",
        "| start-up to IDENTIFY, 10 saved sessions (0 sessions) |",
        "| RSS idle, 0 / 10 saved sessions |",
    ] {
        let row = stdout.lines().find(|l| l.starts_with(figure)).unwrap_or_else(|| panic!("no {figure} in:\n{stdout}"));
        let measured = row.trim_start_matches(figure).split('|').next().unwrap().trim();
        assert!(
            !measured.is_empty() && measured != "—" && !measured.contains("no samples") && !measured.contains('?'),
            "{figure} was not measured: {row}"
        );
    }
    assert!(stdout.contains("(this build)"), "{stdout}");
    assert!(stdout.contains("REST per turn: DELETE /channels/:id/messages/:id 1.00"), "{stdout}");
    assert!(!work.path().join("bench").exists(), "the work folder is removed after a successful run");
}

#[test]
fn a_missing_bot_binary_is_refused_before_anything_runs() {
    let out = Command::new(BINARY).args(["bench", "--bot-binary", "/nonexistent/turn-manager"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/turn-manager: no such file"));
}
