//! The signal grammar in the engine (spec 4.2): every action and every recovery rule, on explicit instants.

use super::*;
use crate::core::templates::Template;

/// A configuration of `signals` (JSON), parsed as a user's file would be.
fn config(signals: &str) -> Config {
    Config::parse("c.json", &format!(r#"{{"signals": {signals}}}"#)).unwrap_or_else(|p| panic!("{p}"))
}

/// Every action, on keywords at the end of a message, with `payload` groups where the action reads one.
const RULES: &str = r#"{"rules": [
    {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
    {"name": "PASS", "pattern": "PASS", "action": "pass"},
    {"name": "HANDOFF", "pattern": "HANDOFF:\\s*(?P<payload>\\S+)", "action": "handoff"},
    {"name": "READY", "pattern": "READY:\\s*(?P<task>\\S+)", "at": "line", "action": "route", "to": "critic",
     "stage": "review"},
    {"name": "SHIPPED", "pattern": "SHIPPED:\\s*(?P<task>\\S+)", "at": "line", "action": "finishTask"},
    {"name": "MORE", "pattern": "<more>(?P<payload>[^<]*)</more>", "at": "anywhere", "action": "keep",
     "maxKeeps": 2},
    {"name": "PROGRESS", "pattern": "PROGRESS:\\s*(?P<payload>-?\\d+)", "at": "line", "action": "progress",
     "extendSeconds": 30},
    {"name": "BLOCKED", "pattern": "BLOCKED:\\s*(?P<payload>.+)", "at": "line", "action": "escalate",
     "priority": 10},
    {"name": "CHECKPOINT", "pattern": "CHECKPOINT:\\s*(?P<payload>\\S+)", "at": "line", "action": "record"},
    {"name": "FIN", "pattern": "FIN", "action": "end", "from": ["critic"]}
  ]}"#;

fn grammar() -> Fixture {
    Fixture::with_config(config(RULES))
}

fn only_event(t: &Transition, name: &str) -> EventKind {
    let found: Vec<&HistoryEvent> = t.events.iter().filter(|e| e.kind.name() == name).collect();
    assert_eq!(found.len(), 1, "one {name} event in {:?}", event_names(t));
    found[0].kind.clone()
}

#[test]
fn complete_is_turn_complete_as_before() {
    let mut f = grammar();
    let t = f.say(PM, "Answer. TURN_COMPLETE", 1_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

#[test]
fn pass_ends_the_turn_and_shows_nothing() {
    let mut f = grammar();
    let t = f.say(PM, "Nothing from me. PASS", 1_000);
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", None));
    assert!(matches!(only_event(&t, "passed"), EventKind::Passed { next_agent, .. } if next_agent == id("dev")));
    assert_eq!(texts(&t)[0], "⏭️ pm passes.");
    assert_eq!(f.active(), "dev");
}

#[test]
fn handoff_gives_the_floor_to_the_persona_named_in_the_payload() {
    let mut f = grammar();
    let t = f.say(PM, "Over to the critic.\nHANDOFF: critic", 1_000);
    assert_eq!(f.active(), "critic");
    assert_eq!(f.session.round, 1, "critic comes after pm in the roster: same round");
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", Some("Over to the critic.".into())));
    assert_eq!(texts(&t)[0], "🤝 pm hands the floor to critic.");
    assert_eq!(announcements(&t)[1].mention, Some(CRITIC), "the new holder is mentioned");
    // Handing back to an earlier persona starts a new round.
    f.say(CRITIC, "HANDOFF: pm", 2_000);
    assert_eq!((f.active(), f.session.round), ("pm", 2));
}

#[test]
fn handoff_to_an_unknown_persona_is_refused_with_a_reply_and_the_turn_goes_on() {
    let mut f = grammar();
    let deadline = f.session.turn_timeout_at;
    let t = f.say(PM, "HANDOFF: ghost", 1_000);
    assert_eq!(f.active(), "pm");
    assert_eq!(f.session.turn_timeout_at, deadline);
    let reply = announcements(&t)[0];
    assert_eq!(reply.reply_to, Some(f.last_id));
    assert_eq!(reply.mention, Some(PM));
    assert_eq!(reply.text, "⚠️ There is no ghost in this session (roster: pm, dev, critic); pm keeps the floor.");
    assert!(matches!(only_event(&t, "handoff_refused"), EventKind::HandoffRefused { target, .. } if target == "ghost"));
    assert!(!t.effects.iter().any(|e| matches!(e, Effect::Relay { .. })), "the refused message stays as written");
}

#[test]
fn handoff_to_oneself_is_refused_so_that_it_never_buys_a_fresh_deadline() {
    let mut f = grammar();
    let deadline = f.session.turn_timeout_at;
    for (i, text) in ["HANDOFF: pm", "Still mine.\nHANDOFF: @pm", "HANDOFF: pm"].into_iter().enumerate() {
        let t = f.say(PM, text, 1_000 + 1_000 * i as i64);
        assert_eq!(f.active(), "pm");
        assert_eq!(f.session.turn_timeout_at, deadline, "no fresh deadline from {text:?}");
        let reply = announcements(&t)[0];
        assert_eq!(reply.reply_to, Some(f.last_id));
        assert_eq!(
            reply.text,
            "⚠️ pm already has the floor: hand it to someone else (roster: pm, dev, critic), or end the turn."
        );
        assert!(
            matches!(only_event(&t, "handoff_refused"), EventKind::HandoffRefused { target, .. } if target == "pm")
        );
        assert_eq!(announcements(&t).len(), 1, "no turn start");
    }
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"], "the turn times out when it was always going to");
}

#[test]
fn route_moves_the_task_and_the_floor_and_status_lists_it() {
    let mut f = grammar();
    let t = f.say(PM, "READY: task-7\n\nFiles Modified:\n- src/a.rs: fix", 1_000);
    assert_eq!(f.active(), "critic");
    match only_event(&t, "routed") {
        EventKind::Routed(r) => {
            let history::Routed { task, stage, next_agent, signal, .. } = *r;
            assert_eq!(
                (task.as_deref(), stage.as_str(), next_agent.as_str(), signal.as_str()),
                (Some("task-7"), "review", "critic", "READY")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", Some("Files Modified:\n- src/a.rs: fix".into())));
    assert_eq!(texts(&t)[0], "📋 Task task-7: review. Over to critic.");
    let status = f.session.status_report(Fixture::at(2_000)).to_string();
    assert!(status.ends_with("Tasks: task-7 review (critic)."), "{status}");
}

#[test]
fn finish_task_marks_it_done_and_passes_the_floor_on() {
    let mut f = grammar();
    f.say(PM, "READY: t1", 1_000);
    let t = f.say(CRITIC, "All good.\nSHIPPED: t1", 2_000);
    assert!(matches!(only_event(&t, "task_finished"), EventKind::TaskFinished(f) if f.task == "t1"));
    assert_eq!(f.session.tasks["t1"].stage, "done");
    assert_eq!(f.session.tasks["t1"].holder, None);
    assert_eq!((f.active(), f.session.round), ("pm", 2), "no `to`: the next in the roster");
    assert_eq!(texts(&t)[0], "✅ Task t1 is done.");
}

#[test]
fn keep_resets_the_deadline_at_most_max_keeps_times_in_a_row() {
    let mut f = grammar();
    let t = f.say(PM, "Searching again. <more>search failed</more>", 10_000);
    assert_eq!(f.active(), "pm");
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(10_000) + TimeDelta::seconds(90)), "a fresh turn");
    assert!(
        matches!(only_event(&t, "kept"), EventKind::Kept(k) if k.count == 1 && k.reason.as_deref() == Some("search failed"))
    );
    assert_eq!(texts(&t), ["🔁 <@101> (pm) keeps the floor for another turn: 90s (1 of 2)."]);
    assert_eq!(announcements(&t)[0].mention, Some(PM), "the agent is called again");
    f.say(PM, "<more>other reason</more>", 20_000);
    assert_eq!(f.session.keeps_in_row, 2);
    let t = f.say(PM, "<more>yet another</more>", 30_000);
    assert_eq!(f.active(), "dev", "the third keep in a row moves the floor on");
    assert_eq!(texts(&t)[0], "🔁 pm kept the floor 2 times in a row; the floor moves on.");
    assert_eq!(f.session.keeps_in_row, 0);
}

/// Found by a review: a `resume` asking the holder again began a new row of keeps, so with a manager resuming, an
/// agent could keep the floor past `maxKeeps` for ever.
#[test]
fn a_resume_that_asks_the_holder_again_goes_on_with_its_row_of_keeps() {
    for paused_by in ["a manager's pause", "an escalation"] {
        let mut f = grammar();
        f.say(PM, "<more>one</more>", 10_000);
        if paused_by == "an escalation" {
            f.say(PM, "BLOCKED: need a key", 20_000);
        } else {
            f.command(Command::Pause, 15_000).unwrap();
            f.say(PM, "<more>two, held</more>", 20_000);
        }
        f.command(Command::Resume, 30_000).unwrap();
        assert_eq!((f.active(), f.session.keeps_in_row), ("pm", 1), "{paused_by}: asked again, in the same row");
        f.say(PM, "<more>two</more>", 40_000);
        assert_eq!(f.active(), "pm", "{paused_by}: the second keep of two");
        f.say(PM, "<more>three</more>", 50_000);
        assert_eq!(f.active(), "dev", "{paused_by}: the third keep in a row moves the floor on");
    }
}

#[test]
fn progress_is_clamped_recorded_and_extends_the_deadline_once_per_turn() {
    let mut f = grammar();
    let deadline = f.session.turn_timeout_at.unwrap();
    let t = f.say(PM, "Working.\nPROGRESS: 150", 1_000);
    assert!(matches!(only_event(&t, "progress"), EventKind::Progress { percent: Some(100), extended_seconds: 30, .. }));
    assert_eq!(f.session.turn_timeout_at, Some(deadline + TimeDelta::seconds(30)));
    assert_eq!(f.active(), "pm", "the turn goes on");
    let t = f.say(PM, "PROGRESS: -5", 2_000);
    assert!(matches!(only_event(&t, "progress"), EventKind::Progress { percent: Some(0), extended_seconds: 0, .. }));
    assert_eq!(f.session.turn_timeout_at, Some(deadline + TimeDelta::seconds(30)), "once per turn");
    let status = f.session.status_report(Fixture::at(3_000)).to_string();
    assert!(status.contains("Progress: pm at 0%."), "{status}");
}

#[test]
fn escalate_pauses_calls_the_managers_and_resume_gives_a_fresh_turn() {
    let mut f = grammar();
    let t = f.say(PM, "I cannot reach the database.\nBLOCKED: need credentials", 30_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    assert_eq!(f.session.paused_remaining_ms, Some(60_000));
    let call = announcements(&t).into_iter().find(|a| a.ping_managers).expect("the managers are called");
    assert_eq!(
        call.text,
        "🚨 pm needs a person: need credentials. The session is paused; a manager's `resume` goes on."
    );
    let status = f.session.status_report(Fixture::at(31_000)).to_string();
    assert!(status.contains("(paused)") && status.contains("Paused because pm escalated (BLOCKED): need credentials."));
    // Nothing times out while paused.
    assert!(f.tick(500_000).events.is_empty());
    let t = f.command(Command::Resume, 600_000).unwrap();
    assert_eq!(f.session.status, SessionStatus::Running);
    assert_eq!(f.session.pause_reason, None);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(600_000) + TimeDelta::seconds(90)), "a fresh turn");
    assert_eq!(
        texts(&t),
        ["🎙️ <@101> (pm) has the floor: 90s. End your message with TURN_COMPLETE."],
        "one announcement, the fresh turn's: no \"Resumed\" line with the old time left"
    );
    assert_eq!(announcements(&t)[0].mention, Some(PM), "pm is called back to read the answer");
    assert!(matches!(only_event(&t, "resumed"), EventKind::Resumed { remaining_seconds: 90 }));
}

#[test]
fn a_resume_given_before_an_escalation_and_handled_after_it_does_not_end_that_pause() {
    let mut f = grammar();
    // A resume given at 25 s, while the session ran, takes poise longer than the actor waits and is handled after
    // pm's escalation at 30 s: it was not about that pause, which its author had not seen.
    f.say(PM, "I cannot reach the database.\nBLOCKED: need credentials", 30_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    let Refusal(why) = f.command_given(Command::Resume, 25_000, 34_000).unwrap_err();
    assert!(why.contains("paused now"), "{why}");
    assert!(f.session.pause_reason.is_some(), "still paused for the escalation");
    f.command_given(Command::Resume, 40_000, 40_000).unwrap();
    assert_eq!(f.session.status, SessionStatus::Running, "a resume given after it goes on");
}

/// An agent streaming its answer by edits, in a message whose progress line was acted on already: an edit adding a
/// signal that ends the turn still ends it (the message is still there as written, in observe mode); one adding
/// nothing that ends the turn acts on nothing again. In relay mode that message was deleted and reposted.
#[test]
fn an_answer_streamed_past_its_progress_line_ends_the_turn_when_an_edit_adds_the_signal() {
    let mut f = grammar();
    f.set_display_mode(DisplayMode::Observe);
    let t = f.say(PM, "Working on it.\nPROGRESS: 40", 1_000);
    assert_eq!(event_names(&t), ["progress"]);
    let streamed = f.last_id;
    let edit = |text: &str, ms: i64| Fixture::edit(streamed, PM, text, ms);
    let more = f.deliver(&edit("Working on it.\nPROGRESS: 40\nNearly there.", 2_000), 2_000);
    // (Only the loop row may change: the edit takes its message's place there.)
    assert!(more.effects.is_empty() && more.events.is_empty(), "the progress is not acted on twice: {more:?}");
    let record = f.deliver(&edit("Working on it.\nPROGRESS: 40\nCHECKPOINT: a", 2_500), 2_500);
    assert!(
        record.effects.is_empty() && record.events.is_empty(),
        "only a signal that ends the turn counts: {record:?}"
    );
    let done = edit("Working on it.\nPROGRESS: 40\nCHECKPOINT: a\nDone. TURN_COMPLETE", 3_000);
    let t = f.deliver(&done, 3_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(t.effects[0], Effect::React { message_id: streamed, emoji: "✅".into() });
    assert_eq!(f.active(), "dev");
    assert_eq!(f.deliver(&done, 4_000), Transition::default(), "one message ends one turn");

    let mut f = grammar();
    let t = f.say(PM, "Working on it.\nPROGRESS: 40", 1_000);
    assert!(matches!(t.effects[0], Effect::Relay { .. }), "relayed without its signal");
    let gone = Fixture::edit(f.last_id, PM, "Working on it.\nPROGRESS: 40\nDone. TURN_COMPLETE", 2_000);
    assert_eq!(f.deliver(&gone, 2_000), Transition::default(), "the deleted message's edits are not looked at");
}

#[test]
fn record_only_records_and_the_turn_goes_on() {
    let mut f = grammar();
    let t = f.say(PM, "CHECKPOINT: step-3\nStill going.", 1_000);
    assert!(matches!(only_event(&t, "recorded"), EventKind::Recorded { payload: Some(p), .. } if p == "step-3"));
    assert!(texts(&t).is_empty(), "the record template is silent by default");
    assert_eq!(f.active(), "pm");
    assert_eq!(t.effects, [relayed(f.last_id, "pm", Some("Still going.".into()))]);
}

#[test]
fn end_ends_the_session_and_only_its_senders_may_use_it() {
    let mut f = grammar();
    let t = f.say(PM, "FIN", 1_000);
    assert!(t.events.is_empty(), "pm may not use FIN: not a signal for pm");
    f.command(Command::Give { persona: "critic".into() }, 2_000).unwrap();
    let t = f.say(CRITIC, "We are done. FIN", 3_000);
    assert_eq!(f.session.status, SessionStatus::Stopped);
    assert_eq!(f.session.active_agent, None);
    assert!(
        matches!(only_event(&t, "session_ended"), EventKind::SessionEnded { reason } if reason == "FIN from critic")
    );
    assert_eq!(texts(&t), ["🏁 critic ended the session (FIN). History is kept."]);
}

#[test]
fn the_highest_priority_wins_and_every_matched_signal_is_stripped() {
    let mut f = grammar();
    // BLOCKED (priority 10) and READY (0) both match; the escalation wins and both lines go.
    let t = f.say(PM, "READY: t9\nBLOCKED: disk full\nDetails follow.", 1_000);
    assert!(t.events.iter().any(|e| e.kind.name() == "escalated"));
    assert!(!t.events.iter().any(|e| e.kind.name() == "routed"));
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", Some("Details follow.".into())));
}

#[test]
fn ties_go_to_the_rule_listed_first() {
    let rules = r#"{"rules": [
        {"name": "first", "pattern": "GO", "action": "pass"},
        {"name": "second", "pattern": "(?:GO)", "action": "complete"}]}"#;
    let mut f = Fixture::with_config(config(rules));
    let t = f.say(PM, "GO", 1_000);
    assert_eq!(event_names(&t), ["passed"]);
}

#[test]
fn invisible_characters_around_the_keyword_still_end_the_turn() {
    let mut f = Fixture::new();
    let t = f.say(PM, "Done.\u{200B}TURN_COMPLETE\u{200F}\u{FEFF}", 1_000);
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", Some("Done.".into())));
    assert_eq!(f.active(), "dev");
    let t = f.say(DEV, "Ok \u{2060}TURN_COMPLETE\u{200E}", 2_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
}

// --- recovery rules ----------------------------------------------------------------------------------------

#[test]
fn unknown_signals_get_a_reply_and_the_third_in_a_row_counts_as_a_timeout() {
    let mut f = grammar();
    let t = f.say(PM, "REDY: t1", 1_000);
    let reply = announcements(&t)[0];
    assert_eq!(reply.reply_to, Some(f.last_id));
    assert_eq!(reply.mention, Some(PM));
    assert!(reply.text.starts_with("⚠️ `REDY: t1` is not a signal here (1 of 3). Valid signals: TURN_COMPLETE, PASS,"));
    assert!(!reply.text.contains("FIN"), "FIN is critic's, not pm's: {}", reply.text);
    f.say(PM, "DONE: t1", 2_000);
    assert_eq!(f.active(), "pm");
    let t = f.say(PM, "FINISHED: t1", 3_000);
    assert_eq!(f.active(), "dev");
    assert!(matches!(only_event(&t, "agent_signal_failure"), EventKind::AgentSignalFailure { count: 3, .. }));
    assert!(f.session.agents[&id("pm")].awaiting_late_reply, "like a timeout: its next message is late");
    assert_eq!(f.session.agents[&id("pm")].consecutive_timeouts, 1, "and it counts as a strike");
}

/// The default keyword in bold (or with a full stop after it) is answered within the turn, as an unknown signal is:
/// before, nothing was said and the turn timed out, though the channel showed the keyword.
#[test]
fn a_bold_keyword_is_answered_within_the_turn_and_the_keyword_written_plain_ends_it() {
    let mut f = Fixture::new();
    let t = f.say(PM, "Here is the plan.\n\n**TURN_COMPLETE**", 1_000);
    let reply = announcements(&t)[0];
    assert_eq!((reply.reply_to, reply.mention), (Some(f.last_id), Some(PM)));
    assert!(
        reply.text.starts_with("⚠️ `**TURN_COMPLETE**` is not a signal here (1 of 3). Valid signals: TURN_COMPLETE"),
        "{}",
        reply.text
    );
    assert_eq!(f.active(), "pm", "the turn goes on");
    f.say(PM, "TURN_COMPLETE", 2_000);
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_recognised_signal_resets_the_unknown_count() {
    let mut f = grammar();
    f.say(PM, "REDY: t1", 1_000);
    f.say(PM, "CHECKPOINT: ok", 2_000);
    assert_eq!(f.session.agents[&id("pm")].unknown_signals, 0);
}

/// Found by a review: a mistyped line beside a signal that leaves the turn going (a record here; a progress or a
/// refused handoff alike) was ignored, and the turn ran to its timeout. It is answered, and counts toward
/// `unknownLimit` in the row the message's own signal started again.
#[test]
fn a_mistyped_line_beside_a_signal_that_leaves_the_turn_going_is_answered_and_counted() {
    let mut f = grammar();
    f.say(PM, "REDY: t1", 1_000);
    let t = f.say(PM, "CHECKPOINT: step-1\nREADY_FOR_REVEIW: task-1", 2_000);
    assert_eq!(event_names(&t), ["recorded", "unknown_signal"]);
    let reply = announcements(&t)[0];
    // Not a Discord reply: the message is relayed (deleted), and a reply to a deleted message pings nobody (found by
    // a review). The agent is mentioned instead.
    assert_eq!((reply.reply_to, reply.mention), (None, Some(PM)));
    // The checkpoint broke the row of the first mistyped line: this one is the first of a new row.
    let said = format!("<@{PM}> ⚠️ `READY_FOR_REVEIW: task-1` is not a signal here (1 of 3).");
    assert!(reply.text.starts_with(&said), "{}", reply.text);
    // Relayed for its record (deleted, reposted without it): an edit is of a message gone, and acts on nothing again
    // (found by a review: answering the line made the message editable, and the edit recorded the checkpoint twice).
    let edit = Fixture::edit(f.last_id, PM, "CHECKPOINT: step-1\nREADY_FOR_REVIEW: task-1", 2_500);
    assert_eq!(event_names(&f.deliver(&edit, 2_500)), Vec::<&str>::new());
    assert_eq!(f.active(), "pm");
    let t = f.say(PM, "REDY: t1", 3_000);
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 2, .. }));
    assert_eq!(f.active(), "pm");
    // A progress beside one alike; the signal's own line is not taken for one.
    let t = f.say(PM, "PROGRESS: 40\nCHEKPOINT: c1", 5_000);
    assert_eq!(event_names(&t), ["progress", "unknown_signal"]);
    let said = format!("<@{PM}> ⚠️ `CHEKPOINT: c1` is not a signal here (1 of 3).");
    assert!(texts(&t).iter().any(|s| s.starts_with(&said)), "{:?}", texts(&t));
    assert_eq!(event_names(&f.say(PM, "CHECKPOINT: step-2", 6_000)), ["recorded"], "nothing mistyped");
    // Counted as any other: the third in a row ends the turn.
    f.say(PM, "CHECKPOINT: step-3\nREDY: t3", 7_000);
    f.say(PM, "REDY: t4", 8_000);
    let t = f.say(PM, "CHECKPOINT: step-4\nREDY: t5", 9_000);
    assert_eq!(f.active(), "pm", "the checkpoint broke the row: {:?}", event_names(&t));
    f.say(PM, "REDY: t6", 10_000);
    let t = f.say(PM, "REDY: t7", 11_000);
    assert_eq!(f.active(), "dev", "three in a row: {:?}", event_names(&t));
}

/// Found by a review: at `unknownLimit`, a mistyped line beside a checkpoint ends the turn as a timeout would, and
/// counts toward `benchAfter` as one (its signal did not end the turn).
#[test]
fn a_turn_a_mistyped_line_beside_a_signal_ended_counts_as_a_timeout() {
    let mut f = Fixture::with_config(config(&RULES.replacen('{', r#"{"unknownLimit": 1, "#, 1)));
    let t = f.say(PM, "CHECKPOINT: step-1\nREDY: t1", 1_000);
    assert_eq!(event_names(&t), ["recorded", "agent_signal_failure"]);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.agents[&id("pm")].consecutive_timeouts, 1);
}

/// Found by a review: a refused handoff beside a mistyped line got two replies, each pinging the agent. It gets one
/// reply saying both, and the line counts toward `unknownLimit` as beside any signal that leaves the turn going; a
/// handoff to oneself alike.
#[test]
fn a_refused_handoff_beside_a_mistyped_line_gets_one_reply_saying_both() {
    let mut f = grammar();
    let t = f.say(PM, "REDY: t1\nHANDOFF: ghost", 1_000);
    assert_eq!(event_names(&t), ["handoff_refused", "unknown_signal"]);
    let replies = announcements(&t);
    assert_eq!(replies.len(), 1, "{:?}", texts(&t));
    assert_eq!((replies[0].reply_to, replies[0].mention), (Some(f.last_id), Some(PM)));
    let text = &replies[0].text;
    assert!(text.starts_with("⚠️ There is no ghost in this session"), "{text}");
    assert!(text.contains("\n⚠️ `REDY: t1` is not a signal here (1 of 3)."), "{text}");
    assert_eq!(f.active(), "pm");
    let t = f.say(PM, "REDY: t2\nHANDOFF: pm", 2_000);
    assert_eq!(event_names(&t), ["handoff_refused", "unknown_signal"]);
    let text = &announcements(&t)[0].text;
    assert_eq!(texts(&t).len(), 1, "{:?}", texts(&t));
    assert!(text.starts_with("⚠️ pm already has the floor") && text.contains("`REDY: t2`"), "{text}");
    assert_eq!((f.active(), f.session.agents[&id("pm")].unknown_signals), ("pm", 1));
}

/// At `unknownLimit`, the mistyped line beside a refused handoff ends the turn: no reply tells the agent it keeps
/// the floor (and pings it) while the next persona is called.
#[test]
fn a_refused_handoff_beside_the_mistyped_line_that_ends_the_turn_gets_no_reply() {
    let mut f = Fixture::with_config(config(&RULES.replacen('{', r#"{"unknownLimit": 1, "#, 1)));
    let t = f.say(PM, "REDY: t1\nHANDOFF: ghost", 1_000);
    assert_eq!(event_names(&t), ["handoff_refused", "agent_signal_failure"]);
    assert_eq!(f.active(), "dev");
    assert!(announcements(&t).iter().all(|a| a.reply_to.is_none() && a.mention != Some(PM)), "{:?}", texts(&t));
}

/// Found by a review: a mistyped line beside a signal that an edit adds was not answered (the edit path answered no
/// line beside a signal), and the turn ran to its timeout. Relayed for its record, the message is gone and no later
/// edit can take the line away: answered at once, as in a new message, and counted once however often the edit is
/// delivered.
#[test]
fn a_mistyped_line_beside_a_signal_an_edit_adds_is_answered_and_counted_once() {
    let mut f = grammar();
    f.say(PM, "Working", 1_000);
    let m = f.last_id;
    let edit = Fixture::edit(m, PM, "Working\nCHECKPOINT: step-1\nREDY: t1", 2_000);
    let t = f.deliver(&edit, 2_000);
    assert_eq!(event_names(&t), ["recorded", "unknown_signal"]);
    let reply = announcements(&t)[0];
    assert_eq!((reply.reply_to, reply.mention), (None, Some(PM)), "the message is relayed: mentioned, not replied to");
    assert!(reply.text.starts_with(&format!("<@{PM}> ⚠️ `REDY: t1` is not a signal here (1 of 3).")), "{}", reply.text);
    assert!(f.deliver(&edit, 2_500).events.is_empty(), "the same edit again (a reconnect)");
    assert!(f.tick(10_000).events.is_empty());
    assert_eq!(f.session.agents[&id("pm")].unknown_signals, 1);
    assert_eq!(f.active(), "pm");
    // Nor after a handoff an edit adds that is refused: the line is said in the refusal's reply, pinging once.
    f.say(PM, "More", 11_000);
    let m = f.last_id;
    let t = f.deliver(&Fixture::edit(m, PM, "More\nREDY: t2\nHANDOFF: ghost", 12_000), 12_000);
    assert_eq!(event_names(&t), ["handoff_refused", "unknown_signal"]);
    assert_eq!(announcements(&t).len(), 1, "{:?}", texts(&t));
    assert_eq!((announcements(&t)[0].reply_to, announcements(&t)[0].mention), (Some(m), Some(PM)));
    assert!(texts(&t)[0].contains("\n⚠️ `REDY: t2` is not a signal here (1 of 3)."), "{:?}", texts(&t));
    assert!(f.tick(20_000).events.is_empty());
}

/// Found by a review: a line answered for a message as it came was answered, and counted, again when an edit added a
/// signal to the message (relayed for a record, or a refused handoff once the line was answered quiet in observe
/// mode): with `unknownLimit` 2 the agent's next mistyped message then ended its turn.
#[test]
fn a_line_answered_for_a_message_is_not_answered_again_when_an_edit_adds_a_signal() {
    let mut f = Fixture::with_config(config(&RULES.replacen('{', r#"{"unknownLimit": 2, "#, 1)));
    let t = f.say(PM, "Working\nREDY: t1", 1_000);
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 1, .. }));
    let m = f.last_id;
    let t = f.deliver(&Fixture::edit(m, PM, "Working\nREDY: t1\nCHECKPOINT: s1", 2_000), 2_000);
    assert_eq!(event_names(&t), ["recorded"], "{:?}", texts(&t));
    assert_eq!(f.session.agents[&id("pm")].unknown_signals, 0, "the checkpoint started the row again");
    let t = f.say(PM, "OOPS: x", 3_000);
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 1, .. }));
    assert_eq!(f.active(), "pm");

    let mut f = grammar();
    f.set_display_mode(DisplayMode::Observe);
    f.say(PM, "Working", 1_000);
    let m = f.last_id;
    f.deliver(&Fixture::edit(m, PM, "Working\nCHECKPOINT: s1\nREDY: t1", 2_000), 2_000);
    assert_eq!(event_names(&f.tick(7_000)), ["unknown_signal"]);
    let t = f.deliver(&Fixture::edit(m, PM, "Working\nCHECKPOINT: s1\nREDY: t1\nHANDOFF: ghost", 8_000), 8_000);
    assert_eq!(event_names(&t), ["handoff_refused"]);
    assert!(texts(&t).iter().all(|text| !text.contains("REDY")), "{:?}", texts(&t));
}

/// Found by a review: a turn an edit ended (its mistyped line the `unknownLimit`-th) ended at the message's own
/// instant, so what the holder wrote between the message and the edit, handled after it, was taken for late.
#[test]
fn a_turn_an_edit_ends_ends_at_the_edit_not_at_its_message() {
    let mut f = Fixture::with_config(config(&RULES.replacen('{', r#"{"unknownLimit": 1, "#, 1)));
    f.say(PM, "Working", 1_000);
    let m = f.last_id;
    let between = f.message(PM, "More of my answer", 2_000);
    let t = f.deliver(&Fixture::edit(m, PM, "Working\nCHECKPOINT: s1\nREDY: t1", 3_000), 3_000);
    assert_eq!(event_names(&t), ["recorded", "agent_signal_failure"]);
    assert_eq!(f.active(), "dev");
    let t = f.deliver(&between, 3_100);
    assert!(!event_names(&t).iter().any(|e| *e == "late_signal" || *e == "out_of_turn"), "{:?}", event_names(&t));
}

/// A refusal and a mistyped line that would not fit in one message together are said in two replies: joined and
/// cut, the line would go unsaid though counted (found by a review).
#[test]
fn a_refusal_too_long_to_share_its_reply_leaves_the_mistyped_line_its_own() {
    let long = "x".repeat(1_990);
    let text = format!(r#"{{"signals": {RULES}, "templates": {{"handoffRefused": "{long}"}}}}"#);
    let mut f = Fixture::with_config(Config::parse("c.json", &text).unwrap_or_else(|p| panic!("{p}")));
    let t = f.say(PM, "REDY: t1\nHANDOFF: ghost", 1_000);
    assert_eq!(event_names(&t), ["handoff_refused", "unknown_signal"]);
    let texts = texts(&t);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[1].starts_with("⚠️ `REDY: t1` is not a signal here"), "{texts:?}");
}

/// In observe mode the message stays, and its edits are still followed: the line beside the signal an edit added is
/// answered once the message is quiet, as any line an edit leaves (a streaming agent passes through such lines), and
/// counted once however often the edit is delivered, before or after the answer; a later edit still ends the turn.
#[test]
fn a_mistyped_line_beside_a_signal_an_edit_adds_to_a_message_that_stays_is_answered_once_quiet() {
    let mut f = grammar();
    f.set_display_mode(DisplayMode::Observe);
    f.say(PM, "Working", 1_000);
    let m = f.last_id;
    let edit = Fixture::edit(m, PM, "Working\nCHECKPOINT: step-1\nREDY: t1", 2_000);
    assert_eq!(event_names(&f.deliver(&edit, 2_000)), ["recorded"]);
    assert!(f.deliver(&edit, 3_000).events.is_empty(), "the same edit again");
    let t = f.tick(7_000);
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 1, .. }));
    assert_eq!(announcements(&t)[0].reply_to, Some(m));
    assert!(f.deliver(&edit, 8_000).events.is_empty(), "and again after the answer");
    assert!(f.tick(14_000).events.is_empty());
    assert_eq!(f.session.agents[&id("pm")].unknown_signals, 1);
    let done = Fixture::edit(m, PM, "Working\nCHECKPOINT: step-1\nDone. TURN_COMPLETE", 15_000);
    assert_eq!(event_names(&f.deliver(&done, 15_000)), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

/// A mistyped line beside a signal that ends the turn is not answered: the reply would mention the agent (and call
/// it to write) while the next persona holds the floor.
#[test]
fn a_mistyped_line_beside_a_signal_that_ends_the_turn_is_not_answered() {
    let mut f = grammar();
    let t = f.say(PM, "CHEKPOINT: c1\nDone. TURN_COMPLETE", 1_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_message_with_nothing_signal_like_breaks_the_row_of_unknown_signals() {
    let mut f = Fixture::new();
    // An agent writing "TODO:" and "NOTE:" in its prose is not confused about signals.
    f.say(PM, "TODO: tests", 1_000);
    f.say(PM, "Here is my analysis of the parser.", 2_000);
    f.say(PM, "NOTE: see above", 3_000);
    f.say(PM, "More prose, nothing signal-like.", 4_000);
    let t = f.say(PM, "URL: http://x", 5_000);
    assert_eq!(f.active(), "pm", "never three in a row: {:?}", event_names(&t));
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 1, .. }));
}

#[test]
fn a_new_turn_starts_a_new_row_of_unknown_signals() {
    let mut f = Fixture::new();
    f.say(PM, "TODO: tests", 1_000);
    f.tick(90_000); // pm times out with one unknown signal counted
    f.say(DEV, "Done. TURN_COMPLETE", 91_000);
    f.say(CRITIC, "Done. TURN_COMPLETE", 92_000);
    f.say(PM, "TODO: more", 93_000);
    f.tick(183_000);
    f.say(DEV, "Done. TURN_COMPLETE", 184_000);
    f.say(CRITIC, "Done. TURN_COMPLETE", 185_000);
    assert_eq!(f.active(), "pm");
    let t = f.say(PM, "NOTE: first of this turn", 186_000);
    assert_eq!(f.active(), "pm", "the first unknown signal of a turn ends nothing: {:?}", event_names(&t));
    assert!(matches!(only_event(&t, "unknown_signal"), EventKind::UnknownSignal { count: 1, .. }));
}

#[test]
fn unknown_signal_recovery_can_be_turned_off() {
    let mut f = Fixture::with_config(config(r#"{"unknownPattern": null}"#));
    let t = f.say(PM, "NOTE: something", 1_000);
    assert!(t.effects.is_empty() && t.events.is_empty());
}

#[test]
fn an_unknown_signal_line_cannot_break_out_of_its_code_span() {
    let mut f = grammar();
    let hostile = "REDY: x` **bold** <@&7> @everyone ```\n# title";
    let t = f.say(PM, hostile, 1_000);
    let reply = &announcements(&t)[0].text;
    assert_eq!(reply.matches('`').count(), 2, "only the template's own backticks: {reply}");
    let quoted = reply.split('`').nth(1).expect("a code span");
    assert!(quoted.starts_with("REDY: x") && quoted.contains("**bold** <@&7> @everyone"), "{reply}");
    assert!(!quoted.contains('\n'), "{reply}");

    let long = format!("REDY: {}", "`".repeat(3_000));
    let t = f.say(PM, &long, 2_000);
    let reply = &announcements(&t)[0].text;
    assert_eq!(reply.matches('`').count(), 2, "{reply}");
    assert!(reply.split('`').nth(1).unwrap().chars().count() <= 100, "the quoted line is bounded: {reply}");
}

#[test]
fn a_persona_timing_out_bench_after_times_is_skipped_until_it_speaks_or_is_added() {
    let mut f = Fixture::with_config(config(r#"{"benchAfter": 2}"#));
    // dev times out twice in a row: each time pm and critic complete at once.
    let mut now = 0;
    for round in 1..=2 {
        now += 1_000;
        f.say(PM, "TURN_COMPLETE", now);
        assert_eq!(f.active(), "dev");
        now += 120_000;
        let t = f.tick(now);
        let benched_now = t.events.iter().any(|e| e.kind.name() == "benched");
        assert_eq!(benched_now, round == 2, "benched at the second timeout in a row, not before");
        if round == 2 {
            assert!(texts(&t).iter().any(|s| s.starts_with("🪑 dev timed out 2 times in a row and is benched")));
        }
        now += 1_000;
        f.say(CRITIC, "TURN_COMPLETE", now);
    }
    assert!(f.session.agents[&id("dev")].benched);
    f.say(PM, "TURN_COMPLETE", now + 1_000);
    assert_eq!(f.active(), "critic", "the rotation skips dev");
    assert!(f.session.status_report(Fixture::at(now)).to_string().contains("Benched: dev."));
    // dev speaks (out of turn): it is back.
    let t = f.say(DEV, "I'm here.", now + 2_000);
    assert!(t.events.iter().any(|e| matches!(&e.kind, EventKind::Unbenched { by } if by == "it spoke")));
    assert!(!f.session.agents[&id("dev")].benched);
    f.say(CRITIC, "TURN_COMPLETE", now + 3_000);
    f.say(PM, "TURN_COMPLETE", now + 4_000);
    assert_eq!(f.active(), "dev");
}

/// The spec's default (`benchAfter` 3): benched at the third timeout in a row, not the second (every other test of
/// benching sets its own; found by a review of what no test held).
#[test]
fn by_default_a_persona_is_benched_at_its_third_timeout_in_a_row() {
    let mut f = Fixture::new();
    let mut now = 0;
    for round in 1..=3 {
        now += 1_000;
        f.say(PM, "TURN_COMPLETE", now);
        assert_eq!(f.active(), "dev");
        now += 120_000;
        let benched_now = f.tick(now).events.iter().any(|e| e.kind.name() == "benched");
        assert_eq!(benched_now, round == 3, "round {round}");
        now += 1_000;
        f.say(CRITIC, "TURN_COMPLETE", now);
    }
    assert!(f.session.agents[&id("dev")].benched);
}

/// Found by a review: any signal reset the row of timeouts, so an agent that recorded a checkpoint (or a progress)
/// every turn and never finished one was never benched. Only a turn its signal ended (or kept) breaks the row.
#[test]
fn turns_that_time_out_after_a_signal_that_leaves_them_going_count_toward_the_bench() {
    let rules = r#"{"benchAfter": 2, "rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "CHECKPOINT", "pattern": "CHECKPOINT:\\s*(?P<payload>\\S+)", "at": "line", "action": "record"},
        {"name": "HANDOFF", "pattern": "HANDOFF:\\s*(?P<payload>\\S+)", "at": "line", "action": "handoff"}]}"#;
    let mut f = Fixture::with_config(config(rules));
    let mut now = 0;
    for (round, said) in [(1, "Saved.\nCHECKPOINT: c1"), (2, "Over to nobody.\nHANDOFF: nobody")] {
        now += 1_000;
        f.say(PM, "a TURN_COMPLETE", now);
        assert_eq!(f.active(), "dev");
        now += 1_000;
        f.say(DEV, said, now);
        assert_eq!(f.active(), "dev", "the turn goes on");
        now += 120_000;
        let t = f.tick(now);
        assert!(event_names(&t).contains(&"turn_timeout"), "dev's turn {round} timed out");
        now += 1_000;
        f.say(CRITIC, "b TURN_COMPLETE", now);
    }
    assert!(f.session.agents[&id("dev")].benched, "two timed-out turns in a row");

    // A turn its signal ended does break the row.
    let mut f = Fixture::with_config(config(rules));
    for (k, said) in ["Nothing.", "Done. TURN_COMPLETE", "Nothing again."].iter().enumerate() {
        let now = k as i64 * 200_000;
        f.say(PM, "a TURN_COMPLETE", now + 1_000);
        f.say(DEV, said, now + 2_000);
        if f.active() == "dev" {
            f.tick(now + 130_000);
        }
        f.say(CRITIC, "b TURN_COMPLETE", now + 131_000);
    }
    assert_eq!(f.session.agents[&id("dev")].consecutive_timeouts, 1, "timed out, completed, timed out");
    assert!(!f.session.agents[&id("dev")].benched, "not two in a row");
}

/// Found by a review: a turn a manager's command ended (`skip`, `give`) did not break the row of timeouts, so
/// timeout, skipped, timeout benched a persona at `benchAfter` 2. Only timeouts in a row bench (spec 4.2, strikes).
#[test]
fn a_turn_a_command_ended_breaks_the_row_of_timeouts() {
    for command in [Command::Skip, Command::Give { persona: "critic".into() }] {
        let mut f = Fixture::with_config(config(r#"{"benchAfter": 2}"#));
        let mut now = 0;
        for ends_dev_turn in [None, Some(command.clone()), None] {
            now += 1_000;
            f.say(PM, "a TURN_COMPLETE", now);
            assert_eq!(f.active(), "dev");
            match ends_dev_turn {
                Some(command) => {
                    now += 1_000;
                    f.command(command, now).unwrap();
                }
                None => {
                    now += 120_000;
                    assert!(event_names(&f.tick(now)).contains(&"turn_timeout"));
                }
            }
            assert_eq!(f.active(), "critic");
            now += 1_000;
            f.say(CRITIC, "b TURN_COMPLETE", now);
        }
        let dev = &f.session.agents[&id("dev")];
        assert!(!dev.benched, "timed out, {command:?}, timed out: not two in a row");
        assert_eq!(dev.consecutive_timeouts, 1, "{command:?}");
    }
}

#[test]
fn add_brings_a_benched_persona_back() {
    let mut f = Fixture::with_config(config(r#"{"benchAfter": 1}"#));
    f.tick(90_000);
    assert!(f.session.agents[&id("pm")].benched);
    let t = f.command(Command::Add { persona: "pm".into() }, 91_000).unwrap();
    assert_eq!(event_names(&t), ["unbenched"]);
    assert_eq!(texts(&t), ["🪑 pm is back in the rotation."]);
    assert!(!f.session.agents[&id("pm")].benched);
}

/// dev benched (`benchAfter` 1): pm completed, dev timed out; critic holds the floor.
fn dev_benched() -> Fixture {
    let mut f = Fixture::with_config(config(r#"{"benchAfter": 1}"#));
    f.say(PM, "Mine. TURN_COMPLETE", 1_000);
    f.tick(121_000);
    assert!(f.session.agents[&id("dev")].benched, "precondition");
    assert_eq!(f.active(), "critic");
    f
}

#[test]
fn removing_the_holder_passes_the_floor_over_a_benched_persona() {
    let mut f = dev_benched();
    f.say(CRITIC, "Mine. TURN_COMPLETE", 122_000);
    assert_eq!(f.active(), "pm");
    // dev comes after pm, but is benched: the rotation skips it, as a completed turn's would.
    let t = f.command(Command::Remove { persona: "pm".into() }, 123_000).unwrap();
    assert_eq!(f.active(), "critic", "{:?}", texts(&t));
    assert!(f.session.agents[&id("dev")].benched, "still benched: {:?}", event_names(&t));
    assert_eq!(f.session.round, 2, "critic comes later in the same round");
}

#[test]
fn a_new_order_without_the_holder_starts_with_the_first_persona_not_benched() {
    let mut f = dev_benched();
    f.say(CRITIC, "Mine. TURN_COMPLETE", 122_000);
    let t = f.command(Command::Order { roster: vec!["dev".into(), "critic".into()] }, 123_000).unwrap();
    assert_eq!(f.active(), "critic", "{:?}", texts(&t));
    assert!(f.session.agents[&id("dev")].benched);
}

#[test]
fn a_benched_persona_removed_then_added_is_back_in_the_rotation() {
    let mut f = dev_benched();
    f.command(Command::Remove { persona: "dev".into() }, 122_000).unwrap();
    let t = f.command(Command::Add { persona: "dev".into() }, 123_000).unwrap();
    assert!(!f.session.agents[&id("dev")].benched, "{:?}", event_names(&t));
    assert!(texts(&t).contains(&"🪑 dev is back in the rotation."), "{:?}", texts(&t));
}

/// Found by a review: a removed persona that spoke was announced as back in a rotation it is not in.
#[test]
fn a_benched_persona_removed_that_speaks_is_not_announced_back_in_the_rotation() {
    let mut f = dev_benched();
    f.command(Command::Remove { persona: "dev".into() }, 122_000).unwrap();
    let t = f.say(DEV, "hello?", 123_000);
    assert!(!event_names(&t).contains(&"unbenched"), "{:?}", texts(&t));
    // Added back, it is back in the rotation then, as before.
    let t = f.command(Command::Add { persona: "dev".into() }, 124_000).unwrap();
    assert!(texts(&t).contains(&"🪑 dev is back in the rotation."), "{:?}", texts(&t));
}

#[test]
fn keeps_count_in_a_row_even_when_the_floor_comes_back_to_the_same_persona() {
    let rules = r#"{"rules": [{"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "MORE", "pattern": "<more>(?P<payload>[^<]*)</more>", "at": "anywhere", "action": "keep",
         "maxKeeps": 1}]}"#;
    let mut f = Fixture::with_config(Config::parse("c.json", &format!(r#"{{"signals": {rules}}}"#)).unwrap());
    f.command(Command::Order { roster: vec!["pm".into()] }, 0).unwrap();
    f.say(PM, "One part <more>one</more>", 1_000);
    f.say(PM, "Done. TURN_COMPLETE", 2_000);
    assert_eq!((f.active(), f.session.round), ("pm", 2), "a roster of one: pm again, a new round");
    let t = f.say(PM, "Another part <more>two</more>", 3_000);
    assert_eq!(event_names(&t), ["kept"], "a new row: {:?}", texts(&t));
}

#[test]
fn the_last_persona_not_benched_is_never_benched() {
    let rules = r#"{"benchAfter": 1}"#;
    let mut f = Fixture::with_config(config(rules));
    f.command(Command::Order { roster: vec!["pm".into()] }, 0).unwrap();
    f.tick(90_000);
    assert!(!f.session.agents[&id("pm")].benched);
    assert_eq!(f.active(), "pm");
}

#[test]
fn the_same_text_three_times_in_a_row_pauses_and_calls_the_managers() {
    let mut f = Fixture::new();
    f.say(PM, "Thanks! TURN_COMPLETE", 1_000);
    f.say(DEV, "Thanks! TURN_COMPLETE", 2_000);
    let t = f.say(CRITIC, "Thanks! TURN_COMPLETE", 3_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    assert_eq!(f.active(), "critic", "the looping message does not pass the floor on");
    assert!(matches!(only_event(&t, "loop_detected"), EventKind::LoopDetected { count: 3, text } if text == "Thanks!"));
    assert!(
        announcements(&t).iter().any(|a| a.ping_managers && a.text.starts_with("🔁 The same message came 3 times"))
    );
    let status = f.session.status_report(Fixture::at(4_000)).to_string();
    assert!(status.contains("Paused because the same message came 3 times in a row."), "{status}");
}

/// Found by a review: a message and the edit adding its signal each counted, so two messages made a loop of three.
#[test]
fn an_edit_adding_the_signal_does_not_count_its_message_twice_towards_a_loop() {
    let mut f = Fixture::new();
    f.say(PM, "Agreed.", 1_000);
    let first = f.last_id;
    f.deliver(&Fixture::edit(first, PM, "Agreed. TURN_COMPLETE", 2_000), 2_000);
    assert_eq!(f.active(), "dev", "the edit ended pm's turn");
    f.say(DEV, "Agreed. TURN_COMPLETE", 3_000);
    assert_eq!(f.session.status, SessionStatus::Running, "said twice; loopAfter is 3");
    assert_eq!(f.active(), "critic");
    f.say(CRITIC, "Agreed. TURN_COMPLETE", 4_000);
    assert_eq!(f.session.status, SessionStatus::Paused, "the third time is a loop");
}

/// Found by a review of the fix above, which counted no edit at all: agents streaming their answer from the same
/// placeholder ("Thinking…") made a loop of three different answers.
#[test]
fn agents_streaming_from_the_same_placeholder_are_no_loop() {
    let mut f = Fixture::new();
    for (n, (persona, at)) in [(PM, 1_000), (DEV, 3_000), (CRITIC, 5_000)].into_iter().enumerate() {
        f.say(persona, "Thinking…", at);
        let id = f.last_id;
        f.deliver(&Fixture::edit(id, persona, &format!("Answer {n}. TURN_COMPLETE"), at + 1_000), at + 1_000);
    }
    assert_eq!(f.session.status, SessionStatus::Running, "three different answers are no loop");
    assert_eq!(f.active(), "pm");
    // The same answer streamed three times is one.
    for (persona, at) in [(PM, 7_000), (DEV, 9_000), (CRITIC, 11_000)] {
        f.say(persona, "Thinking…", at);
        let id = f.last_id;
        f.deliver(&Fixture::edit(id, persona, "Agreed. TURN_COMPLETE", at + 1_000), at + 1_000);
    }
    assert_eq!(f.session.status, SessionStatus::Paused, "the same answer three times in a row");
}

/// Found by a review: a placeholder edited to a bare signal stayed counted, and so did one filled in by edits
/// without a signal before a bare signal sent apart: three turns made a loop of "Thinking…".
#[test]
fn a_placeholder_filled_in_or_left_for_a_bare_signal_is_not_what_counts_towards_a_loop() {
    let mut f = Fixture::new();
    for (persona, at) in [(PM, 1_000), (DEV, 3_000), (CRITIC, 5_000)] {
        f.say(persona, "Thinking…", at);
        let id = f.last_id;
        f.deliver(&Fixture::edit(id, persona, "TURN_COMPLETE", at + 1_000), at + 1_000);
    }
    assert_eq!(f.session.status, SessionStatus::Running, "edited to a bare signal");
    for (n, (persona, at)) in [(PM, 7_000), (DEV, 9_000), (CRITIC, 11_000)].into_iter().enumerate() {
        f.say(persona, "Thinking…", at);
        let id = f.last_id;
        f.deliver(&Fixture::edit(id, persona, &format!("Answer {n}."), at + 500), at + 500);
        f.say(persona, "TURN_COMPLETE", at + 1_000);
    }
    assert_eq!(f.session.status, SessionStatus::Running, "filled in, then a bare signal apart");
    assert_eq!(f.active(), "pm");
}

#[test]
fn the_same_keep_reason_three_times_is_a_loop() {
    let rules = r#"{"rules": [{"name": "MORE", "pattern": "<more>(?P<payload>[^<]*)</more>", "at": "anywhere",
                               "action": "keep", "maxKeeps": 10}]}"#;
    let mut f = Fixture::with_config(config(rules));
    f.say(PM, "try 1 <more>tool failed</more>", 1_000);
    f.say(PM, "try 2 <more>tool failed</more>", 2_000);
    let t = f.say(PM, "try 3 <more>tool failed</more>", 3_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    assert!(t.events.iter().any(|e| e.kind.name() == "loop_detected"));
}

#[test]
fn different_texts_never_make_a_loop() {
    let mut f = Fixture::new();
    for (i, who) in [PM, DEV, CRITIC, PM, DEV, CRITIC].into_iter().enumerate() {
        f.say(who, &format!("point {i} TURN_COMPLETE"), 1_000 * (i as i64 + 1));
    }
    assert_eq!(f.session.status, SessionStatus::Running);
}

#[test]
fn max_rounds_ends_the_session_when_that_many_rounds_are_done() {
    let mut f = Fixture::with_config(config(r#"{"maxRounds": 1}"#));
    f.say(PM, "a TURN_COMPLETE", 1_000);
    f.say(DEV, "b TURN_COMPLETE", 2_000);
    let t = f.say(CRITIC, "c TURN_COMPLETE", 3_000);
    assert_eq!(f.session.status, SessionStatus::Stopped);
    assert_eq!(event_names(&t), ["turn_complete", "session_ended"]);
    assert_eq!(texts(&t), ["🏁 1 rounds done: turn management stopped. History is kept."]);
}

#[test]
fn a_signal_within_the_grace_period_still_counts() {
    let mut f = Fixture::with_config(config(r#"{"graceSeconds": 5}"#));
    let ctx_wake = |f: &Fixture| f.session.wake_at(Context { personas: &f.personas, config: &f.config });
    assert_eq!(ctx_wake(&f), Some(Fixture::at(95_000)), "the actor wakes after the grace");
    assert!(f.tick(92_000).events.is_empty(), "at the deadline, the grace period runs");
    let t = f.say_written(PM, "Just in time. TURN_COMPLETE", 93_000, 93_500);
    assert_eq!(event_names(&t), ["turn_complete"]);
    // Past the grace, the turn times out.
    let t = f.tick(120_000 + 93_500 + 5_000);
    assert_eq!(event_names(&t), ["turn_timeout"]);
}

#[test]
fn a_pause_during_the_grace_period_keeps_the_deadline_where_it_was() {
    let mut f = Fixture::with_config(config(r#"{"graceSeconds": 5}"#));
    f.command(Command::Pause, 92_000).unwrap();
    assert_eq!(f.session.paused_remaining_ms, Some(-2_000));
    f.command(Command::Resume, 100_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(98_000)), "8 s paused: the deadline moved by 8 s");
    assert!(f.tick(102_000).events.is_empty(), "the grace goes on after the resume");
    assert_eq!(event_names(&f.tick(103_000)), ["turn_timeout"]);
}

#[test]
fn silence_after_the_holder_spoke_ends_its_turn_when_auto_detection_is_on() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    let wake = |f: &Fixture| f.session.wake_at(Context { personas: &f.personas, config: &f.config });
    assert_eq!(wake(&f), Some(Fixture::at(90_000)), "no silence counted before the holder speaks");
    f.say(PM, "Here is my take.", 5_000);
    assert_eq!(wake(&f), Some(Fixture::at(15_000)));
    f.say(PM, "And one more thing.", 8_000);
    assert!(f.tick(15_000).events.is_empty(), "the silence restarts with each message");
    let t = f.tick(18_000);
    assert!(matches!(only_event(&t, "turn_silent"), EventKind::TurnSilent { silent_seconds: 10, .. }));
    let said = texts(&t);
    assert_eq!(said[0], "🤫 pm was silent for 10s; the floor moves on.", "one short line, no timeout notice");
    assert!(said[1].contains("(dev) has the floor"), "then the next turn: {said:?}");
    assert_eq!(said.len(), 2);
    assert_eq!(f.active(), "dev");
}

#[test]
fn the_silence_line_may_be_configured_to_say_nothing() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    f.config.templates.set(Template::Silent, String::new());
    f.say(PM, "Here is my take.", 5_000);
    let t = f.tick(15_000);
    assert_eq!(event_names(&t), ["turn_silent"]);
    let said = texts(&t);
    assert!(said.len() == 1 && said[0].contains("(dev) has the floor"), "only the next turn: {said:?}");
}

#[test]
fn a_message_overtaken_by_a_newer_one_does_not_move_the_silence_back() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    let older = f.message(PM, "Here is my take.", 5_000);
    f.say(PM, "And one more thing.", 8_000);
    f.deliver(&older, 8_100);
    assert!(f.tick(15_000).events.is_empty(), "pm last spoke at 8 s, whatever the order its messages came in");
    assert_eq!(event_names(&f.tick(18_000)), ["turn_silent"]);
}

#[test]
fn a_pause_does_not_count_as_the_holders_silence_and_a_resume_restarts_it() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    f.say(PM, "Here is my take.", 5_000);
    f.command(Command::Pause, 8_000).unwrap();
    f.command(Command::Resume, 60_000).unwrap();
    assert!(f.tick(60_000).events.is_empty(), "52 s paused are not 52 s of silence");
    let wake = f.session.wake_at(Context { personas: &f.personas, config: &f.config });
    assert_eq!(wake, Some(Fixture::at(70_000)), "the silence starts again at the resume");
    assert!(f.tick(69_999).events.is_empty());
    assert_eq!(event_names(&f.tick(70_000)), ["turn_silent"]);
}

#[test]
fn a_holder_streaming_by_edits_is_not_silent() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    f.say(PM, "Thinking", 1_000);
    let streamed = f.last_id;
    f.deliver(&Fixture::edit(streamed, PM, "Thinking about it", 9_000), 9_000);
    assert!(f.tick(12_000).events.is_empty(), "the edit at 9 s restarted the silence");
    assert_eq!(event_names(&f.tick(19_000)), ["turn_silent"]);
}

#[test]
fn an_edit_made_after_the_silence_ended_the_turn_does_not_restart_it() {
    let mut f = Fixture::with_config(config(r#"{"silenceSeconds": 10}"#));
    f.say(PM, "Thinking", 1_000);
    let streamed = f.last_id;
    // Made at 12 s, after the silence's end at 11 s, and handled before the deadline tick.
    let t = f.deliver(&Fixture::edit(streamed, PM, "Thinking about it", 12_000), 12_000);
    assert!(matches!(only_event(&t, "turn_silent"), EventKind::TurnSilent { silent_seconds: 10, .. }));
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_completion_phrase_ends_the_turn_like_a_signal() {
    let mut f = Fixture::with_config(config(r#"{"completionPhrases": ["that's all from me"]}"#));
    let t = f.say(PM, "My points are made. That's all from me.", 1_000);
    assert!(
        matches!(only_event(&t, "turn_complete"), EventKind::TurnComplete { keyword, .. } if keyword == "that's all from me")
    );
    assert!(!t.effects.iter().any(|e| matches!(e, Effect::Relay { .. })), "nothing to strip: the message stays");
    assert_eq!(f.active(), "dev");
}

#[test]
fn auto_detection_is_off_by_default() {
    let mut f = Fixture::new();
    f.say(PM, "That's all from me.", 1_000);
    assert!(f.tick(80_000).events.is_empty());
    assert_eq!(f.active(), "pm");
}

#[test]
fn a_rule_that_does_not_strip_leaves_the_message_as_posted() {
    let rules = r#"{"rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "NOTE", "pattern": "NOTE:\\s*(?P<payload>.+)", "at": "line", "strip": false, "action": "record"}]}"#;
    let mut f = Fixture::with_config(config(rules));
    let t = f.say(PM, "NOTE: keep this visible\nMore text.", 1_000);
    assert!(
        matches!(only_event(&t, "recorded"), EventKind::Recorded { payload: Some(p), .. } if p == "keep this visible")
    );
    assert!(t.effects.is_empty(), "nothing stripped, so nothing is reposted: {:?}", t.effects);
    // With a stripping rule in the same message, only that one's match goes.
    let t = f.say(PM, "NOTE: still here\nDone. TURN_COMPLETE", 2_000);
    assert_eq!(t.effects[0], relayed(f.last_id, "pm", Some("NOTE: still here\nDone.".into())));
}

#[test]
fn unknown_limit_sets_how_many_unknown_signals_end_the_turn() {
    let mut f = Fixture::with_config(config(r#"{"unknownLimit": 1}"#));
    let t = f.say(PM, "DONE: all of it", 1_000);
    assert!(matches!(only_event(&t, "agent_signal_failure"), EventKind::AgentSignalFailure { count: 1, .. }));
    assert_eq!(f.active(), "dev");
}

#[test]
fn an_edit_that_adds_a_completion_phrase_ends_the_turn_like_a_signal() {
    let mut f = Fixture::with_config(config(r#"{"completionPhrases": ["that's all from me"]}"#));
    f.say(PM, "Thinking", 1_000);
    let t = f.deliver(&Fixture::edit(f.last_id, PM, "My points. That's all from me.", 2_000), 2_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

#[test]
fn messages_written_before_the_unknown_signal_that_ended_the_turn_stay_in_that_turn() {
    let mut f = Fixture::with_config(config(r#"{"unknownLimit": 1}"#));
    let earlier = f.message(PM, "My analysis, part 1.", 1_000);
    f.say(PM, "DONE: all of it", 2_000);
    assert_eq!(f.active(), "dev");
    // Overtaken by the message that ended the turn (a reordered dispatch, a catch-up).
    let t = f.deliver(&earlier, 2_100);
    assert!(
        !t.effects.iter().any(|e| matches!(e, Effect::Delete { .. })),
        "not removed as out of turn: {:?}",
        t.events
    );
    assert!(
        !t.events.iter().any(|e| matches!(e.kind.name(), "out_of_turn" | "late_signal")),
        "written in its turn: {:?}",
        event_names(&t)
    );
}

/// A message whose record won over a lower-priority ending signal it also carried (observe mode): an edit that adds
/// nothing (a typo fixed) does not end the turn with the signal the first judgement set aside; nor does one of a
/// message with a completion phrase already there.
#[test]
fn an_edit_adding_nothing_does_not_act_on_an_ending_signal_or_phrase_the_message_had_already() {
    let mut f = Fixture::with_config(config(
        r#"{"rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "CONFLICT", "pattern": "FILE CONFLICT:\\s*(?P<payload>\\S+)", "at": "line", "priority": 20,
         "action": "record"}
      ]}"#,
    ));
    f.set_display_mode(DisplayMode::Observe);
    let t = f.say(PM, "FILE CONFLICT: src/a.rs\nMy answer. TURN_COMPLETE", 1_000);
    assert_eq!(event_names(&t), ["recorded"], "the record wins; the turn goes on");
    let typo = Fixture::edit(f.last_id, PM, "FILE CONFLICT: src/a.rs\nMy answer (typo fixed). TURN_COMPLETE", 2_000);
    assert_eq!(f.deliver(&typo, 2_000), Transition::default(), "the edit added no signal");
    assert_eq!(f.active(), "pm");

    let mut f = Fixture::with_config(config(
        r#"{"completionPhrases": ["that is all"], "rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "PROGRESS", "pattern": "PROGRESS:\\s*(?P<payload>-?\\d+)", "at": "line", "action": "progress"}
      ]}"#,
    ));
    f.set_display_mode(DisplayMode::Observe);
    assert_eq!(event_names(&f.say(PM, "PROGRESS: 50\nThat is all for the first half.", 1_000)), ["progress"]);
    let typo = Fixture::edit(f.last_id, PM, "PROGRESS: 50\nThat is all for the first half!", 2_000);
    assert_eq!(f.deliver(&typo, 2_000), Transition::default(), "the edit added no signal");
    assert_eq!(f.active(), "pm");
}

/// A handoff names the persona by its id or its display name, in any case (found by a review: the README said so, but
/// only ids worked); a display name two members share names neither.
#[test]
fn handoff_names_a_persona_by_its_display_name_too() {
    let named = |names: [&str; 3]| {
        let mut personas = catalog().all().to_vec();
        for (persona, name) in personas.iter_mut().zip(names) {
            persona.display_name = name.into();
        }
        PersonaCatalog::new(personas)
    };
    let mut f = grammar();
    f.personas = named(["Planner", "Builder", "Reviewer"]);
    f.say(PM, "Yours.\nHANDOFF: reviewer", 1_000);
    assert_eq!(f.active(), "critic");
    f.say(CRITIC, "HANDOFF: @Builder", 2_000);
    assert_eq!(f.active(), "dev");
    // In any case, accented letters too (found by a review).
    f.personas = named(["Planner", "Builder", "Élodie"]);
    f.say(DEV, "HANDOFF: élodie", 3_000);
    assert_eq!(f.active(), "critic");

    let mut f = grammar();
    f.personas = named(["Planner", "Twin", "Twin"]);
    let t = f.say(PM, "HANDOFF: twin", 1_000);
    assert_eq!(f.active(), "pm", "ambiguous: refused");
    assert!(texts(&t)[0].starts_with("⚠️ There is no twin in this session"), "{:?}", texts(&t));
}

/// Found by a review: with a rule's `to`, the payload was never read, though spec 4.2 names the persona "by
/// `payload` (or the rule's `to`)". A payload naming a member wins; one naming nobody (a reason) leaves it to `to`.
#[test]
fn a_handoff_goes_to_the_persona_its_payload_names_and_else_to_the_rules_to() {
    let rules = r#"{"rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "HANDOFF", "pattern": "HANDOFF(?::[ \\t]*(?P<payload>\\S+))?", "at": "line", "action": "handoff",
         "to": "critic"}]}"#;
    let mut f = Fixture::with_config(config(rules));
    f.say(PM, "Over to dev.\nHANDOFF: dev", 1_000);
    assert_eq!(f.active(), "dev", "the payload names dev");
    f.say(DEV, "Done here.\nHANDOFF", 2_000);
    assert_eq!(f.active(), "critic", "no payload: the rule's `to`");
    f.command(Command::Give { persona: "pm".into() }, 3_000).unwrap();
    f.say(PM, "Please review.\nHANDOFF: please", 4_000);
    assert_eq!(f.active(), "critic", "a payload naming nobody: the rule's `to`");
}
