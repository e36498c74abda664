//! Behaviour tests of the session state machine, one per rule of spec 5, 7 and 8, and property tests; this file
//! holds the fixture they share.

mod commands;
mod grammar;
mod messages;
mod overtaken;
mod paused;
mod properties;
mod reordered;
mod streamed;
mod timing;

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
    /// Tells apart ids minted for the same millisecond (a snowflake's low bits).
    minted: u64,
    /// The id of the message `say` sent last.
    last_id: MessageId,
    /// Effects are carried out (announcements accepted by Discord) the instant they are decided, as the actor
    /// reports them, unless held (Discord down): then they wait in the outbox for `accept`.
    held: bool,
}

impl Fixture {
    fn new() -> Self {
        Self::with_config(Config::default())
    }

    fn with_config(config: Config) -> Self {
        let mut f = Self {
            personas: catalog(),
            config,
            session: Session::new(CHANNEL),
            minted: 0,
            last_id: MessageId(0),
            held: false,
        };
        f.command(Command::Start { roster: vec![] }, 0).unwrap();
        f
    }

    fn at(ms: i64) -> DateTime<Utc> {
        t0() + TimeDelta::milliseconds(ms)
    }

    /// A new id of a message created `ms` after the start: its snowflake's time is that instant, as on Discord.
    fn mint(&mut self, ms: i64) -> MessageId {
        self.minted += 1;
        let id = MessageId(MessageId::first_at(Self::at(ms)).0 + self.minted);
        assert_eq!(id.created_at(), Self::at(ms));
        id
    }

    /// A new message from `author`, written `ms` after the start.
    fn message(&mut self, author: UserId, text: &str, ms: i64) -> IncomingMessage {
        let id = self.mint(ms);
        IncomingMessage {
            id,
            author,
            text: text.into(),
            edited: false,
            written_at: id.created_at(),
            edited_at: None,
            has_files: false,
            flags: Default::default(),
            mentions: None,
        }
    }

    /// An edit of message `id` made `ms` after the start.
    fn edit(id: MessageId, author: UserId, text: &str, ms: i64) -> IncomingMessage {
        IncomingMessage {
            id,
            author,
            text: text.into(),
            edited: true,
            written_at: Self::at(ms),
            edited_at: None,
            has_files: false,
            flags: Default::default(),
            mentions: None,
        }
    }

    /// A new message from `author`, written and handled `ms` after the start.
    fn say(&mut self, author: UserId, text: &str, ms: i64) -> Transition {
        self.say_written(author, text, ms, ms)
    }

    /// A new message written at `written` and handled at `handled` (ms after the start).
    fn say_written(&mut self, author: UserId, text: &str, written: i64, handled: i64) -> Transition {
        let message = self.message(author, text, written);
        self.last_id = message.id;
        self.deliver(&message, handled)
    }

    fn deliver(&mut self, message: &IncomingMessage, ms: i64) -> Transition {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        let t = self.session.handle_message(message, Self::at(ms), Context { personas: &personas, config: &config });
        self.carry_out(t, ms)
    }

    /// Queues the transition's effects as the actor does; unless `held`, Discord accepts them at once.
    fn carry_out(&mut self, t: Transition, ms: i64) -> Transition {
        self.session.enqueue(t.effects.clone());
        if !self.held {
            self.accept(ms);
        }
        t
    }

    /// Discord accepts everything in the outbox, `ms` after the start.
    fn accept(&mut self, ms: i64) {
        let queued: Vec<u64> = self.session.outbox.iter().map(|q| q.id).collect();
        for id in queued {
            self.session.effect_done(id, Self::at(ms), None);
        }
    }

    /// A command with no snowflake of its own, run `ms` after the start.
    fn command(&mut self, command: Command, ms: i64) -> Result<Transition, Refusal> {
        self.run(command, None, ms)
    }

    /// A command given at `given` (its snowflake's time) and run at `handled`.
    fn command_given(&mut self, command: Command, given: i64, handled: i64) -> Result<Transition, Refusal> {
        let origin = self.mint(given);
        self.run(command, Some(origin), handled)
    }

    fn run(&mut self, command: Command, origin: Option<MessageId>, ms: i64) -> Result<Transition, Refusal> {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        let ctx = Context { personas: &personas, config: &config };
        let t = self.session.handle_command(&command, origin, Self::at(ms), ctx)?;
        Ok(self.carry_out(t, ms))
    }

    /// The bot is removed from the channel's server, `ms` after the start: the session ends, by no one's choice.
    fn lose_channel(&mut self, ms: i64) {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        let ctx = Context { personas: &personas, config: &config };
        self.session.unreachable(crate::core::session::lost::Unreachable::LeftServer, Self::at(ms), ctx);
    }

    fn tick(&mut self, ms: i64) -> Transition {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        let t = self.session.tick(Self::at(ms), Context { personas: &personas, config: &config });
        self.carry_out(t, ms)
    }

    fn set_display_mode(&mut self, mode: DisplayMode) {
        let (personas, config) = (self.personas.clone(), self.config.clone());
        self.session.set_display_mode(mode, Self::at(0), Context { personas: &personas, config: &config });
    }

    fn active(&self) -> &str {
        self.session.active_agent.as_ref().map_or("", |a| a.as_str())
    }
}

/// A relay of `message` as `persona`, showing `text`, of a message without files that is still there to delete.
fn relayed(message: MessageId, persona: &str, text: Option<String>) -> Effect {
    Effect::Relay {
        message_id: message,
        persona: id(persona),
        text,
        has_files: false,
        already_deleted: false,
        flags: Default::default(),
        mentions: None,
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
