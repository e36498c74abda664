//! Signal grammar tests: the shipped presets read through `Config::parse` and matched against the seeds' own
//! examples (001's workflow signals, 002's `<chorus>` tags, 003's `<signal>` blocks), invisible characters, unknown
//! signals, and a configuration with many mistakes reported at once.

use super::*;
use crate::core::config::Config;

const ROUND_ROBIN: &str = include_str!("../../../examples/presets/round-robin/turn-manager.json");
const REVIEW: &str = include_str!("../../../examples/presets/review-workflow/turn-manager.json");
const CHORUS: &str = include_str!("../../../examples/presets/chorus/turn-manager.json");
const XML: &str = include_str!("../../../examples/presets/xml-signals/turn-manager.json");

fn preset(file: &str, text: &str) -> SignalRules {
    Config::parse(file, text).unwrap_or_else(|problems| panic!("{file} does not parse:\n{problems}")).signals
}

fn round_robin() -> SignalRules {
    preset("round-robin/turn-manager.json", ROUND_ROBIN)
}

fn review() -> SignalRules {
    preset("review-workflow/turn-manager.json", REVIEW)
}

fn chorus() -> SignalRules {
    preset("chorus/turn-manager.json", CHORUS)
}

fn xml() -> SignalRules {
    preset("xml-signals/turn-manager.json", XML)
}

fn id(raw: &str) -> PersonaId {
    PersonaId::parse(raw).unwrap()
}

/// The rule name, action, payload, task and display of what `author`'s `text` carries.
fn detect(
    rules: &SignalRules,
    author: &str,
    text: &str,
) -> (String, Action, Option<String>, Option<String>, Option<String>) {
    let d = rules.detect(text, &id(author)).unwrap_or_else(|| panic!("no signal found in {text:?}"));
    (d.rule.name.clone(), d.rule.action.clone(), d.payload, d.task, d.display)
}

fn name_of(rules: &SignalRules, author: &str, text: &str) -> Option<String> {
    rules.detect(text, &id(author)).map(|d| d.rule.name.clone())
}

// The round-robin preset: the default made explicit.

#[test]
fn round_robin_turn_complete_at_the_end_completes_and_is_stripped() {
    let rules = round_robin();
    let (name, action, _, _, display) = detect(&rules, "pm", "Here's my response.\n\nTURN_COMPLETE");
    assert_eq!(
        (name.as_str(), action, display.as_deref()),
        ("TURN_COMPLETE", Action::Complete, Some("Here's my response."))
    );
    assert!(rules.detect("My answer TURN_COMPLETE more text", &id("pm")).is_none());
    assert_eq!(rules.turn_end_hint(&id("pm")), "TURN_COMPLETE");
}

/// A keyword made bold, put in backticks or a code block, or followed by a full stop is no signal (spec 4.1's
/// pattern), but it looks like one to the people in the channel, and language models write it so: it is answered as
/// an unknown signal (the agent told within its turn), where before the turn timed out without a word.
#[test]
fn a_keyword_with_markdown_or_punctuation_after_it_is_answered_as_an_unknown_signal() {
    let rules = round_robin();
    for (text, line) in [
        ("Here it is. **TURN_COMPLETE**", "Here it is. **TURN_COMPLETE**"),
        ("Done.\n\n`TURN_COMPLETE`", "`TURN_COMPLETE`"),
        ("Done.\nTURN_COMPLETE.", "TURN_COMPLETE."),
        ("Done.\n_TURN_COMPLETE_ \u{200B}", "_TURN_COMPLETE_"),
        ("Done.\n```\nTURN_COMPLETE\n```", "TURN_COMPLETE\n```"),
    ] {
        assert!(rules.detect(text, &id("pm")).is_none(), "{text:?} is no signal");
        assert_eq!(rules.unknown_signal(text, &id("pm")), None, "no line of it looks like one to `unknownPattern`");
        assert_eq!(rules.near_miss(text, &id("pm")).as_deref(), Some(line), "{text:?}");
    }
    // Prose that names the keyword, a question, and a keyword run into a word are not (found by a review: three such
    // messages in a row ended the turn as a timeout).
    for plain in [
        "Done. I'll go on with it.",
        "Done!",
        "**Bold** words.",
        "TURN_COMPLETE is the word I end with, later",
        "When I am done I will write TURN_COMPLETE.",
        "Should I end this message with TURN_COMPLETE?",
        "TURN_COMPLETE?",
        "Done. See TURN_COMPLETE_",
        "Understood. I will end each of my turns with `TURN_COMPLETE`.",
        "The keyword is **TURN_COMPLETE**!",
        "The keyword is **TURN_COMPLETE*",
    ] {
        assert_eq!(rules.near_miss(plain, &id("pm")), None, "{plain:?}");
    }
    // Only the rules the author may use.
    let critics = preset(
        "c.json",
        r#"{"signals": {"rules": [{"name": "DONE", "pattern": "DONE", "from": ["critic"], "action": "complete"}]}}"#,
    );
    assert_eq!(critics.near_miss("**DONE**", &id("critic")).as_deref(), Some("**DONE**"));
    assert_eq!(critics.near_miss("**DONE**", &id("pm")), None, "not a signal pm may use");
    // Off with the unknown-signal rule.
    let off = preset("c.json", r#"{"signals": {"unknownPattern": null}}"#);
    assert_eq!(off.near_miss("Done. **TURN_COMPLETE**", &id("pm")), None);
}

#[test]
fn round_robin_pass_alone_passes_but_pass_ending_a_sentence_does_not() {
    let rules = round_robin();
    let (name, action, _, _, display) = detect(&rules, "dev", "  PASS \n");
    assert_eq!((name.as_str(), action, display), ("PASS", Action::Pass, None));
    assert!(rules.detect("cargo test: PASS", &id("dev")).is_none(), "a test result is not a pass");
    assert_eq!(name_of(&rules, "dev", "cargo test: PASS\nTURN_COMPLETE").as_deref(), Some("TURN_COMPLETE"));
}

// Seed 001, through the review-workflow preset: line-anchored signals with a task id and a body.

const READY_FOR_REVIEW: &str = "READY_FOR_REVIEW: task-42

Files Modified:
- src/auth/login.rs: checks the password against the stored hash
- src/auth/mod.rs: exports login

Tests Written:
- tests/login.rs: a wrong password is refused

Verification Results (self-verified):
- cargo test: PASS (local)

Summary: login checks the password";

#[test]
fn review_ready_for_review_routes_to_the_critic_with_its_task_and_keeps_the_body() {
    let (name, action, _, task, display) = detect(&review(), "developer", READY_FOR_REVIEW);
    assert_eq!(name, "READY_FOR_REVIEW");
    assert_eq!(action, Action::Route { to: id("critic"), stage: "review".into() });
    assert_eq!(task.as_deref(), Some("task-42"));
    let body = READY_FOR_REVIEW.split_once("\n\n").unwrap().1;
    assert_eq!(display.as_deref(), Some(body), "the signal line goes, the body stays as written");
    assert_eq!(review().unknown_signal(body, &id("developer")), None, "no line of the body looks like a signal");
}

#[test]
fn review_failed_routes_back_to_the_developer_and_keeps_the_prose_mention_of_another_signal() {
    let text = "REVIEW_FAILED: task-42

Files Reviewed:
- src/auth/login.rs

Issues Found:
- src/auth/login.rs:17: the hash is compared with ==, not in constant time

Required Fixes:
- compare in constant time

Priority: HIGH

Developer: Please address all issues above and signal READY_FOR_REVIEW when complete.";
    let rules = review();
    let (name, action, _, task, display) = detect(&rules, "critic", text);
    assert_eq!(name, "REVIEW_FAILED");
    assert_eq!(action, Action::Route { to: id("developer"), stage: "rework".into() });
    assert_eq!(task.as_deref(), Some("task-42"));
    let display = display.unwrap();
    assert!(display.starts_with("Files Reviewed:\n- src/auth/login.rs\n\nIssues Found:"), "{display}");
    assert!(display.ends_with("signal READY_FOR_REVIEW when complete."), "{display}");
    assert!(rules.unknown_signal("Priority: HIGH", &id("critic")).is_none(), "a capitalised word is not a signal");
}

#[test]
fn review_audit_passed_finishes_the_task_and_gives_the_floor_to_the_developer() {
    let text = "AUDIT_PASSED: task-42

Verification Results:
- a wrong password is refused: VERIFIED - tests/login.rs
- the hash is compared in constant time: VERIFIED - src/auth/login.rs:17

Commands Executed:
- cargo test (local): PASS

Summary: both criteria hold";
    let (name, action, _, task, display) = detect(&review(), "auditor", text);
    assert_eq!(name, "AUDIT_PASSED");
    assert_eq!(action, Action::FinishTask { to: Some(id("developer")) });
    assert_eq!(task.as_deref(), Some("task-42"));
    assert_eq!(display.as_deref(), Some(text.split_once("\n\n").unwrap().1));
}

#[test]
fn review_infra_blocked_beats_ready_for_review_in_the_same_message_whatever_their_order() {
    let rules = review();
    let body = "Issue: the test database does not start\nCommand: docker compose up db\nEnvironment: CI";
    for text in [
        format!("READY_FOR_REVIEW: task-7\n\nINFRA_BLOCKED: task-7\n\n{body}"),
        format!("INFRA_BLOCKED: task-7\n\nREADY_FOR_REVIEW: task-7\n\n{body}"),
    ] {
        let (name, action, payload, _, display) = detect(&rules, "developer", &text);
        assert_eq!((name.as_str(), action), ("INFRA_BLOCKED", Action::Escalate), "{text}");
        assert_eq!(payload.as_deref(), Some("task-7"));
        assert_eq!(display.as_deref(), Some(body), "both signal lines are stripped");
    }
}

#[test]
fn review_from_keeps_the_critic_from_seeking_divine_clarification() {
    let rules = review();
    let text =
        "SEEKING_DIVINE_CLARIFICATION\n\nTask: task-7\nQuestion: may the login page drop support for old browsers?";
    assert!(rules.detect(text, &id("critic")).is_none());
    assert!(!rules.has_signal(text, &id("critic")));
    assert_eq!(rules.strip(text, &id("critic")), text, "a signal the author may not use is not stripped");
    assert!(!rules.names_for(&id("critic")).contains(&"SEEKING_DIVINE_CLARIFICATION"));

    let (name, action, _, _, display) = detect(&rules, "developer", text);
    assert_eq!((name.as_str(), action), ("SEEKING_DIVINE_CLARIFICATION", Action::Escalate));
    assert!(display.unwrap().starts_with("Task: task-7"));
}

#[test]
fn review_signal_from_the_wrong_persona_is_not_detected() {
    assert!(review().detect("READY_FOR_REVIEW: task-1", &id("critic")).is_none());
    assert!(review().detect("AUDIT_PASSED: task-1", &id("developer")).is_none());
}

#[test]
fn review_a_signal_not_at_a_line_start_is_prose() {
    assert!(review().detect("I think this is READY_FOR_REVIEW: task-1", &id("developer")).is_none());
}

#[test]
fn review_a_signal_without_its_task_id_takes_no_word_of_the_next_line_and_is_answered_as_unknown() {
    // Found by a review: `\s*` crossed the line break, routing task "The" to the critic.
    let rules = review();
    let text = "READY_FOR_REVIEW:\nThe login form is done.";
    assert!(rules.detect(text, &id("developer")).is_none(), "no task id, no route");
    assert_eq!(rules.unknown_signal(text, &id("developer")).as_deref(), Some("READY_FOR_REVIEW:"));
    let (_, _, _, task, _) = detect(&rules, "developer", "READY_FOR_REVIEW: \t task-9\nDone.");
    assert_eq!(task.as_deref(), Some("task-9"), "spaces and tabs before the id are fine");
}

#[test]
fn review_unknown_signal_line_is_found_and_named_signals_listed() {
    let rules = review();
    let text = "Finished the login form.\nREVIEW_DONE: t1\n";
    assert!(rules.detect(text, &id("developer")).is_none());
    assert_eq!(rules.unknown_signal(text, &id("developer")).as_deref(), Some("REVIEW_DONE: t1"));
    let names = rules.names_for(&id("developer"));
    assert!(names.contains(&"READY_FOR_REVIEW") && !names.contains(&"REVIEW_PASSED"), "{names:?}");
}

/// Found by a review: beside a signal a rule reads (`CHECKPOINT: step-1`, itself an upper-case word and a colon),
/// the mistyped line is the one found, and a line only a rule the author may not use reads is one too.
#[test]
fn review_unknown_signal_skips_the_lines_a_rule_matched() {
    let rules = review();
    let text = "CHECKPOINT: step-1\nREADY_FOR_REVEIW: task-1";
    assert_eq!(rules.detect(text, &id("developer")).map(|d| d.rule.name.as_str()), Some("CHECKPOINT"));
    assert_eq!(rules.unknown_signal(text, &id("developer")).as_deref(), Some("READY_FOR_REVEIW: task-1"));
    assert_eq!(rules.unknown_signal("CHECKPOINT: step-1\nDone.", &id("developer")), None, "its line is a signal");
    let critic_says = "CHECKPOINT: step-1\nREADY_FOR_REVIEW: task-1";
    assert_eq!(rules.unknown_signal(critic_says, &id("critic")).as_deref(), Some("READY_FOR_REVIEW: task-1"));
}

// Seed 002, through the chorus preset: its test list.

#[test]
fn chorus_parses_complete() {
    let (name, action, payload, _, display) = detect(&chorus(), "coder", "Parser done.\n<chorus>COMPLETE</chorus>");
    assert_eq!((name.as_str(), action, payload), ("COMPLETE", Action::Complete, None));
    assert_eq!(display.as_deref(), Some("Parser done."));
}

#[test]
fn chorus_parses_blocked_with_reason() {
    let text = "<chorus>BLOCKED: missing API key for staging</chorus>";
    let (name, action, payload, _, display) = detect(&chorus(), "coder", text);
    assert_eq!((name.as_str(), action), ("BLOCKED", Action::Escalate));
    assert_eq!(payload.as_deref(), Some("missing API key for staging"));
    assert_eq!(display, None);
    let (name, _, payload, _, _) = detect(&chorus(), "coder", "<chorus>BLOCKED</chorus>");
    assert_eq!((name.as_str(), payload), ("BLOCKED", None), "the reason is optional");
}

#[test]
fn chorus_parses_needs_help_with_question_and_needs_human_with_reason() {
    let rules = chorus();
    let (name, action, payload, _, _) = detect(&rules, "planner", "<chorus>NEEDS_HELP: which database?</chorus>");
    assert_eq!((name.as_str(), action, payload.as_deref()), ("NEEDS_HELP", Action::Escalate, Some("which database?")));
    let (name, _, payload, _, _) = detect(&rules, "coder", "<chorus>NEEDS_HUMAN: both sides changed main.rs</chorus>");
    assert_eq!((name.as_str(), payload.as_deref()), ("NEEDS_HUMAN", Some("both sides changed main.rs")));
    let (name, action, _, _, _) = detect(&rules, "coder", "Merged.<chorus>RESOLVED</chorus>");
    assert_eq!((name.as_str(), action), ("RESOLVED", Action::Complete));
}

#[test]
fn chorus_parses_progress_and_clamps_the_percentage() {
    let rules = chorus();
    for (written, payload, clamped) in [("45", "45", 45), ("45%", "45", 45), ("150", "150", 100), ("-5", "-5", 0)] {
        let text = format!("Working.\n<chorus>PROGRESS: {written}</chorus>");
        let (name, action, found, _, display) = detect(&rules, "coder", &text);
        assert_eq!((name.as_str(), action), ("PROGRESS", Action::Progress { extend_seconds: 30 }));
        assert_eq!(found.as_deref(), Some(payload));
        assert_eq!(percent(&found.unwrap()), Some(clamped), "{written}");
        assert_eq!(display.as_deref(), Some("Working."));
    }
    assert!(rules.detect("<chorus>PROGRESS: about half</chorus>", &id("coder")).is_none());
}

#[test]
fn chorus_no_signal_is_none() {
    let rules = chorus();
    assert!(rules.detect("Still reading the code.", &id("coder")).is_none());
    assert!(rules.detect("I will say COMPLETE when done.", &id("coder")).is_none());
    assert!(rules.detect("Done.\nTURN_COMPLETE", &id("coder")).is_none(), "the preset's rules replace the default");
}

#[test]
fn chorus_signal_in_the_middle_of_output_is_found_and_cut_out() {
    let text = "Step 1 done. <chorus>PROGRESS: 50</chorus> Now step 2.";
    let (name, _, payload, _, display) = detect(&chorus(), "coder", text);
    assert_eq!((name.as_str(), payload.as_deref()), ("PROGRESS", Some("50")));
    assert_eq!(display.as_deref(), Some("Step 1 done.  Now step 2."));
}

#[test]
fn chorus_several_signals_priority_decides_and_every_tag_is_removed() {
    let rules = chorus();
    let cases = [
        ("<chorus>PROGRESS: 100</chorus>\nAll done.\n<chorus>COMPLETE</chorus>", "COMPLETE"),
        ("<chorus>COMPLETE</chorus>\nBut: <chorus>NEEDS_HELP: is this right?</chorus>", "NEEDS_HELP"),
        ("<chorus>NEEDS_HELP: which db?</chorus> <chorus>BLOCKED: no db</chorus>", "BLOCKED"),
        // BLOCKED and NEEDS_HUMAN tie; the one listed first in the preset wins, wherever it is in the text.
        ("<chorus>NEEDS_HUMAN: conflict</chorus> <chorus>BLOCKED: no db</chorus>", "BLOCKED"),
    ];
    for (text, winner) in cases {
        let d = rules.detect(text, &id("coder")).unwrap();
        assert_eq!(d.rule.name, winner, "{text}");
        let shown = d.display.unwrap_or_default();
        assert!(!shown.contains("<chorus>") && !shown.contains("</chorus>"), "{shown:?}");
    }
}

#[test]
fn chorus_payloads_are_not_greedy_and_stop_at_their_own_tag() {
    let rules = chorus();
    let text = "<chorus>BLOCKED: no db</chorus> and later <chorus>NEEDS_HUMAN: conflict</chorus>";
    let (_, _, payload, _, display) = detect(&rules, "coder", text);
    assert_eq!(payload.as_deref(), Some("no db"));
    assert_eq!(display.as_deref(), Some("and later"));
    // An empty reason does not reach into the next tag.
    let (name, _, payload, _, _) = detect(&rules, "coder", "<chorus>BLOCKED:</chorus> x <chorus>COMPLETE</chorus>");
    assert_eq!((name.as_str(), payload), ("BLOCKED", None));
    let (_, _, payload, _, _) = detect(&rules, "coder", "<chorus>BLOCKED: the key\nexpired a < b</chorus>");
    assert_eq!(payload.as_deref(), Some("the key\nexpired a < b"), "a reason may span lines and hold '<'");
}

#[test]
fn chorus_unknown_tag_is_an_unknown_signal() {
    let rules = chorus();
    let text = "Finished.\nI think <chorus>DONE</chorus>";
    assert!(rules.detect(text, &id("coder")).is_none());
    assert_eq!(rules.unknown_signal(text, &id("coder")).as_deref(), Some("I think <chorus>DONE</chorus>"));
    assert_eq!(rules.unknown_signal("No tags here: plain prose.", &id("coder")), None);
}

// Seed 003, through the xml-signals preset.

const NEED_TURN: &str = r#"The search encountered an error. Let me try a different approach.

<signal type="need_turn">
  <reason>search_code failed, trying vault search instead</reason>
  <confidence>0.8</confidence>
</signal>"#;

#[test]
fn xml_need_turn_keeps_the_floor_with_its_reason_and_is_stripped() {
    let (name, action, payload, _, display) = detect(&xml(), "oracle", NEED_TURN);
    assert_eq!((name.as_str(), action), ("need_turn", Action::Keep { max_keeps: 3 }));
    assert_eq!(payload.as_deref(), Some("search_code failed, trying vault search instead"));
    let display = display.unwrap();
    assert_eq!(display, "The search encountered an error. Let me try a different approach.");
    assert!(!display.contains("<signal") && !display.contains("confidence"));
}

#[test]
fn xml_context_sufficient_completes_the_turn() {
    let text = "The auth function checks the token.\n<signal type=\"context_sufficient\">\n  <reason>found auth.py \
                and its tests</reason>\n  <confidence>0.95</confidence>\n</signal>\n";
    let (name, action, _, _, display) = detect(&xml(), "researcher", text);
    assert_eq!((name.as_str(), action), ("context_sufficient", Action::Complete));
    assert_eq!(display.as_deref(), Some("The auth function checks the token."));
}

#[test]
fn xml_stuck_escalates_with_its_reason_or_its_blocker() {
    let rules = xml();
    let with_blocker = "I cannot go on.\n<signal type=\"stuck\">\n  <attempted>search_code, vault search</attempted>\n  \
                        <blocker>the index is not built</blocker>\n  <confidence>0.9</confidence>\n</signal>";
    let (name, action, payload, _, display) = detect(&rules, "oracle", with_blocker);
    assert_eq!((name.as_str(), action), ("stuck", Action::Escalate));
    assert_eq!(payload.as_deref(), Some("the index is not built"));
    assert_eq!(display.as_deref(), Some("I cannot go on."));
    let with_reason = "<signal type=\"stuck\"><reason>no access to the repo</reason></signal>";
    assert_eq!(detect(&rules, "oracle", with_reason).2.as_deref(), Some("no access to the repo"));
}

#[test]
fn xml_confidence_is_ignored_wherever_it_stands() {
    let text = "<signal type=\"need_turn\">\n<confidence>0.1</confidence>\n<reason>retry</reason>\n</signal>";
    let (name, _, payload, _, display) = detect(&xml(), "oracle", text);
    assert_eq!((name.as_str(), payload.as_deref(), display), ("need_turn", Some("retry"), None));
}

#[test]
fn xml_block_without_a_reason_still_counts_and_its_capture_stays_inside_it() {
    let text = "<signal type=\"need_turn\"><confidence>0.5</confidence></signal>\nMiddle prose.\n\
                <signal type=\"context_sufficient\"><reason>enough</reason></signal>";
    let rules = xml();
    let (name, _, _, _, display) = detect(&rules, "oracle", text);
    assert_eq!(name, "context_sufficient", "higher priority than need_turn");
    assert_eq!(display.as_deref(), Some("Middle prose."), "the prose between the blocks stays");
    let alone = "<signal type=\"need_turn\"><confidence>0.5</confidence></signal> <signal type=\"x\"><reason>r</reason></signal>";
    let (name, _, payload, _, _) = detect(&rules, "oracle", alone);
    assert_eq!((name.as_str(), payload), ("need_turn", None), "the reason of another block is not taken");
}

#[test]
fn xml_stuck_outranks_context_sufficient_and_need_turn() {
    let text = "<signal type=\"need_turn\"><reason>a</reason></signal>\n\
                <signal type=\"context_sufficient\"></signal>\n<signal type=\"stuck\"><reason>b</reason></signal>";
    let (name, _, payload, _, display) = detect(&xml(), "oracle", text);
    assert_eq!((name.as_str(), payload.as_deref(), display), ("stuck", Some("b"), None));
}

#[test]
fn xml_single_quotes_and_extra_attributes_are_accepted() {
    let text = "ok <signal type='need_turn' v=\"2\"><reason>again</reason></signal>";
    assert_eq!(detect(&xml(), "oracle", text).2.as_deref(), Some("again"));
}

#[test]
fn xml_unknown_type_is_an_unknown_signal() {
    let rules = xml();
    let text = "Here.\n<signal type=\"done\"><reason>r</reason></signal>";
    assert!(rules.detect(text, &id("oracle")).is_none());
    assert_eq!(
        rules.unknown_signal(text, &id("oracle")).as_deref(),
        Some("<signal type=\"done\"><reason>r</reason></signal>")
    );
}

// Invisible characters (spec 4.1) around signals.

#[test]
fn invisible_characters_around_turn_complete_are_detected_and_stripped() {
    let rules = round_robin();
    for text in [
        "Done.\u{200B}TURN_COMPLETE",
        "Done. TURN_COMPLETE\u{2060}",
        "Done.\n\u{200E}TURN_COMPLETE\u{200F}\n",
        "\u{FEFF}Done. \u{FEFF}TURN_COMPLETE\u{200B}\u{200B}",
    ] {
        let d = rules.detect(text, &id("pm")).unwrap_or_else(|| panic!("{text:?} not detected"));
        assert_eq!(d.rule.name, "TURN_COMPLETE");
        assert_eq!(d.display.as_deref(), Some("Done."), "{text:?}");
        assert_eq!(rules.strip(text, &id("pm")), "Done.");
    }
}

#[test]
fn invisible_characters_at_a_line_start_do_not_hide_a_line_signal() {
    let rules = review();
    for mark in ["\u{200B}", "\u{FEFF}", "\u{200E}", "\u{2060}\u{200F}"] {
        let text = format!("Implemented it.\n{mark}READY_FOR_REVIEW: task-3\u{200B}\nSummary: done");
        let (name, _, _, task, display) = detect(&rules, "developer", &text);
        assert_eq!(name, "READY_FOR_REVIEW");
        assert_eq!(task.as_deref(), Some("task-3"), "the id stops before the invisible character");
        assert_eq!(display.as_deref(), Some("Implemented it.\nSummary: done"), "{text:?}");
    }
}

// Configuration errors: every mistake at once, each at its rule, field and line.

#[test]
fn every_mistake_in_the_rules_is_reported_at_once_with_its_field_and_line() {
    let text = r#"{
  "signals": {
    "rules": [
      { "name": "ok", "pattern": "OK", "action": "complete" },
      { "name": "bad_regex", "pattern": "READY(", "action": "complete" },
      { "name": "typo", "pattern": "DONE",
        "action": "compelte" },
      { "name": "route", "pattern": "GO: (?P<task>\\S+)", "at": "line", "action": "route" },
      { "name": "group", "pattern": "P: (?P<paylod>\\d+)", "action": "record" },
      { "name": "hand", "pattern": "HANDOFF", "action": "handoff" },
      { "name": "ok_again", "pattern": "OK", "action": "pass" },
      { "name": "ok", "pattern": "OK!", "action": "complete" },
      { "name": "slash", "pattern": "DONE\\", "action": "complete" }
    ]
  }
}"#;
    let problems = Config::parse("c.json", text).unwrap_err();
    let lines: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
    let expected = [
        "error: c.json:5: field \"signals.rules[1].pattern\" does not compile: unclosed group",
        "error: c.json:7: field \"signals.rules[2].action\" is \"compelte\"; did you mean \"complete\"? use one of \
         \"complete\", \"pass\", \"handoff\", \"route\", \"finishTask\", \"keep\", \"progress\", \"escalate\", \
         \"record\", \"end\"",
        "error: c.json:8: field \"signals.rules[3]\" has action \"route\" but no \"to\": name the persona the task \
         goes to",
        "error: c.json:9: field \"signals.rules[4].pattern\" has a group named \"paylod\"; the groups read are \
         (?P<payload>...) and (?P<task>...)",
        "error: c.json:10: field \"signals.rules[5].pattern\" has action \"handoff\" without \"to\", so its pattern \
         needs a (?P<payload>...) group naming the persona",
        // The pattern's own error, not the anchored wrapping's "unclosed group" (found by a review).
        "error: c.json:13: field \"signals.rules[8].pattern\" does not compile: incomplete escape sequence, reached \
         end of pattern prematurely",
        "error: c.json:11: field \"signals.rules[6].priority\" rule \"ok_again\" can never win: rule 0 (\"ok\") has \
         the same pattern, a priority at least as high and every sender this rule has; give it a higher priority or \
         remove one of them",
        "error: c.json:12: field \"signals.rules[7].name\" \"ok\" is also the name of rule 0; names must be unique",
    ];
    assert_eq!(lines, expected, "\n{}", lines.join("\n"));
}

/// Found by a review: a rule was taken for one that can never win only behind a rule with the very same senders, and
/// never behind `signal`'s keywords, matched before every listed rule: a `pass` rule "PASS" beside the alternative
/// "PASS" (spec 4.2's seed 004) passed `check` without a word, and every "PASS" completed the turn instead. Behind a
/// keyword it is a warning (a configuration that ran must still start), and none for a rule that is the keyword
/// again (a preset's `TURN_COMPLETE` beside `signal`). A keyword listed twice was kept twice.
#[test]
fn a_rule_behind_a_keyword_or_a_rule_for_more_senders_can_never_win_and_a_keyword_is_kept_once() {
    let said = |text: &str| -> Vec<String> {
        let (_, problems) = Config::parse_partly("c.json", text);
        problems.iter().map(ToString::to_string).collect()
    };
    let cases = [
        (
            r#"{"signals": {"rules": [
                {"name": "done", "pattern": "DONE", "action": "complete"},
                {"name": "done_lead", "pattern": "DONE", "from": ["dev"], "action": "end"}]}}"#,
            "error: c.json:3: field \"signals.rules[1].priority\" rule \"done_lead\" can never win: rule 0",
        ),
        (
            r#"{"signal": {"alternatives": ["PASS"]},
                "signals": {"rules": [{"name": "pass", "pattern": "PASS", "action": "pass"}]}}"#,
            "warning: c.json:2: field \"signals.rules[0].priority\" rule \"pass\" can never win: the keyword \"PASS\"",
        ),
        (
            r#"{"signal": {"alternatives": ["PASS"]},
                "signals": {"rules": [{"name": "PASS", "pattern": "PASS", "priority": 1, "action": "pass"}]}}"#,
            "warning: c.json:2: field \"signals.rules[0].name\" \"PASS\" is also a keyword",
        ),
    ];
    for (text, expected) in cases {
        let lines = said(text);
        assert!(lines.len() == 1 && lines[0].starts_with(expected), "{expected}: {lines:#?}");
    }
    // The keyword again, as a rule: the same signal twice, nothing to say.
    let again = r#"{"signal": {"turnComplete": "TURN_COMPLETE"},
        "signals": {"rules": [{"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"}]}}"#;
    assert_eq!(said(again), Vec::<String>::new());
    // Not shadowed: fewer senders before, or a higher priority.
    let fine = r#"{"signals": {"rules": [
        {"name": "done_lead", "pattern": "DONE", "from": ["dev"], "action": "end"},
        {"name": "done", "pattern": "DONE", "action": "complete"},
        {"name": "done_pm", "pattern": "DONE", "from": ["pm"], "priority": 1, "action": "pass"}]}}"#;
    assert_eq!(said(fine), Vec::<String>::new(), "every rule may win");
    let config = Config::parse("c.json", r#"{"signal": {"turnComplete": "AB", "alternatives": ["CD", "AB", "CD"]}}"#)
        .expect("valid");
    let names: Vec<&str> = config.signals.rules().iter().map(|rule| rule.name.as_str()).collect();
    assert_eq!(names, ["AB", "CD"], "each once");
}

/// Found by a review: a pattern whose parentheses the anchor's wrapping balanced compiled, and matched outside its
/// anchor (`DONE)|(READY`, at the end: `DONE` anywhere in a message). It is refused as it does not compile alone.
#[test]
fn an_unbalanced_pattern_never_escapes_its_anchor() {
    for (at, field) in [("end", "signals.rules[0].pattern"), ("line", "signals.rules[0].pattern")] {
        let text = format!(
            r#"{{"signals": {{"rules": [{{"name": "x", "pattern": "DONE)|(READY", "at": "{at}", "action": "complete"}}]}}}}"#
        );
        let problems = Config::parse("c.json", &text).unwrap_err();
        assert_eq!(problems.0.len(), 1, "{problems}");
        assert_eq!(problems.0[0].field, field);
        assert!(problems.0[0].message.starts_with("does not compile: unopened group"), "{problems}");
    }
    let text = r#"{"signals": {"unknownPattern": "X)|(Y"}}"#;
    assert!(Config::parse("c.json", text).is_err(), "the unknown-signal pattern too");
}

#[test]
fn a_verbose_pattern_ending_in_a_comment_is_refused_with_how_to_fix_it_never_a_panic() {
    let text = r##"{
  "signals": {
    "unknownPattern": "(?x)[A-Z]+: # looks like a signal",
    "rules": [{ "name": "done", "pattern": "(?x) DONE # the end", "action": "complete" }]
  }
}"##;
    let problems = Config::parse("c.json", text).unwrap_err();
    let lines: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for field in ["signals.unknownPattern", "signals.rules[0].pattern"] {
        let said = |l: &&String| l.contains(field) && l.contains("end a `#` comment with a new line");
        assert!(lines.iter().any(|l| said(&l)), "{field}: {lines:#?}");
    }
    // With the new line it asks for, both are used.
    let fixed = text.replace("a signal\"", "a signal\\n\"").replace("the end\"", "the end\\n\"");
    let config = Config::parse("c.json", &fixed).unwrap();
    let found = crate::core::signals::rules::find_in(&config.signals.rules()[0], "All done. DONE");
    assert!(found.is_some());
}

/// Found by a review: a rule whose pattern can match nothing at a message's end (`\b(?:DONE|FINISHED)?\.?`, which
/// the check let through, as it does not match an empty message) stripped the same empty match for ever, and the
/// channel stopped. An empty match is no signal.
#[test]
fn a_pattern_that_can_match_nothing_at_the_end_is_no_signal_there_and_never_hangs_detection() {
    let text = r#"{"signals": {"rules": [
        {"name": "DONE", "pattern": "\\b(?:DONE|FINISHED)?\\.?", "action": "complete"}]}}"#;
    let rules = Config::parse("c.json", text).unwrap_or_else(|p| panic!("{p}")).signals;
    let (answer, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let plain = rules.detect("I agree, let's go with option B", &id("pm")).map(|d| d.display);
        let ended = rules.detect("All set.\nDONE", &id("pm")).map(|d| d.rule.name.clone());
        let _ = answer.send((plain, ended));
    });
    let (plain, ended) = ended.recv_timeout(std::time::Duration::from_secs(10)).expect("detection never returned");
    assert_eq!(plain, None, "nothing written, no signal");
    assert_eq!(ended.as_deref(), Some("DONE"), "the keyword itself still ends the turn");
}

/// Found by a review of the fix above: a match of nothing but the anchor's whitespace (a trailing invisible
/// character, a line's indentation) around a pattern that matched nothing was still a signal.
#[test]
fn a_match_of_nothing_but_whitespace_is_no_signal() {
    let parse = |text: &str| Config::parse("c.json", text).unwrap_or_else(|p| panic!("{p}")).signals;
    let end = parse(
        r#"{"signals": {"rules": [{"name": "DONE", "pattern": "\\b(?:DONE|FINISHED)?\\.?", "action": "complete"}]}}"#,
    );
    assert!(end.detect("I agree, let's go with option B\u{200B}", &id("pm")).is_none());
    assert!(end.detect("I agree, let's go with option B  \n", &id("pm")).is_none());
    let line = parse(
        r#"{"signals": {"rules": [
        {"name": "CHECKPOINT", "pattern": "\\b(?:CHECKPOINT:\\s*(?P<payload>\\S+))?", "at": "line", "action": "record"},
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"}]}}"#,
    );
    assert!(line.detect("Plan:\n  step one", &id("pm")).is_none());
    let found = line.detect("Plan:\n  CHECKPOINT: c1", &id("pm")).expect("the checkpoint is a signal");
    assert_eq!(found.payload.as_deref(), Some("c1"));
}

/// Found by two reviews: announcements named the first `complete` rule, which could be an alternative keyword
/// (listed first, being longer) or a rule only another persona may use: an agent that did as told lost its turn.
#[test]
fn announcements_name_the_configured_keyword_or_a_rule_the_holder_may_use() {
    let parse = |text: &str| Config::parse("c.json", text).unwrap_or_else(|p| panic!("{p}")).signals;
    let legacy = parse(r#"{"signal": {"turnComplete": "DONE", "alternatives": ["OVER_TO_YOU"]}}"#);
    assert_eq!(legacy.turn_end_hint(&id("dev")), "DONE");
    let rules = parse(
        r#"{"signals": {"rules": [
        {"name": "SHIP_IT", "pattern": "SHIP_IT", "from": ["critic"], "action": "complete"},
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"}]}}"#,
    );
    assert_eq!(rules.turn_end_hint(&id("dev")), "TURN_COMPLETE", "dev may not use SHIP_IT");
    assert_eq!(rules.turn_end_hint(&id("critic")), "SHIP_IT");
    assert!(rules.detect(&format!("b {}", rules.turn_end_hint(&id("dev"))), &id("dev")).is_some());
}

#[test]
fn a_tag_character_or_a_musical_format_control_after_the_keyword_hides_nothing() {
    let rules = SignalRules::default();
    for invisible in ['\u{E0001}', '\u{E0020}', '\u{E007F}', '\u{1D173}'] {
        let d = rules.detect(&format!("Done. TURN_COMPLETE{invisible}"), &id("pm"));
        assert_eq!(d.and_then(|d| d.display).as_deref(), Some("Done."), "U+{:04X}", u32::from(invisible));
    }
}

#[test]
fn a_signal_line_between_crlf_paragraphs_leaves_them_one_blank_line_apart_as_with_lf() {
    let rules = r#"{"signals": {"rules": [
        {"name": "CHECKPOINT", "pattern": "CHECKPOINT:\\s*(?P<payload>\\S+)", "at": "line", "action": "record"},
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"}]}}"#;
    let rules = Config::parse("c.json", rules).unwrap_or_else(|p| panic!("{p}")).signals;
    let shown = |text: &str| rules.detect(text, &id("pm")).and_then(|d| d.display);
    assert_eq!(shown("First.\n\nCHECKPOINT: c1\n\nSecond.").as_deref(), Some("First.\n\nSecond."));
    assert_eq!(shown("First.\r\n\r\nCHECKPOINT: c1\r\n\r\nSecond.").as_deref(), Some("First.\r\n\r\nSecond."));
    assert_eq!(shown("First.\n  \nCHECKPOINT: c1\n\nSecond.").as_deref(), Some("First.\n  \nSecond."));
}

/// Found by a review: the tag characters that spell a region's flag after 🏴 were taken as invisible, so a flag
/// before the keyword was reposted cut to a black flag. Tag characters after anything else still hide nothing.
#[test]
fn a_regions_flag_before_the_keyword_is_shown_whole() {
    let scotland = "\u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}";
    let rules = SignalRules::default();
    for text in [format!("Go {scotland} TURN_COMPLETE"), format!("Go {scotland}\nTURN_COMPLETE\u{E0020}")] {
        let d = rules.detect(&text, &id("pm")).expect("the signal");
        assert_eq!(d.display.as_deref(), Some(format!("Go {scotland}").as_str()), "{text:?}");
    }
    assert_eq!(text::trim_blank(&format!("{scotland}\u{E0020} ")), scotland);
}

/// Found by a review: a rule with only a warning (a persona named twice in `from`) was left out of the rules, so
/// `check` said OK and its signal never ended a turn. A warning changes nothing that is read.
#[test]
fn a_rule_with_a_warning_is_kept_and_its_signal_detected() {
    let text = r#"{"signals": {"rules": [
        {"name": "DONE", "pattern": "DONE", "from": ["pm", "dev", "pm"], "action": "complete"}
    ]}}"#;
    let (config, problems) = Config::parse_partly("c.json", text);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].to_string().contains("names \"pm\" twice"), "{problems:?}");
    let d = config.signals.detect("All done. DONE", &id("pm")).expect("the warned rule is read");
    assert_eq!(d.rule.name, "DONE");
}
