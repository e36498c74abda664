//! The channel actor (style practice 4): one task per managed channel owns its [`Session`] and takes every input of
//! that channel from one inbox: messages, edits, commands, catch-up pages, its own deadline, shutdown. Each input is
//! handled the moment it arrives and judged by when it was written; the actor decides with the core, saves (durably
//! when the turn or the settings changed), then hands the effects to the channel's [`Sender`]. No lock is shared
//! with another task, and nothing it waits for belongs to another channel.

mod awaited;
mod backlog;
mod catch_up;
pub mod commands_seen;
pub mod elsewhere;
pub mod inbox;
mod saving;
#[cfg(test)]
mod tests;

use super::access::{
    READ_HISTORY, absent_personas_notice, fallback_notice, lost_permission_notice, missing_for_relay,
    reactions_refused_notice, read_history_notice, unpingable_roles_notice, webhooks_full_notice,
};
use super::clock::Clock;
use super::commands::{self, Typed};
use super::persist::Saver;
use super::rest::{Rest, RestError};
use super::sender::{Acting, Lease, Outcome, Report, Sender, Tools};
use super::shards_up::ShardsUp;
use super::stats::Stats;
use crate::core::config::{Config, DisplayModeSetting};
use crate::core::ids::{ChannelId, GuildId, MessageId, PersonaId, UserId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::effects::Effect;
use crate::core::session::history::{EventKind, HistoryEvent};
use crate::core::session::lost::Unreachable;
use crate::core::session::{Command, Context, DisplayMode, IncomingMessage, Refusal, Session};
use crate::core::shards::Shard;
pub use backlog::{Backlog, INBOX_MESSAGES_MAX};
use catch_up::Awaiting;
use inbox::{Inbox, InboxSender};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::{Semaphore, oneshot};
use tokio::task::AbortHandle;
use tokio_util::task::TaskTracker;

/// Live inputs held while a catch-up reads (spec 8) at the most: messages past it are left to the channel's history,
/// read again once the catch-up is done, so a long catch-up in a busy channel does not hold without bound.
const HELD_MAX: usize = 1_000;
/// Commands remembered by their snowflake, so one delivered twice around a reconnect runs once.
const COMMANDS_REMEMBERED: usize = 64;

/// What every actor shares: the set-up, the seams to Discord and the disk, the clock and the figures.
pub struct Env {
    pub personas: Arc<PersonaCatalog>,
    pub config: Arc<Config>,
    pub rest: Arc<dyn Rest>,
    pub saver: Arc<dyn Saver>,
    pub clock: Clock,
    pub stats: Arc<Stats>,
    /// Bounds how many channels read their missed messages at once.
    pub catch_up_permits: Arc<Semaphore>,
    /// Which of the process's shards are connected: a channel on one that is not waits for its catch-up.
    pub shards: Arc<ShardsUp>,
    /// The channels' senders and the deletions they run beside their posts: a shutdown stops the ones still at work
    /// when its wait ends, and waits until they are gone before the process lets go of its channels.
    pub tasks: TaskTracker,
    /// The commands of channels whose actor retired lately, for their next actor.
    pub retired_commands: commands_seen::RetiredCommands,
    /// The channels another process of the bot acts for, as this one found.
    pub elsewhere: elsewhere::ActingElsewhere,
    /// When this process started (see `Tools::process_started`).
    pub process_started: tokio::time::Instant,
}

impl Env {
    fn context(&self) -> Context<'_> {
        Context { personas: &self.personas, config: &self.config }
    }
}

/// One input for a channel's actor. Kept small (large parts boxed): every channel's inbox holds a block of them.
#[derive(Debug)]
pub enum Input {
    /// A new or edited message seen on the gateway.
    Message(Box<IncomingMessage>),
    /// A command from a person.
    Command(Box<CommandInput>),
    /// The gateway carried a command (a `!turn` message or a `/turn` interaction, by its id): what the channel gets
    /// after it waits for it (see `awaited.rs`).
    CommandComing(MessageId),
    /// poise will not hand that command over (refused, read-only, not a command at all), or has handed it over.
    CommandGone(MessageId),
    /// A copy of the session as it is now.
    Snapshot(oneshot::Sender<Session>),
    /// Whether a message id has been handled (boxed, like every part larger than a pointer: see [`INPUT_SIZE_MAX`]).
    Handled(Box<HandledQuery>),
    /// A new gateway session began, or a lost connection is back: read everything after the last handled message
    /// before ending overdue turns. For the channels of that shard's servers only (`None`: every channel): one
    /// running on another shard, perhaps not connected yet, cannot have seen its messages either way.
    CatchUp(Option<Shard>),
    /// The gateway connection of a shard (`None`: of every shard) was lost: signals may be arriving unseen on it, so
    /// the deadlines of its channels wait for its next catch-up or resume instead of ending turns blind (spec 8).
    Disconnected(Option<Shard>),
    /// A lost connection of a shard was resumed, and Discord has replayed what it carried meanwhile (RESUMED comes
    /// after the replay, and reaches the actors after the replayed messages): the deadlines go on without reading
    /// the history, unless the channel owes a read for another reason (see [`Awaiting`]).
    Resumed(Option<Shard>),
    /// A page of missed messages, oldest first.
    Missed(Box<MissedPage>),
    /// The inbox was full: gateway messages were left in the channel's history, to be read from there.
    ReadAgain,
    /// The channel's server is in the cache now: check the display mode against the bot's permissions.
    CheckDisplayMode,
    /// The channel's sender carried out (or gave up) an effect of the outbox.
    Sent(Box<Report>),
    /// Personas a start, an `add` or an `order` brought into the roster whose accounts are no members of the channel's
    /// server, as Discord says (see [`Actor::look_for_absent_personas`]).
    Absent(Box<AbsentPersonas>),
    /// A message read back from the history that may carry a command typed while the bot was away, held in its
    /// place behind a command given during the catch-up (see [`Actor::typed_while_away`]).
    ReadBack(Box<IncomingMessage>),
    /// Someone deleted a message of the channel (MESSAGE_DELETE): a relay of it not begun yet posts nothing.
    Deleted(MessageId),
    /// The channel can no longer be spoken in (deleted, or the bot left its server).
    Unreachable(Unreachable),
    /// The bot was removed from this server: the channel's session ends if it is there.
    LeftServer(GuildId),
    /// A new gateway session's READY listed every server of its shard the bot is in: a session of that shard in
    /// another ends, the bot having been removed from it while it was not connected (no GUILD_DELETE tells of that).
    ServersOfShard(Arc<ShardServers>),
    /// This process no longer holds the channel's lease (lost at a renewal), and the channel is to be taken over
    /// afresh: this actor stops when it comes to it (a save before that is refused: the lease is not held), and a
    /// new one starts once it has.
    TakenOver,
    /// Answered once everything decided so far has been carried out.
    Flush(oneshot::Sender<()>),
    /// Finish what is in hand and stop.
    Shutdown(oneshot::Sender<()>),
}

/// The size of an [`Input`] at most: an inbox keeps room for the inputs it held (at least 4 once used), for every
/// channel, idle or not.
pub const INPUT_SIZE_MAX: usize = 16;
const _: () = assert!(std::mem::size_of::<Input>() <= INPUT_SIZE_MAX);

/// The servers a READY listed for its shard (`None`: the only shard), sorted.
#[derive(Debug)]
pub struct ShardServers {
    pub shard: Option<Shard>,
    pub servers: Vec<GuildId>,
}

/// Asks an actor whether a message id has been handled.
#[derive(Debug)]
pub struct HandledQuery {
    pub id: MessageId,
    pub reply: oneshot::Sender<bool>,
}

/// A page of the messages a channel missed, for its actor.
#[derive(Debug)]
pub struct MissedPage {
    pub messages: Vec<IncomingMessage>,
    /// The last page of this catch-up.
    pub done: bool,
    /// Told once the page is handled: the catch-up reads its next page only then, so a long catch-up never piles
    /// pages up in the inbox.
    pub handled: Option<oneshot::Sender<()>>,
}

/// The answer to [`Actor::look_for_absent_personas`].
#[derive(Debug)]
pub struct AbsentPersonas {
    /// Of which of the actor's starts ([`StartLooks::starts_run`]) the session that asked is: an answer that comes after
    /// another start says nothing (that start asked again). Not the start's event in the history: the session file
    /// keeps only the last `historyLimit` events, and a look that took a while found it gone, its answer dropped.
    pub start: u32,
    pub users: Vec<UserId>,
}

/// What an actor remembers of its starts' membership looks.
#[derive(Debug, Default)]
struct StartLooks {
    /// How many starts this actor ran: a look's answer is for the session as the start it counts left it.
    starts_run: u32,
    /// The accounts named as no members since the last start: two looks in flight at once (an `add` after a
    /// `remove` of the same persona) name each once.
    named_absent: Vec<UserId>,
}

/// A command for an actor; `origin` is its message's or interaction's snowflake (when it was given).
#[derive(Debug)]
pub struct CommandInput {
    pub command: Command,
    pub origin: Option<MessageId>,
    pub reply: Option<oneshot::Sender<Result<(), Refusal>>>,
    /// Given as a slash command: an interaction only this process saw, which no other process runs if this one's
    /// save of it is refused (a `!turn` message is read by the process that holds the channel).
    pub interaction: bool,
}

impl Input {
    pub fn command(
        command: Command,
        origin: Option<MessageId>,
        reply: Option<oneshot::Sender<Result<(), Refusal>>>,
    ) -> Self {
        Self::command_given(command, origin, reply, false)
    }

    /// A command, `interaction` when given as a slash command.
    pub fn command_given(
        command: Command,
        origin: Option<MessageId>,
        reply: Option<oneshot::Sender<Result<(), Refusal>>>,
        interaction: bool,
    ) -> Self {
        Input::Command(Box::new(CommandInput { command, origin, reply, interaction }))
    }
}

/// The answer to a slash command whose save another process refused: it took the channel over.
const TAKEN_OVER_NOW: &str =
    "Not done: another process of the bot took this channel over just now. Give the command again.";

/// The answer to a slash command taken while the channel's saves fail: held, as the turn changes are.
const NOT_SAVED_YET: &str = "Not saved yet: I cannot save this channel's session right now (see my log). The change is \
                             held and will be announced once saving works; if I stop before that, it is lost: give \
                             the command again then.";

/// How an actor begins.
pub enum Origin {
    /// A session read at start-up: its deadline waits for the first catch-up, since signals may have been missed.
    Saved(Box<Session>),
    /// A channel with no actor yet (a command came): its session is read from disk, if it has one.
    Load,
}

/// Called when a stopped channel's actor retires; answers false if inputs arrived meanwhile (the actor goes on).
pub type Retire = Box<dyn Fn(&mut Inbox) -> bool + Send + Sync>;

/// The actor's own timers.
#[derive(Clone, Copy, Debug)]
enum Timer {
    /// The turn's deadline (or the end of the holder's silence).
    Deadline,
    /// A failed durable save is tried again.
    SaveRetry,
    /// Activity not saved yet goes to the writer.
    SaveActivity,
    /// A command awaited too long is given up on.
    CommandWait,
}

pub struct Actor {
    channel: ChannelId,
    session: Session,
    env: Arc<Env>,
    /// Started on the first effect: an idle channel needs no sender task.
    sender: Option<Sender>,
    inbox: Inbox,
    /// Counts the gateway messages waiting in the inbox, with the router.
    backlog: Arc<Backlog>,
    /// For the catch-up task, which posts its pages to this inbox.
    myself: InboxSender,
    /// What the deadlines wait for before they may end turns: the connection's return, or a read of the history.
    awaiting: Awaiting,
    catch_ups_running: u32,
    commands_seen: Vec<MessageId>,
    /// The newest outbox entry handed to the sender: the entries after it wait for a durable save that works.
    handed: u64,
    /// Events decided but not on disk yet, since a durable save failed: they go with the next one.
    unsaved_events: Vec<HistoryEvent>,
    /// Set while durable saves fail: when to try again.
    save_retry: Option<Box<saving::SaveRetry>>,
    /// The announcement giving the holder the floor was replayed from the outbox and has not reported yet: Discord
    /// may have posted it long ago (before a crash), so the turn's deadline is unknown until it reports, and nothing
    /// written meanwhile may be judged: the read of what was missed waits for it, and live inputs with it.
    floor_replayed: bool,
    /// A read of what was missed was due (connected) while `floor_replayed` held it: it starts at the report.
    read_deferred: bool,
    /// Set while activity is not saved yet: when to hand it to the writer (one copy for a burst of it).
    activity_save_at: Option<tokio::time::Instant>,
    /// A lazy copy went to the writer after the last durable save: the store may not show it yet.
    lazy_handed: bool,
    /// Another process took the channel over (a store shared by several processes refused a save): this actor stops
    /// at once, saying and saving nothing more.
    taken_over: bool,
    /// Live messages and commands that came while the missed messages were unread, in arrival order: handled after
    /// the catch-up's last page, since either may end a turn whose in-time signal is still on an unread page.
    held: VecDeque<Input>,
    /// Messages were left to the history (the held queue was full): read it again after this catch-up, or, while a
    /// command is held, once it is handled (what was written after it waits for it).
    read_again: bool,
    /// A new gateway session came while a catch-up ran: what was missed before it is read as soon as that catch-up
    /// is done, before any held command (which may have been given after a signal only this read shows).
    read_owed: bool,
    /// The oldest message left to the history since the last read began (see [`Actor::leave_to_history`]).
    left_from: Option<MessageId>,
    /// Commands the gateway carried that poise has not handed over yet, each with its place in `held`.
    awaited: awaited::Awaited,
    /// The bot was found to lack Read Message History here and said so (at a start, or at a relay it refused):
    /// said once.
    told_history_missing: bool,
    /// Discord refused a reaction of observe mode and the bot said so: said once.
    told_reactions_refused: bool,
    /// The membership looks of this actor's starts (see [`Actor::look_for_absent_personas`]); boxed, as an idle
    /// channel's task keeps every field resident, and most actors (a restored session's) run no start.
    looks: Option<Box<StartLooks>>,
    /// The handoff being timed, for the metrics.
    handoff: crate::metrics::Handoff,
    /// How a stopped channel's actor leaves the router.
    retire: Retire,
}

impl Actor {
    /// Starts the actor's task; `retire` is how a stopped channel's actor leaves the router.
    pub fn spawn(
        channel: ChannelId,
        origin: Origin,
        env: Arc<Env>,
        inbox: (Inbox, Arc<Backlog>),
        myself: InboxSender,
        retire: Retire,
    ) -> AbortHandle {
        // Not on `env.tasks`: its wrapper would cost every channel's task a larger cell (see the size test). A
        // shutdown waits for a stopped actor by its handle.
        tokio::spawn(task(channel, origin, env, inbox, myself, retire)).abort_handle()
    }

    async fn run(&mut self) {
        // Every step but the wait itself is boxed: a future holds room for the largest of its steps for as long as it
        // lives, and an idle channel's task lives on in the wait, so only what waiting needs stays resident.
        if !Box::pin(self.begin()).await {
            return;
        }
        loop {
            if self.taken_over {
                return;
            }
            let timer = self.next_timer();
            let input = tokio::select! {
                biased;
                input = self.inbox.recv() => input,
                () = sleep_until(timer.map(|(at, _)| at)) => {
                    if let Some((_, timer)) = timer {
                        Box::pin(self.on_timer(timer)).await;
                    }
                    continue;
                }
            };
            let Some(input) = input else {
                self.save_activity();
                return;
            };
            if matches!(input, Input::Message(_)) {
                self.backlog.taken();
            }
            if let Input::Shutdown(done) = input {
                Box::pin(self.shut_down(done)).await;
                return;
            }
            if let Input::TakenOver = input {
                if self.env.saver.holds(self.channel) {
                    // This actor's claim crossed the lease round that found the channel left: it is not stale.
                    tracing::debug!(channel = %self.channel, "told of a takeover, but this process holds the lease");
                    continue;
                }
                tracing::warn!(
                    channel = %self.channel,
                    "this channel's lease was lost: this channel's actor stops here, leaving what it had not done to \
                     whoever holds the channel now"
                );
                self.abandon_sender();
                return;
            }
            if Box::pin(self.take(input)).await && self.retire_now() {
                return;
            }
        }
    }

    /// What comes before the first input: what was left undone, and the personas as they are now. False when the
    /// channel is another process's (see [`Actor::hand_over_if_elsewhere`]): this actor has stopped.
    async fn begin(&mut self) -> bool {
        // A session read from disk may stay idle for long: its lists keep no room a decoder left. (Done here, not
        // on a local of the spawning task: a local borrowed there would keep a second session's room in the task.)
        self.session.shrink_to_fit();
        self.session.forget_delivered_announcement();
        if self.hand_over_if_elsewhere().await {
            return false;
        }
        // What was decided and saved but maybe not carried out before the process stopped comes first.
        if let Some(last) = self.session.outbox.back() {
            self.handed = last.id;
            let replay: Vec<_> = self.session.outbox.iter().cloned().collect();
            tracing::info!(channel = %self.channel, effects = replay.len(), "carrying out what was left undone");
            self.sender().effects(replay, true);
        }
        // Personas may have changed while the bot was down. Said in the log, naming them: a start with the wrong
        // personas folder (or a file moved away) stops sessions, and before, nothing but the channel said so (found
        // by a review).
        let unknown: Vec<&str> = if self.session.is_active() {
            self.session.roster.iter().filter(|p| self.env.personas.get(p).is_none()).map(|p| p.as_str()).collect()
        } else {
            Vec::new()
        };
        if !unknown.is_empty() {
            let outcome = if unknown.len() == self.session.roster.len() {
                "none of them is left, so the session stops"
            } else {
                "they are dropped from it"
            };
            tracing::warn!(
                channel = %self.channel,
                "personas of this channel's roster have no persona file (is the personas folder the right one?): {}; \
                 {outcome}",
                unknown.join(", ")
            );
        }
        let t = self.session.reconcile(self.env.clock.now(), self.env.context());
        self.commit(t).await;
        true
    }

    /// A session saved before sessions recorded their server, resumed by a process that runs only some shards
    /// (each such process claims those sessions): its server is looked up (at the start, and again at each catch-up
    /// while the REST client is not connected yet). On another process's shard, that process gets the channel's
    /// messages, not this one: the server is saved and the channel let go, its outbox left for that process to carry
    /// out, and it takes the channel over at its next lease round. True when handed over: this actor stops.
    async fn hand_over_if_elsewhere(&mut self) -> bool {
        // A stopped (or new) session has nothing to hand over, and nothing to save: its actor retires by itself.
        if self.env.shards.runs_all() || !self.session.is_active() {
            return false;
        }
        self.learn_guild().await;
        let Some(guild) = self.session.guild_id.filter(|guild| !self.env.shards.runs(*guild)) else {
            return false;
        };
        // Durably, not as activity (saved later): the other process reads the server to know the channel is its.
        // Nothing of the outbox is handed to this process's sender by that save.
        let handed = self.handed;
        self.handed = self.session.outbox.back().map_or(handed, |q| q.id);
        if !self.save_durably().await {
            // Still this process's: the server is forgotten, so that the next catch-up (or the save's retry) looks
            // it up and tries again, the channel meanwhile taking every shard's news as its own.
            self.handed = handed;
            self.session.guild_id = None;
            return false;
        }
        tracing::debug!(channel = %self.channel, %guild, "handing the channel over");
        // Nothing waiting here is this channel's to act on (the connection's news, a snapshot asked for): its
        // messages and commands come on the other process's shard.
        self.abandon_sender();
        self.held.clear();
        self.inbox.close();
        while self.inbox.try_recv().is_some() {}
        self.retire_now();
        self.taken_over = true;
        tracing::info!(channel = %self.channel, "this channel's server is on another process's shard: left to it");
        true
    }

    /// The earliest of the actor's own timers, if any is set. One timer is waited for, not one per kind: each wait
    /// holds its room in the task for as long as the channel lives. On a tie the turn's deadline goes first, then a
    /// failed save's retry, then the activity's save; the others are due at once in the next round.
    fn next_timer(&self) -> Option<(tokio::time::Instant, Timer)> {
        let timers = [
            (self.armed_deadline(), Timer::Deadline),
            (self.save_retry.as_ref().map(|retry| retry.at), Timer::SaveRetry),
            (self.activity_save_at, Timer::SaveActivity),
            (self.awaited.give_up_at(), Timer::CommandWait),
        ];
        timers
            .into_iter()
            .filter_map(|(at, timer)| at.map(|at| (at, timer)))
            .reduce(|first, next| if next.0 < first.0 { next } else { first })
    }

    async fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Deadline => self.on_deadline().await,
            Timer::SaveRetry => {
                if self.save_durably().await {
                    Box::pin(self.hand_over_if_elsewhere()).await; // One that failed on this save, if any.
                }
            }
            Timer::SaveActivity => self.save_activity(),
            Timer::CommandWait => {
                self.give_up_overdue_commands();
                Box::pin(self.handle_held()).await;
            }
        }
    }

    /// Finishes what is in hand before the process ends.
    async fn shut_down(&mut self, done: oneshot::Sender<()>) {
        // The newest handled message first: a sender still busy when the process ends must not lose it.
        self.save_activity();
        if self.save_retry.is_some() {
            self.save_durably().await; // A last try, so that what was held back is not left to a restart.
        }
        // Take what was done out of the outbox, so a restart does not carry it out again. A report may hand the sender
        // more (a refusal's display-mode switch and its notice, which no restart would give): flushed in turn, until
        // nothing new comes (the router's wait bounds it all).
        loop {
            self.flush_sender().await;
            let mut reported = false;
            while let Some(input) = self.inbox.try_recv() {
                if let Input::Sent(report) = input {
                    self.on_sent(*report).await;
                    reported = true;
                }
            }
            if !reported {
                break;
            }
        }
        self.save_activity();
        let _ = done.send(());
    }

    /// Handles an input (or holds it while the missed messages are unread, or behind a command on its way), then
    /// what was held and may go now. True when the channel stopped with nothing left to do: its task may retire.
    async fn take(&mut self, input: Input) -> bool {
        match input {
            Input::CommandComing(id) => self.await_command(id),
            Input::CommandGone(id) => self.command_gone(id),
            input => {
                if let Some(input) = self.place_awaited(input) {
                    self.take_live(input).await;
                }
            }
        }
        self.handle_held().await;
        if !self.session.is_active()
            && self.catch_ups_running == 0
            && self.session.outbox.is_empty()
            && self.save_retry.is_none()
            && self.held.is_empty()
        {
            // A stopped channel needs no task: its state is on disk; what it said is sent first.
            self.flush_sender().await;
            self.save_on_retiring().await;
            return true;
        }
        false
    }

    /// Handles a live input now, or holds it behind the missed messages or a command on its way.
    async fn take_live(&mut self, input: Input) {
        if (self.holding() || self.awaited.any()) && waits_for_catch_up(&input) {
            match &input {
                // It is in the channel's history: the next catch-up reads it.
                Input::Message(message) if self.must_leave(message) => {
                    if message.edited {
                        self.read_again = true;
                    } else {
                        self.leave_to_history(message.id);
                    }
                }
                Input::Deleted(message) => {
                    // A relay decided before the hold goes on in the sender meanwhile: it must not wait for the
                    // hold to end (found by a review). The deletion is held too, for a message among those held.
                    self.forget_queued_relay_of(*message);
                    self.held.push_back(input);
                }
                _ => self.held.push_back(input),
            }
            return;
        }
        self.handle(input).await;
    }

    /// Handles what was held, in order, up to a command still on its way; once nothing holds the channel, live
    /// messages left to the history meanwhile are read from there.
    async fn handle_held(&mut self) {
        while !self.holding() && !self.next_held_is_awaited() {
            let Some(held) = self.held.pop_front() else { break };
            self.handle(held).await;
        }
        let free = self.session.is_active() && !self.holding() && !self.awaited.any() && self.catch_ups_running == 0;
        if self.read_again && free {
            self.read_again = false;
            self.start_catch_up();
        }
    }

    /// The place in the held queue of the first command held that says when it was given (a live one, or one the
    /// gateway said is coming), and when.
    fn first_command_held(&self) -> Option<(usize, MessageId)> {
        self.held.iter().enumerate().find_map(|(place, held)| given(held).map(|given| (place, given)))
    }

    /// Where a message read from the history goes among the held inputs: right after the last one written before
    /// it (a command given, or a message), and never past a command given after it, so that what is held is handled
    /// in the order it was written whatever the page that showed it (live messages may have come in another order).
    /// `None` when its live copy is held there already; a live copy held later is taken out, the page's copy going
    /// in its place. Only called for a message written after the first held command.
    fn make_place_for(&mut self, message: &IncomingMessage) -> Option<usize> {
        let given_after = |held: &Input| given(held).is_some_and(|given| !written_after(message, given));
        let before = |held: &Input| match (held, given(held)) {
            (_, Some(given)) => written_after(message, given),
            (Input::Message(other), None) => written_no_later(other, message),
            _ => false,
        };
        let bound = self.held.iter().position(given_after).unwrap_or(self.held.len());
        let place = self.held.range(..bound).rposition(before).map_or(bound, |place| place + 1);
        if !message.edited {
            // The same message as the gateway brought it (the page's copy may differ in what was added since: an
            // edit's time, an embed).
            let live = |held: &Input| matches!(held, Input::Message(other) if !other.edited && other.id == message.id);
            if let Some(copy) = self.held.iter().position(live) {
                if copy < place {
                    return None;
                }
                self.held.remove(copy);
            }
        }
        Some(place)
    }

    /// The held queue is full and `message` goes at `place`: the newest message held after both that place and the
    /// last held command, if newer than `message` and not an edit, is left to the history to make room (see
    /// [`Actor::leave_to_history`]). Messages held before a command given after them are never left: read again
    /// after it, they would act after it.
    fn leave_newest_held_after(&mut self, place: usize, message: &IncomingMessage) -> bool {
        let last_command = self.held.iter().rposition(|held| given(held).is_some());
        let from = last_command.map_or(place, |at| place.max(at + 1));
        let newest = (from..self.held.len())
            .filter_map(|at| match &self.held[at] {
                Input::Message(held) if !held.edited => Some((at, held)),
                _ => None,
            })
            .reduce(|newest, other| if written_no_later(newest.1, other.1) { other } else { newest });
        match newest {
            Some((at, held)) if written_no_later(message, held) => {
                let id = held.id;
                self.held.remove(at);
                self.leave_to_history(id);
                true
            }
            _ => false,
        }
    }

    /// A message left in the channel's history (the held queue is full), read again once what is held is handled,
    /// from before the oldest message left. Until then every message newer than that one is left too: handled
    /// before it, they would move the channel so far past it that it could be taken for a repeat.
    fn leave_to_history(&mut self, id: MessageId) {
        self.read_again = true;
        self.left_from = Some(self.left_from.map_or(id, |left| left.min(id)));
    }

    /// Whether a message must be left to the history: the held queue is full, or a message older than it was.
    fn must_leave(&self, message: &IncomingMessage) -> bool {
        self.held.len() >= HELD_MAX || self.newer_than_left(message)
    }

    /// Whether a message (not an edit) is newer than one left to the history, which it must not overtake.
    fn newer_than_left(&self, message: &IncomingMessage) -> bool {
        !message.edited && self.left_from.is_some_and(|left| message.id > left)
    }

    /// Whether the missed messages are still unread (being read, or waiting for the connection to come back): spec 8
    /// reads them before anything may end a turn.
    fn holding(&self) -> bool {
        self.session.is_active() && (self.awaiting != Awaiting::Nothing || self.catch_ups_running > 0)
    }

    /// The instant to wake for the turn's deadline, unless deadlines wait for the missed messages (spec 8). The core
    /// itself runs no deadline whose floor announcement Discord has not accepted yet.
    fn armed_deadline(&self) -> Option<tokio::time::Instant> {
        if self.holding() || self.awaited.any() {
            return None; // A command on its way (or a message behind it) may end the turn first.
        }
        self.session.wake_at(self.env.context()).map(|deadline| self.env.clock.instant_at(deadline))
    }

    async fn handle(&mut self, input: Input) {
        match input {
            Input::Message(message) => self.on_message(*message).await,
            // Placed as a command typed while away: that stands, though the gateway may have brought it since
            // (poise's copy, held behind, is then a repeat).
            Input::ReadBack(message) => self.on_read_back(*message, true).await,
            Input::Command(input) => {
                let CommandInput { command, origin, reply, interaction } = *input;
                let mut outcome = self.on_command(&command, origin).await;
                if outcome.is_ok() && self.taken_over && interaction {
                    // Its save was refused: another process acts for the channel now, which never saw this slash
                    // command. (A `!turn` message it reads and runs itself: nothing is said of it here.)
                    outcome = Err(Refusal(TAKEN_OVER_NOW.into()));
                } else if outcome.is_ok() && self.save_retry.is_some() && interaction {
                    // Not on disk: a restart before a save works would lose it, and unlike a `!turn` message, which
                    // the next start reads back, a slash command is in no history (found by a review: it was
                    // answered "Done.").
                    outcome = Err(Refusal(NOT_SAVED_YET.into()));
                }
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            Input::Snapshot(reply) => {
                let _ = reply.send(self.session.clone());
            }
            Input::Handled(query) => {
                let HandledQuery { id, reply } = *query;
                let _ = reply.send(self.session.has_handled(id));
            }
            Input::CatchUp(shard) if self.is_on(shard) => {
                if !Box::pin(self.hand_over_if_elsewhere()).await {
                    self.catch_up_once_connected();
                }
            }
            Input::CatchUp(_) => {}
            Input::ReadAgain => {
                self.backlog.reading_again();
                if self.awaiting != Awaiting::Nothing {
                    // Read once the connection is back, even if a RESUME replays the rest: these are not replayed.
                    self.awaiting = Awaiting::Read;
                } else {
                    // After the running catch-up, if any: it may have read past them already.
                    self.start_catch_up();
                }
            }
            Input::Disconnected(shard) if self.is_on(shard) => {
                if self.awaiting == Awaiting::Nothing {
                    self.awaiting = Awaiting::Connection;
                }
            }
            Input::Disconnected(_) => {}
            Input::Resumed(shard) if self.is_on(shard) => match self.awaiting {
                Awaiting::Connection if self.its_shard_is_up() => self.awaiting = Awaiting::Nothing,
                Awaiting::Connection | Awaiting::Nothing => {}
                Awaiting::Read => self.catch_up_once_connected(),
            },
            Input::Resumed(_) => {}
            Input::Missed(page) => {
                let MissedPage { messages, done, handled } = *page;
                let first_command = self.first_command_held().map(|(_, given)| given);
                for message in messages {
                    // Written after a command given during the catch-up (held until it is done): it is held in its
                    // place among what is held, by when each was written (its live copy, if it came, is then a
                    // repeat). A `pause` given before a signal is not overtaken by a page that shows the signal.
                    if first_command.is_some_and(|given| written_after(&message, given)) {
                        if self.newer_than_left(&message) {
                            self.leave_to_history(message.id);
                            continue;
                        }
                        // Before its live copy, if any, is taken out: seen live, poise has it.
                        let read_back = self.typed_while_away(&message).is_some();
                        // None: its live copy is held already, no later than where it goes.
                        if let Some(place) = self.make_place_for(&message) {
                            let room = self.held.len() < HELD_MAX
                                || self.leave_newest_held_after(place, &message)
                                // Nothing newer can make room: held over the bound rather than left to a read
                                // that might start after it.
                                || self.held.len() < 2 * HELD_MAX;
                            if room {
                                let message = Box::new(message);
                                let input = if read_back { Input::ReadBack(message) } else { Input::Message(message) };
                                self.held.insert(place, input);
                            } else if message.edited {
                                self.read_again = true;
                            } else {
                                self.leave_to_history(message.id);
                            }
                        }
                        continue;
                    }
                    self.on_read_back(message, false).await;
                }
                if done {
                    self.catch_ups_running = self.catch_ups_running.saturating_sub(1);
                    // Read again at once for what a new gateway session missed meanwhile, even before a held
                    // command (the pages hold what was written after it in its place); and for what was left to
                    // the history, unless a held command must go first: what was written after it waits for it
                    // (then `handle_held` reads).
                    let command_held = self.first_command_held().is_some();
                    if self.catch_ups_running == 0 && (self.read_owed || !command_held && self.read_again) {
                        // The read starts before the oldest message left to the history: it covers those too.
                        (self.read_owed, self.read_again) = (false, false);
                        self.start_catch_up();
                    }
                }
                if let Some(handled) = handled {
                    let _ = handled.send(());
                }
            }
            Input::CheckDisplayMode => {
                if self.session.is_active() {
                    self.learn_guild().await;
                    let missing = self.permissions_missing_if_auto().await;
                    let choice = self.choose_display_mode(missing.as_deref());
                    // Permissions say nothing of the webhooks' room, nor of a refusal the cache does not show: only a
                    // new start tries relay again.
                    let held = self.session.webhooks_full || self.session.relay_refused;
                    let choice = choice.filter(|(mode, _)| !(held && *mode == DisplayMode::Relay));
                    self.apply_display_mode(choice).await;
                }
            }
            Input::Sent(report) => {
                self.env.stats.work();
                self.on_sent(*report).await
            }
            Input::Deleted(message) => self.forget_queued_relay_of(message),
            Input::Absent(absent) => self.tell_absent_personas(*absent),
            Input::Unreachable(why) => self.on_unreachable(why).await,
            Input::LeftServer(guild) => {
                if self.session.guild_id == Some(guild) {
                    self.on_unreachable(Unreachable::LeftServer).await;
                }
            }
            Input::ServersOfShard(listed) => {
                let gone = self.session.guild_id.is_some_and(|guild| listed.servers.binary_search(&guild).is_err());
                if gone && self.is_on(listed.shard) && self.session.is_active() {
                    self.on_unreachable(Unreachable::LeftServer).await;
                }
            }
            Input::Flush(done) => {
                self.flush_sender().await;
                let _ = done.send(());
            }
            Input::Shutdown(_) | Input::TakenOver => unreachable!("handled by the loop"),
            Input::CommandComing(_) | Input::CommandGone(_) => unreachable!("taken by `take`"),
        }
    }

    /// Leaves out the relays of messages someone deleted while the channel was held: the deletion waits with the
    /// live inputs, and a page of the history read meanwhile may show the message and decide its relay, which the
    /// sender would carry out before the deletion is handled (found by a review). The bot's own deletions (an
    /// out-of-turn message, judged in turn once a page shows the signal before it) do not count.
    pub(super) fn drop_relays_of_held_deletions(&self, effects: &mut Vec<Effect>) {
        let held_deletion =
            |id: MessageId| self.held.iter().any(|input| matches!(input, Input::Deleted(d) if *d == id));
        let own = |id: MessageId| self.sender.as_ref().is_some_and(|sender| sender.deleted_itself(id));
        effects.retain(|effect| match effect {
            Effect::Relay { message_id, .. } => !held_deletion(*message_id) || own(*message_id),
            _ => true,
        });
    }

    /// Someone deleted `message`: a relay of it in the outbox, reposted, would undo the deletion (found by a review),
    /// so it posts nothing if it has not begun.
    fn forget_queued_relay_of(&self, message: MessageId) {
        let relayed = self
            .session
            .outbox
            .iter()
            .any(|q| matches!(q.effect, Effect::Relay { message_id, .. } if message_id == message));
        if let (Some(sender), true) = (&self.sender, relayed) {
            sender.forget_relay_of(message);
        }
    }

    async fn on_message(&mut self, message: IncomingMessage) {
        self.env.stats.message();
        let t = self.session.handle_message(&message, self.env.clock.now(), self.env.context());
        self.handoff.decided(&t.events, &self.session);
        self.commit(t).await;
    }

    async fn on_deadline(&mut self) {
        let Some(woken_for) = self.session.wake_at(self.env.context()) else { return };
        // The lateness of a turn's end is from the turn's own deadline, not from a line's answer that woke the actor
        // first (found by a review).
        let deadline = self.session.turn_ends_at(self.env.context()).unwrap_or(woken_for);
        let now = self.env.clock.now();
        let t = self.session.tick(now, self.env.context());
        // A tick may also answer a line an edit left (no turn ended): only a turn ended by its clock is a timeout
        // (found by a review: the answer was counted as one, with a lateness).
        let by_the_clock =
            |e: &HistoryEvent| matches!(e.kind, EventKind::TurnTimeout { .. } | EventKind::TurnSilent { .. });
        if t.events.iter().any(by_the_clock) {
            let lateness_ms = (now - deadline).num_milliseconds();
            self.env.stats.timeout(lateness_ms);
            crate::metrics::deadline_handled(lateness_ms);
            tracing::debug!(channel = %self.channel, lateness_ms, "turn timed out");
        }
        self.commit(t).await;
    }

    /// An effect of the outbox is done or failed for good. Losing Manage Messages or Manage Webhooks mid-session
    /// (a 403 on relaying or deleting), or a channel with no room for the bot's webhook, switches the channel to
    /// observe mode with one notice, instead of failing every turn; lacking only Read Message History is said once and
    /// changes nothing. An announcement refused with 404 or 403 means the channel is gone or closed to the bot.
    async fn on_sent(&mut self, report: Report) {
        self.handoff.reported(&self.session, report.id, report.outcome.accepted_at());
        let queued = self.session.outbox.iter().find(|q| q.id == report.id);
        let relaying = queued.is_some_and(|q| matches!(q.effect, Effect::Relay { .. } | Effect::Delete { .. }));
        let reacting = queued.is_some_and(|q| matches!(q.effect, Effect::React { .. }));
        let unreachable = match (queued, &report.outcome) {
            (Some(q), Outcome::Refused { status }) => Unreachable::from_refusal(&q.effect, *status),
            _ => None,
        };
        if let Some(why) = unreachable {
            // First, while the refused announcement still marks the turn as not begun: a pause keeps its whole time.
            self.on_unreachable(why).await;
        }
        let (now, ctx) = (self.env.clock.now(), self.env.context());
        let t = match report.outcome {
            Outcome::Done { at, posted } => self.session.effect_done(report.id, at, posted),
            Outcome::Refused { status } => self.session.effect_failed(report.id, Some(status), now, ctx),
            Outcome::GaveUp => self.session.effect_failed(report.id, None, now, ctx),
            // Discord answered 400 to making a webhook.
            Outcome::NoWebhook(_) => self.session.effect_failed(report.id, Some(400), now, ctx),
        };
        self.commit(t).await;
        if self.floor_replayed && !self.session.awaiting_floor_announcement() {
            // The turn's start is known now (when Discord made it, or now if it was never made): what was missed is
            // read and judged against it.
            self.floor_replayed = false;
            if std::mem::take(&mut self.read_deferred) {
                self.catch_up_once_connected();
            }
        }
        // Observe mode's ✅ refused: completed turns would show nothing, unsaid (found by a review: the permissions
        // looked at choose the mode, and Add Reactions is none of them). Unless the missing Read Message History,
        // which it needs too, was said already.
        let refused = report.outcome == (Outcome::Refused { status: 403 });
        if reacting
            && refused
            && self.session.is_active()
            && !self.told_history_missing
            && !std::mem::replace(&mut self.told_reactions_refused, true)
        {
            let saved = self.save_retry.is_none();
            self.say_once_saved(reactions_refused_notice(), saved);
        }
        // A stopped session's last relay says nothing more: the next start chooses again.
        if !relaying || self.session.display_mode != DisplayMode::Relay || !self.session.is_active() {
            return;
        }
        if report.outcome == (Outcome::Refused { status: 403 }) {
            let missing = self.env.rest.relay_permissions_missing(self.channel).await.unwrap_or_default();
            let relay_missing = missing_for_relay(&missing);
            if relay_missing.is_empty() && missing.contains(&READ_HISTORY) {
                // Discord refused to show the message to be reposted (it has files): other messages still relay,
                // and observe mode would not help (its reactions need the permission too).
                self.tell_history_missing(true);
                return;
            }
            self.session.relay_refused = true; // saved with the switch
            self.apply_display_mode(Some((DisplayMode::Observe, Some(lost_permission_notice(&relay_missing))))).await;
        } else if let Outcome::NoWebhook(limit) = report.outcome {
            self.session.webhooks_full = true; // saved with the switch
            self.apply_display_mode(Some((DisplayMode::Observe, Some(webhooks_full_notice(limit))))).await;
        }
    }

    /// The channel can no longer be spoken in: the core ends or pauses its session, said once in the log (a notice
    /// in the channel would be refused too).
    async fn on_unreachable(&mut self, why: Unreachable) {
        let t = self.session.unreachable(why, self.env.clock.now(), self.env.context());
        if t.durable() {
            let what = if self.session.is_active() { "paused" } else { "ended" };
            tracing::warn!(channel = %self.channel, "turn management {what} here: {}", why.reason());
        }
        self.commit(t).await;
    }

    /// A command in a message read back from the history that poise never saw (written while the bot was away), with
    /// its first line for the reply: a person's, not handled before (then poise had it) and not run already.
    fn typed_while_away(&self, message: &IncomingMessage) -> Option<(Typed, String)> {
        self.typed_in(message).filter(|_| !self.seen_live(message.id))
    }

    /// [`Actor::typed_while_away`] but for the look at what the gateway brought.
    fn typed_in(&self, message: &IncomingMessage) -> Option<(Typed, String)> {
        // Most messages are no command: that is looked at first.
        let typed = commands::typed(&message.text)?;
        let person = self.env.personas.by_user(message.author).is_none();
        let new = !self.session.has_handled(message.id) && !self.commands_seen.contains(&message.id);
        if message.edited || !person || !new {
            return None;
        }
        Some((typed, message.text.lines().next().unwrap_or_default().to_owned()))
    }

    /// Whether the gateway brought message `id` during the catch-up: its live copy, or the command it carries (on
    /// its way from poise, or handed over), is held until the reading is done.
    fn seen_live(&self, id: MessageId) -> bool {
        self.held.iter().any(|held| match held {
            Input::Message(live) => !live.edited && live.id == id,
            Input::CommandComing(given) => *given == id,
            Input::Command(command) => command.origin == Some(id),
            _ => false,
        })
    }

    /// A message read back from the history, and the command typed in it while the bot was away, if any; `placed`:
    /// held as one already ([`Input::ReadBack`]).
    async fn on_read_back(&mut self, message: IncomingMessage, placed: bool) {
        let typed = if placed { self.typed_in(&message) } else { self.typed_while_away(&message) };
        let (id, author) = (message.id, message.author);
        self.on_message(message).await;
        if let Some((typed, text)) = typed {
            self.run_typed_while_away(id, author, typed, &text).await;
        }
    }

    /// Runs a command [`Actor::typed_while_away`] found, in its place among the messages read back, as if poise had
    /// handed it over then: the same permission rule and the same core; its refusal (or how to write it) is said in
    /// the channel, naming it. `status` and `history` are not answered: the answer would be about now.
    async fn run_typed_while_away(&mut self, id: MessageId, author: UserId, typed: Typed, text: &str) {
        let refusal = match typed {
            Typed::ReadOnly => return,
            // Answered only to a member of the server, as a command it could read is (found by a review: the bot
            // answered its own repost of an agent's `!turn please wait`, read back before it found its webhook).
            Typed::Unreadable(usage) => match self.env.rest.may_manage(self.channel, author).await {
                Err(None) => return,
                _ => usage,
            },
            Typed::Change(command) => match self.env.rest.may_manage(self.channel, author).await {
                Ok(()) => match self.on_command(&command, Some(id)).await {
                    Ok(()) => return,
                    Err(refusal) => refusal.0,
                },
                Err(Some(reason)) => reason,
                // No member of the server: a webhook's message (the bot's own reposts among them, before it has
                // found its webhook again), or someone who left. Nothing to say to it.
                Err(None) => return,
            },
        };
        let typed = crate::core::templates::quotable(text);
        self.sender().answer(id, format!("`{typed}` (sent while I was away, so only read now): {refusal}"));
    }

    /// Runs a command. Starting a session first picks relay or observe from the bot's permissions (when the
    /// configuration says `auto`) and says once in the channel if it had to fall back.
    async fn on_command(&mut self, command: &Command, origin: Option<MessageId>) -> Result<(), Refusal> {
        if let Some(id) = origin {
            if self.commands_seen.contains(&id) {
                return Ok(()); // The same command delivered again around a reconnect, or read back already.
            }
            self.remember_command(id);
        }
        let (mut history_missing, mut unpingable) = (false, Vec::new());
        let starting = matches!(command, Command::Start { .. });
        if starting {
            // A start that will be refused (a name typed wrong, no personas, a session running) changes nothing, not
            // even the display mode, and says nothing but its refusal: it is tried on a copy first. One accepted may
            // find the session still running: its last round ran out before the start was given, and the start came
            // in before the deadline's tick (found by a review: the display mode, the permissions and the membership
            // of the roster went unchecked then).
            self.session.clone().handle_command(command, origin, self.env.clock.now(), self.env.context())?;
            self.learn_guild().await;
            let missing = self.permissions_missing().await;
            let choice = self.choose_display_mode(missing.as_deref());
            self.apply_display_mode(choice).await;
            history_missing = missing.is_some_and(|missing| missing.contains(&READ_HISTORY));
            self.told_history_missing = false; // each start says it again
            self.told_reactions_refused = false;
            unpingable = self.env.rest.control_roles_unpingable(self.channel).await.unwrap_or_else(|e| {
                tracing::debug!(channel = %self.channel, "could not look at the control roles: {e}");
                Vec::new()
            });
        }
        let roster_before = if starting { Vec::new() } else { self.session.roster.clone() };
        let t = self.session.handle_command(command, origin, self.env.clock.now(), self.env.context())?;
        if starting {
            let looks = self.looks.get_or_insert_default();
            looks.starts_run += 1;
            looks.named_absent.clear();
        }
        let saved = self.commit(t).await;
        // The personas a start, an `add` or an `order` brought into the roster (found by a review: one added whose
        // account was no member timed out in each turn with nothing saying why, as at a start before).
        let joined: Vec<PersonaId> =
            self.session.roster.iter().filter(|p| !roster_before.contains(p)).cloned().collect();
        if self.session.is_active() && !joined.is_empty() {
            self.look_for_absent_personas(&joined);
        }
        if history_missing {
            self.tell_history_missing(saved);
        }
        if !unpingable.is_empty() {
            self.say_once_saved(unpingable_roles_notice(&unpingable), saved);
        }
        Ok(())
    }

    /// Leaves the router, unless inputs came meanwhile (false: the actor goes on). The commands it ran are kept for
    /// the channel's next actor.
    fn retire_now(&mut self) -> bool {
        self.env.retired_commands.keep(self.channel, std::mem::take(&mut self.commands_seen));
        let retired = (self.retire)(&mut self.inbox);
        if !retired {
            self.commands_seen = self.env.retired_commands.take(self.channel);
        }
        retired
    }

    fn remember_command(&mut self, id: MessageId) {
        self.commands_seen.push(id);
        if self.commands_seen.len() > COMMANDS_REMEMBERED {
            self.commands_seen.remove(0);
        }
    }

    /// Records the channel's server if it is not known yet: it decides which process keeps the session when the bot
    /// runs on several (spec 12). Saved with the next save; looked up again if it could not be found now.
    async fn learn_guild(&mut self) {
        if self.session.guild_id.is_some() {
            return;
        }
        match self.env.rest.guild_of(self.channel).await {
            Ok(Some(guild)) => {
                let t = self.session.set_guild(guild);
                self.commit(t).await;
                if !self.env.shards.runs(guild) {
                    return; // Another process's: handed over (`hand_over_if_elsewhere`), nothing to wait for here.
                }
                // Not knowing its server, the channel took every shard's loss and return for its own; from now on
                // only its own shard's are meant for it.
                let shard_up = self.its_shard_is_up();
                match self.awaiting {
                    // A new session whose shard is reconnecting (a start in the replay): it waits for it.
                    Awaiting::Nothing if !shard_up => self.awaiting = Awaiting::Connection,
                    // Its own shard is connected (it was never lost, or RESUMED has brought its replay).
                    Awaiting::Connection if shard_up => self.awaiting = Awaiting::Nothing,
                    Awaiting::Read => self.catch_up_once_connected(),
                    Awaiting::Nothing | Awaiting::Connection => {}
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(channel = %self.channel, "the channel's server is not known yet: {e}"),
        }
    }

    /// The permissions the bot lacks here (`Access::relay_permissions_missing`), `None` when they cannot be read.
    async fn permissions_missing(&self) -> Option<Vec<&'static str>> {
        match self.env.rest.relay_permissions_missing(self.channel).await {
            Ok(missing) => Some(missing),
            // Not connected, or the server not in the cache yet: its arrival checks again (CheckDisplayMode).
            Err(RestError::Unavailable(why)) => {
                tracing::debug!(channel = %self.channel, "display mode checked once the server is known: {why}");
                None
            }
            Err(e) => {
                tracing::warn!(channel = %self.channel, "could not read my permissions, keeping the display mode: {e}");
                None
            }
        }
    }

    /// [`Self::permissions_missing`] when the configuration lets them choose the display mode.
    async fn permissions_missing_if_auto(&self) -> Option<Vec<&'static str>> {
        match self.env.config.display_mode {
            DisplayModeSetting::Auto => self.permissions_missing().await,
            DisplayModeSetting::Relay | DisplayModeSetting::Observe => None,
        }
    }

    /// The display mode to use here, given the permissions `missing` (`None`: unknown), and the notice to give if
    /// relay is not possible.
    fn choose_display_mode(&self, missing: Option<&[&'static str]>) -> Option<(DisplayMode, Option<String>)> {
        match self.env.config.display_mode {
            DisplayModeSetting::Relay => Some((DisplayMode::Relay, None)),
            DisplayModeSetting::Observe => Some((DisplayMode::Observe, None)),
            DisplayModeSetting::Auto => {
                let relay_missing = missing_for_relay(missing?);
                if relay_missing.is_empty() {
                    Some((DisplayMode::Relay, None))
                } else {
                    Some((DisplayMode::Observe, Some(fallback_notice(&relay_missing))))
                }
            }
        }
    }

    /// Switches the display mode if it changed; the fallback notice is given only on the switch, so only once.
    async fn apply_display_mode(&mut self, choice: Option<(DisplayMode, Option<String>)>) {
        let Some((mode, notice)) = choice else { return };
        let t = self.session.set_display_mode(mode, self.env.clock.now(), self.env.context());
        let switched = t.changed;
        let saved = self.commit(t).await;
        // Given only on the switch.
        if let Some(notice) = notice.filter(|_| switched) {
            self.say_once_saved(notice, saved);
        }
    }

    /// Asks Discord, beside the session, whether the accounts of `personas` (those a command brought into the
    /// roster) are members of the channel's server: a persona whose account is not (not invited yet, or a wrong
    /// `discordUserId`) never answers, and each of its turns would time out with nothing saying why. The look runs
    /// on a task of its own, so the first turn waits for none of its calls; its answer comes back as
    /// [`Input::Absent`]. A look that fails says nothing.
    fn look_for_absent_personas(&self, personas: &[PersonaId]) {
        let users: Vec<UserId> =
            personas.iter().filter_map(|p| self.env.personas.get(p)).map(|p| p.discord_user_id).collect();
        let (rest, channel, inbox) = (self.env.rest.clone(), self.channel, self.myself.clone());
        let start = self.looks.as_ref().map_or(0, |looks| looks.starts_run);
        // The server the start learned: the look needs no read of the channel, which may be gone by the time the
        // look runs (found by a flaky test: a channel deleted just after its start was read for the look, a 404).
        let guild = self.session.guild_id;
        tokio::spawn(async move {
            match rest.not_members(channel, guild, &users).await {
                Ok(users) if !users.is_empty() => {
                    drop(inbox.send(Input::Absent(Box::new(AbsentPersonas { start, users }))))
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(%channel, "could not look whether the personas are members here: {e}"),
            }
        });
    }

    /// Names the personas of the running session whose accounts are no members of the server (see
    /// [`Actor::look_for_absent_personas`]), with what to do about it.
    fn tell_absent_personas(&mut self, absent: AbsentPersonas) {
        let Some(looks) = self.looks.as_deref_mut().filter(|looks| looks.starts_run == absent.start) else { return };
        if !self.session.is_active() {
            return;
        }
        let personas = self.env.personas.clone();
        let named: Vec<_> = self
            .session
            .roster
            .iter()
            .filter_map(|p| personas.get(p))
            .filter(|p| absent.users.contains(&p.discord_user_id) && !looks.named_absent.contains(&p.discord_user_id))
            .collect();
        looks.named_absent.extend(named.iter().map(|p| p.discord_user_id));
        if !named.is_empty() {
            let ids: Vec<&str> = named.iter().map(|p| p.id.as_str()).collect();
            tracing::warn!(channel = %self.channel, "personas whose accounts are no members of this server: {}", ids.join(", "));
            // Behind the start's announcement, held with it while saves fail.
            let saved = self.save_retry.is_none();
            self.say_once_saved(absent_personas_notice(&named), saved);
        }
    }

    /// Says, once, that the bot lacks Read Message History here (see [`read_history_notice`]).
    fn tell_history_missing(&mut self, saved: bool) {
        if !std::mem::replace(&mut self.told_history_missing, true) {
            self.say_once_saved(read_history_notice(), saved);
        }
    }

    /// Gives `notice` now if what it follows was `saved`, else once saving works again, with what else was held back.
    fn say_once_saved(&mut self, notice: String, saved: bool) {
        match &mut self.save_retry {
            _ if saved => self.sender().notice(notice),
            Some(retry) => retry.notices.push(notice),
            None => {}
        }
    }

    fn sender(&mut self) -> &Sender {
        let (channel, env, inbox, announced) =
            (self.channel, &self.env, self.myself.clone(), self.session.last_announced);
        self.sender.get_or_insert_with(|| {
            Sender::spawn(Tools {
                channel,
                rest: env.rest.clone(),
                personas: env.personas.clone(),
                clock: env.clock,
                reports: Box::new(move |report| drop(inbox.send(Input::Sent(Box::new(report))))),
                tasks: env.tasks.clone(),
                announced,
                gone: Arc::default(),
                process_started: env.process_started,
                acting: {
                    let saver = env.saver.clone();
                    Acting::new(move || match (saver.holds(channel), saver.surely_held(channel)) {
                        (false, _) => Lease::Lost,
                        (true, false) => Lease::Unsure,
                        (true, true) => Lease::Sure,
                    })
                },
            })
        })
    }

    /// Another process acts for the channel now: what the sender still had is left to it (see [`Sender::abandon`]).
    fn abandon_sender(&mut self) {
        if let Some(sender) = self.sender.take() {
            sender.abandon();
        }
    }

    async fn flush_sender(&self) {
        if let Some(sender) = &self.sender {
            sender.flush().await;
        }
    }

    /// Whether the channel's server is on `shard` (`None`: any shard). A session that has not recorded its server
    /// (saved by an older build) takes every shard's catch-up, as before servers were recorded.
    fn is_on(&self, shard: Option<Shard>) -> bool {
        match (shard, self.session.guild_id) {
            (Some(shard), Some(guild)) => shard.carries(guild),
            _ => true,
        }
    }

    /// Whether the shard carrying the channel's server is connected. A session that has not recorded its server took
    /// every shard's loss for its own: it needs every shard connected.
    fn its_shard_is_up(&self) -> bool {
        match self.session.guild_id {
            Some(guild) => self.env.shards.carries_up(guild),
            None => self.env.shards.all_up(),
        }
    }

    /// Whether the session read at start waits for the announcement of its holder's floor, which the outbox replay
    /// carries out (one its report was not saved for, still in the outbox).
    fn replays_the_floor(&mut self) -> bool {
        self.session.forget_delivered_announcement();
        self.session.awaiting_floor_announcement()
    }

    /// Reads what the channel missed, unless its server's shard is not connected (a lease taken over while the shard
    /// starts, or is lost): then the deadline waits for that shard's catch-up, which comes once it is back. Nor
    /// while the replayed announcement of the holder's floor has not reported ([`Actor::floor_replayed`]): the read
    /// comes once it has.
    fn catch_up_once_connected(&mut self) {
        if self.floor_replayed {
            self.read_deferred |= self.its_shard_is_up();
            self.awaiting = Awaiting::Read;
            return;
        }
        if self.its_shard_is_up() {
            self.awaiting = Awaiting::Nothing; // The read covers whatever was owed.
            // One running still holds the deadlines and commands; this read follows it at once.
            self.read_owed |= self.catch_ups_running > 0;
            self.start_catch_up();
        } else {
            self.awaiting = Awaiting::Read;
        }
    }

    /// Reads the history after the last handled message; if a read is running, once it is done (two reads at once
    /// would page the same range twice). What the deadlines wait for stays as it is: a read asked for again
    /// (messages left to the history) while the connection is lost still waits for its return.
    fn start_catch_up(&mut self) {
        if !self.session.is_active() {
            return;
        }
        if self.catch_ups_running > 0 {
            self.read_again = true;
            return;
        }
        let Some(after) = catch_up::read_from(&self.session) else { return };
        let after = match self.left_from.take() {
            Some(left) => after.min(MessageId(left.0.saturating_sub(1))),
            None => after,
        };
        let editable = catch_up::may_have_been_edited(&self.session);
        self.catch_ups_running += 1;
        let env = self.env.clone();
        tokio::spawn(catch_up::read_missed(env, self.channel, after, editable, self.myself.clone()));
    }
}

/// The actor's whole life, as one future: it stays in memory for as long as its channel is managed, idle or not.
/// The actor is made before the future, and the future takes it alone: what a future takes stays in it for its whole
/// life, even once moved on, so taking the actor's parts one by one would keep a second copy of each.
fn task(
    channel: ChannelId,
    origin: Origin,
    env: Arc<Env>,
    (inbox, backlog): (Inbox, Arc<Backlog>),
    myself: InboxSender,
    retire: Retire,
) -> impl Future<Output = ()> + Send + 'static {
    let commands_seen = env.retired_commands.take(channel);
    let mut actor = Actor {
        channel,
        session: Session::new(channel),
        env,
        sender: None,
        inbox,
        backlog,
        myself,
        awaiting: Awaiting::Nothing,
        catch_ups_running: 0,
        commands_seen,
        handed: 0,
        unsaved_events: Vec::new(),
        save_retry: None,
        activity_save_at: None,
        lazy_handed: false,
        floor_replayed: false,
        read_deferred: false,
        taken_over: false,
        held: VecDeque::new(),
        read_again: false,
        read_owed: false,
        left_from: None,
        awaited: awaited::Awaited::default(),
        told_history_missing: false,
        told_reactions_refused: false,
        looks: None,
        handoff: crate::metrics::Handoff::default(),
        retire,
    };
    async move {
        // With a store shared by several processes, another one may be acting for this channel: then this one
        // does nothing here (the store's lease watch takes the channel over if that process dies).
        if !saving::claimed(&actor.env, actor.channel).await {
            return;
        }
        let _counted = crate::metrics::actor_alive();
        match origin {
            Origin::Saved(session) => {
                (actor.session, actor.awaiting) = (*session, Awaiting::Read);
                actor.floor_replayed = actor.replays_the_floor();
            }
            Origin::Load => {
                let Some(session) = Box::pin(actor.read_saved()).await else { return };
                actor.session = session;
                actor.floor_replayed = actor.replays_the_floor();
                if actor.session.is_active() {
                    // A running session no actor of this process ran (another process's, before its lease ran out;
                    // or a stale actor's, stopped): what was written meanwhile is read before any turn ends.
                    actor.catch_up_once_connected();
                } else if actor.session.guild_id.is_some() && !actor.its_shard_is_up() {
                    // Started while its shard is reconnecting (a command in a resume's replay): its deadline waits.
                    actor.awaiting = Awaiting::Connection;
                }
            }
        }
        actor.run().await;
    }
}

/// Live inputs that may end a turn: a message (written after the deadline, it would time the turn out), and every
/// command, since each first ends a turn that is overdue. `status` and `history` are not commands here (a snapshot
/// and a read of the log), so they are answered at once. A message's deletion waits with them: the message it
/// deletes may be among those held, and its relay is decided only once it is handled (found by a review).
fn waits_for_catch_up(input: &Input) -> bool {
    matches!(input, Input::Message(_) | Input::Command(_) | Input::Deleted(_))
}

/// When a held command was given: a live one's (or one on its way) snowflake, or a read-back message's that may carry
/// one. `None` for a held message, or a command without one.
fn given(held: &Input) -> Option<MessageId> {
    match held {
        Input::Command(command) => command.origin,
        Input::CommandComing(id) => Some(*id),
        Input::ReadBack(message) => Some(message.id),
        _ => None,
    }
}

/// Whether `a` was written (or, an edit, last edited) no later than `b`: by id when neither is an edit (ids order
/// messages written in the same millisecond), else by time.
fn written_no_later(a: &IncomingMessage, b: &IncomingMessage) -> bool {
    let when = |m: &IncomingMessage| if m.edited { m.written_at } else { m.id.created_at() };
    if a.edited || b.edited { when(a) <= when(b) } else { a.id <= b.id }
}

/// Whether `message` was written (or, an edit, last edited) after the command given as `command`.
fn written_after(message: &IncomingMessage, command: MessageId) -> bool {
    if message.edited { message.written_at > command.created_at() } else { message.id > command }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
