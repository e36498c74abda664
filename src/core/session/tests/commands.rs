//! Commands that people steer a session with (spec 7), status, history and the saved form.

use super::*;

// --- commands (spec 7) ---------------------------------------------------------------------------------------

#[test]
fn pause_freezes_the_clock_and_resume_restores_the_remaining_time() {
    let mut f = Fixture::new();
    let t = f.command(Command::Pause, 30_000).unwrap();
    assert_eq!(texts(&t), ["⏸️ Paused. pm keeps the floor with 60s left."]);
    assert_eq!(f.session.next_deadline(), None);
    assert_eq!(f.tick(500_000), Transition::default(), "no timeout while paused");
    let t = f.command(Command::Resume, 100_000).unwrap();
    assert_eq!(texts(&t), ["▶️ Resumed. pm has 60s left."]);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(160_000)));
    assert_eq!(f.command(Command::Resume, 100_001).unwrap_err().0, "The session is not paused.");
    f.command(Command::Pause, 100_002).unwrap();
    assert!(f.command(Command::Pause, 100_003).unwrap_err().0.contains("already paused"));
}

#[test]
fn pause_of_a_session_saved_without_its_deadline_rebuilds_it_rather_than_panicking() {
    let mut f = Fixture::new();
    f.session.turn_timeout_at = None;
    let t = f.command(Command::Pause, 30_000).unwrap();
    assert_eq!(texts(&t), ["⏸️ Paused. pm keeps the floor with 60s left."], "start + 90 s, as if it had been saved");
    f.command(Command::Resume, 40_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(100_000)));

    let mut f = Fixture::new();
    (f.session.turn_timeout_at, f.session.turn_started_at) = (None, None);
    f.command(Command::Pause, 30_000).unwrap();
    assert_eq!(f.session.paused_remaining_ms, Some(90_000), "with no start either, the whole turn");
}

#[test]
fn a_skip_during_a_pause_hands_over_but_the_next_turn_waits_for_resume() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    // (The holder's own signal is held while paused: see `paused.rs`.)
    let t = f.command(Command::Skip, 20_000).unwrap();
    assert_eq!(event_names(&t), ["skipped"]);
    assert_eq!(texts(&t), ["⏭️ pm's turn was skipped."]);
    assert!(announcements(&t).iter().all(|a| a.mention.is_none()), "nobody is called on while paused");
    assert_eq!((f.active(), f.session.status), ("dev", SessionStatus::Paused));
    let t = f.command(Command::Resume, 50_000).unwrap();
    assert_eq!(
        texts(&t),
        ["▶️ Resumed. dev has 120s left.", "🎙️ <@102> (dev) has the floor: 120s. End your message with TURN_COMPLETE."]
    );
    assert_eq!(f.session.turn_started_at, Some(Fixture::at(50_000)));
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(170_000)));
}

#[test]
fn skip_ends_the_turn_now_and_records_it() {
    let mut f = Fixture::new();
    let t = f.command(Command::Skip, 5_000).unwrap();
    assert_eq!(texts(&t)[0], "⏭️ pm's turn was skipped.");
    assert_eq!(t.events[0].kind, EventKind::Skipped { next_agent: id("dev") });
    assert_eq!(f.active(), "dev");
}

#[test]
fn give_hands_the_floor_to_a_roster_member() {
    let mut f = Fixture::new();
    let t = f.command(Command::Give { persona: "critic".into() }, 5_000).unwrap();
    assert_eq!(texts(&t)[0], "👉 The floor goes to critic.");
    assert_eq!(announcements(&t)[1].mention, Some(CRITIC));
    assert_eq!((f.active(), f.session.round), ("critic", 1));
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(65_000)));
    assert!(
        f.command(Command::Give { persona: "critic".into() }, 6_000).unwrap_err().0.contains("already has the floor")
    );
    f.command(Command::Remove { persona: "dev".into() }, 7_000).unwrap();
    let refusal = f.command(Command::Give { persona: "dev".into() }, 8_000).unwrap_err();
    assert_eq!(refusal.0, "dev is not in this session's roster (pm, critic); add it with `add dev`.");
    let refusal = f.command(Command::Give { persona: "qa".into() }, 9_000).unwrap_err();
    assert!(refusal.0.contains("known personas: pm, dev, critic"));
}

#[test]
fn extend_adds_time_running_or_paused() {
    let mut f = Fixture::new();
    let t = f.command(Command::Extend { seconds: 30 }, 10_000).unwrap();
    assert_eq!(texts(&t), ["⏩ pm's turn extended by 30s: 110s left."]);
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(120_000)));
    f.command(Command::Pause, 20_000).unwrap();
    f.command(Command::Extend { seconds: 10 }, 25_000).unwrap();
    f.command(Command::Resume, 40_000).unwrap();
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(40_000 + 110_000)));
    assert!(f.command(Command::Extend { seconds: 0 }, 41_000).is_err());
    assert!(f.command(Command::Extend { seconds: 86_401 }, 41_000).is_err());
}

#[test]
fn order_changes_the_roster_and_keeps_the_turn_of_a_member() {
    let mut f = Fixture::new();
    let t = f.command(Command::Order { roster: vec!["critic".into(), "pm".into(), "dev".into()] }, 1_000).unwrap();
    assert_eq!(texts(&t), ["🔀 Roster: critic, pm, dev."]);
    assert_eq!(f.active(), "pm");
    f.say(PM, "ok TURN_COMPLETE", 2_000);
    assert_eq!(f.active(), "dev");
    f.say(DEV, "ok TURN_COMPLETE", 3_000);
    assert_eq!((f.active(), f.session.round), ("critic", 2));
}

#[test]
fn order_without_the_floor_holder_gives_the_floor_to_the_first() {
    let mut f = Fixture::new();
    f.command(Command::Order { roster: vec!["dev".into(), "critic".into()] }, 1_000).unwrap();
    assert_eq!(f.active(), "dev");
    assert!(f.command(Command::Order { roster: vec![] }, 2_000).is_err());
}

#[test]
fn add_and_remove_change_the_roster_mid_session() {
    let mut f = Fixture::new();
    f.command(Command::Order { roster: vec!["pm".into(), "dev".into()] }, 1_000).unwrap();
    assert!(f.command(Command::Add { persona: "dev".into() }, 2_000).unwrap_err().0.contains("already in the roster"));
    f.command(Command::Add { persona: "critic".into() }, 3_000).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("dev"), id("critic")]);
    f.command(Command::Remove { persona: "dev".into() }, 4_000).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("critic")]);
    assert_eq!(f.active(), "pm");
}

#[test]
fn removing_the_floor_holder_passes_the_floor_to_the_one_after_it() {
    let mut f = Fixture::new();
    let t = f.command(Command::Remove { persona: "pm".into() }, 1_000).unwrap();
    assert_eq!(texts(&t)[0], "🔀 Roster: dev, critic.");
    assert_eq!(announcements(&t)[1].mention, Some(DEV));
    assert_eq!((f.active(), f.session.round), ("dev", 1));
    // Removing the last of the roster while it holds the floor wraps around to a new round.
    f.command(Command::Give { persona: "critic".into() }, 2_000).unwrap();
    f.command(Command::Remove { persona: "critic".into() }, 3_000).unwrap();
    assert_eq!((f.active(), f.session.round), ("dev", 2));
    let refusal = f.command(Command::Remove { persona: "dev".into() }, 4_000).unwrap_err();
    assert!(refusal.0.contains("only persona left"));
}

#[test]
fn stop_ends_the_session_and_later_messages_are_not_managed() {
    let mut f = Fixture::new();
    let t = f.command(Command::Stop, 1_000).unwrap();
    assert_eq!(texts(&t), ["⏹️ Turn management stopped in round 1. History is kept."]);
    assert_eq!((f.session.active_agent.as_ref(), f.session.next_deadline()), (None, None));
    assert_eq!(f.say(PM, "hello TURN_COMPLETE", 2_000), Transition::default());
    let refusal = f.command(Command::Skip, 3_000).unwrap_err().0;
    assert_eq!(refusal, "No session is running here. Start one with `/turn start` or `!turn start`.");
    assert!(f.command(Command::Stop, 3_000).is_err());
}

#[test]
fn restarting_keeps_history_and_announcement_numbering() {
    let mut f = Fixture::new();
    f.command(Command::Stop, 1_000).unwrap();
    let seq = f.session.announcement_seq;
    let events = f.session.history.len();
    let t = f.command_given(Command::Start { roster: vec![] }, 2_000, 2_000).unwrap();
    assert!(f.session.history.len() > events);
    assert_eq!(f.session.announcement_seq, seq + 2);
    let nonces: Vec<&str> = announcements(&t).iter().map(|a| a.nonce.as_str()).collect();
    assert_ne!(nonces[0], nonces[1]);
}

#[test]
fn status_reports_the_floor_time_left_roster_and_round() {
    let mut f = Fixture::new();
    let report = f.session.status_report(Fixture::at(30_500));
    assert_eq!(report.remaining_seconds, Some(60));
    assert_eq!(
        report.to_string(),
        "pm has the floor, 60s left (running). Round 1. Roster: pm, dev, critic. Display: relay."
    );
    f.command(Command::Pause, 40_000).unwrap();
    assert!(f.session.status_report(Fixture::at(99_000)).to_string().contains("50s left (paused)"));
    f.command(Command::Stop, 41_000).unwrap();
    assert_eq!(f.session.status_report(Fixture::at(0)).to_string(), "No session is running here.");
}

#[test]
fn history_in_the_session_is_bounded_by_the_configured_limit() {
    let config = Config { history_limit: 3, ..Config::default() };
    let mut f = Fixture::with_config(config);
    for i in 0..5 {
        f.command(Command::Skip, 1_000 * (i + 1)).unwrap();
    }
    assert_eq!(f.session.history.len(), 3);
    assert!(f.session.history.iter().all(|e| e.kind.name() == "skipped"));
    let recent: Vec<_> = f.session.recent_history(2).collect();
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[1].at, Fixture::at(5_000));
}

#[test]
fn a_history_tail_read_back_and_shrunk_keeps_its_events_and_is_never_reallocated_larger() {
    let config = Config { history_limit: 3, ..Config::default() };
    let mut f = Fixture::with_config(config);
    for i in 0..3 {
        f.command(Command::Skip, 1_000 * (i + 1)).unwrap();
    }
    // As a session read from its file: the decoder left spare room, which the shrink gives back.
    let json = serde_json::to_string(&f.session).unwrap();
    let mut read: crate::core::session::Session = serde_json::from_str(&json).unwrap();
    read.history.reserve(29);
    read.shrink_to_fit();
    assert_eq!(read, f.session, "shrinking changes nothing a transition sees");
    let capacity = read.history.capacity();
    assert!(capacity < 32, "the spare room is given back (capacity {capacity})");
    f.session = read;
    for i in 3..10 {
        f.command(Command::Skip, 1_000 * (i + 1)).unwrap();
    }
    assert_eq!(f.session.history.len(), 3);
    assert_eq!(f.session.history.back().unwrap().at, Fixture::at(10_000));
    assert_eq!(f.session.history.capacity(), capacity, "the oldest event goes before the newest comes");
}

#[test]
fn reconcile_drops_personas_that_no_longer_exist_and_moves_the_floor_on() {
    let mut f = Fixture::new();
    f.personas = PersonaCatalog::new(vec![persona("dev", DEV, Some(120)), persona("critic", CRITIC, None)]);
    let (personas, config) = (f.personas.clone(), f.config.clone());
    let t = f.session.reconcile(Fixture::at(1_000), Context { personas: &personas, config: &config });
    assert_eq!(f.session.roster, [id("dev"), id("critic")]);
    assert_eq!(f.active(), "dev");
    assert_eq!(event_names(&t), ["roster_changed"]);
    let none = PersonaCatalog::new(vec![]);
    f.session.reconcile(Fixture::at(2_000), Context { personas: &none, config: &config });
    assert!(!f.session.is_active());
}

/// Found by a review: the persona files changed across a restart passed the floor unlike `remove`: to a benched
/// persona, counting no round past the roster's end, and an emptied session stopped without a word.
#[test]
fn reconcile_passes_the_floor_as_remove_does_and_stops_an_emptied_session_with_its_line() {
    let reconcile = |f: &mut Fixture, kept: Vec<Persona>, ms: i64| {
        f.personas = PersonaCatalog::new(kept);
        let (personas, config) = (f.personas.clone(), f.config.clone());
        f.session.reconcile(Fixture::at(ms), Context { personas: &personas, config: &config })
    };
    // dev benched (it timed out once, `benchAfter` 1); critic then pm, whose file is gone: the floor skips dev.
    let mut f = Fixture::with_config(Config::parse("c.json", r#"{"signals": {"benchAfter": 1}}"#).unwrap());
    f.say(PM, "Mine. TURN_COMPLETE", 1_000);
    f.tick(121_000);
    f.say(CRITIC, "Mine. TURN_COMPLETE", 122_000);
    assert_eq!((f.active(), f.session.agents[&id("dev")].benched), ("pm", true), "precondition");
    reconcile(&mut f, vec![persona("dev", DEV, Some(120)), persona("critic", CRITIC, None)], 123_000);
    assert_eq!(f.active(), "critic", "the benched dev is skipped");
    // critic, last in the roster, gone: the floor wraps to pm, a new round.
    let mut f = Fixture::new();
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    reconcile(&mut f, vec![persona("pm", PM, Some(90)), persona("dev", DEV, Some(120))], 2_000);
    assert_eq!((f.active(), f.session.round), ("pm", 2));
    // Everyone gone from a paused session: stopped with the stop's line, no pause left on it.
    let mut f = Fixture::new();
    f.command(Command::Pause, 1_000).unwrap();
    let t = reconcile(&mut f, vec![], 2_000);
    assert!(!f.session.is_active());
    assert!(texts(&t).iter().any(|s| s.starts_with("⏹️")), "{:?}", texts(&t));
    assert_eq!((f.session.paused_at, f.session.paused_remaining_ms), (None, None));
}

#[test]
fn saved_session_uses_the_seed_field_names() {
    let mut f = Fixture::new();
    f.say(PM, "hi", 1_000);
    let json = serde_json::to_value(&f.session).unwrap();
    assert_eq!(json["activeAgent"], "pm");
    assert_eq!(json["turnStartedAt"], "2026-02-04T21:20:00Z");
    assert_eq!(json["turnTimeoutAt"], "2026-02-04T21:21:30Z");
    assert_eq!(json["agents"]["pm"]["lastActivity"], "2026-02-04T21:20:01Z");
    assert_eq!(json["channelId"], "555");
    let back: Session = serde_json::from_value(json).unwrap();
    assert_eq!(back, f.session);
}

// --- all or nothing: a refused command changes nothing -----------------------------------------------------------

#[test]
fn a_refused_command_leaves_an_overdue_session_exactly_as_it_was() {
    let refused = [
        Command::Resume,
        Command::Give { persona: "critc".into() },
        Command::Order { roster: vec!["pm".into(), "devv".into()] },
        Command::Add { persona: "qa".into() },
        Command::Add { persona: "dev".into() },
        Command::Remove { persona: "crtic".into() },
        Command::Extend { seconds: 0 },
        Command::Extend { seconds: 1_000_000 },
        Command::Start { roster: vec![] },
    ];
    for command in refused {
        let mut f = Fixture::new();
        // pm's 90 s are over: a command that ran would time pm out first.
        let before = f.session.clone();
        let refusal = f.command_given(command.clone(), 95_000, 95_000);
        assert!(refusal.is_err(), "{command:?} is refused");
        if command == Command::Resume {
            // All it leaves is the note of when it was given, which a `pause` given before it must not overtake.
            let noted = f.session.pause_toggled_at.expect("a refused resume is noted as given");
            assert_eq!(noted.created_at(), Fixture::at(95_000));
            f.session.pause_toggled_at = before.pause_toggled_at;
        }
        assert_eq!(f.session, before, "{command:?} changed the session although it was refused");
        assert_eq!(f.session.history, before.history, "{command:?}");
        // The timeout is still there to happen, once, and announced.
        let t = f.tick(95_000);
        assert_eq!(event_names(&t), ["turn_timeout"], "{command:?}");
        assert_eq!(f.active(), "dev");
    }
}

#[test]
fn a_refused_command_of_a_paused_session_changes_nothing_either() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    let before = f.session.clone();
    assert!(f.command(Command::Pause, 20_000).is_err());
    assert!(f.command(Command::Remove { persona: "nobody".into() }, 20_000).is_err());
    assert_eq!(f.session, before);
}

#[test]
fn removing_the_last_holder_of_the_last_round_ends_the_session_at_max_rounds() {
    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut f = Fixture::with_config(config);
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    // critic is last in the roster: the floor wraps to pm, which would begin round 2.
    let t = f.command(Command::Remove { persona: "critic".into() }, 2_000).unwrap();
    assert!(event_names(&t).contains(&"session_ended"), "{:?}", event_names(&t));
    assert!(!f.session.is_active());
    assert_eq!(f.session.round, 1, "never past maxRounds");
}

/// Found by a review: a `start` given while the session ran (it would have been refused), handled after a `stop`
/// given after it, started a session nobody asked for after the stop.
#[test]
fn a_start_given_before_the_stop_but_handled_after_it_is_refused() {
    let mut f = Fixture::new();
    f.command_given(Command::Stop, 6_000, 6_000).unwrap();
    let refusal = f.command_given(Command::Start { roster: vec![] }, 5_000, 7_000).unwrap_err();
    assert!(
        refusal
            .to_string()
            .contains("given while the session before was still running, and that session has ended since"),
        "{refusal}"
    );
    assert!(!f.session.is_active());
    // One given after the stop starts a new session, as ever.
    f.command_given(Command::Start { roster: vec![] }, 8_000, 8_000).unwrap();
    assert!(f.session.is_active());
}

/// Found by a review: the same for a session ended by a command that finished the last round.
#[test]
fn a_start_given_before_a_skip_that_ended_the_last_round_is_refused() {
    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut f = Fixture::with_config(config);
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    f.command_given(Command::Skip, 6_000, 6_000).unwrap();
    assert!(!f.session.is_active(), "the skip finished the last round");
    assert!(f.command_given(Command::Start { roster: vec![] }, 5_000, 7_000).is_err());
    assert!(f.command_given(Command::Start { roster: vec![] }, 8_000, 8_000).is_ok());
}

/// Found by a review: the same for a session ended by a signal (an `end` rule's, or the one that finished the last
/// round) or by the last round's deadline.
#[test]
fn a_start_given_before_a_signal_or_deadline_that_ended_the_session_is_refused() {
    let rules = r#"{"signals": {"rules": [
        {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
        {"name": "FIN", "pattern": "FIN", "action": "end"}]}}"#;
    let mut f = Fixture::with_config(Config::parse("c.json", rules).unwrap());
    f.say(PM, "We are done.\nFIN", 6_000);
    assert!(!f.session.is_active(), "FIN ended the session");
    assert!(f.command_given(Command::Start { roster: vec![] }, 5_000, 7_000).is_err(), "given while it ran");
    assert!(f.command_given(Command::Start { roster: vec![] }, 8_000, 8_000).is_ok(), "given after it ended");

    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut f = Fixture::with_config(config.clone());
    f.say(PM, "a TURN_COMPLETE", 1_000);
    f.say(DEV, "b TURN_COMPLETE", 2_000);
    f.say(CRITIC, "c TURN_COMPLETE", 6_000);
    assert!(!f.session.is_active(), "the last round is over");
    assert!(f.command_given(Command::Start { roster: vec![] }, 5_000, 7_000).is_err());

    let mut f = Fixture::with_config(config);
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    let deadline = (f.session.turn_timeout_at.unwrap() - Fixture::at(0)).num_milliseconds();
    f.tick(deadline + 10);
    assert!(!f.session.is_active(), "the last round's deadline ended it");
    assert!(f.command_given(Command::Start { roster: vec![] }, deadline - 1_000, deadline + 20).is_err());
    assert!(f.command_given(Command::Start { roster: vec![] }, deadline + 15, deadline + 20).is_ok());
}

/// Found by a review: a `start` given after the last round's deadline, handled before that deadline's tick (a
/// catch-up holds it), was refused as "already running".
#[test]
fn a_start_given_after_the_last_rounds_deadline_starts_a_new_session() {
    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut f = Fixture::with_config(config);
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    let after = (f.session.turn_timeout_at.unwrap() - Fixture::at(0)).num_milliseconds() + 60_000;
    let t = f.command_given(Command::Start { roster: vec![] }, after, after).unwrap();
    let names = event_names(&t);
    assert_eq!(names, ["turn_timeout", "session_ended", "session_started"], "the old one ends first");
    assert_eq!((f.active(), f.session.round), ("pm", 1));
    // One given before that deadline finds the session running, as ever.
    let mut f = Fixture::new();
    assert!(f.command_given(Command::Start { roster: vec![] }, 1_000, 200_000).is_err());
    assert!(f.session.is_active());
}

/// A session file written before `boundedBy` names its start `beganWith`: read as the same.
#[test]
fn a_session_saved_with_began_with_is_read_with_its_start_as_its_bound() {
    let mut f = Fixture::new();
    f.command_given(Command::Stop, 6_000, 6_000).unwrap();
    let mut saved = serde_json::to_value(&f.session).unwrap();
    let bound = saved.as_object_mut().unwrap().remove("boundedBy").expect("written as boundedBy");
    saved["beganWith"] = bound;
    let read: Session = serde_json::from_value(saved).unwrap();
    assert_eq!(read, f.session);
}

/// Found by a review: a command given after the last round's deadline (handled before the deadline's own tick, or
/// read back after a restart) was answered "Done." though it did nothing, a typo included.
#[test]
fn a_command_given_after_the_last_rounds_deadline_is_refused_and_the_deadline_ends_the_session() {
    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut f = Fixture::with_config(config);
    f.command(Command::Give { persona: "critic".into() }, 1_000).unwrap();
    let before = f.session.clone();
    let deadline = f.session.turn_timeout_at.unwrap();
    let after = (deadline - Fixture::at(0)).num_milliseconds() + 1_000;
    for command in [Command::Give { persona: "pmm".into() }, Command::Skip, Command::Stop] {
        let refusal = f.command(command.clone(), after).unwrap_err();
        assert!(refusal.to_string().contains("had ended before this command"), "{command:?}: {refusal}");
        assert_eq!(f.session, before, "{command:?}: nothing changed by it");
    }
    let t = f.tick(after);
    assert!(event_names(&t).contains(&"session_ended"), "{:?}", event_names(&t));
    assert!(!f.session.is_active());
}

// --- a session starts at its start: what was written before it is never judged -----------------------------------

#[test]
fn a_message_written_before_a_restart_and_delivered_after_it_is_not_judged() {
    let mut f = Fixture::new();
    f.say(PM, "Some thoughts.", 1_000);
    let old_last = f.last_id;
    f.command(Command::Stop, 2_000).unwrap();
    // Written while the channel was not managed, delivered (or caught up) only after the new start.
    let signal = f.message(PM, "Finished. TURN_COMPLETE", 3_000);
    let chatter = f.message(DEV, "Meanwhile, my idea.", 3_500);
    f.command_given(Command::Start { roster: vec![] }, 4_000, 4_000).unwrap();
    let start = f.session.last_message_id.expect("the start is where the session's messages begin");
    assert!(start > chatter.id && old_last < start);
    assert!(f.session.has_handled(signal.id) && f.session.has_handled(chatter.id), "older than the start");
    assert_eq!(f.deliver(&signal, 5_000), Transition::default(), "no turn end");
    assert_eq!(f.deliver(&chatter, 5_000), Transition::default(), "no out_of_turn, no delete");
    assert_eq!(f.active(), "pm");
    // What is written after the start is judged as ever.
    assert_eq!(event_names(&f.say(PM, "Now. TURN_COMPLETE", 6_000)), ["turn_complete"]);
}

#[test]
fn a_start_without_a_snowflake_of_its_own_begins_at_its_instant() {
    let mut f = Fixture::new();
    f.lose_channel(1_000); // the configuration starts it again once its server is back
    let before = f.message(PM, "Done. TURN_COMPLETE", 1_500);
    f.command(Command::Start { roster: vec![] }, 2_000).unwrap();
    assert_eq!(f.session.last_message_id, Some(MessageId::first_at(Fixture::at(2_000))));
    assert_eq!(f.deliver(&before, 2_500), Transition::default());
    assert_eq!(f.active(), "pm");
}

#[test]
fn a_command_given_before_the_running_session_started_and_handled_after_it_is_refused() {
    let mut f = Fixture::new();
    f.command_given(Command::Stop, 1_000, 1_000).unwrap();
    f.command_given(Command::Start { roster: vec![] }, 3_000, 3_000).unwrap();
    // A `stop` (or any other command) given before that `start`, delivered late: meant for the session before.
    for command in [Command::Stop, Command::Give { persona: "dev".into() }, Command::Remove { persona: "pm".into() }] {
        let refusal = f.command_given(command.clone(), 2_000, 4_000).unwrap_err();
        assert!(refusal.0.contains(&format!("this `{}` was given before the session", command.word())), "{refusal:?}");
    }
    assert!(f.session.is_active() && f.active() == "pm" && f.session.roster.len() == 3, "the new session goes on");
    // Given after the start, however late it is handled, it runs.
    f.command_given(Command::Stop, 3_500, 5_000).unwrap();
    assert!(!f.session.is_active());
}

#[test]
fn a_start_from_the_configuration_refuses_no_command_given_just_after_it_on_a_clock_behind_ours() {
    let mut f = Fixture::new();
    f.lose_channel(1_000);
    f.command(Command::Start { roster: vec![] }, 3_000).unwrap();
    // Discord's clock 500 ms behind ours: a stop given just after the start carries an earlier time.
    f.command_given(Command::Stop, 2_500, 3_100).unwrap();
    assert!(!f.session.is_active());
}

/// Found by a review: a configured channel's session that a manager stopped (or that ended by an `end` signal or
/// `maxRounds`) was started again by the configuration at every restart, calling its agents. A start from the
/// configuration (no message gave it) is refused for a session ended on purpose; one ended otherwise (the bot removed
/// from the server, every persona of the roster gone, a file saved before this was recorded) starts again, and a
/// manager's `start` starts either.
#[test]
fn a_start_from_the_configuration_does_not_undo_a_stop() {
    let start = || Command::Start { roster: vec![] };
    let mut f = Fixture::new();
    f.command_given(Command::Stop, 1_000, 1_000).unwrap();
    assert!(f.session.stays_stopped());
    let refusal = f.command(start(), 2_000).unwrap_err();
    assert!(refusal.0.contains("ended on purpose"), "{refusal}");
    assert!(!f.session.is_active());
    f.command_given(start(), 3_000, 3_000).unwrap();
    assert!(f.session.is_active() && !f.session.stays_stopped(), "a manager's start");

    let config = Config::parse("c.json", r#"{"signals": {"maxRounds": 1}}"#).unwrap();
    let mut ended_by_rounds = Fixture::with_config(config);
    for (persona, ms) in [(PM, 1_000), (DEV, 2_000), (CRITIC, 3_000)] {
        ended_by_rounds.say(persona, &format!("Done at {ms}. TURN_COMPLETE"), ms);
    }
    assert!(ended_by_rounds.session.stays_stopped(), "maxRounds ended it");
    assert!(ended_by_rounds.command(start(), 4_000).is_err());

    let mut lost = Fixture::new();
    lost.lose_channel(1_000);
    assert!(!lost.session.is_active() && !lost.session.stays_stopped());
    lost.command(start(), 2_000).unwrap();
    assert!(lost.session.is_active(), "started again by the configuration");

    // Every persona of the roster gone from the persona files: ended, but by nobody's choice.
    let mut emptied = Fixture::new();
    emptied.personas = PersonaCatalog::new(Vec::new());
    let (personas, config) = (emptied.personas.clone(), emptied.config.clone());
    emptied.session.reconcile(Fixture::at(1_000), Context { personas: &personas, config: &config });
    assert!(!emptied.session.is_active() && !emptied.session.stays_stopped());

    // Saved by a build that did not record it: started again, as that build did.
    let mut stopped = Fixture::new();
    stopped.command_given(Command::Stop, 1_000, 1_000).unwrap();
    let mut json = serde_json::to_value(&stopped.session).unwrap();
    json.as_object_mut().unwrap().remove("endedOnPurpose").expect("written while true");
    let old: Session = serde_json::from_value(json).unwrap();
    assert!(!old.stays_stopped());
}

/// Found by a review: a display name with spaces could not name a persona in `start` or `order` (split at its
/// spaces), nor in `!turn give` (its second word taken for an extra argument). Quoted, or not, it names the persona.
#[test]
fn a_display_name_with_spaces_names_its_persona_quoted_or_not() {
    let mut f = Fixture::new();
    let mut personas: Vec<Persona> = f.personas.all().to_vec();
    personas[0].display_name = "Product Manager".into();
    f.personas = PersonaCatalog::new(personas);
    f.command_given(Command::Stop, 1_000, 1_000).unwrap();
    let words = |text: &str| text.split(' ').map(str::to_owned).collect::<Vec<_>>();
    f.command_given(Command::Start { roster: words("dev Product Manager") }, 2_000, 2_000).unwrap();
    assert_eq!(f.session.roster, [id("dev"), id("pm")]);
    f.command_given(Command::Order { roster: words("product manager critic dev") }, 3_000, 3_000).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("critic"), id("dev")], "any case");
    f.command_given(Command::Give { persona: "\"Product Manager\"".into() }, 4_000, 4_000).unwrap();
    assert_eq!(f.active(), "pm");
    let refusal = f.command_given(Command::Order { roster: words("Product Mana dev") }, 5_000, 5_000).unwrap_err();
    assert!(refusal.0.starts_with("unknown persona \"Product\""), "{refusal}");
    // Words that name a persona alone and, read together, another: refused, not guessed (found by a review: `Dev
    // Critic`, pm's display name, gave the roster dev and critic). In quotes, each way is meant.
    let mut personas: Vec<Persona> = f.personas.all().to_vec();
    personas[0].display_name = "Dev Critic".into();
    f.personas = PersonaCatalog::new(personas);
    let refusal = f.command_given(Command::Order { roster: words("Dev Critic") }, 6_000, 6_000).unwrap_err();
    assert!(refusal.0.starts_with("\"Dev Critic\" is the display name of pm, and \"Dev\" names dev"), "{refusal}");
    f.command_given(Command::Order { roster: words("\"Dev\" \"Critic\"") }, 7_000, 7_000).unwrap();
    assert_eq!(f.session.roster, [id("dev"), id("critic")]);
    // Its own id first: one persona either way, not unclear (found by a review).
    let mut personas: Vec<Persona> = f.personas.all().to_vec();
    personas[0].display_name = "PM Lead".into();
    f.personas = PersonaCatalog::new(personas);
    f.command_given(Command::Order { roster: words("dev PM Lead") }, 7_500, 7_500).unwrap();
    assert_eq!(f.session.roster, [id("dev"), id("pm")]);
    // ... unless a later word names another persona (found by a review: `pm dev critic`, pm's display name "PM Dev",
    // left dev out without a word). Quoted, each way is meant.
    let mut personas: Vec<Persona> = f.personas.all().to_vec();
    personas[0].display_name = "PM Dev".into();
    f.personas = PersonaCatalog::new(personas);
    let refusal = f.command_given(Command::Order { roster: words("pm dev critic") }, 7_600, 7_600).unwrap_err();
    let said = "\"pm dev\" is the display name of pm, and \"dev\" names dev: put a name in double quotes to have it \
                read alone (\"pm dev\" for pm, \"dev\" for dev).";
    assert_eq!(refusal.0, said);
    assert_eq!(f.session.roster, [id("dev"), id("pm")], "unchanged");
    f.command_given(Command::Order { roster: words("pm \"dev\" critic") }, 7_700, 7_700).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("dev"), id("critic")]);
    let quoted = vec!["\"PM Dev\"".to_owned(), "critic".to_owned()]; // as `names` reads `"PM Dev" critic`
    f.command_given(Command::Order { roster: quoted }, 7_800, 7_800).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("critic")]);
    let mut personas: Vec<Persona> = f.personas.all().to_vec();
    personas[0].display_name = "Dev Critic".into();
    f.personas = PersonaCatalog::new(personas);
    let quoted = vec!["\"Dev Critic\"".to_owned(), "dev".to_owned()]; // as `names` reads `"Dev Critic" dev`
    f.command_given(Command::Order { roster: quoted }, 8_000, 8_000).unwrap();
    assert_eq!(f.session.roster, [id("pm"), id("dev")]);
}

/// Found by a review: a persona named by a mention of its account (`<@102>`, what Discord's autocomplete puts in a
/// command) was refused as unknown.
#[test]
fn a_persona_named_by_a_mention_of_its_account_is_found() {
    let mut f = Fixture::new();
    f.command(Command::Give { persona: format!("<@{}>", DEV.0) }, 5_000).unwrap();
    assert_eq!(f.active(), "dev");
    f.command(Command::Remove { persona: format!("<@!{}>", CRITIC.0) }, 6_000).unwrap();
    assert_eq!(f.session.roster, vec![id("pm"), id("dev")]);
    assert!(f.command(Command::Give { persona: "<@999>".into() }, 7_000).is_err(), "no persona's account");
}
