//! One channel under turn management (spec 2, 5, 8): the saved state, the inputs it takes, and status queries.
//!
//! Transitions live in `turns` (messages and deadlines) and `commands` (people steering). They take `now` and
//! return a [`Transition`]; they never sleep, read the clock or do I/O.

pub mod agents;
mod commands;
pub mod effects;
pub mod history;
pub mod lost;
mod outbox;
mod overtaken;
mod pauses;
mod recent;
mod recovery;
mod signals;
mod streamed;
mod turns;

#[cfg(test)]
mod tests;

use crate::core::config::Config;
use crate::core::ids::{ChannelId, GuildId, MessageId, PersonaId, UserId};
use crate::core::persona::PersonaCatalog;
use chrono::{DateTime, TimeDelta, Utc};
use effects::Effect;
use history::HistoryEvent;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

pub use agents::Agents;
pub use commands::Command;
pub use recent::{REORDER_WINDOW, RecentIds};

/// The session file's format version, for future migrations.
pub const SESSION_FORMAT_VERSION: u32 = 1;
/// How many recent signal-less messages may still be finished by an edit that adds the signal.
const EDITABLE_MESSAGES_KEPT: usize = 32;
/// How many workflow tasks a session keeps in its file.
pub const TASKS_KEPT: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Running,
    Paused,
    Stopped,
}

/// How this channel shows agents' messages, as decided by the Discord layer from its permissions (spec 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DisplayMode {
    Relay,
    Observe,
}

/// What the session remembers of one persona.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<DateTime<Utc>>,
    /// When the session was last resumed while it held the floor: its silence (auto-detection) counts from then at
    /// the earliest, so time paused is never taken for silence. (Kept here, on the heap, not in the session: an
    /// idle channel's task keeps the session in place, filled to the last byte of its allocation.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silence_from: Option<DateTime<Utc>>,
    /// Its last turn ended by timeout and it has not spoken since: its next message is a late signal (once it holds
    /// the floor again, only one written before the floor reached it).
    #[serde(default)]
    pub awaiting_late_reply: bool,
    #[serde(default)]
    pub consecutive_timeouts: u32,
    /// Its last turn that ended by its signal or by a command (not by timeout), so that a message it wrote during
    /// that turn and that is handled only after the turn ended is still in turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_turn: Option<TurnSpan>,
    /// Skipped in the rotation after timing out `benchAfter` times in a row, until it speaks or is added back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub benched: bool,
    /// Messages in a row with a line that looks like a signal but is none (seed 000's recovery).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown_signals: u32,
}

fn is_zero<N: Default + PartialEq>(n: &N) -> bool {
    *n == N::default()
}

/// A task moved by workflow signals (`route`, `finishTask`): its stage and who holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskState {
    pub stage: String,
    /// The persona the task went to; `None` once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<PersonaId>,
    pub updated_at: DateTime<Utc>,
}

/// The last progress figure a persona gave (a `progress` rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressMark {
    pub agent: PersonaId,
    pub percent: u8,
    pub at: DateTime<Utc>,
}

/// The same message coming again and again (spec 4.2, loops): what was said last, as a digest (a session keeps
/// no copy of the text), and how many times in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Repeats {
    pub digest: u64,
    pub count: u32,
    /// The message counted last (its id; 0 for none, in a file from an older build), and the row as it was before
    /// it: an edit of that message takes its place in the row rather than counting again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub message: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_digest: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_count: u32,
}

impl Repeats {
    /// FNV-1a: the same on every run and every build, since the digest is saved with the session.
    pub fn digest_of(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
    }
}

/// A past turn in Discord's clock (message ids), which is the clock its messages' ids are written in: the bot's own
/// clock may differ from Discord's, and a message can arrive long after it was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSpan {
    /// The newest message handled when the turn began: every message after it may have been written in the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<MessageId>,
    /// The message that ended the turn: the signal, or the command's own id (or the first id of the instant it was
    /// run, when it had none).
    pub until: MessageId,
}

impl TurnSpan {
    /// Whether a message with this id was written during the turn: strictly between its two ends.
    pub fn contains(&self, id: MessageId) -> bool {
        self.after.is_none_or(|after| id > after) && id < self.until
    }
}

/// A channel's session, exactly as saved in `state/channels/<channelId>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub version: u32,
    pub channel_id: ChannelId,
    /// The channel's server, once known: it decides which process keeps the session when the bot runs on several
    /// (spec 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<GuildId>,
    pub status: SessionStatus,
    pub display_mode: DisplayMode,
    /// Relay fell back to observe mode for want of room for the bot's webhook (Discord's 15 per channel): the
    /// permission checks at the server's arrivals leave it in observe mode; the next start tries relay again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub webhooks_full: bool,
    /// It was ended on purpose: a manager's `stop`, an `end` signal, `maxRounds`. A channel the configuration
    /// manages stays stopped then; one ended otherwise (the channel lost, every persona of its roster gone, or saved
    /// before this was recorded) starts again when its server is seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_on_purpose: bool,
    /// Relay fell back to observe mode because Discord refused it (403: a permission taken away): likewise kept
    /// until the next start, as its notice says, whatever the permissions the server's arrivals show (found by a
    /// review: each arrival switched back to relay, to be refused and announced again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay_refused: bool,
    pub roster: Vec<PersonaId>,
    pub active_agent: Option<PersonaId>,
    pub round: u32,
    pub turn_started_at: Option<DateTime<Utc>>,
    /// When the turn ends; `None` while paused or stopped.
    pub turn_timeout_at: Option<DateTime<Utc>>,
    /// The active persona's turn length, as it was when the turn began.
    pub turn_timeout_seconds: u32,
    pub turn_extended_seconds: u64,
    /// Time this turn spent paused, added to its deadline.
    pub turn_paused_ms: i64,
    /// The turn's announcement has been made (it waits for `resume` when the turn began paused).
    pub turn_announced: bool,
    /// When the holder was last called on with a mention in this turn, on Discord's clock: the announcement's message
    /// once Discord accepted it, until then the latest instant known on Discord's clock when it was decided. A signal
    /// written before it and held needs no new call (see `pauses`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_called_at: Option<MessageId>,
    /// When the session was paused (on our clock, from when the `pause` was given): a turn that begins during the
    /// pause leaves it as it is, so that a signal written after the pause was given is held, whoever holds the floor.
    pub paused_at: Option<DateTime<Utc>>,
    pub paused_remaining_ms: Option<i64>,
    pub agents: Agents,
    /// The newest message handled: where catch-up resumes reading. Older messages are still handled when they
    /// arrive late (overtaken by newer ones); `recent_ids` is what tells a repeat.
    pub last_message_id: Option<MessageId>,
    /// The messages handled lately; the file keeps those within the reorder window of the newest, so a message
    /// overtaken just before a crash is still new to the catch-up that follows.
    #[serde(default, rename = "recentlyHandled", skip_serializing_if = "RecentIds::is_unknown")]
    pub recent_ids: RecentIds,
    /// `last_message_id` or `floor_moved_at` when the current turn began, whichever is later (or, for a holder owing
    /// a late reply, the first id of the instant the floor reached it, if later still): the holder's messages at or
    /// before it were written before its turn and belong to an earlier one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_began_after: Option<MessageId>,
    /// When the floor last moved, on Discord's clock: the signal or command that ended the turn before the current
    /// one, or the first id of the instant a deadline ended it or the session started. A command about the current
    /// turn (`skip`, `extend`) written before it was about a turn that is over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_moved_at: Option<MessageId>,
    /// The newest change, or asked-for change, of whether the session is paused, on Discord's clock: its start, a
    /// `pause` or `resume` given (run or refused), the instant something else paused it (an escalation, a recovery
    /// rule, a lost permission). A `pause` or `resume` given before it but handled after it is refused: it was not
    /// about the session as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_toggled_at: Option<MessageId>,
    /// The command that bounds the session on Discord's clock: while it runs, the `start` that began it (none for a
    /// start from the configuration), and a command given before it but handled after it was meant for the session
    /// before; once ended, the command that ended it (a `stop`, or a `skip`, `give` or `remove` that finished the
    /// last round) or where the floor last moved (an `end` signal, the last round's signal or deadline), and a
    /// `start` given before it but handled after it was given while the session ran. Either is refused. (One field
    /// for both: an idle channel's task holds the session.)
    #[serde(default, alias = "beganWith", skip_serializing_if = "Option::is_none")]
    pub bounded_by: Option<MessageId>,
    /// Recent messages written in turn without a signal, which an edit adding the signal may still finish.
    pub editable_messages: Vec<MessageId>,
    /// Those of `editable_messages` whose signal was acted on already without ending the turn (a progress or a
    /// record, the message left as written: observe mode, or a rule that does not strip): an edit of one counts
    /// only when it adds a signal that ends the turn (an answer streamed by edits, finished). Boxed, and `None`
    /// when empty: an idle channel's task holds the session in place (see the actor's size test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editable_after_signal: Option<Box<Vec<MessageId>>>,
    /// Recent messages taken for out of turn, judged again if a signal written before them gives their author the
    /// floor (see `overtaken`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_of_turn_lately: Vec<overtaken::OutOfTurnNote>,
    /// Counts announcements, so each gets a nonce that stays the same if it is sent again.
    pub announcement_seq: u64,
    /// The newest message of the bot's announcements that Discord accepted: one replayed after a stop longer than
    /// Discord remembers nonces is looked for only after it, so an earlier one of the same words is not taken for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_announced: Option<MessageId>,
    /// The nonce of the announcement that gave the current turn's holder the floor, until Discord accepted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_announcement: Option<Box<str>>,
    /// Effects decided and saved but not yet carried out (spec 9): carried out again after a crash.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub outbox: VecDeque<effects::Queued>,
    /// Numbers the outbox's effects.
    #[serde(default)]
    pub outbox_seq: u64,
    /// Why the session was paused by itself (an escalation, a loop); `None` for a manager's `pause`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<Box<str>>,
    /// The holder signalled while the session was paused, and the signal was not acted on: `resume` gives it a
    /// fresh turn, announced with a mention, so that it is asked again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub signal_held: bool,
    /// The session's recent pauses, on the clock messages are judged by: what the holder wrote during one is held,
    /// whenever it is handled (see `pauses`). Boxed, and `None` when empty: see `editable_after_signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pauses: Option<Box<Vec<pauses::PauseSpan>>>,
    /// Workflow tasks by id: their stage and holder (at most [`TASKS_KEPT`], the oldest done ones dropped first).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tasks: BTreeMap<String, TaskState>,
    /// Boxed, as only sessions with a progress rule have one: see `editable_after_signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Box<ProgressMark>>,
    /// Times in a row the holder kept the floor with a `keep` signal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keeps_in_row: u32,
    /// The deadline was extended by a progress signal this turn (once per turn).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub turn_progress_extended: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<Box<Repeats>>,
    /// The holder's messages this turn whose edits are followed for a line that looks like a signal (streamed.rs).
    /// Boxed, and `None` when there are none: see `editable_after_signal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_like: Option<Box<Vec<streamed::SignalLike>>>,
    pub history: VecDeque<HistoryEvent>,
}

/// What a session needs to know of the world: the personas and the configuration.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub personas: &'a PersonaCatalog,
    pub config: &'a Config,
}

impl Context<'_> {
    fn timeout_of(&self, persona: &PersonaId) -> u32 {
        self.config.timeout_of(self.personas.get(persona).and_then(|p| p.timeout_seconds))
    }
}

/// A message seen in the channel (the Discord layer has already dropped the manager's own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingMessage {
    pub id: MessageId,
    pub author: UserId,
    pub text: String,
    /// An edit (MESSAGE_UPDATE) of a message seen before, rather than a new message.
    pub edited: bool,
    /// When the author wrote it, on Discord's clock: the id's time for a new message (`MessageId::created_at`), the
    /// edit's time for an edit. Messages are judged by it, not by when they arrived (spec 5, step 7).
    pub written_at: DateTime<Utc>,
    /// When Discord says the message was last edited, as a page of history gives it (`edited_timestamp`): a page's
    /// message is timed by its id, and an edit found by catch-up is judged by this. `None` from the gateway.
    pub edited_at: Option<DateTime<Utc>>,
    /// It carries files or embeds of its own, which a repost must carry over (spec 6); plain text needs no more
    /// than the gateway gave.
    pub has_files: bool,
    /// The flags a repost keeps (`@silent`, previews suppressed).
    pub flags: effects::KeptFlags,
    /// The users Discord says it mentioned (its `mentions`, after the author's allowed mentions; an edit's as the
    /// edit left them): a repost pings no one else. `None` where that is not known (an update that left it out, an
    /// out-of-turn message judged again from what the session kept of it).
    pub mentions: Option<Vec<UserId>>,
}

impl IncomingMessage {
    /// Where a turn this message ends, ends: at the message, or at an edit's own instant, so that what the holder
    /// wrote between the message and the edit, handled after it, is still of that turn (found by a review: it was
    /// taken for late, or out of turn and removed).
    pub fn turn_ends_at(&self) -> MessageId {
        if self.edited { self.id.max(MessageId::first_at(self.written_at)) } else { self.id }
    }

    /// The message with Discord's message `flags`, of which a repost keeps some.
    pub fn with_flags(self, flags: u64) -> Self {
        Self { flags: effects::KeptFlags::of(flags), ..self }
    }

    /// The message with the users Discord says it mentioned.
    pub fn with_mentions(self, mentions: impl IntoIterator<Item = u64>) -> Self {
        Self { mentions: Some(mentions.into_iter().map(UserId).collect()), ..self }
    }
}

/// What a transition decided: effects to carry out in order, and the events to record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transition {
    pub effects: Vec<Effect>,
    pub events: Vec<HistoryEvent>,
    /// The session changed and must be saved at some point; see [`Transition::durable`] for when it must be
    /// saved before anything else happens.
    pub changed: bool,
}

impl Transition {
    /// The turn or the settings changed, or something is to be said or done: the session must be on disk (fsync'd)
    /// before any effect is carried out, so that nothing is announced that a crash could take back. A transition
    /// that is only `changed` (activity, the newest message id) may be saved lazily: losing it loses nothing that
    /// matters, as its messages are read again by catch-up and handled the same way.
    pub fn durable(&self) -> bool {
        !self.events.is_empty() || !self.effects.is_empty()
    }
}

/// A command refused, with the reason to tell the person who gave it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// The answer to `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusReport {
    pub status: SessionStatus,
    pub active_agent: Option<PersonaId>,
    pub remaining_seconds: Option<u64>,
    pub roster: Vec<PersonaId>,
    pub round: u32,
    pub display_mode: DisplayMode,
    pub pause_reason: Option<Box<str>>,
    /// Personas skipped in the rotation.
    pub benched: Vec<PersonaId>,
    pub progress: Option<ProgressMark>,
    /// Workflow tasks and their stages, most recently moved first.
    pub tasks: Vec<(String, TaskState)>,
}

impl std::fmt::Display for StatusReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roster = history::join_ids(&self.roster);
        match (self.status, &self.active_agent) {
            (SessionStatus::Stopped, _) | (_, None) => write!(f, "No session is running here."),
            (status, Some(agent)) => {
                let state = if status == SessionStatus::Paused { "paused" } else { "running" };
                let left = self.remaining_seconds.unwrap_or(0);
                write!(f, "{agent} has the floor, {left}s left ({state}). Round {}. Roster: {roster}.", self.round)?;
                let mode = match self.display_mode {
                    DisplayMode::Relay => "relay",
                    DisplayMode::Observe => "observe",
                };
                write!(f, " Display: {mode}.")?;
                if let Some(reason) = &self.pause_reason {
                    write!(f, " Paused because {reason}.")?;
                }
                if !self.benched.is_empty() {
                    write!(f, " Benched: {}.", history::join_ids(&self.benched))?;
                }
                if let Some(mark) = &self.progress {
                    write!(f, " Progress: {} at {}%.", mark.agent, mark.percent)?;
                }
                if !self.tasks.is_empty() {
                    let tasks: Vec<String> = self
                        .tasks
                        .iter()
                        .map(|(id, task)| match &task.holder {
                            Some(holder) => format!("{id} {} ({holder})", task.stage),
                            None => format!("{id} {}", task.stage),
                        })
                        .collect();
                    write!(f, " Tasks: {}.", tasks.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl Session {
    /// A channel with no session running yet.
    pub fn new(channel_id: ChannelId) -> Self {
        Self {
            version: SESSION_FORMAT_VERSION,
            channel_id,
            guild_id: None,
            status: SessionStatus::Stopped,
            display_mode: DisplayMode::Relay,
            webhooks_full: false,
            ended_on_purpose: false,
            relay_refused: false,
            roster: Vec::new(),
            active_agent: None,
            round: 0,
            turn_started_at: None,
            turn_timeout_at: None,
            turn_timeout_seconds: 0,
            turn_extended_seconds: 0,
            turn_paused_ms: 0,
            turn_announced: false,
            holder_called_at: None,
            paused_at: None,
            paused_remaining_ms: None,
            agents: Agents::default(),
            last_message_id: None,
            recent_ids: RecentIds::default(),
            turn_began_after: None,
            floor_moved_at: None,
            pause_toggled_at: None,
            bounded_by: None,
            editable_messages: Vec::new(),
            editable_after_signal: None,
            out_of_turn_lately: Vec::new(),
            announcement_seq: 0,
            last_announced: None,
            turn_announcement: None,
            outbox: VecDeque::new(),
            outbox_seq: 0,
            pause_reason: None,
            signal_held: false,
            pauses: None,
            tasks: BTreeMap::new(),
            progress: None,
            keeps_in_row: 0,
            turn_progress_extended: false,
            repeats: None,
            signal_like: None,
            history: VecDeque::new(),
        }
    }

    /// Whether message `id` has been handled (or is too old to tell, which counts as handled).
    pub fn has_handled(&self, id: MessageId) -> bool {
        self.recent_ids.contains(id, self.last_message_id)
    }

    /// The newest message id at or below which every message is taken as handled: a catch-up reads after it, which
    /// is the reorder window behind the newest handled message (see [`REORDER_WINDOW`]).
    pub fn settled_through(&self) -> Option<MessageId> {
        self.recent_ids.settled(self.last_message_id)
    }

    pub fn is_active(&self) -> bool {
        self.status != SessionStatus::Stopped
    }

    /// Whether it was ended on purpose (see [`Session::ended_on_purpose`](field@Session::ended_on_purpose)) and
    /// has not run since.
    pub fn stays_stopped(&self) -> bool {
        !self.is_active() && self.ended_on_purpose
    }

    /// Whether a process starting (or taking the channel over) must start its actor: the session runs or is
    /// paused, or it stopped with effects left undone (its last words, saved just before a crash).
    pub fn needs_resuming(&self) -> bool {
        self.is_active() || !self.outbox.is_empty()
    }

    /// The running turn's deadline, if any. None while the announcement that gives the holder the floor is on its
    /// way (spec 8): the turn begins when Discord accepts it, and no message, tick or command may end a turn whose
    /// holder was never told it had it.
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        (self.status == SessionStatus::Running && !self.awaiting_floor_announcement())
            .then_some(self.turn_timeout_at)
            .flatten()
    }

    /// The running turn's deadline as it stands at `now`: while its announcement is on its way the turn has not
    /// begun, so the deadline is as far off as if it began now (what `status` and announcements show as left).
    pub(crate) fn deadline_seen_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let deadline = self.turn_timeout_at?;
        let waited = match self.turn_started_at {
            Some(started) if self.awaiting_floor_announcement() && now > started => now - started,
            _ => TimeDelta::zero(),
        };
        Some(deadline + waited)
    }

    /// The instant the actor must wake for this session (a `tick`), if any: the deadline plus its grace, the end
    /// of the silence that auto-detection waits for, or the instant an edited line that looks like a signal is
    /// answered, whichever comes first.
    pub fn wake_at(&self, ctx: Context) -> Option<DateTime<Utc>> {
        [self.turn_ends_at(ctx), self.signal_like_due()].into_iter().flatten().min()
    }

    /// When the running turn ends by the clock unless something comes first: its deadline plus its grace, or the
    /// end of the silence that auto-detection waits for, whichever comes first.
    pub fn turn_ends_at(&self, ctx: Context) -> Option<DateTime<Utc>> {
        let grace = seconds(u64::from(ctx.config.signals.recovery.grace_seconds));
        let timeout = self.next_deadline().map(|d| d + grace);
        [timeout, self.silence_deadline(ctx)].into_iter().flatten().min()
    }

    /// When the holder's silence ends its turn (auto-detection), if it is on and the holder has spoken this turn.
    pub(crate) fn silence_deadline(&self, ctx: Context) -> Option<DateTime<Utc>> {
        let silence = ctx.config.signals.recovery.silence_seconds?;
        // The holder's last message, if it wrote one in this turn (its activity is updated by in-turn messages only).
        let started = self.turn_started_at?;
        let spoke = self.agents.get(self.active_agent.as_ref()?)?.last_activity.filter(|at| *at > started)?;
        let holder = self.agents.get(self.active_agent.as_ref()?)?;
        let counted_from = spoke.max(holder.silence_from.unwrap_or(spoke));
        self.next_deadline().map(|_| counted_from + seconds(u64::from(silence)))
    }

    pub fn status_report(&self, now: DateTime<Utc>) -> StatusReport {
        let now = whole_millis(now);
        let remaining_ms = match self.status {
            SessionStatus::Running => self.deadline_seen_at(now).map(|d| (d - now).num_milliseconds()),
            SessionStatus::Paused => self.paused_remaining_ms,
            SessionStatus::Stopped => None,
        };
        StatusReport {
            status: self.status,
            active_agent: self.active_agent.clone(),
            remaining_seconds: remaining_ms.map(|ms| ceil_seconds(ms.max(0))),
            roster: self.roster.clone(),
            round: self.round,
            display_mode: self.display_mode,
            pause_reason: self.pause_reason.clone(),
            benched: self.roster.iter().filter(|p| self.agents.get(p).is_some_and(|a| a.benched)).cloned().collect(),
            progress: self.progress.as_deref().cloned(),
            tasks: {
                let mut tasks: Vec<(String, TaskState)> =
                    self.tasks.iter().map(|(id, task)| (id.clone(), task.clone())).collect();
                tasks.sort_by(|a, b| b.1.updated_at.cmp(&a.1.updated_at).then_with(|| a.0.cmp(&b.0)));
                tasks
            },
        }
    }

    /// The last `n` events, oldest first.
    pub fn recent_history(&self, n: usize) -> impl Iterator<Item = &HistoryEvent> {
        self.history.iter().skip(self.history.len().saturating_sub(n))
    }

    /// Appends events to the bounded history kept in the session file. The oldest go first, so the tail never grows
    /// past `limit` and its buffer, once that large, is never reallocated larger.
    fn record(&mut self, events: &[HistoryEvent], limit: usize) {
        let limit = limit.max(1);
        let incoming = &events[events.len().saturating_sub(limit)..];
        while !self.history.is_empty() && self.history.len() + incoming.len() > limit {
            self.history.pop_front();
        }
        self.history.extend(incoming.iter().cloned());
    }

    /// Gives back the spare capacity of the session's lists, for a session read from a file and then kept idle: a
    /// decoder grows a list by doubling, so a tail of 20 events read back has room for 32 (some 1.2 KB per session
    /// held for nothing). Changes nothing a transition sees.
    pub fn shrink_to_fit(&mut self) {
        self.roster.shrink_to_fit();
        self.agents.shrink_to_fit();
        self.editable_messages.shrink_to_fit();
        self.out_of_turn_lately.shrink_to_fit();
        if let Some(followed) = &mut self.signal_like {
            followed.shrink_to_fit();
        }
        self.outbox.shrink_to_fit();
        self.history.shrink_to_fit();
    }
}

/// Times inside the engine are whole milliseconds, so deadline arithmetic is exact and survives a save.
pub(crate) fn whole_millis(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(t.timestamp_millis()).unwrap_or(t)
}

/// Seconds to announce for a duration: rounded to the nearest second, as the seed does.
pub(crate) fn round_seconds(ms: i64) -> u64 {
    ((ms.max(0) + 500) / 1000) as u64
}

/// Seconds left, rounded up so that "0s left" only shows when nothing is left.
pub(crate) fn ceil_seconds(ms: i64) -> u64 {
    ((ms.max(0) + 999) / 1000) as u64
}

pub(crate) fn seconds(n: u64) -> TimeDelta {
    TimeDelta::seconds(n as i64)
}
