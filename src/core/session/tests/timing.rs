//! Messages judged by when they were written (spec 5, steps 6 and 7; spec 8): each id handled once, overtaken
//! messages, signals read after their deadline, messages of a turn that already ended, catch-up, durability.

use super::*;

/// How many turns have ended, by signal or deadline, as the history tells.
fn turn_ends(session: &Session) -> usize {
    session
        .history
        .iter()
        .filter(|e| matches!(e.kind, EventKind::TurnComplete { .. } | EventKind::TurnTimeout { .. }))
        .count()
}

// --- exactly once per message id -----------------------------------------------------------------------------

#[test]
fn a_repeated_delivery_of_a_message_is_handled_once() {
    let mut f = Fixture::new();
    let message = f.message(PM, "x TURN_COMPLETE", 1_000);
    assert_eq!(event_names(&f.deliver(&message, 1_000)), ["turn_complete"]);
    let before = f.session.clone();
    assert_eq!(f.deliver(&message, 1_001), Transition::default());
    assert_eq!(f.deliver(&message, 500_000), Transition::default(), "however late the repeat");
    assert_eq!(f.session, before);
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_signal_overtaken_by_a_newer_message_is_still_handled_and_completes_the_turn() {
    let mut f = Fixture::new();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 1_000);
    let newer = f.message(HUMAN, "Looks good", 1_005);
    f.deliver(&newer, 1_010);
    let t = f.deliver(&signal, 1_020);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.last_message_id, Some(newer.id), "the catch-up cursor stays on the newest message");
}

#[test]
fn repeats_are_recognised_across_many_messages_with_a_bounded_memory() {
    let mut f = Fixture::new();
    let messages: Vec<IncomingMessage> = (0..1_000).map(|i| f.message(HUMAN, "chatter", 1_000 + i)).collect();
    for m in &messages {
        assert!(f.deliver(m, 2_000).changed);
    }
    assert_eq!(f.session.recent_ids.len(), RecentIds::CAPACITY);
    for m in messages.iter().rev().take(RecentIds::CAPACITY) {
        assert_eq!(f.deliver(m, 3_000), Transition::default(), "remembered");
    }
    assert_eq!(f.deliver(&messages[0], 3_000), Transition::default(), "forgotten, and older than all it keeps");
    // One written among the remembered ones but never delivered is new.
    let unseen = IncomingMessage { id: MessageId(messages[900].id.0 + 1_000_000), ..messages[900].clone() };
    assert!(unseen.id < messages[901].id);
    assert!(f.deliver(&unseen, 3_000).changed);
}

#[test]
fn after_a_load_handled_messages_are_repeats_and_one_overtaken_within_the_window_is_still_new() {
    let mut f = Fixture::new();
    let too_old = f.message(PM, "never delivered, long before", 1_000);
    let handled = f.message(PM, "part one", 12_000);
    f.deliver(&handled, 12_000);
    let overtaken = f.message(PM, "part two", 13_000);
    f.say(PM, "part three", 13_050);
    let saved = serde_json::to_string(&f.session).unwrap();
    f.session = serde_json::from_str(&saved).unwrap();
    assert_eq!(f.session.recent_ids.len(), 2, "the ids handled within the window are saved");
    assert_eq!(f.deliver(&handled, 14_000), Transition::default(), "handled before the restart");
    assert_eq!(f.deliver(&too_old, 14_000), Transition::default(), "older than the window: taken as handled");
    assert!(f.deliver(&overtaken, 14_000).changed, "overtaken just before the save, never handled: new");
    assert_eq!(f.deliver(&overtaken, 14_001), Transition::default(), "and handled once");
    let signal = f.message(PM, "TURN_COMPLETE", 15_000);
    assert_eq!(event_names(&f.deliver(&signal, 15_000)), ["turn_complete"]);
}

#[test]
fn a_session_saved_before_the_window_was_kept_takes_everything_up_to_its_newest_id_as_handled() {
    let mut f = Fixture::new();
    let old = f.message(PM, "part one", 1_000);
    f.say(PM, "part two", 2_000);
    let mut file: serde_json::Value = serde_json::to_value(&f.session).unwrap();
    file.as_object_mut().unwrap().remove("recentlyHandled").expect("saved now");
    f.session = serde_json::from_value(file).unwrap();
    let before = f.session.clone();
    assert_eq!(f.deliver(&old, 3_000), Transition::default(), "it may have been handled before the restart");
    let signal = f.message(PM, "TURN_COMPLETE", 3_000);
    assert_eq!(event_names(&f.deliver(&signal, 3_000)), ["turn_complete"]);
    assert_eq!(f.deliver(&old, 3_001), Transition::default(), "still a repeat once newer ids are remembered");
    assert_ne!(f.session, before);
}

#[test]
fn commands_are_not_deduplicated_in_the_core_and_do_not_claim_their_message_id() {
    let mut f = Fixture::new();
    let origin = f.mint(1_000);
    assert_eq!(event_names(&f.run(Command::Skip, Some(origin), 1_000).unwrap()), ["skipped"]);
    assert_eq!(
        event_names(&f.run(Command::Skip, Some(origin), 1_001).unwrap()),
        ["skipped"],
        "the layer above dedupes"
    );
    assert_eq!(f.active(), "critic");
    // The command's own message still reaches the engine as a message of a person.
    let typed = IncomingMessage {
        id: origin,
        author: HUMAN,
        text: "!skip".into(),
        edited: false,
        written_at: Fixture::at(1_000),
        edited_at: None,
        has_files: false,
        flags: Default::default(),
        mentions: None,
    };
    assert!(f.deliver(&typed, 1_002).changed);
}

// --- deadlines judged by written time ------------------------------------------------------------------------

#[test]
fn a_signal_written_before_the_deadline_and_handled_after_it_completes_the_turn() {
    let mut f = Fixture::new();
    let t = f.say_written(PM, "Just in time. TURN_COMPLETE", 89_000, 95_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.turn_started_at, Some(Fixture::at(95_000)), "dev's turn starts when it is announced");
    assert_eq!(f.tick(95_000), Transition::default());
    assert_eq!(f.session.agents[&id("pm")].consecutive_timeouts, 0);
}

#[test]
fn a_signal_written_before_the_deadline_is_late_once_the_turn_timed_out() {
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"]);
    let t = f.say_written(PM, "Just in time? TURN_COMPLETE", 89_000, 90_500);
    assert_eq!(event_names(&t), ["late_signal"]);
    assert_eq!(f.active(), "dev", "a turn ended and announced is not taken back");
}

#[test]
fn a_signal_written_exactly_at_the_deadline_is_late() {
    // The turn covers [start, deadline).
    for handled in [90_000, 95_000] {
        let mut f = Fixture::new();
        let t = f.say_written(PM, "Made it? TURN_COMPLETE", 90_000, handled);
        assert_eq!(event_names(&t), ["turn_timeout", "late_signal"], "handled at {handled}");
        assert_eq!(f.active(), "dev");
        assert_eq!(f.tick(handled), Transition::default());
        assert_eq!(turn_ends(&f.session), 1);
    }
}

#[test]
fn a_deadline_and_a_signal_at_the_same_instant_end_one_turn() {
    // The tick first: the signal written a millisecond before the deadline is late.
    let mut f = Fixture::new();
    f.tick(90_000);
    assert_eq!(event_names(&f.say_written(PM, "Made it. TURN_COMPLETE", 89_999, 90_000)), ["late_signal"]);
    assert_eq!((f.active(), turn_ends(&f.session)), ("dev", 1));

    // The signal first: the deadline that follows finds nothing to end.
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.say_written(PM, "Made it. TURN_COMPLETE", 89_999, 90_000)), ["turn_complete"]);
    assert_eq!(f.tick(90_000), Transition::default());
    assert_eq!((f.active(), turn_ends(&f.session)), ("dev", 1));
}

#[test]
fn a_discord_clock_ahead_of_ours_does_not_end_a_turn_early() {
    let mut f = Fixture::new();
    let t = f.say_written(PM, "Still thinking", 91_000, 89_000);
    assert!(t.events.is_empty());
    assert_eq!(f.active(), "pm");
    assert_eq!(f.session.agents[&id("pm")].last_activity, Some(Fixture::at(89_000)), "not in our future");
}

// --- messages of a turn that already ended -------------------------------------------------------------------

#[test]
fn a_message_written_in_turn_and_handled_after_its_own_signal_is_in_turn_without_a_second_advance() {
    let mut f = Fixture::new();
    let earlier = f.message(PM, "Part one.", 1_000);
    f.say(PM, "Part two. TURN_COMPLETE", 2_000);
    assert_eq!(f.active(), "dev");
    let before = (f.session.turn_started_at, f.session.round, f.session.history.len());
    let t = f.deliver(&earlier, 2_010);
    assert!(t.effects.is_empty() && t.events.is_empty(), "neither out of turn nor deleted: {t:?}");
    assert_eq!(f.active(), "dev");
    assert_eq!((f.session.turn_started_at, f.session.round, f.session.history.len()), before);
}

#[test]
fn an_older_signal_of_a_completed_turn_is_shown_stripped_without_advancing() {
    for mode in [DisplayMode::Relay, DisplayMode::Observe] {
        let mut f = Fixture::new();
        f.set_display_mode(mode);
        let earlier = f.message(PM, "First answer. TURN_COMPLETE", 1_000);
        f.say(PM, "Second answer. TURN_COMPLETE", 2_000);
        let t = f.deliver(&earlier, 2_010);
        let shown = match mode {
            DisplayMode::Relay => relayed(earlier.id, "pm", Some("First answer.".into())),
            DisplayMode::Observe => Effect::React { message_id: earlier.id, emoji: "✅".into() },
        };
        assert_eq!(t.effects, [shown]);
        assert!(t.events.is_empty());
        assert_eq!((f.active(), turn_ends(&f.session)), ("dev", 1), "{mode:?}");
    }
}

#[test]
fn skip_handled_before_a_signal_written_earlier_leaves_the_signal_in_its_past_turn() {
    // The skip's snowflake marks the end of pm's turn, or the instant it was run when it has none.
    for origin in [true, false] {
        let mut f = Fixture::new();
        if origin {
            f.command_given(Command::Skip, 5_000, 5_500).unwrap();
        } else {
            f.command(Command::Skip, 5_000).unwrap();
        }
        assert_eq!(f.active(), "dev");
        pms_signal_of_4_s_is_shown_stripped_in_its_past_turn(&mut f, &format!("origin {origin}"));
        assert_eq!((f.active(), f.session.round), ("dev", 1), "no advance");
    }
}

/// pm's answer to its turn, written at 4 s, before a command given at 5 s ended that turn, and handled at 6 s: in
/// that turn, which is over, so it is shown without its signal and ends nothing (no `out_of_turn` either).
fn pms_signal_of_4_s_is_shown_stripped_in_its_past_turn(f: &mut Fixture, case: &str) {
    let t = f.say_written(PM, "Here it is. TURN_COMPLETE", 4_000, 6_000);
    let stripped = relayed(f.last_id, "pm", Some("Here it is.".into()));
    assert_eq!(t.effects, [stripped], "{case}");
    assert!(t.events.is_empty(), "{case}: {t:?}");
}

#[test]
fn a_message_written_after_its_turn_ended_is_out_of_turn() {
    let mut f = Fixture::new();
    f.say(PM, "Done. TURN_COMPLETE", 2_000);
    let t = f.say(PM, "One more thing.", 3_000);
    assert_eq!(t.effects, [Effect::Delete { message_id: f.last_id }]);
    assert_eq!(event_names(&t), ["out_of_turn"]);

    let mut f = Fixture::new();
    // The skip's snowflake marks the end, not the moment it was handled.
    f.command_given(Command::Skip, 5_000, 7_000).unwrap();
    let t = f.say_written(PM, "But wait.", 6_000, 7_100);
    assert_eq!(event_names(&t), ["out_of_turn"]);
}

#[test]
fn a_message_of_an_older_turn_does_not_use_up_the_late_reply_to_a_timeout() {
    let mut f = Fixture::new();
    let old = f.message(PM, "An afterthought.", 1_000);
    f.say(PM, "a TURN_COMPLETE", 2_000);
    f.say(DEV, "b TURN_COMPLETE", 3_000);
    f.say(CRITIC, "c TURN_COMPLETE", 4_000);
    assert_eq!(f.active(), "pm");
    f.tick(94_000);
    assert_eq!(f.active(), "dev");
    assert!(f.deliver(&old, 95_000).events.is_empty(), "in its own past turn");
    assert_eq!(event_names(&f.say(PM, "Sorry. TURN_COMPLETE", 96_000)), ["late_signal"]);
}

#[test]
fn in_a_roster_of_one_an_older_signal_does_not_end_the_next_turn() {
    let mut f = Fixture::new();
    f.command(Command::Order { roster: vec!["pm".into()] }, 100).unwrap();
    let first = f.message(PM, "First. TURN_COMPLETE", 1_000);
    assert_eq!(event_names(&f.say(PM, "Second. TURN_COMPLETE", 2_000)), ["turn_complete"]);
    assert_eq!((f.active(), f.session.round), ("pm", 2));
    let t = f.deliver(&first, 2_010);
    assert!(t.events.is_empty(), "written before pm's new turn began: {t:?}");
    assert_eq!((f.session.round, f.session.turn_started_at), (2, Some(Fixture::at(2_000))));
}

#[test]
fn a_signal_written_before_a_skip_gave_its_author_the_floor_again_does_not_end_that_new_turn() {
    // pm alone (its skip gives it a new turn), or given the floor back by `give` after a skip moved it on.
    for regiven in [false, true] {
        let mut f = Fixture::new();
        if regiven {
            f.command_given(Command::Skip, 5_000, 5_500).unwrap();
            f.command_given(Command::Give { persona: "pm".into() }, 5_800, 5_800).unwrap();
        } else {
            f.command(Command::Order { roster: vec!["pm".into()] }, 100).unwrap();
            f.command_given(Command::Skip, 5_000, 5_500).unwrap();
        }
        let (round, started) = (f.session.round, f.session.turn_started_at);
        assert_eq!(f.active(), "pm");
        // Handled after pm was given the floor again: still in its first turn.
        pms_signal_of_4_s_is_shown_stripped_in_its_past_turn(&mut f, &format!("regiven {regiven}"));
        assert_eq!((f.active(), f.session.round, f.session.turn_started_at), ("pm", round, started), "one turn end");
    }
}

// --- commands judged by when they were given ------------------------------------------------------------------

#[test]
fn a_skip_given_before_a_signal_but_handled_after_it_is_refused_and_the_next_turn_stands() {
    let mut f = Fixture::new();
    f.say_written(PM, "Done. TURN_COMPLETE", 6_000, 6_000);
    assert_eq!(f.active(), "dev");
    // Saved and read back in between: what the refusal rests on is in the file.
    f.session = serde_json::from_value(serde_json::to_value(&f.session).unwrap()).unwrap();
    let before = f.session.clone();
    let refusal = f.command_given(Command::Skip, 5_000, 6_500).unwrap_err();
    assert!(refusal.0.contains("had already ended") && refusal.0.contains("dev has the floor"), "{}", refusal.0);
    assert_eq!(f.session, before, "one turn end, not two: dev keeps the floor it was just given");
    let refusal = f.command_given(Command::Extend { seconds: 60 }, 5_500, 6_600).unwrap_err();
    assert!(refusal.0.contains("`extend`"), "{}", refusal.0);
    assert_eq!(f.session, before, "dev's turn is not lengthened by a request made for pm's");

    // Given after the signal, it is about dev's turn.
    assert_eq!(event_names(&f.command_given(Command::Skip, 6_100, 6_700).unwrap()), ["skipped"]);
    assert_eq!(f.active(), "critic");
}

#[test]
fn a_skip_given_before_the_deadline_and_handled_after_it_ends_that_turn_only() {
    let mut f = Fixture::new();
    let t = f.command_given(Command::Skip, 89_000, 91_000).unwrap();
    assert_eq!(event_names(&t), ["skipped"], "pm's turn was still running when the skip was given");
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.agents[&id("pm")].consecutive_timeouts, 0, "no strike for a turn that did not time out");

    // The deadline handled first: the skip was about the turn that timed out.
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"]);
    let refusal = f.command_given(Command::Skip, 89_000, 90_500).unwrap_err();
    assert!(refusal.0.contains("dev has the floor"), "{}", refusal.0);
    assert_eq!(f.active(), "dev");

    // Given after the deadline, it finds pm's turn over and skips the next one, as before.
    let mut f = Fixture::new();
    let t = f.command_given(Command::Skip, 90_500, 91_000).unwrap();
    assert_eq!(event_names(&t), ["turn_timeout", "skipped"]);
    assert_eq!(f.active(), "critic");
}

#[test]
fn a_pause_given_before_the_deadline_and_handled_after_it_keeps_the_time_left_when_it_was_given() {
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 85_000, 91_000).unwrap();
    assert_eq!(f.active(), "pm", "pm's turn was still running when the pause was given");
    assert_eq!(f.session.paused_remaining_ms, Some(5_000), "pm had 5 s left when the pause was given");
    f.command(Command::Resume, 200_000).unwrap();
    assert_eq!(f.tick(204_999).events, []);
    assert_eq!(event_names(&f.tick(205_000)), ["turn_timeout"]);

    // The deadline handled first: the pause finds dev's turn, which has had none of its time yet.
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"]);
    f.command_given(Command::Pause, 85_000, 90_500).unwrap();
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.paused_remaining_ms, Some(120_000), "dev's whole turn, not more: it began after the pause");
    // A resume given after that pause (but before dev's turn began) is not overtaken by it: it was given later.
    f.command_given(Command::Resume, 87_000, 91_000).unwrap();
    assert_eq!(f.session.status, SessionStatus::Running);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(211_000)), "dev's whole turn from the resume");
}

#[test]
fn a_pause_or_resume_overtaken_by_a_later_one_is_refused_and_the_session_is_left_as_the_later_one_left_it() {
    // Running: a pause given at 10 s takes poise longer than the actor waits; the resume given at 12 s comes first.
    let mut f = Fixture::new();
    assert!(f.command_given(Command::Resume, 12_000, 12_100).is_err(), "not paused (yet)");
    let Refusal(why) = f.command_given(Command::Pause, 10_000, 14_000).unwrap_err();
    assert!(why.contains("resumed after this `pause` was given") && why.contains("running now"), "{why}");
    assert_eq!(f.session.status, SessionStatus::Running, "the session runs, as the resume, given last, asked");
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"], "pm's deadline untouched");

    // Paused: the resume given at 30 s comes before a pause given at 25 s. Run, that pause would pause the session
    // again, and from 25 s: with the 5 s before the resume given back to pm.
    let mut f = Fixture::new();
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    f.command_given(Command::Resume, 30_000, 30_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(110_000)), "80 s left from 30 s");
    assert!(f.command_given(Command::Pause, 25_000, 33_000).is_err());
    assert_eq!(f.session.status, SessionStatus::Running);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(110_000)));
    // A pause given after the resume is run, and a command without a snowflake is never taken for an old one.
    f.command_given(Command::Pause, 40_000, 40_000).unwrap();
    assert_eq!(f.session.paused_remaining_ms, Some(70_000));
    f.command(Command::Resume, 41_000).unwrap();
    assert_eq!(f.session.status, SessionStatus::Running);
}

#[test]
fn a_command_without_a_snowflake_is_never_taken_for_one_given_in_an_earlier_turn() {
    let mut f = Fixture::new();
    f.say_written(PM, "Done. TURN_COMPLETE", 6_000, 6_000);
    // Discord's clock ahead of ours: the signal's snowflake is later than the instant the skip is run.
    assert_eq!(event_names(&f.command(Command::Skip, 5_000).unwrap()), ["skipped"]);
    assert_eq!(f.active(), "critic");
}

// --- catch-up ------------------------------------------------------------------------------------------------

#[test]
fn catch_up_judges_replayed_messages_by_when_they_were_written_and_a_later_tick_ends_the_turn() {
    let mut f = Fixture::new();
    for (who, text, written) in [(PM, "Part one.", 10_000), (HUMAN, "Go on", 50_000), (PM, "Part two.", 80_000)] {
        let t = f.say_written(who, text, written, 200_000);
        assert!(t.events.is_empty() && t.effects.is_empty(), "{text} was written in pm's turn");
    }
    assert_eq!(f.active(), "pm", "handling old messages does not time the turn out");
    let t = f.tick(200_001);
    assert_eq!(t.events[0].kind, EventKind::TurnTimeout { duration_seconds: 200, next_agent: id("dev") });
}

#[test]
fn catch_up_completes_a_turn_signalled_in_time_and_times_out_at_a_message_written_after_the_deadline() {
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.say_written(PM, "Done. TURN_COMPLETE", 80_000, 300_000)), ["turn_complete"]);
    // dev's turn starts now (300 s), so its deadline is 420 s; a message written later than that ends it.
    assert!(f.say_written(DEV, "Working on it.", 200_000, 300_001).events.is_empty(), "dev holds the floor");
    let t = f.say_written(HUMAN, "Anyone?", 420_000, 420_005);
    assert_eq!(event_names(&t), ["turn_timeout"]);
    assert_eq!(f.active(), "critic");
}

// --- durability ----------------------------------------------------------------------------------------------

#[test]
fn only_turn_and_settings_changes_or_effects_must_be_saved_before_going_on() {
    let mut f = Fixture::new();
    let t = f.say(PM, "Thinking.", 1_000);
    assert!(t.changed && !t.durable(), "an in-turn message without the signal");
    let t = f.say(HUMAN, "Take your time.", 2_000);
    assert!(t.changed && !t.durable(), "a person's message");
    let t = f.deliver(&Fixture::edit(f.last_id, HUMAN, "Take your time!", 2_500), 2_500);
    assert!(!t.changed && !t.durable(), "an edit without the signal");
    let t = f.say(PM, "Done. TURN_COMPLETE", 3_000);
    assert!(t.changed && t.durable(), "a signal");
    let t = f.say(PM, "Oops.", 4_000);
    assert!(t.durable(), "out of turn is recorded");
    assert!(!f.tick(5_000).durable() && !f.tick(5_000).changed);
    let (personas, config) = (f.personas.clone(), f.config.clone());
    let t = f.session.set_display_mode(
        DisplayMode::Observe,
        Fixture::at(6_000),
        Context { personas: &personas, config: &config },
    );
    assert!(t.durable(), "a setting");
}

// --- a turn begins when its announcement is accepted (spec 8) ------------------------------------------------------

#[test]
fn no_deadline_runs_before_the_holders_announcement_is_accepted_and_then_it_moves_by_the_wait() {
    let mut f = Fixture::new();
    // Discord is down from here: dev's announcement waits in the outbox.
    f.held = true;
    f.say(PM, "Done. TURN_COMPLETE", 1_000);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(121_000)), "dev's nominal 120 s");
    assert_eq!(f.session.next_deadline(), None, "dev has not been told");
    // A person writes after dev's nominal deadline: dev, never told it has the floor, does not time out.
    let t = f.say(HUMAN, "Anyone there?", 130_000);
    assert!(t.events.is_empty(), "{:?}", event_names(&t));
    assert_eq!(f.tick(130_000).events, []);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.status_report(Fixture::at(130_000)).remaining_seconds, Some(120), "the whole turn");
    // Discord accepts dev's announcement at 131 s: its 120 s begin then.
    f.accept(131_000);
    assert_eq!(f.session.next_deadline(), Some(Fixture::at(251_000)));
    assert_eq!(f.session.status_report(Fixture::at(131_000)).remaining_seconds, Some(120));
    assert_eq!(f.tick(250_999).events, []);
    assert_eq!(event_names(&f.tick(251_000)), ["turn_timeout"]);
}

#[test]
fn a_pause_while_the_floor_announcement_is_on_its_way_keeps_the_whole_turn() {
    let mut f = Fixture::new();
    f.held = true;
    f.say(PM, "Done. TURN_COMPLETE", 1_000);
    // dev's announcement still waits when a manager pauses, long after dev's nominal deadline.
    f.command(Command::Pause, 130_000).unwrap();
    assert_eq!(f.session.paused_remaining_ms, Some(120_000), "dev was never told: none of its time is gone");
}

#[test]
fn a_resume_while_the_floor_announcement_is_on_its_way_starts_the_turn_when_it_is_accepted() {
    let mut f = Fixture::new();
    f.held = true;
    f.say(PM, "Done. TURN_COMPLETE", 1_000);
    f.command(Command::Pause, 5_000).unwrap();
    f.command(Command::Resume, 300_000).unwrap();
    // Discord accepts dev's announcement (and the pause and resume lines) at 301 s: dev's 120 s begin then.
    f.accept(301_000);
    assert_eq!(f.session.next_deadline(), Some(Fixture::at(421_000)), "not extended by the pause as well");
}

/// critic timed out (at 62 s) and has not spoken since; pm completed, and dev, whose signal gives critic the floor
/// again, holds it.
fn critic_timed_out_and_is_next_again() -> Fixture {
    let mut f = Fixture::new();
    f.say(PM, "a TURN_COMPLETE", 1_000);
    f.say(DEV, "b TURN_COMPLETE", 2_000);
    assert_eq!(event_names(&f.tick(62_000)), ["turn_timeout"], "critic's 60 s are up");
    f.say(PM, "c TURN_COMPLETE", 63_000);
    assert_eq!(f.active(), "dev");
    f
}

#[test]
fn a_late_reply_read_after_its_author_was_given_the_floor_again_is_late_not_the_new_turns_answer() {
    // The bot was down from 64 s to 70 s (seed 2026112504 of the soak): dev's signal and critic's late reply to the
    // call it timed out on are both read by the catch-up, in the order they were written.
    let mut f = critic_timed_out_and_is_next_again();
    assert_eq!(event_names(&f.say_written(DEV, "d TURN_COMPLETE", 64_000, 70_000)), ["turn_complete"]);
    assert_eq!(f.active(), "critic");
    let t = f.say_written(CRITIC, "Sorry, I was slow. TURN_COMPLETE", 65_000, 70_000);
    assert_eq!(event_names(&t), ["late_signal"], "written before critic could know it had the floor again");
    assert_eq!(f.active(), "critic", "its new turn is still to be answered");
    // Its answer to the new call ends the new turn.
    assert_eq!(event_names(&f.say(CRITIC, "My review. TURN_COMPLETE", 75_000)), ["turn_complete"]);
    assert_eq!(f.active(), "pm");
}

#[test]
fn a_late_reply_overtaken_by_the_signal_that_gives_its_author_the_floor_again_is_late() {
    // Live: critic's late reply is written a millisecond after dev's signal and dispatched after it.
    let mut f = critic_timed_out_and_is_next_again();
    f.say_written(DEV, "d TURN_COMPLETE", 64_000, 64_002);
    let t = f.say_written(CRITIC, "Sorry, I was slow. TURN_COMPLETE", 64_001, 64_003);
    assert_eq!(event_names(&t), ["late_signal"]);
    assert_eq!(f.active(), "critic");
    // Once told, its messages are in turn, even one dispatched late.
    assert_eq!(event_names(&f.say_written(CRITIC, "Reviewed. TURN_COMPLETE", 64_500, 64_600)), ["turn_complete"]);
    assert_eq!(f.active(), "pm");
}

#[test]
fn the_first_message_of_a_timed_out_persona_written_after_it_is_given_the_floor_again_is_in_turn() {
    let mut f = critic_timed_out_and_is_next_again();
    f.say(DEV, "d TURN_COMPLETE", 64_000);
    assert_eq!(event_names(&f.say(CRITIC, "Here now. TURN_COMPLETE", 64_001)), ["turn_complete"]);
    assert_eq!(f.active(), "pm");
}

#[test]
fn a_turn_begun_during_a_pause_reaches_a_timed_out_persona_at_resume() {
    let mut f = Fixture::new();
    assert_eq!(event_names(&f.tick(90_000)), ["turn_timeout"]);
    f.command(Command::Pause, 91_000).unwrap();
    f.command(Command::Give { persona: "pm".into() }, 92_000).unwrap();
    assert_eq!(f.active(), "pm");
    f.command(Command::Resume, 100_000).unwrap();
    // Written during the pause, before pm was told: the late reply to the turn it timed out on.
    let t = f.say_written(PM, "Sorry. TURN_COMPLETE", 95_000, 100_001);
    assert_eq!(event_names(&t), ["late_signal"]);
    assert_eq!(event_names(&f.say(PM, "Now then. TURN_COMPLETE", 101_000)), ["turn_complete"]);
}
