//! Each check finds the broken promise it is named for, and a clean channel passes them all.

use super::*;
use crate::core::ids::{MessageId, PersonaId};
use chrono::DateTime;

const BOT: u64 = 1;
const PM: u64 = 2;
const DEV: u64 = 3;
const CHANNEL: u64 = 9;

fn message(id: u64, author: u64, content: &str) -> Posted {
    Posted {
        id,
        author: Some(author),
        content: content.into(),
        created_ms: id,
        deleted: false,
        nonce: (author == BOT).then(|| format!("n{id}")),
    }
}

fn floor(id: u64, persona: &str) -> Posted {
    message(id, BOT, &format!("🎙️ <@0> ({persona}) has the floor: 60s. End your message with TURN_COMPLETE."))
}

fn deleted(mut m: Posted) -> Posted {
    m.deleted = true;
    m
}

fn persona(id: &str) -> PersonaId {
    PersonaId::parse(id).unwrap()
}

fn event(agent: Option<&str>, kind: EventKind) -> HistoryEvent {
    HistoryEvent { at: DateTime::UNIX_EPOCH, round: 1, agent_id: agent.map(persona), kind }
}

fn started() -> HistoryEvent {
    event(None, EventKind::SessionStarted { roster: vec![persona("pm"), persona("dev")] })
}

fn completed(by: &str, message: u64, next: &str) -> HistoryEvent {
    let kind = EventKind::TurnComplete {
        message_id: MessageId(message),
        keyword: "TURN_COMPLETE".into(),
        next_agent: persona(next),
    };
    event(Some(by), kind)
}

struct Fixture {
    personas: BTreeMap<String, u64>,
    roster: Vec<String>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            personas: [("pm".to_owned(), PM), ("dev".to_owned(), DEV)].into(),
            roster: vec!["pm".into(), "dev".into()],
        }
    }

    fn settled(&self, messages: &[Posted], history: &[HistoryEvent]) -> Vec<&'static str> {
        let record = ChannelRecord {
            channel: CHANNEL,
            bot: BOT,
            personas: &self.personas,
            roster: &self.roster,
            messages,
            history,
            relay_until_ms: None,
        };
        check_settled(&record).iter().map(Violation::kind).collect()
    }
}

/// pm's floor, pm's signal (relayed: deleted), dev's floor.
fn one_clean_turn() -> (Vec<Posted>, Vec<HistoryEvent>) {
    let messages = vec![floor(10, "pm"), deleted(message(20, PM, "Done. TURN_COMPLETE")), floor(30, "dev")];
    (messages, vec![started(), completed("pm", 20, "dev")])
}

#[test]
fn a_clean_channel_passes_every_check() {
    let f = Fixture::new();
    let (messages, history) = one_clean_turn();
    assert_eq!(f.settled(&messages, &history), Vec::<&str>::new());
    assert_eq!(
        floor_persona("🎙️ <@5> (critic) has the floor: 3s. End your message with TURN_COMPLETE."),
        Some("critic".into())
    );
    assert_eq!(floor_persona("⏱️ pm turn timed out after 3s"), None);
}

#[test]
fn a_turn_whose_announcement_never_came_is_missing() {
    let f = Fixture::new();
    let (mut messages, history) = one_clean_turn();
    messages.pop();
    assert_eq!(f.settled(&messages, &history), vec!["announcement_missing"]);
}

#[test]
fn an_announcement_posted_twice_is_doubled_even_with_two_nonces() {
    let f = Fixture::new();
    let (mut messages, history) = one_clean_turn();
    messages.push(floor(40, "dev"));
    let kinds = f.settled(&messages, &history);
    assert!(kinds.contains(&"announcement_doubled"), "{kinds:?}");
}

#[test]
fn one_nonce_on_two_messages_is_reused() {
    let f = Fixture::new();
    let (mut messages, history) = one_clean_turn();
    messages[2].nonce = messages[0].nonce.clone();
    assert_eq!(f.settled(&messages, &history), vec!["nonce_reused"]);
}

#[test]
fn a_signal_recorded_as_complete_and_late_is_doubled_and_one_never_recorded_is_lost() {
    let f = Fixture::new();
    let (messages, mut history) = one_clean_turn();
    let late = EventKind::LateSignal { message_id: MessageId(20), text: "Done.".into(), had_signal: true };
    history.push(event(Some("pm"), late));
    assert_eq!(f.settled(&messages, &history), vec!["signal_doubled"]);

    let (mut messages, history) = one_clean_turn();
    messages.push(deleted(message(35, DEV, "Mine. TURN_COMPLETE")));
    assert_eq!(f.settled(&messages, &history), vec!["signal_lost"]);
}

#[test]
fn a_signal_left_out_of_turn_breaks_the_promise_but_one_judged_again_in_its_turn_does_not() {
    let f = Fixture::new();
    let (messages, mut history) = one_clean_turn();
    let out = EventKind::OutOfTurn { message_id: MessageId(20), text: "Done. TURN_COMPLETE".into(), removed: true };
    history.insert(1, event(Some("pm"), out));
    assert_eq!(f.settled(&messages, &history), Vec::<&str>::new(), "it overtook its floor, then ended that turn");
    history.pop();
    history.push(event(Some("pm"), EventKind::SessionStopped {}));
    let kinds = f.settled(&messages[..2], &history);
    assert!(kinds.contains(&"signal_out_of_turn"), "{kinds:?}");
}

#[test]
fn a_signal_left_showing_in_relay_mode_is_visible_unless_observe_mode_began_before_it() {
    let f = Fixture::new();
    let (mut messages, history) = one_clean_turn();
    messages[1].deleted = false;
    assert_eq!(f.settled(&messages, &history), vec!["signal_visible"]);
    let record = ChannelRecord {
        channel: CHANNEL,
        bot: BOT,
        personas: &f.personas,
        roster: &f.roster,
        messages: &messages,
        history: &history,
        relay_until_ms: Some(15),
    };
    assert!(check_settled(&record).is_empty(), "written after the switch to observe mode");
}

#[test]
fn the_floor_going_to_anyone_but_the_next_of_the_roster_breaks_the_order() {
    let mut f = Fixture::new();
    f.roster = vec!["pm".into(), "critic".into(), "dev".into()];
    let (messages, history) = one_clean_turn();
    let kinds = f.settled(&messages, &history);
    assert!(kinds.iter().all(|k| *k == "roster_order") && !kinds.is_empty(), "{kinds:?}");
}

#[test]
fn only_what_was_caught_up_with_is_judged_before_the_end() {
    let f = Fixture::new();
    let (mut messages, history) = one_clean_turn();
    messages.push(message(50, DEV, "Mine. TURN_COMPLETE"));
    let record = ChannelRecord {
        channel: CHANNEL,
        bot: BOT,
        personas: &f.personas,
        roster: &f.roster,
        messages: &messages,
        history: &history,
        relay_until_ms: None,
    };
    assert!(check_caught_up(&record, 49).is_empty());
    let kinds: Vec<_> = check_caught_up(&record, 50).iter().map(Violation::kind).collect();
    assert_eq!(kinds, vec!["signal_lost", "signal_visible"]);
}
