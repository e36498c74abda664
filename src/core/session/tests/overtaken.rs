//! A message overtaken by the signal that gave its author the floor is judged by when it was written (spec 5,
//! step 7): taken for out of turn when it arrived first, then judged again, in turn, once the signal arrives.

use super::*;
use crate::core::session::effects::KeptFlags;

fn relays(t: &Transition) -> Vec<(MessageId, Option<String>)> {
    relays_by(t, |relay| relay.text.clone())
}

/// The relays `t` decides, in order: each message's id, with what `read` takes of the relay.
fn relays_by<T>(t: &Transition, read: impl Fn(RelayRead<'_>) -> T) -> Vec<(MessageId, T)> {
    t.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Relay { message_id, text, already_deleted, flags, mentions, .. } => Some((
                *message_id,
                read(RelayRead { text, already_deleted: *already_deleted, flags: *flags, mentions }),
            )),
            _ => None,
        })
        .collect()
}

/// What the tests read of a relay.
struct RelayRead<'a> {
    text: &'a Option<String>,
    already_deleted: bool,
    flags: KeptFlags,
    mentions: &'a Option<Vec<UserId>>,
}

#[test]
fn the_next_personas_signal_that_arrives_before_the_signal_giving_it_the_floor_ends_its_turn_once() {
    let mut f = Fixture::new();
    let pm_signal = f.message(PM, "Plan ready. TURN_COMPLETE", 5_000);
    let dev_answer = f.message(DEV, "Built it. TURN_COMPLETE", 5_100);
    // dev's message arrives first: dev does not hold the floor yet.
    let t = f.deliver(&dev_answer, 5_101);
    assert_eq!(event_names(&t), ["out_of_turn"]);
    assert_eq!(f.active(), "pm");
    // pm's signal, written before it, arrives: dev's turn began then, so dev's answer was in its turn.
    let t = f.deliver(&pm_signal, 5_150);
    assert_eq!(event_names(&t), ["turn_complete", "turn_complete"], "pm's turn, then dev's");
    assert_eq!(f.active(), "critic");
    assert_eq!(
        relays(&t),
        [(pm_signal.id, Some("Plan ready.".into())), (dev_answer.id, Some("Built it.".into()))],
        "both shown without the signal; dev's deleted message comes back as its repost"
    );
    assert!(f.session.out_of_turn_lately.is_empty(), "judged once");
    assert_eq!(f.deliver(&dev_answer, 5_200), Transition::default(), "and handled once");
}

#[test]
fn a_removed_message_said_in_the_next_turn_is_shown_again_and_the_turn_goes_on() {
    let mut f = Fixture::new();
    let pm_signal = f.message(PM, "Over to dev. TURN_COMPLETE", 5_000);
    let dev_first = f.message(DEV, "Starting on it now.", 5_100);
    f.deliver(&dev_first, 5_101);
    let t = f.deliver(&pm_signal, 5_150);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
    assert_eq!(relays(&t)[1], (dev_first.id, Some("Starting on it now.".into())), "reposted whole, as dev");
    assert_eq!(f.session.agents[&id("dev")].last_activity, Some(Fixture::at(5_100)), "dev spoke in its turn");
    assert_eq!(event_names(&f.say(DEV, "Done. TURN_COMPLETE", 9_000)), ["turn_complete"]);
}

/// A relay of a message the bot removed as out of turn says so: the sender must not take the message's absence for
/// someone else's deletion (which takes the repost back). Found while making it do that: the overtaken message's
/// repost was taken back at once.
#[test]
fn a_relay_of_a_message_removed_as_out_of_turn_says_it_is_already_deleted() {
    let already_deleted = |t: &Transition| relays_by(t, |relay| relay.already_deleted);
    for dev_text in ["Built it. TURN_COMPLETE", "Starting on it now."] {
        let mut f = Fixture::new();
        let pm_signal = f.message(PM, "Over to dev. TURN_COMPLETE", 5_000);
        let dev_answer = f.message(DEV, dev_text, 5_100);
        assert_eq!(f.deliver(&dev_answer, 5_101).effects, [Effect::Delete { message_id: dev_answer.id }]);
        let t = f.deliver(&pm_signal, 5_150);
        assert_eq!(already_deleted(&t), [(pm_signal.id, false), (dev_answer.id, true)], "{dev_text}");
    }
    // Left as written (`allow`), the message is there to delete.
    let mut f = Fixture::with_config(Config { out_of_turn: OutOfTurnPolicy::Allow, ..Config::default() });
    let pm_signal = f.message(PM, "Over to dev. TURN_COMPLETE", 5_000);
    let dev_answer = f.message(DEV, "Built it. TURN_COMPLETE", 5_100);
    assert!(f.deliver(&dev_answer, 5_101).effects.is_empty());
    let t = f.deliver(&pm_signal, 5_150);
    assert_eq!(already_deleted(&t), [(pm_signal.id, false), (dev_answer.id, false)]);
}

/// A repost keeps the flags of the message (`@silent`, previews suppressed), and pings only whom it pinged (found by
/// a review: one removed as out of turn lost that), one removed as out of turn too, whose note is saved with the
/// session in between.
#[test]
fn the_flags_and_pings_a_repost_keeps_go_with_the_relay_and_with_an_out_of_turn_note() {
    let silent = KeptFlags::of(KeptFlags::SUPPRESS_NOTIFICATIONS | (1 << 6));
    assert_eq!(silent.bits(), KeptFlags::SUPPRESS_NOTIFICATIONS, "only the flags a webhook may set");
    let kept_of = |t: &Transition| relays_by(t, |relay| (relay.flags, relay.mentions.clone()));
    let pinged = Some(vec![UserId(7)]);
    for dev_text in ["Built it. TURN_COMPLETE", "Starting on it now."] {
        let mut f = Fixture::new();
        let pm_signal = IncomingMessage { flags: silent, ..f.message(PM, "Over to dev. TURN_COMPLETE", 5_000) };
        let dev_answer = f.message(DEV, dev_text, 5_100);
        let dev_answer = IncomingMessage { flags: silent, mentions: pinged.clone(), ..dev_answer };
        f.deliver(&dev_answer, 5_101);
        f.session = serde_json::from_str(&serde_json::to_string(&f.session).unwrap()).unwrap();
        let t = f.deliver(&pm_signal, 5_150);
        let kept = [(pm_signal.id, (silent, None)), (dev_answer.id, (silent, pinged.clone()))];
        assert_eq!(kept_of(&t), kept, "{dev_text}");
    }
}

#[test]
fn an_out_of_turn_message_written_before_the_signal_stays_out_of_turn() {
    let mut f = Fixture::new();
    let dev_early = f.message(DEV, "Can I go? TURN_COMPLETE", 4_900);
    f.deliver(&dev_early, 4_901);
    let t = f.say(PM, "Go ahead. TURN_COMPLETE", 5_000);
    assert_eq!(event_names(&t), ["turn_complete"], "dev wrote before it had the floor");
    assert_eq!(f.active(), "dev");
    assert_eq!(relays(&t).len(), 1);
}

#[test]
fn out_of_turn_notes_survive_a_save_and_are_bounded_to_the_reorder_window() {
    let mut f = Fixture::new();
    let old = f.message(DEV, "early", 1_000);
    f.deliver(&old, 1_001);
    let dev_answer = f.message(DEV, "Built it. TURN_COMPLETE", 20_000);
    f.deliver(&dev_answer, 20_001);
    let noted: Vec<MessageId> = f.session.out_of_turn_lately.iter().map(|n| n.message_id).collect();
    assert_eq!(noted, [dev_answer.id], "the one older than the window is dropped");
    f.session = serde_json::from_str(&serde_json::to_string(&f.session).unwrap()).unwrap();
    let pm_signal = f.message(PM, "TURN_COMPLETE", 19_900);
    assert_eq!(event_names(&f.deliver(&pm_signal, 20_100)), ["turn_complete", "turn_complete"]);
}

#[test]
fn a_removed_message_judged_again_is_not_reposted_in_observe_mode_nor_when_it_had_no_text() {
    let mut f = Fixture::new();
    let pm_signal = f.message(PM, "Over to dev. TURN_COMPLETE", 5_000);
    let dev_files = IncomingMessage { has_files: true, ..f.message(DEV, " ", 5_100) };
    f.deliver(&dev_files, 5_101);
    let t = f.deliver(&pm_signal, 5_150);
    assert_eq!(relays(&t), [(pm_signal.id, Some("Over to dev.".into()))], "nothing left to show of dev's message");

    let mut f = Fixture::new();
    let pm_signal = f.message(PM, "Over to dev. TURN_COMPLETE", 5_000);
    let dev_first = f.message(DEV, "Starting on it now.", 5_100);
    f.deliver(&dev_first, 5_101);
    f.set_display_mode(DisplayMode::Observe);
    let t = f.deliver(&pm_signal, 5_150);
    assert!(relays(&t).is_empty(), "no webhook to repost through in observe mode: {:?}", t.effects);
    assert_eq!(f.active(), "dev");
}

/// A removed message whose judgement in turn leaves it as written (a handoff refused, a rule that does not strip) is
/// shown again, as the persona, before what the judgement says: deleted as out of turn, it was said in turn.
#[test]
fn a_removed_message_judged_in_turn_to_stay_as_written_is_shown_again() {
    let config = |rule: &str| {
        let rules = format!(
            r#"{{"signals": {{"rules": [{{"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"}}, {rule}]}}}}"#
        );
        Config::parse("c.json", &rules).unwrap_or_else(|p| panic!("{p}"))
    };
    let handoff = r#"{"name": "HANDOFF", "pattern": "HANDOFF:\\s*(?P<payload>\\S+)", "action": "handoff"}"#;
    let note =
        r#"{"name": "NOTE", "pattern": "NOTE:\\s*(?P<payload>.+)", "at": "line", "strip": false, "action": "record"}"#;
    for (rule, text, judged) in [
        (handoff, "My long answer.\nHANDOFF: ghost", "handoff_refused"),
        (note, "NOTE: the schema changed\nMy long answer.", "recorded"),
    ] {
        let mut f = Fixture::with_config(config(rule));
        let signal = f.message(PM, "Done. TURN_COMPLETE", 1_000);
        let t = f.say(DEV, text, 1_200);
        assert_eq!(t.effects, [Effect::Delete { message_id: f.last_id }], "out of turn, removed");
        let t = f.deliver(&signal, 1_300);
        assert_eq!(f.active(), "dev");
        assert!(event_names(&t).contains(&judged), "{:?}", event_names(&t));
        assert_eq!(relays(&t), [(signal.id, Some("Done.".into())), (f.last_id, Some(text.into()))], "{text}");
        let shown =
            t.effects.iter().position(|e| matches!(e, Effect::Relay { message_id, .. } if *message_id == f.last_id));
        let replies = t.effects.iter().position(|e| matches!(e, Effect::Announce(a) if a.reply_to == Some(f.last_id)));
        assert!(replies.is_none_or(|reply| shown < Some(reply)), "the text, then the reply about it");
    }
}

/// The signal that gave the floor handled during a manager's pause: the new holder's messages it overtook are judged
/// in turn all the same, as the pause says (one written before the pause was given ends the turn; one written after
/// it is held). Before, they stayed out of turn: removed, never shown, never acted on.
#[test]
fn messages_overtaken_by_a_signal_handled_during_a_pause_are_judged_in_turn_as_the_pause_says() {
    let mut f = Fixture::new();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.say(DEV, "My answer. TURN_COMPLETE", 9_500);
    let before_the_pause = f.last_id;
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["turn_complete", "turn_complete"], "pm's, then dev's, written before the pause");
    assert_eq!((f.active(), f.session.status), ("critic", SessionStatus::Paused));
    assert!(relays(&t).contains(&(before_the_pause, Some("My answer.".into()))), "{:?}", relays(&t));

    let mut f = Fixture::new();
    let signal = f.message(PM, "Done. TURN_COMPLETE", 9_000);
    f.command_given(Command::Pause, 10_000, 10_000).unwrap();
    f.say(DEV, "My answer. TURN_COMPLETE", 10_200);
    let after_the_pause = f.last_id;
    let t = f.deliver(&signal, 10_500);
    assert_eq!(event_names(&t), ["turn_complete", "signal_held"]);
    assert_eq!(f.active(), "dev");
    assert!(relays(&t).contains(&(after_the_pause, Some("My answer.".into()))), "shown, as a held signal is");
    let t = f.command(Command::Resume, 30_000).unwrap();
    assert!(texts(&t).iter().any(|s| s.contains("(dev) has the floor")), "asked again: {:?}", texts(&t));
}
