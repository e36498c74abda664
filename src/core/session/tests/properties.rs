//! Invariants over random sequences of messages (new, overtaken, repeated, edited), deadlines and commands.

use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

#[derive(Clone, Debug)]
enum Step {
    /// A new message. `author` 0..3 are the personas, 3 is a person; written `age_ms` before it is handled (an
    /// overtaken or caught-up message; negative when Discord's clock runs ahead of ours).
    Say {
        author: usize,
        /// Which of the run's texts it says (the first is never a signal).
        text: usize,
        age_ms: i64,
    },
    /// The message said `back` messages ago, delivered again.
    Repeat {
        back: usize,
    },
    EditLast {
        signal: bool,
    },
    Wait {
        ms: i64,
    },
    /// A command, with a snowflake of its own (given `age_ms` before it is handled) or not.
    Command {
        command: Command,
        origin: Option<i64>,
    },
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
    let age = prop_oneof![6 => Just(0i64), 3 => 1i64..150_000, 1 => -2_000i64..0];
    prop_oneof![
        4 => (0usize..4, 0usize..64, age).prop_map(|(author, text, age_ms)| Step::Say { author, text, age_ms }),
        1 => (1usize..5).prop_map(|back| Step::Repeat { back }),
        1 => any::<bool>().prop_map(|signal| Step::EditLast { signal }),
        3 => (0i64..150_000).prop_map(|ms| Step::Wait { ms }),
        2 => (command, prop::option::of(prop_oneof![3 => Just(0i64), 1 => 1i64..5_000]))
            .prop_map(|(command, origin)| Step::Command { command, origin }),
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
            let holder = active.and_then(|a| session.agents.get(a));
            if holder.is_some_and(|a| a.awaiting_late_reply) && session.status == SessionStatus::Running {
                // What it wrote before it was given the floor is the late reply, not this turn's answer.
                let floor_reached_it = session.turn_started_at.map(MessageId::first_at);
                prop_assert!(
                    session.turn_began_after >= floor_reached_it,
                    "a holder owing a late reply is in turn only with what it wrote once given the floor"
                );
            }
            prop_assert!(!holder.is_some_and(|a| a.benched), "a benched persona never holds the floor");
            let playing = session.roster.iter().filter(|p| !session.agents.get(p).is_some_and(|a| a.benched));
            prop_assert!(playing.count() >= 1, "someone is always left in the rotation");
        }
    }
    if session.status == SessionStatus::Running {
        let active = session.active_agent.as_ref().unwrap();
        let timeout = config.timeout_of(personas.get(active).and_then(|p| p.timeout_seconds));
        prop_assert_eq!(session.turn_timeout_seconds, timeout);
        let expected = session.turn_started_at.unwrap()
            + TimeDelta::seconds(i64::from(timeout) + session.turn_extended_seconds as i64)
            + TimeDelta::milliseconds(session.turn_paused_ms);
        prop_assert_eq!(session.turn_timeout_at, Some(expected), "deadline = start + timeout + extensions + paused");
    }
    if session.status == SessionStatus::Paused {
        let grace_ms = i64::from(config.signals.recovery.grace_seconds) * 1000;
        prop_assert!(
            session.turn_timeout_at.is_none() && session.paused_remaining_ms.is_some_and(|ms| ms >= -grace_ms)
        );
    }
    Ok(())
}

/// Messages and commands of the run, with ids minted from their times as Discord does.
struct Run {
    session: Session,
    now: DateTime<Utc>,
    minted: u64,
    said: Vec<IncomingMessage>,
    /// Ids handled while a session was running: delivering one again must change nothing.
    handled: HashSet<MessageId>,
    /// Messages that completed a turn: none may complete a second.
    completed: HashSet<MessageId>,
    /// The id the running session started at: older messages belong to no session of its.
    started_at: MessageId,
}

impl Run {
    fn mint(&mut self, at: DateTime<Utc>) -> MessageId {
        self.minted += 1;
        MessageId(MessageId::first_at(at).0 + self.minted)
    }

    /// Delivers a message, checking that each id is handled once.
    fn deliver(&mut self, message: &IncomingMessage, ctx: Context) -> Result<Transition, TestCaseError> {
        let before = self.session.clone();
        let transition = self.session.handle_message(message, self.now, ctx);
        if self.handled.contains(&message.id) {
            prop_assert_eq!(&self.session, &before, "a repeated message id must not change the state");
            prop_assert_eq!(&transition, &Transition::default());
        } else if before.is_active() && message.id > self.started_at {
            prop_assert!(transition.changed, "a new message is handled, however old its id");
            self.handled.insert(message.id);
        } else if before.is_active() {
            prop_assert_eq!(&transition, &Transition::default(), "written before the session started: not judged");
            prop_assert_eq!(&self.session, &before);
        }
        let after = self.session.clone();
        prop_assert_eq!(self.session.handle_message(message, self.now, ctx), Transition::default());
        prop_assert_eq!(&self.session, &after, "the same message again never changes anything");
        Ok(transition)
    }
}

/// Texts of the default grammar: words, or words and the signal.
const PLAIN_TEXTS: &[&str] = &["words", "words\nTURN_COMPLETE "];

/// A rule of every action, and texts that use each of them (and a few that are almost signals).
const GRAMMAR: &str = r#"{"signals": {"benchAfter": 2, "loopAfter": 3, "maxRounds": 4, "graceSeconds": 3,
  "silenceSeconds": 40, "completionPhrases": ["over to you"], "rules": [
    {"name": "TURN_COMPLETE", "pattern": "TURN_COMPLETE", "action": "complete"},
    {"name": "PASS", "pattern": "PASS", "action": "pass"},
    {"name": "HANDOFF", "pattern": "HANDOFF:\\s*(?P<payload>\\S+)", "action": "handoff"},
    {"name": "READY", "pattern": "READY:\\s*(?P<task>\\S+)", "at": "line", "action": "route", "to": "critic"},
    {"name": "SHIPPED", "pattern": "SHIPPED:\\s*(?P<task>\\S+)", "at": "line", "action": "finishTask", "to": "pm"},
    {"name": "MORE", "pattern": "<more>(?P<payload>[^<]*)</more>", "at": "anywhere", "action": "keep"},
    {"name": "PROGRESS", "pattern": "PROGRESS:\\s*(?P<payload>-?\\d+)", "at": "line", "action": "progress",
     "extendSeconds": 20},
    {"name": "BLOCKED", "pattern": "BLOCKED:\\s*(?P<payload>.+)", "at": "line", "action": "escalate", "priority": 5},
    {"name": "CHECKPOINT", "pattern": "CHECKPOINT:\\s*(?P<payload>\\S+)", "at": "line", "action": "record"},
    {"name": "FIN", "pattern": "FIN", "action": "end", "from": ["critic"]}]}}"#;
const GRAMMAR_TEXTS: &[&str] = &[
    "words",
    "words\nTURN_COMPLETE ",
    "PASS",
    "HANDOFF: dev",
    "HANDOFF: critic",
    "HANDOFF: ghost",
    "READY: t1\nbody",
    "SHIPPED: t1",
    "again <more>same</more>",
    "PROGRESS: 150",
    "BLOCKED: need help",
    "CHECKPOINT: c1",
    "bye FIN",
    "ALMOST: a signal",
    "that is it, over to you",
    "READY: t2\nBLOCKED: both",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_sessions_keep_their_invariants(steps in prop::collection::vec(step(), 1..60)) {
        random_session(steps, Config::default(), PLAIN_TEXTS)?;
    }

    #[test]
    fn no_rule_set_makes_the_floor_holder_ambiguous(steps in prop::collection::vec(step(), 1..80)) {
        let config = Config::parse("c.json", GRAMMAR).unwrap();
        random_session(steps, config, GRAMMAR_TEXTS)?;
    }
}

/// Runs `steps` from a stopped session, checking the invariants after each.
fn random_session(steps: Vec<Step>, config: Config, texts: &[&str]) -> Result<(), TestCaseError> {
    let personas = catalog();
    let ctx = Context { personas: &personas, config: &config };
    let users = [PM, DEV, CRITIC, HUMAN];
    let mut run = Run {
        session: Session::new(CHANNEL),
        now: t0(),
        minted: 0,
        said: Vec::new(),
        handled: HashSet::new(),
        completed: HashSet::new(),
        started_at: MessageId(0),
    };
    let mut round = 0;
    let mut moved_at = None;

    for step in steps {
        // When the step was given: now, or a command's snowflake.
        let mut given = MessageId::first_at(run.now);
        let transition = match step {
            Step::Say { author, text, age_ms } => {
                let id = run.mint(run.now - TimeDelta::milliseconds(age_ms));
                let text = texts[text % texts.len()];
                let message = IncomingMessage {
                    id,
                    author: users[author],
                    text: text.into(),
                    edited: false,
                    written_at: id.created_at(),
                    edited_at: None,
                    has_files: false,
                    flags: Default::default(),
                    mentions: None,
                };
                run.said.push(message.clone());
                run.deliver(&message, ctx)?
            }
            Step::Repeat { back } => match run.said.len().checked_sub(back).map(|i| run.said[i].clone()) {
                Some(message) => run.deliver(&message, ctx)?,
                None => Transition::default(),
            },
            Step::EditLast { signal } => match run.said.last() {
                Some(message) => {
                    let text = if signal { "edited TURN_COMPLETE" } else { "edited" };
                    let edit =
                        IncomingMessage { text: text.into(), edited: true, written_at: run.now, ..message.clone() };
                    let transition = run.session.handle_message(&edit, run.now, ctx);
                    let after = run.session.clone();
                    let again = run.session.handle_message(&edit, run.now, ctx);
                    prop_assert_eq!(again, Transition::default(), "an edit counts once");
                    prop_assert_eq!(&run.session, &after);
                    transition
                }
                None => Transition::default(),
            },
            Step::Wait { ms } => {
                // Discord accepts what was decided before time goes on: the turns announced begin now.
                let queued: Vec<u64> = run.session.outbox.iter().map(|q| q.id).collect();
                for id in queued {
                    run.session.effect_done(id, run.now, None);
                }
                run.now += TimeDelta::milliseconds(ms);
                let wake = run.session.wake_at(ctx);
                let transition = run.session.tick(run.now, ctx);
                if wake.is_some_and(|w| w <= run.now) && run.session.is_active() {
                    prop_assert!(!transition.events.is_empty(), "a tick past the wake-up instant ends the turn");
                }
                transition
            }
            Step::Command { command, origin } => {
                let origin = origin.map(|age_ms| run.mint(run.now - TimeDelta::milliseconds(age_ms)));
                given = origin.unwrap_or(given);
                let moved = run.session.floor_moved_at;
                let outcome = run.session.handle_command(&command, origin, run.now, ctx);
                if matches!(command, Command::Skip) && origin.zip(moved).is_some_and(|(given, moved)| given < moved) {
                    prop_assert!(outcome.is_err(), "a skip given in an earlier turn never ends a second one");
                }
                outcome.unwrap_or_default()
            }
        };
        run.session.enqueue(transition.effects.clone());
        for effect in &transition.effects {
            // Its author's signal: another persona's keyword (FIN is the critic's alone) is plain text in dev's mouth,
            // and a message of dev's removed as out of turn, then found in turn, is shown again as written. So is one
            // whose handoff was refused (to someone not in the session, or to its author), as it stays when live.
            if let Effect::Relay { message_id, text: Some(text), persona, .. } = effect {
                let refused = transition.events.iter().any(
                    |e| matches!(&e.kind, EventKind::HandoffRefused { message_id: refused, .. } if refused == message_id),
                );
                prop_assert!(
                    refused || !config.signals.has_signal(text, persona),
                    "shown text never ends with its signal: {text:?}"
                );
            }
            if let Effect::Announce(a) = effect {
                prop_assert!(a.nonce.len() <= 25);
            }
        }
        for event in &transition.events {
            if let EventKind::TurnComplete { message_id, .. } = event.kind {
                prop_assert!(run.completed.insert(message_id), "{} completed a second turn", message_id);
            }
        }
        prop_assert!(transition.changed || !transition.durable(), "whatever must be saved first is a change");
        if transition.events.iter().any(|e| e.kind.name() == "session_started") {
            let origin_or_now = run.session.last_message_id.expect("a started session begins at its start");
            prop_assert!(origin_or_now >= given, "a session begins at its start");
            run.started_at = origin_or_now;
        }
        // Stop then start resets the round to 1; otherwise it never decreases.
        let restarted = transition.events.iter().any(|e| e.kind.name() == "session_started");
        prop_assert!(restarted || run.session.round >= round, "round went from {} to {}", round, run.session.round);
        round = run.session.round;
        prop_assert!(restarted || run.session.floor_moved_at >= moved_at, "the floor's last move never goes back");
        moved_at = run.session.floor_moved_at;
        check_invariants(&run.session, &personas, &config)?;
        // Whatever happened survives a save and a load unchanged.
        let saved = serde_json::to_string(&run.session).unwrap();
        prop_assert_eq!(&serde_json::from_str::<Session>(&saved).unwrap(), &run.session);
    }
    Ok(())
}
