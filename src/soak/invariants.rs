//! The invariants the soak and the fault tests hold the bot to, judged from outside: the channel as the local server
//! keeps it (deleted messages included) and the channel's history log. Pure functions over that data, no I/O, so
//! the soak (bot as a process) and the fault tests (bot in-process) check exactly the same things.

use crate::core::session::history::{EventKind, HistoryEvent};
use crate::core::signals::SignalRules;
use local_discord::world::{Author, Message};
use std::collections::{BTreeMap, HashMap};

/// A message as the checks see it: who posted it, what it says now, whether it is still shown. Taken from the local
/// server's messages, so the checks do not depend on everything else the server keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posted {
    pub id: u64,
    /// The account that posted it; `None` for a webhook (a repost).
    pub author: Option<u64>,
    /// Its text now (after any edits).
    pub content: String,
    /// When it was created (its snowflake's time), in Unix milliseconds.
    pub created_ms: u64,
    pub deleted: bool,
    pub nonce: Option<String>,
}

impl From<&Message> for Posted {
    fn from(m: &Message) -> Self {
        let author = match m.author {
            Author::User(user) => Some(user),
            Author::Webhook { .. } => None,
        };
        Posted {
            id: m.id,
            author,
            content: m.content.clone(),
            created_ms: m.created_ms,
            deleted: m.deleted,
            nonce: m.nonce.clone(),
        }
    }
}

/// One channel as the checks see it.
pub struct ChannelRecord<'a> {
    pub channel: u64,
    /// The manager's account: its messages are the announcements.
    pub bot: u64,
    /// Persona id -> the account that speaks for it.
    pub personas: &'a BTreeMap<String, u64>,
    /// The session's roster, in order.
    pub roster: &'a [String],
    /// The channel's messages in id order, deleted ones included.
    pub messages: &'a [Posted],
    /// The channel's history log, oldest first.
    pub history: &'a [HistoryEvent],
    /// Signals written from this instant on (Unix ms) are left showing on purpose (observe mode after a lost
    /// permission); before it, relay mode must have removed every one. `None`: relay throughout.
    pub relay_until_ms: Option<u64>,
}

/// A broken promise, with what identifies it. Ordered and hashable so a soak counts each one once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// A state file that does not parse (a torn write), or a log line glued to a torn one.
    TornFile { path: String, why: String },
    /// A file the bot moved aside as unreadable at start-up.
    CorruptFile { path: String },
    /// An agent's signal that ended no turn.
    SignalLost { channel: u64, message: u64 },
    /// An agent's signal recorded as more than one turn end (`turn_complete` and `late_signal`, or one twice).
    SignalDoubled { channel: u64, message: u64, ends: usize },
    /// An agent's signal, written in its turn or late, recorded as out of turn.
    SignalOutOfTurn { channel: u64, message: u64 },
    /// A message still showing the signal in relay mode after the bot caught up with it.
    SignalVisible { channel: u64, message: u64 },
    /// A message posted while the bot was down (or disconnected) that it never read.
    MessageUnhandled { channel: u64, message: u64 },
    /// A turn began (history) but its floor announcement never appeared.
    AnnouncementMissing { channel: u64, turn: usize, persona: String },
    /// A floor announcement posted twice for one turn, or with no turn behind it.
    AnnouncementDoubled { channel: u64, turn: usize, persona: String },
    /// The floor went to someone other than the next persona of the roster.
    RosterOrder { channel: u64, turn: usize, expected: String, found: String },
    /// Two of the manager's messages with one nonce.
    NonceReused { channel: u64, nonce: String },
    /// Timeout lines in the channel and `turn_timeout` events in history disagree.
    TimeoutAnnouncements { channel: u64, shown: usize, recorded: usize },
    /// Effects still in the outbox once the bot was stopped gracefully.
    EffectsLeft { channel: u64, count: usize },
    /// The bot did not come back or catch up within the soak's bound.
    Stalled { what: String },
}

impl Violation {
    /// The kind, for the summary table.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::TornFile { .. } => "torn_file",
            Violation::CorruptFile { .. } => "corrupt_file",
            Violation::SignalLost { .. } => "signal_lost",
            Violation::SignalDoubled { .. } => "signal_doubled",
            Violation::SignalOutOfTurn { .. } => "signal_out_of_turn",
            Violation::SignalVisible { .. } => "signal_visible",
            Violation::MessageUnhandled { .. } => "message_unhandled",
            Violation::AnnouncementMissing { .. } => "announcement_missing",
            Violation::AnnouncementDoubled { .. } => "announcement_doubled",
            Violation::RosterOrder { .. } => "roster_order",
            Violation::NonceReused { .. } => "nonce_reused",
            Violation::TimeoutAnnouncements { .. } => "timeout_announcements",
            Violation::EffectsLeft { .. } => "effects_left",
            Violation::Stalled { .. } => "stalled",
        }
    }

    /// Every kind, in the order the summary lists them.
    pub const KINDS: [&'static str; 14] = [
        "torn_file",
        "corrupt_file",
        "signal_lost",
        "signal_doubled",
        "signal_out_of_turn",
        "signal_visible",
        "message_unhandled",
        "announcement_missing",
        "announcement_doubled",
        "roster_order",
        "nonce_reused",
        "timeout_announcements",
        "effects_left",
        "stalled",
    ];
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::TornFile { path, why } => write!(f, "torn file {path}: {why}"),
            Violation::CorruptFile { path } => write!(f, "a state file was moved aside as unreadable: {path}"),
            Violation::SignalLost { channel, message } => {
                write!(f, "channel {channel}: signal {message} ended no turn")
            }
            Violation::SignalDoubled { channel, message, ends } => {
                write!(f, "channel {channel}: signal {message} recorded as {ends} turn ends")
            }
            Violation::SignalOutOfTurn { channel, message } => {
                write!(f, "channel {channel}: signal {message} recorded as out of turn")
            }
            Violation::SignalVisible { channel, message } => {
                write!(f, "channel {channel}: message {message} still shows its signal")
            }
            Violation::MessageUnhandled { channel, message } => {
                write!(f, "channel {channel}: message {message} posted while the bot was away was never read")
            }
            Violation::AnnouncementMissing { channel, turn, persona } => {
                write!(f, "channel {channel}: turn {turn} ({persona}) was never announced")
            }
            Violation::AnnouncementDoubled { channel, turn, persona } => {
                write!(f, "channel {channel}: announcement {turn} ({persona}) has no turn of its own")
            }
            Violation::RosterOrder { channel, turn, expected, found } => {
                write!(f, "channel {channel}: turn {turn} went to {found}, not {expected}")
            }
            Violation::NonceReused { channel, nonce } => write!(f, "channel {channel}: nonce {nonce} used twice"),
            Violation::TimeoutAnnouncements { channel, shown, recorded } => {
                write!(f, "channel {channel}: {shown} timeout line(s) shown, {recorded} recorded")
            }
            Violation::EffectsLeft { channel, count } => {
                write!(f, "channel {channel}: {count} effect(s) left undone after a graceful stop")
            }
            Violation::Stalled { what } => write!(f, "stalled: {what}"),
        }
    }
}

/// How a signal message ended up in history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalFate {
    pub completed: usize,
    pub late: usize,
    pub out_of_turn: usize,
}

impl SignalFate {
    pub fn ends(&self) -> usize {
        self.completed + self.late
    }
}

impl ChannelRecord<'_> {
    fn is_agent(&self, m: &Posted) -> bool {
        m.author.is_some_and(|user| self.personas.values().any(|p| *p == user))
    }

    /// The agents' messages whose (latest) text ends with the signal, deleted or not.
    pub fn signals(&self) -> impl Iterator<Item = &Posted> {
        let matcher = SignalRules::default();
        self.messages.iter().filter(move |m| self.is_agent(m) && matcher.has_any_signal(&m.content))
    }

    /// What history says of each message: its turn ends and out-of-turn records.
    pub fn fates(&self) -> HashMap<u64, SignalFate> {
        let mut fates: HashMap<u64, SignalFate> = HashMap::new();
        for event in self.history {
            match &event.kind {
                EventKind::TurnComplete { message_id, .. } => fates.entry(message_id.0).or_default().completed += 1,
                EventKind::LateSignal { message_id, .. } => fates.entry(message_id.0).or_default().late += 1,
                EventKind::OutOfTurn { message_id, .. } => fates.entry(message_id.0).or_default().out_of_turn += 1,
                _ => {}
            }
        }
        fates
    }

    /// The personas given the floor by the manager's announcements, in the order they were posted.
    pub fn announced(&self) -> Vec<String> {
        self.messages
            .iter()
            .filter(|m| m.author == Some(self.bot) && !m.deleted)
            .filter_map(|m| floor_persona(&m.content))
            .collect()
    }

    /// The personas history says were given the floor, in order: the first of the roster at each start, then the
    /// next of each turn end or hand-over.
    pub fn floors_recorded(&self) -> Vec<String> {
        self.history
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::SessionStarted { roster } => roster.first().map(|p| p.as_str().to_owned()),
                EventKind::TurnComplete { next_agent, .. }
                | EventKind::TurnTimeout { next_agent, .. }
                | EventKind::Skipped { next_agent } => Some(next_agent.as_str().to_owned()),
                EventKind::FloorGiven { .. } => event.agent_id.as_ref().map(|p| p.as_str().to_owned()),
                _ => None,
            })
            .collect()
    }

    fn following(&self, persona: &str) -> Option<&str> {
        let i = self.roster.iter().position(|p| p == persona)?;
        Some(self.roster[(i + 1) % self.roster.len()].as_str())
    }
}

/// The persona a floor announcement (the default template) gives the floor to.
pub fn floor_persona(content: &str) -> Option<String> {
    let before = content.strip_prefix("🎙️ ")?.split(") has the floor").next()?;
    let (_, persona) = before.rsplit_once('(')?;
    content.contains(") has the floor").then(|| persona.to_owned())
}

/// What must hold at every instant, whatever the bot is doing: nonces unique, no signal ending two turns, no
/// announcement twice in a row for one persona, the floor going round the roster (in the channel and in history).
pub fn check_always(r: &ChannelRecord) -> Vec<Violation> {
    let mut found = Vec::new();
    let channel = r.channel;
    let mut nonces: HashMap<&str, usize> = HashMap::new();
    for m in r.messages.iter().filter(|m| m.author == Some(r.bot)) {
        if let Some(nonce) = &m.nonce {
            *nonces.entry(nonce).or_default() += 1;
        }
    }
    found.extend(
        nonces
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(nonce, _)| Violation::NonceReused { channel, nonce: nonce.into() }),
    );
    let fates = r.fates();
    for (&message, fate) in &fates {
        if fate.ends() > 1 {
            found.push(Violation::SignalDoubled { channel, message, ends: fate.ends() });
        }
    }
    let announced = r.announced();
    for (turn, pair) in announced.windows(2).enumerate() {
        let (before, now) = (&pair[0], &pair[1]);
        if r.roster.len() > 1 && before == now {
            found.push(Violation::AnnouncementDoubled { channel, turn: turn + 1, persona: now.clone() });
        } else if let Some(expected) = r.following(before).filter(|next| *next != now) {
            let (expected, found_persona) = (expected.to_owned(), now.clone());
            found.push(Violation::RosterOrder { channel, turn: turn + 1, expected, found: found_persona });
        }
    }
    // In history: each turn end gives the floor to the one after the persona whose turn ended.
    let turn_ends = r.history.iter().filter_map(|event| match &event.kind {
        EventKind::TurnComplete { next_agent, .. } | EventKind::TurnTimeout { next_agent, .. } => {
            Some((event.agent_id.as_ref()?, next_agent))
        }
        _ => None,
    });
    for (turn, (ended, next)) in turn_ends.enumerate() {
        if let Some(expected) = r.following(ended.as_str()).filter(|e| *e != next.as_str()) {
            let (expected, found_persona) = (expected.to_owned(), next.as_str().to_owned());
            found.push(Violation::RosterOrder { channel, turn: turn + 1, expected, found: found_persona });
        }
    }
    found
}

/// What must hold once the bot has caught up with every message up to id `upto`: each agent signal among them ended
/// exactly one turn (or was shown as late), was not left taken for out of turn, and no longer shows in relay mode.
pub fn check_caught_up(r: &ChannelRecord, upto: u64) -> Vec<Violation> {
    let fates = r.fates();
    let channel = r.channel;
    let mut found = Vec::new();
    for signal in r.signals().filter(|m| m.id <= upto) {
        let fate = fates.get(&signal.id).copied().unwrap_or_default();
        let message = signal.id;
        // Taken for out of turn when it overtook the signal that gave its author the floor, then judged again in
        // its turn: it ended one turn, which is the promise.
        if fate.ends() == 0 && fate.out_of_turn > 0 {
            found.push(Violation::SignalOutOfTurn { channel, message });
        } else if fate.ends() == 0 {
            found.push(Violation::SignalLost { channel, message });
        }
        let relaying = r.relay_until_ms.is_none_or(|until| signal.created_ms < until);
        if !signal.deleted && relaying {
            found.push(Violation::SignalVisible { channel, message });
        }
    }
    found
}

/// Everything, once the bot is stopped and the channel still: the checks above over every message, and the floor
/// announcements exactly those history records (none missing, none doubled), with one timeout line per timeout.
pub fn check_settled(r: &ChannelRecord) -> Vec<Violation> {
    let mut found = check_always(r);
    found.extend(check_caught_up(r, u64::MAX));
    let channel = r.channel;
    let (announced, recorded) = (r.announced(), r.floors_recorded());
    let first_difference = announced.iter().zip(&recorded).position(|(a, b)| a != b);
    match first_difference {
        Some(turn) if turn > 0 && announced[turn] == announced[turn - 1] => {
            found.push(Violation::AnnouncementDoubled { channel, turn, persona: announced[turn].clone() });
        }
        Some(turn) => found.push(Violation::RosterOrder {
            channel,
            turn,
            expected: recorded[turn].clone(),
            found: announced[turn].clone(),
        }),
        None if announced.len() < recorded.len() => {
            let turn = announced.len();
            found.push(Violation::AnnouncementMissing { channel, turn, persona: recorded[turn].clone() });
        }
        None if announced.len() > recorded.len() => {
            let turn = recorded.len();
            found.push(Violation::AnnouncementDoubled { channel, turn, persona: announced[turn].clone() });
        }
        None => {}
    }
    let shown =
        r.messages.iter().filter(|m| m.author == Some(r.bot) && !m.deleted && m.content.starts_with("⏱️")).count();
    let recorded = r.history.iter().filter(|e| matches!(e.kind, EventKind::TurnTimeout { .. })).count();
    if shown != recorded {
        found.push(Violation::TimeoutAnnouncements { channel, shown, recorded });
    }
    found
}

#[cfg(test)]
mod tests;
