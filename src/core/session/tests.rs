//! Behaviour tests of the session state machine, one per rule of spec 5, 7 and 8, and property tests.

use super::effects::{Announcement, Effect};
use super::history::EventKind;
use super::*;
use crate::core::config::{Config, OutOfTurnPolicy};
use crate::core::persona::{Persona, PersonaCatalog};
use chrono::TimeDelta;

const PM: UserId = UserId(101);
const DEV: UserId = UserId(102);
const CRITIC: UserId = UserId(103);
const HUMAN: UserId = UserId(900);
const CHANNEL: ChannelId = ChannelId(555);

fn persona(id: &str, user: UserId, timeout: Option<u32>) -> Persona {
    Persona {
        id: PersonaId::parse(id).unwrap(),
        display_name: id.to_uppercase(),
        discord_user_id: user,
        avatar_url: None,
        timeout_seconds: timeout,
        order: None,
        source: format!("{id}.json"),
    }
}

fn catalog() -> PersonaCatalog {
    let mut personas =
        vec![persona("pm", PM, Some(90)), persona("dev", DEV, Some(120)), persona("critic", CRITIC, None)];
    for (i, p) in personas.iter_mut().enumerate() {
        p.order = Some(i as i64);
    }
    PersonaCatalog::new(personas)
}

fn id(text: &str) -> PersonaId {
    PersonaId::parse(text).unwrap()
}

fn t0() -> DateTime<Utc> {
    "2026-02-04T21:20:00Z".parse().unwrap()
}

/// A running session of pm (90 s), dev (120 s) and critic (default 60 s), started at `t0`.
struct Fixture {
    personas: PersonaCatalog,
    config: Config,
    session: Session,
    next_id: u64,
}

impl Fixture {
    fn new() -> Self {
        Self::with_config(Config::default())
    }

    fn with_config(config: Config) -> Self {
        let mut f = Self { personas: catalog(), config, session: Session::new(CHANNEL), next_id: 1000 };
        f.command(Command::Start { roster: vec![] }, 0).unwrap();
        f
    }

    fn at(ms: i64) -> DateTime<Utc> {
        t0() + TimeDelta::milliseconds(ms)
    }

    /// A new message from `author` at `ms` after the start.
    fn say(&mut self, author: UserId, text: &str, ms: i64) -> Transition {
        self.next_id += 1;
        let message = IncomingMessage { id: MessageId(self.next_id), author, text: text.into(), edited: false };
        self.deliver(&message, ms)
    }

    fn deliver(&mut self, message: &IncomingMessage, ms: i64) -> Transition {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        self.session.handle_message(message, Self::at(ms), Context { personas: &personas, config: &config })
    }

    fn command(&mut self, command: Command, ms: i64) -> Result<Transition, Refusal> {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        self.session.handle_command(&command, None, Self::at(ms), Context { personas: &personas, config: &config })
    }

    fn tick(&mut self, ms: i64) -> Transition {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        self.session.tick(Self::at(ms), Context { personas: &personas, config: &config })
    }

    fn active(&self) -> &str {
        self.session.active_agent.as_ref().map_or("", |a| a.as_str())
    }
}

fn announcements(t: &Transition) -> Vec<&Announcement> {
    t.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Announce(a) => Some(a),
            _ => None,
        })
        .collect()
}

fn texts(t: &Transition) -> Vec<&str> {
    announcements(t).iter().map(|a| a.text.as_str()).collect()
}

fn event_names(t: &Transition) -> Vec<&'static str> {
    t.events.iter().map(|e| e.kind.name()).collect()
}

// --- start ---------------------------------------------------------------------------------------------------

#[test]
fn start_gives_the_floor_to_the_first_persona_and_mentions_it() {
    let mut session = Session::new(CHANNEL);
    let (personas, config) = (catalog(), Config::default());
    let ctx = Context { personas: &personas, config: &config };
    let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
    assert_eq!(
        texts(&t),
        [
            "▶️ Turn management started. Roster: pm, dev, critic.",
            "🎙️ <@101> (pm) has the floor: 90s. End your message with TURN_COMPLETE."
        ]
    );
    assert_eq!(announcements(&t)[0].mention, None);
    assert_eq!(announcements(&t)[1].mention, Some(PM));
    assert_eq!(session.active_agent, Some(id("pm")));
    assert_eq!(session.turn_timeout_at, Some(t0() + TimeDelta::seconds(90)));
    assert_eq!((session.round, session.status), (1, SessionStatus::Running));
    assert_eq!(event_names(&t), ["session_started"]);
    assert!(t.changed);
}

#[test]
fn start_with_named_personas_uses_them_in_that_order() {
    let mut f = Fixture::new();
    f.command(Command::Stop, 1).unwrap();
    f.command(Command::Start { roster: vec!["critic".into(), "PM".into()] }, 2).unwrap();
    assert_eq!(f.session.roster, [id("critic"), id("pm")]);
    assert_eq!(f.active(), "critic");
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(2) + TimeDelta::seconds(60)), "critic uses the default");
}

#[test]
fn start_is_refused_while_running_and_for_unknown_or_repeated_personas() {
    let mut f = Fixture::new();
    let refusal = f.command(Command::Start { roster: vec![] }, 1).unwrap_err();
    assert!(refusal.0.contains("already running here (pm has the floor)"), "{refusal}");
    f.command(Command::Stop, 2).unwrap();
    let refusal = f.command(Command::Start { roster: vec!["ceo".into()] }, 3).unwrap_err();
    assert_eq!(refusal.0, "unknown persona \"ceo\"; known personas: pm, dev, critic");
    let refusal = f.command(Command::Start { roster: vec!["pm".into(), "pm".into()] }, 4).unwrap_err();
    assert!(refusal.0.contains("named twice"));
    assert!(!f.session.is_active());
}

// --- agent messages (spec 5) ---------------------------------------------------------------------------------

#[test]
fn signal_from_the_floor_holder_is_stripped_and_the_turn_advances() {
    let mut f = Fixture::new();
    let t = f.say(PM, "Here's my response.\n\nTURN_COMPLETE", 5_000);
    let message_id = MessageId(f.next_id);
    assert_eq!(t.effects[0], Effect::Relay { message_id, persona: id("pm"), text: Some("Here's my response.".into()) });
    assert_eq!(texts(&t), ["🎙️ <@102> (dev) has the floor: 120s. End your message with TURN_COMPLETE."]);
    assert_eq!(announcements(&t)[0].mention, Some(DEV));
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(5_000) + TimeDelta::seconds(120)));
    match &t.events[0].kind {
        EventKind::TurnComplete { next_agent, keyword, .. } => {
            assert_eq!((next_agent.as_str(), keyword.as_str()), ("dev", "TURN_COMPLETE"))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(t.events[0].agent_id, Some(id("pm")));
}

#[test]
fn message_without_signal_is_left_as_posted_and_the_turn_goes_on() {
    let mut f = Fixture::new();
    let t = f.say(PM, "Thinking about it...", 3_000);
    assert!(t.effects.is_empty() && t.events.is_empty());
    assert!(t.changed, "last activity and last message id changed");
    assert_eq!(f.active(), "pm");
    assert_eq!(f.session.agents[&id("pm")].last_activity, Some(Fixture::at(3_000)));
    assert_eq!(f.session.turn_timeout_at, Some(Fixture::at(90_000)), "activity does not move the deadline");
}

#[test]
fn signal_alone_shows_nothing_and_still_advances() {
    let mut f = Fixture::new();
    let t = f.say(PM, "TURN_COMPLETE", 1_000);
    assert_eq!(t.effects[0], Effect::Relay { message_id: MessageId(f.next_id), persona: id("pm"), text: None });
    assert_eq!(f.active(), "dev");
}

#[test]
fn several_messages_then_the_signal_end_one_turn() {
    let mut f = Fixture::new();
    assert!(f.say(PM, "Part one.", 1_000).effects.is_empty());
    assert!(f.say(PM, "Part two.", 2_000).effects.is_empty());
    let t = f.say(PM, "Part three. TURN_COMPLETE", 3_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.active(), "dev");
}

#[test]
fn observe_mode_leaves_the_message_and_reacts_on_completion() {
    let mut f = Fixture::new();
    let ctx_personas = f.personas.clone();
    let config = f.config.clone();
    f.session.set_display_mode(
        DisplayMode::Observe,
        Fixture::at(0),
        Context { personas: &ctx_personas, config: &config },
    );
    let t = f.say(PM, "Done. TURN_COMPLETE", 1_000);
    assert_eq!(t.effects[0], Effect::React { message_id: MessageId(f.next_id), emoji: "✅" });
    assert!(!t.effects.iter().any(|e| matches!(e, Effect::Relay { .. } | Effect::Delete { .. })));
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_person_who_is_not_a_persona_is_left_alone() {
    let mut f = Fixture::new();
    let t = f.say(HUMAN, "Can you also cover testing? TURN_COMPLETE", 1_000);
    assert!(t.effects.is_empty() && t.events.is_empty());
    assert_eq!(f.active(), "pm");
}

#[test]
fn out_of_turn_under_remove_is_deleted_in_relay_and_its_text_kept() {
    let mut f = Fixture::new();
    let t = f.say(CRITIC, "I disagree! TURN_COMPLETE", 1_000);
    assert_eq!(t.effects, [Effect::Delete { message_id: MessageId(f.next_id) }]);
    assert!(announcements(&t).is_empty(), "no notice mentions the persona");
    assert_eq!(
        t.events[0].kind,
        EventKind::OutOfTurn {
            message_id: MessageId(f.next_id),
            text: "I disagree! TURN_COMPLETE".into(),
            removed: true
        }
    );
    assert_eq!(f.active(), "pm", "the floor does not move");
}

#[test]
fn out_of_turn_under_allow_is_left_and_recorded() {
    let config = Config { out_of_turn: OutOfTurnPolicy::Allow, ..Config::default() };
    let mut f = Fixture::with_config(config);
    let t = f.say(DEV, "Me first.", 1_000);
    assert!(t.effects.is_empty());
    assert!(matches!(t.events[0].kind, EventKind::OutOfTurn { removed: false, .. }));
}

#[test]
fn out_of_turn_in_observe_mode_cannot_be_removed() {
    let mut f = Fixture::new();
    let (personas, config) = (f.personas.clone(), f.config.clone());
    f.session.set_display_mode(DisplayMode::Observe, Fixture::at(0), Context { personas: &personas, config: &config });
    let t = f.say(DEV, "Me first.", 1_000);
    assert!(t.effects.is_empty());
    assert!(matches!(t.events[0].kind, EventKind::OutOfTurn { removed: false, .. }));
}

#[test]
fn late_signal_after_a_timeout_is_shown_without_advancing() {
    let mut f = Fixture::new();
    f.tick(90_000);
    assert_eq!(f.active(), "dev");
    let t = f.say(PM, "Sorry, here it is. TURN_COMPLETE", 95_000);
    assert_eq!(
        t.effects,
        [Effect::Relay {
            message_id: MessageId(f.next_id),
            persona: id("pm"),
            text: Some("Sorry, here it is.".into())
        }]
    );
    assert_eq!(event_names(&t), ["late_signal"]);
    assert_eq!(f.active(), "dev", "a late signal does not advance");
    // Only the first message after the timeout is late; the next one is out of turn.
    let t = f.say(PM, "And another thing.", 96_000);
    assert_eq!(event_names(&t), ["out_of_turn"]);
}

// --- deadlines (spec 8) --------------------------------------------------------------------------------------

#[test]
fn deadline_ends_the_turn_with_the_seed_announcement() {
    let mut f = Fixture::new();
    assert_eq!(f.tick(89_999), Transition::default(), "nothing is due before the deadline");
    let t = f.tick(90_000);
    assert_eq!(
        texts(&t),
        ["⏱️ pm turn timed out after 90s", "🎙️ <@102> (dev) has the floor: 120s. End your message with TURN_COMPLETE."]
    );
    assert_eq!(announcements(&t)[0].mention, None);
    assert_eq!(t.events[0].kind, EventKind::TurnTimeout { duration_seconds: 90, next_agent: id("dev") });
    assert_eq!(f.active(), "dev");
    assert_eq!(f.session.agents[&id("pm")].consecutive_timeouts, 1);
}

#[test]
fn timeout_announcement_can_be_turned_off_but_the_turn_still_ends() {
    let config = Config { announce_timeouts: false, ..Config::default() };
    let mut f = Fixture::with_config(config);
    let t = f.tick(90_000);
    assert_eq!(texts(&t), ["🎙️ <@102> (dev) has the floor: 120s. End your message with TURN_COMPLETE."]);
    assert_eq!(event_names(&t), ["turn_timeout"]);
}

#[test]
fn overdue_turn_reports_its_true_duration() {
    // As after a restart: the bot was down when the deadline passed.
    let mut f = Fixture::new();
    let t = f.tick(301_400);
    assert_eq!(texts(&t)[0], "⏱️ pm turn timed out after 301s");
    assert_eq!(
        f.session.turn_started_at,
        Some(Fixture::at(301_400)),
        "the next turn starts now, not at the old deadline"
    );
}

#[test]
fn signal_and_deadline_at_the_same_instant_end_one_turn() {
    // The signal arrives exactly at the deadline: the turn covers [start, deadline), so it timed out first and the
    // signal is late. One turn end, not two.
    let mut f = Fixture::new();
    let t = f.say(PM, "Made it? TURN_COMPLETE", 90_000);
    assert_eq!(event_names(&t), ["turn_timeout", "late_signal"]);
    assert_eq!(f.active(), "dev");
    assert_eq!(f.tick(90_000), Transition::default());

    // A millisecond earlier, the signal wins and the deadline that follows finds nothing to end.
    let mut f = Fixture::new();
    let t = f.say(PM, "Made it. TURN_COMPLETE", 89_999);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert_eq!(f.tick(90_000), Transition::default());
    assert_eq!(f.active(), "dev");
}

#[test]
fn the_round_grows_when_the_roster_wraps() {
    let mut f = Fixture::new();
    f.say(PM, "a TURN_COMPLETE", 1);
    f.say(DEV, "b TURN_COMPLETE", 2);
    assert_eq!(f.session.round, 1);
    f.say(CRITIC, "c TURN_COMPLETE", 3);
    assert_eq!((f.active(), f.session.round), ("pm", 2));
}

// --- message identity ----------------------------------------------------------------------------------------

#[test]
fn each_message_id_is_handled_once_and_older_ids_are_ignored() {
    let mut f = Fixture::new();
    let message = IncomingMessage { id: MessageId(5_000), author: PM, text: "x TURN_COMPLETE".into(), edited: false };
    assert_eq!(event_names(&f.deliver(&message, 1_000)), ["turn_complete"]);
    let before = f.session.clone();
    assert_eq!(f.deliver(&message, 1_001), Transition::default());
    let older = IncomingMessage { id: MessageId(4_999), author: DEV, ..message };
    assert_eq!(f.deliver(&older, 1_002), Transition::default());
    assert_eq!(f.session, before);
}

#[test]
fn a_command_message_delivered_twice_runs_once() {
    let mut f = Fixture::new();
    let (personas, config) = (f.personas.clone(), f.config.clone());
    let ctx = Context { personas: &personas, config: &config };
    let skip = f.session.handle_command(&Command::Skip, Some(MessageId(7_000)), Fixture::at(1), ctx).unwrap();
    assert_eq!(event_names(&skip), ["skipped"]);
    let again = f.session.handle_command(&Command::Skip, Some(MessageId(7_000)), Fixture::at(2), ctx).unwrap();
    assert_eq!(again, Transition::default());
    assert_eq!(f.active(), "dev");
}

#[test]
fn a_streamed_message_whose_last_edit_adds_the_signal_ends_the_turn_once() {
    let mut f = Fixture::new();
    f.say(PM, "Draft", 1_000);
    let mut message =
        IncomingMessage { id: MessageId(f.next_id), author: PM, text: "Draft, longer".into(), edited: true };
    assert_eq!(f.deliver(&message, 2_000), Transition::default(), "an edit without the signal changes nothing");
    message.text = "Draft, final.\nTURN_COMPLETE".into();
    let t = f.deliver(&message, 3_000);
    assert_eq!(
        t.effects[0],
        Effect::Relay { message_id: message.id, persona: id("pm"), text: Some("Draft, final.".into()) }
    );
    assert_eq!(f.active(), "dev");
    assert_eq!(f.deliver(&message, 4_000), Transition::default(), "the same message cannot end a second turn");
}

#[test]
fn an_edit_of_a_message_never_seen_is_ignored() {
    let mut f = Fixture::new();
    let message = IncomingMessage { id: MessageId(1), author: PM, text: "old TURN_COMPLETE".into(), edited: true };
    assert_eq!(f.deliver(&message, 1_000), Transition::default());
    assert_eq!(f.active(), "pm");
}

#[test]
fn an_edit_adding_the_signal_after_the_turn_ended_is_a_late_signal() {
    let mut f = Fixture::new();
    f.say(PM, "Streaming...", 1_000);
    let streamed = MessageId(f.next_id);
    f.tick(90_000);
    let edit =
        IncomingMessage { id: streamed, author: PM, text: "Streaming... done. TURN_COMPLETE".into(), edited: true };
    let t = f.deliver(&edit, 91_000);
    assert_eq!(event_names(&t), ["late_signal"]);
    assert_eq!(f.active(), "dev");
}

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
fn a_signal_during_a_pause_hands_over_but_the_next_turn_waits_for_resume() {
    let mut f = Fixture::new();
    f.command(Command::Pause, 10_000).unwrap();
    let t = f.say(PM, "Finishing my thought. TURN_COMPLETE", 20_000);
    assert_eq!(event_names(&t), ["turn_complete"]);
    assert!(announcements(&t).is_empty(), "nobody is called on while paused");
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
    assert_eq!(texts(&t), ["⏹️ Turn management stopped after 1 round(s). History is kept."]);
    assert_eq!((f.session.active_agent.as_ref(), f.session.next_deadline()), (None, None));
    assert_eq!(f.say(PM, "hello TURN_COMPLETE", 2_000), Transition::default());
    assert!(f.command(Command::Skip, 3_000).unwrap_err().0.contains("No session is running here"));
    assert!(f.command(Command::Stop, 3_000).is_err());
}

#[test]
fn restarting_keeps_history_and_announcement_numbering() {
    let mut f = Fixture::new();
    f.command(Command::Stop, 1_000).unwrap();
    let seq = f.session.announcement_seq;
    let events = f.session.history.len();
    let t = f.command(Command::Start { roster: vec![] }, 2_000).unwrap();
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

mod properties {
    //! Invariants over random sequences of messages, deadlines and commands.

    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Step {
        /// `author` 0..3 are the personas, 3 is a person; `id_back` > 0 repeats an old id.
        Say {
            author: usize,
            signal: bool,
            id_back: u64,
        },
        EditLast {
            signal: bool,
        },
        Wait {
            ms: i64,
        },
        Command(Command),
    }

    fn persona_name() -> impl Strategy<Value = String> {
        prop_oneof![Just("pm".to_owned()), Just("dev".to_owned()), Just("critic".to_owned()), Just("ghost".to_owned())]
    }

    fn step() -> impl Strategy<Value = Step> {
        let command = prop_oneof![
            prop::collection::vec(persona_name(), 0..4).prop_map(|roster| Command::Start { roster }),
            Just(Command::Stop),
            Just(Command::Pause),
            Just(Command::Resume),
            Just(Command::Skip),
            persona_name().prop_map(|persona| Command::Give { persona }),
            (-5i64..200).prop_map(|seconds| Command::Extend { seconds }),
            prop::collection::vec(persona_name(), 0..4).prop_map(|roster| Command::Order { roster }),
            persona_name().prop_map(|persona| Command::Add { persona }),
            persona_name().prop_map(|persona| Command::Remove { persona }),
        ];
        prop_oneof![
            4 => (0usize..4, any::<bool>(), prop_oneof![3 => Just(0u64), 1 => 1u64..4])
                .prop_map(|(author, signal, id_back)| Step::Say { author, signal, id_back }),
            1 => any::<bool>().prop_map(|signal| Step::EditLast { signal }),
            3 => (0i64..150_000).prop_map(|ms| Step::Wait { ms }),
            2 => command.prop_map(Step::Command),
        ]
    }

    fn check_invariants(session: &Session, personas: &PersonaCatalog, config: &Config) -> Result<(), TestCaseError> {
        match session.status {
            SessionStatus::Stopped => prop_assert!(session.active_agent.is_none(), "nobody holds the floor after stop"),
            _ => {
                let active = session.active_agent.as_ref();
                prop_assert!(
                    active.is_some_and(|a| session.roster.contains(a)),
                    "exactly one roster member holds the floor"
                );
            }
        }
        if session.status == SessionStatus::Running {
            let active = session.active_agent.as_ref().unwrap();
            let timeout = config.timeout_of(personas.get(active).and_then(|p| p.timeout_seconds));
            prop_assert_eq!(session.turn_timeout_seconds, timeout);
            let expected = session.turn_started_at.unwrap()
                + TimeDelta::seconds(i64::from(timeout) + session.turn_extended_seconds as i64)
                + TimeDelta::milliseconds(session.turn_paused_ms);
            prop_assert_eq!(
                session.turn_timeout_at,
                Some(expected),
                "deadline = start + timeout + extensions + paused"
            );
        }
        if session.status == SessionStatus::Paused {
            prop_assert!(session.turn_timeout_at.is_none() && session.paused_remaining_ms.is_some_and(|ms| ms >= 0));
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn random_sessions_keep_their_invariants(steps in prop::collection::vec(step(), 1..60)) {
            let personas = catalog();
            let config = Config::default();
            let ctx = Context { personas: &personas, config: &config };
            let users = [PM, DEV, CRITIC, HUMAN];
            let mut session = Session::new(CHANNEL);
            let mut now = t0();
            let mut next_id = 10_000u64;
            let mut last_said: Option<IncomingMessage> = None;
            let mut round = 0;

            for step in steps {
                let transition = match step {
                    Step::Say { author, signal, id_back } => {
                        next_id += 1;
                        let text = if signal { "words\nTURN_COMPLETE " } else { "words" };
                        let message = IncomingMessage {
                            id: MessageId(next_id - id_back),
                            author: users[author],
                            text: text.into(),
                            edited: false,
                        };
                        let before = session.clone();
                        let transition = session.handle_message(&message, now, ctx);
                        if before.last_message_id.is_some_and(|last| message.id <= last) {
                            prop_assert_eq!(&session, &before, "a repeated message id must not change the state");
                            prop_assert_eq!(&transition, &Transition::default());
                        }
                        // The same message again never changes anything.
                        let after = session.clone();
                        prop_assert_eq!(session.handle_message(&message, now, ctx), Transition::default());
                        prop_assert_eq!(&session, &after);
                        last_said = Some(message);
                        transition
                    }
                    Step::EditLast { signal } => match &last_said {
                        Some(message) => {
                            let text = if signal { "edited TURN_COMPLETE" } else { "edited" };
                            let edit = IncomingMessage { text: text.into(), edited: true, ..message.clone() };
                            let transition = session.handle_message(&edit, now, ctx);
                            let after = session.clone();
                            prop_assert_eq!(session.handle_message(&edit, now, ctx), Transition::default(), "an edit counts once");
                            prop_assert_eq!(&session, &after);
                            transition
                        }
                        None => Transition::default(),
                    },
                    Step::Wait { ms } => {
                        now += TimeDelta::milliseconds(ms);
                        session.tick(now, ctx)
                    }
                    Step::Command(command) => session.handle_command(&command, None, now, ctx).unwrap_or_default(),
                };
                for effect in &transition.effects {
                    if let Effect::Relay { text: Some(text), .. } = effect {
                        prop_assert!(!config.signals.has_signal(text), "shown text never ends with the signal: {:?}", text);
                    }
                    if let Effect::Announce(a) = effect {
                        prop_assert!(a.nonce.len() <= 25);
                    }
                }
                // Stop then start resets the round to 1; otherwise it never decreases.
                let restarted = transition.events.iter().any(|e| e.kind.name() == "session_started");
                prop_assert!(restarted || session.round >= round, "round went from {} to {}", round, session.round);
                round = session.round;
                check_invariants(&session, &personas, &config)?;
                // Whatever happened survives a save and a load unchanged.
                let saved = serde_json::to_string(&session).unwrap();
                prop_assert_eq!(&serde_json::from_str::<Session>(&saved).unwrap(), &session);
            }
        }
    }
}
