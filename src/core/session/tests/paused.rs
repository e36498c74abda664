//! A paused session does not act on signals (issue 15): the holder's signal is shown as any signal is, recorded as
//! held, and the holder is asked again at `resume`.

use super::*;

/// A review workflow in small: a route, an escalation, a keep, and unknown-signal and loop recovery.
fn workflow() -> Fixture {
    let json = r#"{"signals": {"unknownLimit": 3, "loopAfter": 3, "rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "READY", "pattern": "READY:\\s*(?P<task>\\S+)", "at": "line", "action": "route", "to": "critic",
         "stage": "review"},
        {"name": "BLOCKED", "pattern": "BLOCKED:\\s*(?P<payload>\\S+)", "at": "line", "action": "escalate",
         "priority": 50},
        {"name": "MORE", "pattern": "<more>(?P<payload>[^<]*)</more>", "at": "anywhere", "action": "keep"}]}}"#;
    Fixture::with_config(Config::parse("c.json", json).unwrap_or_else(|p| panic!("{p}")))
}

fn held(t: &Transition) -> Vec<(MessageId, String)> {
    t.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SignalHeld { message_id, signal } => Some((*message_id, signal.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_holders_signal_during_a_managers_pause_is_held_and_resume_asks_it_again() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    let t = f.say(PM, "Finishing my thought. TURN_COMPLETE", 20_000);
    assert_eq!((f.active(), f.session.status), ("pm", SessionStatus::Paused), "the floor stays");
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!(held(&t), [(f.last_id, "TURN_COMPLETE".to_owned())]);
    assert!(announcements(&t).is_empty(), "nobody is called on while paused");
    let text = Some("Finishing my thought.".into());
    let relay = relayed(f.last_id, "pm", text);
    assert_eq!(t.effects, [relay], "shown without the signal, as any signal is");
    assert_eq!(f.session.paused_remaining_ms, Some(80_000), "the turn's time is untouched");

    let t = f.command(Command::Resume, 50_000).unwrap();
    assert_eq!(
        texts(&t),
        ["🎙️ <@101> (pm) has the floor: 90s. End your message with TURN_COMPLETE."],
        "pm is asked again, with a mention"
    );
    assert_eq!(announcements(&t)[0].mention, Some(PM));
    assert_eq!((f.active(), f.session.turn_timeout_at), ("pm", Some(Fixture::at(140_000))), "a fresh turn");
    // Its next signal is acted on as ever.
    assert_eq!(event_names(&f.say(PM, "Done now. TURN_COMPLETE", 60_000)), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

#[test]
fn resume_after_a_pause_with_nothing_held_keeps_the_remaining_time() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    f.say(PM, "Still thinking, no signal.", 20_000);
    let t = f.command(Command::Resume, 50_000).unwrap();
    assert_eq!(texts(&t), ["▶️ Resumed. pm has 80s left."]);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(130_000)));
}

#[test]
fn after_an_escalation_a_route_signal_moves_neither_the_floor_nor_the_task_and_resume_gives_the_holder_a_fresh_turn() {
    let mut f = workflow();
    f.say(PM, "The build server is down.\nBLOCKED: infra", 5_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    let t = f.say(PM, "Parser done anyway.\nREADY: task-1", 6_000);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!(held(&t)[0].1, "READY");
    assert_eq!(f.active(), "pm");
    assert!(f.session.tasks.is_empty(), "no task moves");
    assert!(announcements(&t).is_empty());
    assert!(matches!(&t.effects[..], [Effect::Relay { text: Some(text), .. }] if text == "Parser done anyway."));

    let t = f.command(Command::Resume, 30_000).unwrap();
    assert_eq!(announcements(&t).len(), 1);
    assert_eq!(announcements(&t)[0].mention, Some(PM), "the holder keeps the floor, asked again");
    assert_eq!(f.active(), "pm");
    // Then the task routes as it should.
    let t = f.say(PM, "Parser done.\nREADY: task-1", 31_000);
    assert_eq!(event_names(&t), ["routed"]);
    assert_eq!((f.active(), f.session.tasks["task-1"].stage.as_str()), ("critic", "review"));
}

#[test]
fn while_paused_no_keep_escalation_unknown_signal_reply_or_loop_counting_happens() {
    let mut f = workflow();
    f.command(Command::Pause, 1_000).unwrap();
    let t = f.say(PM, "One more go <more>tests</more>", 2_000);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!(f.session.keeps_in_row, 0);
    let t = f.say(PM, "BLOCKED: again", 3_000);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!(f.session.pause_reason, None, "still a manager's pause, not an escalation");
    let t = f.say(PM, "ALMOST: a signal", 4_000);
    assert!(t.events.is_empty() && t.effects.is_empty(), "no unknown-signal reply: {:?}", event_names(&t));
    assert_eq!(f.session.agents[&id("pm")].unknown_signals, 0);
    for ms in [5_000, 6_000, 7_000] {
        let t = f.say(PM, "Same words.", ms);
        assert!(t.events.is_empty(), "no loop counting: {:?}", event_names(&t));
    }
    assert_eq!(f.session.repeats, None);
    assert_eq!(f.session.status, SessionStatus::Paused);
}

#[test]
fn a_held_signal_survives_a_save_and_a_load() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    f.say(PM, "Done. TURN_COMPLETE", 20_000);
    f.session = serde_json::from_str(&serde_json::to_string(&f.session).unwrap()).unwrap();
    let t = f.command(Command::Resume, 50_000).unwrap();
    assert_eq!(announcements(&t).iter().map(|a| a.mention).collect::<Vec<_>>(), [Some(PM)], "asked again");
}

#[test]
fn a_signal_written_before_a_managers_pause_but_handled_after_it_ends_the_turn() {
    let mut f = Fixture::new();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["turn_complete"], "judged by when it was written");
    assert!(announcements(&t).is_empty(), "dev's turn waits, unannounced, for the resume");
    assert_eq!((f.active(), f.session.status), ("dev", SessionStatus::Paused));
    let t = f.command(Command::Resume, 30_000).unwrap();
    assert!(
        texts(&t).iter().any(|s| s.starts_with("🎙️ <@102> (dev) has the floor: 120s")),
        "dev is called at the resume, with its whole turn: {:?}",
        texts(&t)
    );
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(150_000)));
}

#[test]
fn a_keep_written_before_a_pause_is_held_like_any_signal_that_would_go_on_within_the_turn() {
    let mut f = workflow();
    let keep = f.message(PM, "More to say <more>part two</more>", 9_000);
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let t = f.deliver(&keep, 10_500);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!((f.active(), f.session.paused_remaining_ms), ("pm", Some(80_000)));
}

#[test]
fn a_signal_written_before_an_escalation_paused_the_session_is_held() {
    let mut f = workflow();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.say(PM, "BLOCKED: need-creds", 10_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    // The pause followed the messages it was decided on: what comes after it waits for a person.
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert_eq!(f.active(), "pm");
}

#[test]
fn a_turn_extended_during_the_pause_it_began_in_is_announced_with_its_whole_time() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    f.command(Command::Skip, 11_000).unwrap();
    f.command(Command::Extend { seconds: 60 }, 12_000).unwrap();
    let t = f.command(Command::Resume, 20_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(200_000)), "dev's 120 s and the 60 s added");
    assert!(
        texts(&t).iter().any(|s| s.starts_with("🎙️ <@102> (dev) has the floor: 180s")),
        "one figure, the one the deadline keeps: {:?}",
        texts(&t)
    );
}

#[test]
fn a_signal_written_during_the_pause_is_held_even_by_a_holder_whose_turn_began_in_the_pause() {
    let mut f = Fixture::new();
    // pm signals at 9 s; the manager pauses at 10 s; pm's signal is read only at 30 s and still ends pm's turn.
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let devs = f.message(DEV, "My part. TURN_COMPLETE", 20_000);
    assert_eq!(event_names(&f.deliver(&signal, 30_000)), ["turn_complete"]);
    assert_eq!((f.active(), f.session.status), ("dev", SessionStatus::Paused));
    // dev's signal was written after the pause was given: held, not acted on, though dev's turn began at 30 s.
    assert_eq!(event_names(&f.deliver(&devs, 30_500)), ["signal_held"]);
    assert_eq!(f.active(), "dev");
}

/// An `extend` confirmed while paused is kept by the fresh turn a `resume` gives (after an escalation, or a held
/// signal): before, the fresh turn had the persona's timeout only, the time confirmed lost.
#[test]
fn time_added_while_paused_is_kept_by_the_fresh_turn_the_resume_gives() {
    let mut f = workflow();
    f.say(PM, "BLOCKED: creds", 5_000);
    let t = f.command(Command::Extend { seconds: 300 }, 10_000).unwrap();
    assert!(texts(&t)[0].contains("extended by 300s"), "{:?}", texts(&t));
    let t = f.command(Command::Resume, 20_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(20_000 + 90_000 + 300_000)), "the 300 s kept");
    assert!(texts(&t).iter().any(|s| s.contains("(pm) has the floor: 390s")), "{:?}", texts(&t));

    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    f.say(PM, "Done. TURN_COMPLETE", 12_000);
    f.command(Command::Extend { seconds: 300 }, 15_000).unwrap();
    f.command(Command::Resume, 20_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(20_000 + 90_000 + 300_000)), "with a held signal too");
}

/// The holder's message written before a `resume` that gives it a fresh turn, handled after it (a reordered
/// dispatch), is its own from the turn the resume restarted: not out of turn (before, it was deleted as such), also
/// when the floor has moved on since (a `give` after the resume).
#[test]
fn the_holders_message_written_before_a_fresh_resume_and_handled_after_it_is_not_out_of_turn() {
    for given_on in [false, true] {
        let mut f = workflow();
        f.say(PM, "BLOCKED: creds", 5_000);
        let details = f.message(PM, "Here is what I tried.", 8_000);
        f.say(HUMAN, "Creds are in the vault.", 9_000);
        f.command_given(Command::Resume, 10_000, 10_000).unwrap();
        if given_on {
            f.command_given(Command::Give { persona: "dev".into() }, 11_000, 11_000).unwrap();
        }
        let t = f.deliver(&details, 11_500);
        assert!(t.effects.is_empty(), "given on: {given_on}; left as written: {:?}", t.effects);
        assert!(!event_names(&t).contains(&"out_of_turn"), "given on: {given_on}; {:?}", event_names(&t));
        assert_eq!(f.active(), if given_on { "dev" } else { "pm" });
    }
}

/// A `skip` or `extend` given while paused, before a `resume` that restarts the turn, handled after it: it applies
/// to the turn the resume restarted, as it would handled in order.
#[test]
fn a_skip_or_extend_given_before_a_fresh_resume_and_handled_after_it_applies() {
    let mut f = workflow();
    f.say(PM, "BLOCKED: creds", 5_000);
    let extend = f.mint(9_000);
    f.command_given(Command::Resume, 10_000, 10_000).unwrap();
    let deadline = f.session.turn_timeout_at;
    let outcome = f.run(Command::Extend { seconds: 300 }, Some(extend), 10_500);
    assert!(outcome.is_ok(), "refused: {:?}", outcome.err());
    assert_eq!(f.session.turn_timeout_at, deadline.map(|d| d + TimeDelta::seconds(300)));

    let mut f = workflow();
    f.say(PM, "BLOCKED: creds", 5_000);
    let skip = f.mint(9_000);
    f.command_given(Command::Resume, 10_000, 10_000).unwrap();
    assert!(f.run(Command::Skip, Some(skip), 10_500).is_ok());
    assert_eq!(f.active(), "dev");
}

/// A signal written during a pause but handled only after the `resume` (a slash `resume` whose interaction overtook
/// the message on the gateway, a delayed dispatch): judged by when it was written, it is held, and the holder is
/// asked again, as it would have been handled in order. Before, it ended the turn the manager had paused.
#[test]
fn a_signal_written_during_a_pause_but_handled_after_the_resume_is_held_and_the_holder_asked_again() {
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 20_000);
    let quiet = f.message(PM, "And one more thing, no signal.", 21_000);
    let second = f.message(PM, "Really done. TURN_COMPLETE", 22_000);
    let t = f.command_given(Command::Resume, 30_000, 30_000).unwrap();
    assert_eq!(texts(&t), ["▶️ Resumed. pm has 80s left."], "nothing held yet");
    f.session = serde_json::from_str(&serde_json::to_string(&f.session).unwrap()).unwrap(); // saved and loaded

    // A message without a signal written while paused is left as written, and asks nothing.
    let t = f.deliver(&quiet, 30_200);
    assert!(t.events.is_empty() && t.effects.is_empty(), "{:?} {:?}", event_names(&t), t.effects);
    let t = f.deliver(&signal, 30_500);
    assert_eq!(event_names(&t), ["signal_held"], "written while paused");
    assert_eq!(held(&t), [(signal.id, "TURN_COMPLETE".to_owned())]);
    assert_eq!(
        texts(&t),
        ["🎙️ <@101> (pm) has the floor: 90s. End your message with TURN_COMPLETE."],
        "pm is asked again, as the resume would have"
    );
    assert_eq!(announcements(&t)[0].mention, Some(PM));
    assert!(t.effects.iter().any(|e| matches!(e, Effect::Relay { message_id, .. } if *message_id == signal.id)));
    assert_eq!((f.active(), f.session.turn_timeout_at), ("pm", Some(Fixture::at(120_500))), "a fresh turn");

    // Once asked, the rest of what it wrote while paused is held without asking again.
    let t = f.deliver(&second, 31_500);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert!(announcements(&t).is_empty(), "asked once: {:?}", texts(&t));
    assert_eq!(f.active(), "pm");

    // What it writes after the resume is acted on as ever.
    assert_eq!(event_names(&f.say(PM, "Now done. TURN_COMPLETE", 40_000)), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

/// The same after a resume that gave the holder a fresh turn already (an escalation): held, and not asked twice.
#[test]
fn a_signal_written_during_an_escalations_pause_but_handled_after_the_resume_is_held() {
    let mut f = workflow();
    f.say(PM, "BLOCKED: creds", 5_000);
    let signal = f.message(PM, "Done anyway. TURN_COMPLETE", 8_000);
    let t = f.command_given(Command::Resume, 10_000, 10_000).unwrap();
    assert_eq!(announcements(&t)[0].mention, Some(PM), "the resume asks pm again");
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert!(announcements(&t).is_empty(), "asked once: {:?}", texts(&t));
    assert_eq!(f.active(), "pm");
}

/// A signal written before the pause was given, handled after the resume, ends the turn, as handled in order; and
/// one written during a pause whose turn has ended since belongs to an earlier turn, judged as such.
#[test]
fn a_signal_written_before_the_pause_and_handled_after_the_resume_ends_the_turn() {
    let mut f = Fixture::new();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    f.command_given(Command::Resume, 30_000, 30_000).unwrap();
    assert_eq!(event_names(&f.deliver(&signal, 30_500)), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

/// A signal written during one pause and handled during the next: held, as it was written while paused (before, it
/// ended the turn, taken for one written before the second pause); the second `resume` asks the holder again.
#[test]
fn a_signal_written_during_one_pause_and_handled_during_the_next_is_held() {
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 20_000);
    f.command_given(Command::Resume, 30_000, 30_000).unwrap();
    f.command_given(Command::Pause, 40_000, 40_000).unwrap();
    assert_eq!(event_names(&f.deliver(&signal, 41_000)), ["signal_held"]);
    assert_eq!((f.active(), f.session.status), ("pm", SessionStatus::Paused));
    let t = f.command_given(Command::Resume, 50_000, 50_000).unwrap();
    assert_eq!(announcements(&t).iter().map(|a| a.mention).collect::<Vec<_>>(), [Some(PM)], "asked again");
}

/// A pause the session took by itself holds what the holder wrote from when the message that paused it was written
/// (an escalation handled late), also when handled after the `resume`; the resume asked the holder already.
#[test]
fn a_signal_written_after_an_escalation_handled_late_is_held_after_the_resume_too() {
    let mut f = workflow();
    let escalation = f.message(PM, "BLOCKED: creds", 5_000);
    let signal = f.message(PM, "Done anyway. TURN_COMPLETE", 6_000);
    f.deliver(&escalation, 8_000);
    assert_eq!(f.session.status, SessionStatus::Paused);
    let t = f.command_given(Command::Resume, 10_000, 10_000).unwrap();
    assert_eq!(announcements(&t)[0].mention, Some(PM), "the resume asks pm again");
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["signal_held"], "written after the escalation");
    assert!(announcements(&t).is_empty(), "asked once: {:?}", texts(&t));
    assert_eq!(f.active(), "pm");
}

/// A signal written during a first pause, handled after a second pause's `resume`: held, the holder asked again.
#[test]
fn a_signal_from_an_earlier_pause_handled_after_a_later_resume_is_held() {
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 11_000);
    f.command_given(Command::Resume, 12_000, 12_000).unwrap();
    f.command_given(Command::Pause, 13_000, 13_000).unwrap();
    f.command_given(Command::Resume, 14_000, 14_000).unwrap();
    let t = f.deliver(&signal, 14_500);
    assert_eq!(event_names(&t), ["signal_held"], "written while paused: {:?}", texts(&t));
    assert_eq!(announcements(&t).iter().map(|a| a.mention).collect::<Vec<_>>(), [Some(PM)], "asked again");
    assert_eq!(f.active(), "pm");
}

/// The next persona's signal written during the pause is held even when its turn began only after the `resume` (the
/// signal that gave it the floor, written before the pause, handled after the resume), directly or re-judged after
/// being taken for out of turn; it was called on when its turn began, so it is not asked again.
#[test]
fn a_signal_written_during_the_pause_by_a_holder_whose_turn_began_after_the_resume_is_held() {
    for overtaken in [false, true] {
        let mut f = Fixture::new();
        let pms = f.message(PM, "Done. TURN_COMPLETE", 9_000);
        f.command_given(Command::Pause, 10_000, 10_000).unwrap();
        let devs = f.message(DEV, "My part. TURN_COMPLETE", 20_000);
        f.command_given(Command::Resume, 30_000, 30_000).unwrap();
        let names = if overtaken {
            assert_eq!(event_names(&f.deliver(&devs, 30_200)), ["out_of_turn"]);
            event_names(&f.deliver(&pms, 30_500))
        } else {
            assert_eq!(event_names(&f.deliver(&pms, 30_500)), ["turn_complete"]);
            event_names(&f.deliver(&devs, 31_000))
        };
        assert_eq!(names.last(), Some(&"signal_held"), "overtaken: {overtaken}: {names:?}");
        assert_eq!(f.active(), "dev", "overtaken: {overtaken}");
        let floors = f.session.history.iter().filter(|e| e.kind.name() == "turn_complete").count();
        assert_eq!(floors, 1, "overtaken: {overtaken}");
    }
}

/// A held signal of a pause the holder was asked again after, handled only during a later pause: held, and the
/// later `resume` does not ask the holder a second time.
#[test]
fn a_holder_asked_again_is_not_asked_twice_for_what_it_wrote_before() {
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    f.say(PM, "Done. TURN_COMPLETE", 15_000);
    let second = f.message(PM, "Really done. TURN_COMPLETE", 20_000);
    let t = f.command_given(Command::Resume, 30_000, 30_000).unwrap();
    assert_eq!(announcements(&t)[0].mention, Some(PM), "asked once, at the resume");
    f.command_given(Command::Pause, 40_000, 40_000).unwrap();
    assert_eq!(event_names(&f.deliver(&second, 41_000)), ["signal_held"]);
    let t = f.command_given(Command::Resume, 50_000, 50_000).unwrap();
    assert_eq!(texts(&t), ["▶️ Resumed. pm has 80s left."], "not a second fresh turn");
}

/// Whether the holder was called on since it wrote a held signal is judged on Discord's clock: ours running 2 s
/// behind it, a second signal written just before the `resume` does not ask the holder a second time (found by a
/// review: our clock's instant of the call looked earlier than the signal).
#[test]
fn a_holder_is_not_asked_twice_when_discords_clock_runs_ahead_of_ours() {
    let mut f = Fixture::new();
    // Discord's time = ours + 2 s.
    f.command_given(Command::Pause, 10_000, 8_000).unwrap();
    let first = f.message(PM, "Done. TURN_COMPLETE", 20_000);
    let second = f.message(PM, "Really done. TURN_COMPLETE", 29_500);
    let t = f.command_given(Command::Resume, 30_000, 28_050).unwrap();
    assert_eq!(texts(&t), ["▶️ Resumed. pm has 82s left."]);
    let t = f.deliver(&first, 28_100);
    assert_eq!(announcements(&t).len(), 1, "asked again once");
    let t = f.deliver(&second, 28_150);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert!(announcements(&t).is_empty(), "asked a second time: {:?}", texts(&t));
}

/// A `resume` that restarts a turn whose announcement Discord has not confirmed yet calls nobody: the holder's
/// signal written during the pause asks it again whether handled before the `resume` or after it (found by a review:
/// the restart was taken for a call, and the holder was never asked again).
#[test]
fn a_signal_held_after_a_resume_that_restarted_an_unconfirmed_turn_asks_the_holder_again() {
    for reordered in [false, true] {
        let mut f = Fixture::new();
        f.held = true;
        f.command_given(Command::Skip, 500, 500).unwrap(); // dev's floor, its announcement not confirmed yet
        assert_eq!(f.active(), "dev");
        f.command_given(Command::Pause, 1_000, 1_000).unwrap();
        let signal = f.message(DEV, "Done. TURN_COMPLETE", 3_000);
        let mut asked = 0;
        if !reordered {
            assert_eq!(event_names(&f.deliver(&signal, 3_100)), ["signal_held"]);
        }
        let t = f.command_given(Command::Resume, 5_000, 5_000).unwrap();
        asked += announcements(&t).iter().filter(|a| a.mention == Some(DEV)).count();
        if reordered {
            let t = f.deliver(&signal, 5_100);
            assert_eq!(event_names(&t), ["signal_held"]);
            asked += announcements(&t).iter().filter(|a| a.mention == Some(DEV)).count();
        }
        f.held = false;
        f.accept(6_000);
        assert_eq!(asked, 1, "reordered: {reordered}: dev asked again {asked} times");
    }
}

/// The same with a `resume` that asks the holder again itself (a signal held before it): its own id bounds the
/// instant of the call on Discord's clock, so a second signal written just before it is not taken for a new one.
#[test]
fn a_holder_asked_again_by_the_resume_is_not_asked_twice_when_discords_clock_runs_ahead_of_ours() {
    let mut f = Fixture::new();
    // Discord's time = ours + 2 s.
    f.command_given(Command::Pause, 10_000, 8_000).unwrap();
    let first = f.message(PM, "Done. TURN_COMPLETE", 20_000);
    assert_eq!(event_names(&f.deliver(&first, 18_000)), ["signal_held"]);
    let second = f.message(PM, "Really done. TURN_COMPLETE", 29_500);
    let t = f.command_given(Command::Resume, 30_000, 28_050).unwrap();
    assert_eq!(announcements(&t).iter().map(|a| a.mention).collect::<Vec<_>>(), [Some(PM)], "asked again");
    let t = f.deliver(&second, 28_150);
    assert_eq!(event_names(&t), ["signal_held"]);
    assert!(announcements(&t).is_empty(), "asked a second time: {:?}", texts(&t));
}

/// Found by a review: dev's floor announcement was on its way when a manager paused, and Discord refused it (403,
/// the bot may no longer post). Running, the same refusal pauses with a reason and `resume` calls dev again; paused,
/// the refusal was passed over, and at the `resume` only "Resumed" was said: dev was never told, and timed out.
#[test]
fn a_floor_announcement_refused_during_a_pause_is_made_at_the_resume() {
    use crate::core::session::lost::Unreachable;
    let mut f = Fixture::new();
    f.held = true;
    f.say(PM, "Done. TURN_COMPLETE", 1_000);
    f.command_given(Command::Pause, 1_100, 1_100).unwrap();
    let floor = f
        .session
        .outbox
        .iter()
        .find(|q| matches!(&q.effect, Effect::Announce(a) if a.text.contains("(dev) has the floor")))
        .expect("dev's floor on its way")
        .id;
    let (personas, config) = (f.personas.clone(), f.config.clone());
    let ctx = Context { personas: &personas, config: &config };
    f.session.unreachable(Unreachable::MayNotPost, Fixture::at(1_200), ctx);
    f.session.effect_failed(floor, Some(403), Fixture::at(1_200), ctx);
    f.session.outbox.clear(); // the rest refused too
    f.held = false;
    let t = f.command_given(Command::Resume, 60_000, 60_000).unwrap();
    assert!(texts(&t).iter().any(|x| x.contains("(dev) has the floor")), "dev is told: {:?}", texts(&t));
    assert_eq!(f.active(), "dev");
    let left = (f.session.turn_timeout_at.unwrap() - Fixture::at(60_000)).num_seconds();
    assert_eq!(left, 120, "its whole turn, from the resume");
}

/// Found by two reviews: a turn paused then resumed that timed out said "timed out after 690s" for a 90 s turn that
/// ran 90 s (the pause counted), while one that began during a pause said its running time only.
#[test]
fn a_turn_paused_then_timed_out_reports_the_time_it_ran() {
    let mut f = Fixture::new(); // pm: 90 s
    f.command(Command::Pause, 30_000).unwrap();
    f.command(Command::Resume, 630_000).unwrap();
    let t = f.tick(690_000);
    assert_eq!(t.events[0].kind, EventKind::TurnTimeout { duration_seconds: 90, next_agent: id("dev") });
    assert!(texts(&t).contains(&"⏱️ pm turn timed out after 90s"), "{:?}", texts(&t));
}
