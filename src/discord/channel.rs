//! One managed channel: its session behind a lock, the queue that hands its messages to the engine one at a time
//! in message-id order, and the rule that a transition is saved before anything is said or done about it.

use super::bot::Bot;
use super::{access, effects, events, to_channel, to_message};
use crate::core::config::DisplayModeSetting;
use crate::core::ids::{ChannelId, MessageId};
use crate::core::session::history::EventKind;
use crate::core::session::{Command, DisplayMode, IncomingMessage, Refusal, Session, Transition};
use chrono::{DateTime, Utc};
use serenity::all as discord;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

/// How long the queue waits after a message arrives for earlier ones still on their way. serenity hands every
/// event to its own task, so two messages sent a moment apart can reach the handler in either order.
const SETTLE: Duration = Duration::from_millis(20);
/// Prefix commands remembered, so one delivered twice around a reconnect runs once.
const COMMANDS_REMEMBERED: usize = 64;

pub struct ChannelSlot {
    pub id: ChannelId,
    pub session: tokio::sync::Mutex<Session>,
    /// The session's next deadline, readable without waiting for the session lock.
    deadline: Mutex<Option<DateTime<Utc>>>,
    queue: mpsc::UnboundedSender<IncomingMessage>,
    /// Messages queued and not yet handled.
    pending: AtomicUsize,
    idle: Notify,
    commands_seen: Mutex<VecDeque<MessageId>>,
}

impl ChannelSlot {
    /// Makes the slot and starts the task that handles its messages in order.
    pub(super) fn spawn(bot: Weak<Bot>, session: Session) -> Arc<Self> {
        let (queue, receiver) = mpsc::unbounded_channel();
        let slot = Arc::new(Self {
            id: session.channel_id,
            deadline: Mutex::new(session.next_deadline()),
            session: tokio::sync::Mutex::new(session),
            queue,
            pending: AtomicUsize::new(0),
            idle: Notify::new(),
            commands_seen: Mutex::new(VecDeque::new()),
        });
        tokio::spawn(work(bot, Arc::downgrade(&slot), receiver));
        slot
    }

    pub(super) fn deadline(&self) -> Option<DateTime<Utc>> {
        *self.deadline.lock().expect("deadline lock")
    }

    /// Queues a message; called from the event handler before it awaits anything.
    pub(super) fn enqueue(&self, message: IncomingMessage) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if self.queue.send(message).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// False when this prefix command message was run already.
    pub(super) fn claim_command(&self, id: MessageId) -> bool {
        let mut seen = self.commands_seen.lock().expect("commands lock");
        if seen.contains(&id) {
            return false;
        }
        seen.push_back(id);
        if seen.len() > COMMANDS_REMEMBERED {
            seen.pop_front();
        }
        true
    }

    /// Saves the transition, then carries out its effects: nothing is announced that is not on disk.
    pub(super) async fn commit(&self, bot: &Bot, session: &Session, t: Transition) {
        if t.changed {
            if let Err(e) = bot.store.save(session, &t.events) {
                tracing::error!(channel = %self.id, "could not save the session, so its announcements are held back: {e}");
                return;
            }
        }
        let deadline = session.next_deadline();
        let moved = std::mem::replace(&mut *self.deadline.lock().expect("deadline lock"), deadline) != deadline;
        if moved {
            // Most messages leave the deadline as it was; only a change needs the timeout task to look again.
            bot.deadlines_changed.notify_one();
        }
        effects::carry_out(bot, self.id, &t.effects).await;
    }

    /// Runs a command for this channel. Starting a session first picks relay or observe from the bot's permissions
    /// (when the configuration says `auto`) and says once in the channel if it had to fall back.
    pub(super) async fn run_command(&self, bot: &Bot, command: &Command) -> Result<(), Refusal> {
        let starting = matches!(command, Command::Start { .. }) && !self.session.lock().await.is_active();
        let fallback = if starting { self.choose_display_mode(bot).await } else { None };
        let mut session = self.session.lock().await;
        if !session.is_active() {
            self.apply_display_mode(bot, &mut session, fallback).await;
        }
        let t = session.handle_command(command, None, Utc::now(), bot.context())?;
        self.commit(bot, &session, t).await;
        Ok(())
    }

    /// The display mode to use here, and the notice to give if relay is not possible.
    async fn choose_display_mode(&self, bot: &Bot) -> Option<(DisplayMode, Option<String>)> {
        match bot.config.display_mode {
            DisplayModeSetting::Relay => Some((DisplayMode::Relay, None)),
            DisplayModeSetting::Observe => Some((DisplayMode::Observe, None)),
            DisplayModeSetting::Auto => match access::relay_permissions_missing(bot, self.id).await {
                Ok(missing) if missing.is_empty() => Some((DisplayMode::Relay, None)),
                Ok(missing) => Some((DisplayMode::Observe, Some(access::fallback_notice(&missing)))),
                Err(e) => {
                    tracing::warn!(channel = %self.id, "could not read my permissions, keeping the display mode: {e}");
                    None
                }
            },
        }
    }

    /// Switches the display mode if it changed; the fallback notice is given only on the switch, so only once.
    async fn apply_display_mode(
        &self,
        bot: &Bot,
        session: &mut Session,
        choice: Option<(DisplayMode, Option<String>)>,
    ) {
        let Some((mode, notice)) = choice else { return };
        let t = session.set_display_mode(mode, Utc::now(), bot.context());
        let switched = t.changed;
        self.commit(bot, session, t).await;
        if let Some(notice) = notice.filter(|_| switched) {
            effects::notice(bot, self.id, &notice).await;
        }
    }

    /// At start-up: checks the display mode again, drops personas that no longer exist, and ends turns that fell
    /// due while the bot was down (with their true duration).
    pub(super) async fn bring_up_to_date(&self, bot: &Bot) {
        if !self.session.lock().await.is_active() {
            return;
        }
        let choice = self.choose_display_mode(bot).await;
        let mut session = self.session.lock().await;
        self.apply_display_mode(bot, &mut session, choice).await;
        let t = session.reconcile(Utc::now(), bot.context());
        self.commit(bot, &session, t).await;
        let t = session.tick(Utc::now(), bot.context());
        self.commit(bot, &session, t).await;
    }

    /// Reads the messages posted since the last one handled (a restart or a new gateway session does not replay
    /// them) and queues them.
    pub(super) async fn catch_up(&self, bot: &Bot) {
        let after = {
            let session = self.session.lock().await;
            if !session.is_active() {
                return;
            }
            // With no message handled yet, everything since the session started is new.
            let started =
                session.history.iter().rev().find(|e| matches!(e.kind, EventKind::SessionStarted { .. })).map(|e| e.at);
            session.last_message_id.or(started.or(session.turn_started_at).map(MessageId::first_at))
        };
        let Some(after) = after else { return };
        let request = discord::GetMessages::new().after(to_message(after)).limit(100);
        match to_channel(self.id).messages(bot.http(), request).await {
            Ok(mut missed) => {
                missed.sort_by_key(|m| m.id);
                if !missed.is_empty() {
                    tracing::info!(channel = %self.id, count = missed.len(), "reading messages missed while away");
                }
                for message in &missed {
                    if let Some(incoming) = events::incoming(
                        bot,
                        message.author.id,
                        message.webhook_id,
                        message.id,
                        &message.content,
                        false,
                    ) {
                        self.enqueue(incoming);
                    }
                }
            }
            Err(e) => tracing::warn!(channel = %self.id, "could not read the messages missed while away: {e}"),
        }
    }

    /// Waits until every queued message is handled and no transition is in progress.
    pub(super) async fn drain(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.pending.load(Ordering::SeqCst) == 0 {
                break;
            }
            idle.await;
        }
        drop(self.session.lock().await);
    }

    async fn handle(&self, bot: &Bot, message: IncomingMessage) {
        bot.record_message();
        let mut session = self.session.lock().await;
        let t = session.handle_message(&message, Utc::now(), bot.context());
        self.commit(bot, &session, t).await;
    }
}

/// The channel's message loop: gathers what arrives within [`SETTLE`], then handles it in message-id order (an
/// edit after the message it edits).
async fn work(bot: Weak<Bot>, slot: Weak<ChannelSlot>, mut receiver: mpsc::UnboundedReceiver<IncomingMessage>) {
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        let settled = tokio::time::sleep(SETTLE);
        tokio::pin!(settled);
        loop {
            tokio::select! {
                () = &mut settled => break,
                next = receiver.recv() => match next {
                    Some(message) => batch.push(message),
                    None => break,
                },
            }
        }
        batch.sort_by_key(|m| m.id);
        let (Some(bot), Some(slot)) = (bot.upgrade(), slot.upgrade()) else { return };
        for message in batch {
            slot.handle(&bot, message).await;
            slot.pending.fetch_sub(1, Ordering::SeqCst);
        }
        slot.idle.notify_waiters();
    }
}
