//! `demo --preset review-workflow` end to end, through the functions the command runs: the preset's configuration
//! and personas, scripted agents speaking seed 001's protocol, and the real bot, on the local Discord-compatible
//! server over real sockets. The task must go developer → critic → developer (review failed) → critic → auditor →
//! done, and the channel must never keep a signal line (relay mode strips them).

use std::path::Path;
use turn_manager::core::session::history::EventKind;
use turn_manager::demo::preset::{self, PRESETS_DIR};
use turn_manager::demo::{self, PresetOutcome, TaskOutcome};

const SIGNALS: [&str; 4] = ["READY_FOR_REVIEW:", "REVIEW_FAILED:", "REVIEW_PASSED:", "AUDIT_PASSED:"];

async fn play_review_workflow() -> TaskOutcome {
    let preset = preset::load(Path::new(PRESETS_DIR), "review-workflow").expect("the preset loads");
    let state = tempfile::tempdir().expect("state folder");
    match demo::run_preset(preset, 1, state.path()).await.expect("the demo runs") {
        PresetOutcome::Task(outcome) => outcome,
        PresetOutcome::Rounds(_) => panic!("review-workflow has a script"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_workflow_demo_takes_the_task_through_a_failed_review_to_done() {
    let outcome = play_review_workflow().await;

    // The engine's own record: every turn's end, in order, with who ended it and where the task went, up to the
    // task's end (the floor then goes back to the developer, whose turn the demo's stop cuts short).
    let mut moves: Vec<(String, String, String)> = Vec::new();
    for e in &outcome.history {
        let who = e.agent_id.as_ref().map(|a| a.to_string()).unwrap_or_default();
        match &e.kind {
            EventKind::Routed(routed) => {
                assert_eq!(routed.task.as_deref(), Some("task-1"));
                moves.push((who, routed.signal.clone(), routed.stage.clone()));
            }
            EventKind::TaskFinished(finished) => {
                moves.push((who, finished.signal.clone(), format!("{} done", finished.task)));
                break;
            }
            EventKind::TurnComplete { .. } | EventKind::TurnTimeout { .. } => {
                moves.push((who, e.kind.name().to_owned(), String::new()))
            }
            _ => {}
        }
    }
    let expected = [
        ("developer", "READY_FOR_REVIEW", "review"),
        ("critic", "REVIEW_FAILED", "rework"),
        ("developer", "READY_FOR_REVIEW", "review"),
        ("critic", "REVIEW_PASSED", "audit"),
        ("auditor", "AUDIT_PASSED", "task-1 done"),
    ];
    let moves: Vec<(&str, &str, &str)> = moves.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    assert_eq!(moves, expected, "{:#?}", outcome.history);
    assert_eq!(outcome.stage.as_deref(), Some("done"), "the session holds the task as done");
    assert_eq!(outcome.path(), ["developer", "critic", "developer", "critic", "auditor", "done"]);

    // The channel as a person sees it: the five answers, relayed in that order, none keeping its signal line.
    let relayed: Vec<&str> = outcome.channel.iter().filter(|m| m.from_webhook).map(|m| m.author.as_str()).collect();
    assert_eq!(relayed, ["Developer", "Critic", "Developer", "Critic", "Auditor"]);
    for message in &outcome.channel {
        let signal_line = message.content.lines().find(|line| SIGNALS.iter().any(|s| line.trim_start().starts_with(s)));
        assert_eq!(signal_line, None, "{} shows a signal line in {:?}", message.author, message.content);
    }
    assert!(outcome.channel.iter().any(|m| m.from_webhook && m.content.contains("Issues Found:")));

    demo::summarize_preset(&PresetOutcome::Task(outcome)).expect("the summary finds the whole workflow");
}

const BINARY: &str = env!("CARGO_BIN_EXE_turn-manager");

#[test]
fn the_command_plays_the_preset_and_prints_the_tasks_path() {
    let out = std::process::Command::new(BINARY)
        .args(["demo", "--preset", "review-workflow"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for expected in [
        "turn-manager: ▶️ Turn management started. Roster: developer, critic, auditor.",
        "Critic (relayed): Files Reviewed:",
        "Summary: task-1: developer → critic (review) → developer (rework) → critic (review) → auditor (audit) → done",
        "5 handoff(s) by signal (READY_FOR_REVIEW, REVIEW_FAILED, READY_FOR_REVIEW, REVIEW_PASSED, AUDIT_PASSED)",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
}

#[test]
fn an_unknown_preset_is_refused_with_the_presets_found() {
    let out = std::process::Command::new(BINARY)
        .args(["demo", "--preset", "review-workflw"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("there is no preset \"review-workflw\" in examples/presets"), "{stderr}");
    assert!(stderr.contains("the presets found are: ") && stderr.contains("review-workflow"), "{stderr}");
}
