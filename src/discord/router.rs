//! The router: which actor owns which channel. It spawns an actor when a command comes for a channel that has none,
//! retires the actor of a stopped session (its state is on disk), and never loses an input that races a retirement.
//! A channel's inbox holds at most [`INBOX_MESSAGES_MAX`] gateway messages: past that they are left in the
//! channel's history, which its actor reads again (a catch-up), so a flood in one channel whose actor is slow (a
//! stalled disk, a long REST call) cannot grow the process's memory without bound.
//!
//! [`INBOX_MESSAGES_MAX`]: super::actor::INBOX_MESSAGES_MAX

use super::actor::inbox::{Inbox, InboxSender, inbox};
use super::actor::{Actor, Backlog, Env, Input, Origin, Retire};
use crate::core::ids::ChannelId;
use crate::core::session::Session;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// How long a shutdown waits, in all, for the channels to finish what is in hand. A REST call may be retried for
/// minutes (a 5xx, a rate limit); what is not done by then stays in its channel's saved outbox and is carried out at
/// the next start.
pub const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a shutdown waits for the actors and senders it stopped to be gone. A stopped task is dropped when its
/// current step on a worker ends, so only one stuck in blocking code could reach this; the process then lets go of its
/// channels all the same (said in the log) rather than never stop.
const STOPPED_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
struct Handle {
    inbox: InboxSender,
    /// How many gateway messages wait in the inbox, shared with the actor.
    backlog: Arc<Backlog>,
    /// Tells this actor apart from a later one of the same channel.
    generation: u64,
    /// Its task: stopped if it is still at work when a shutdown's wait ends.
    task: AbortHandle,
}

pub struct Router {
    env: Arc<Env>,
    actors: Mutex<HashMap<ChannelId, Handle>>,
    generations: AtomicU64,
    /// Set when shutting down: no new inputs are taken.
    closing: AtomicBool,
    myself: Weak<Router>,
}

impl Router {
    pub fn new(env: Arc<Env>) -> Arc<Self> {
        Arc::new_cyclic(|myself| Self {
            env,
            actors: Mutex::default(),
            generations: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            myself: myself.clone(),
        })
    }

    pub fn env(&self) -> &Arc<Env> {
        &self.env
    }

    /// Starts the actors of the sessions saved as running or paused, and of stopped ones with effects left undone
    /// (their last words, saved just before a crash): those are carried out now, then the actor retires.
    pub fn resume(&self, sessions: Vec<Session>) {
        let mut actors = self.actors.lock().expect("actors lock");
        for session in sessions.into_iter().filter(|s| s.needs_resuming()) {
            let channel = session.channel_id;
            self.spawn_locked(&mut actors, channel, Origin::Saved(Box::new(session)), Vec::new());
        }
    }

    /// Gives an input to the channel's actor if the channel has one (a session may be running there). A gateway
    /// message finding a full inbox is left in the channel's history, and the actor is told once to read it again
    /// ([`Input::ReadAgain`]).
    pub fn deliver(&self, channel: ChannelId, input: Input) {
        self.send(channel, input, false);
    }

    /// Gives an input to the channel's actor, starting one if needed (commands, status).
    pub fn deliver_or_start(&self, channel: ChannelId, input: Input) {
        self.send(channel, input, true);
    }

    /// Starts a new actor of `channel`, which claims the channel, reads its session afresh and then the messages
    /// posted meanwhile: one this process no longer holds (its lease lost at a renewal, then left by whoever took
    /// it). An actor still running for it is stale: it remembers the session as it was before the lease was lost,
    /// and would never claim it again. It is told to stop instead (unless it holds the lease: its claim crossed the
    /// round that found the channel left), and no new actor starts while it runs (the store knows one lease per
    /// channel: a new actor's claim would let the stale one's saves through); the next round, the channel still
    /// left by everyone, finds it gone and starts the new one. True when a new actor was started.
    pub fn take_over(&self, channel: ChannelId) -> bool {
        if self.closing.load(Ordering::SeqCst) {
            return false;
        }
        let mut actors = self.actors.lock().expect("actors lock");
        if let Some(stale) = actors.get(&channel) {
            if stale.inbox.send(Input::TakenOver).is_ok() {
                return false;
            }
            actors.remove(&channel);
        }
        self.spawn_locked(&mut actors, channel, Origin::Load, Vec::new());
        true
    }

    /// This process no longer holds the channel's lease (a renewal found it taken): its actor stops, leaving what it
    /// had not done to whoever holds the channel now. While shutting down, when the actor waits on its sender and
    /// reads no input, it is stopped at once (which stops its sender).
    pub fn lost(&self, channel: ChannelId) {
        if !self.closing.load(Ordering::SeqCst) {
            self.deliver(channel, Input::TakenOver);
            return;
        }
        let actors = self.actors.lock().expect("actors lock");
        if let Some(handle) = actors.get(&channel).filter(|_| !self.env.saver.holds(channel)) {
            tracing::warn!(%channel, "this channel's lease was lost while shutting down: its actor stops here");
            handle.task.abort();
        }
    }

    /// Gives the same input to every actor.
    pub fn broadcast(&self, input: impl Fn() -> Input) {
        for handle in self.handles() {
            let _ = handle.inbox.send(input());
        }
    }

    /// The channels that have an actor now.
    pub fn channels(&self) -> Vec<ChannelId> {
        self.actors.lock().expect("actors lock").keys().copied().collect()
    }

    /// Asks the channel's actor (started if needed) and waits for its answer.
    pub async fn ask<T>(&self, channel: ChannelId, question: impl FnOnce(oneshot::Sender<T>) -> Input) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.deliver_or_start(channel, question(reply));
        answer.await.ok()
    }

    /// Stops taking inputs, then lets every actor finish what is in hand, for at most [`SHUTDOWN_WAIT`] in all. The
    /// actors and senders still at work then are stopped, and gone when this returns (unless one is stuck past
    /// [`STOPPED_GONE_WAIT`]): the process lets go of its channels next, and whoever runs one then carries out its
    /// saved outbox, so a call made from here after that would come twice or out of order.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let mut waiting = Vec::new();
        for handle in self.handles() {
            let (done, wait) = oneshot::channel();
            if handle.inbox.send(Input::Shutdown(done)).is_ok() {
                waiting.push(wait);
            }
        }
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        let mut unfinished = 0;
        for wait in waiting {
            if tokio::time::timeout_at(deadline, wait).await.is_err() {
                unfinished += 1;
            }
        }
        if unfinished > 0 {
            tracing::warn!(
                "{unfinished} channel(s) still sending after {SHUTDOWN_WAIT:?}; what they had not done is in their \
                 saved outbox and is carried out at the next start"
            );
        }
        // An actor dropped takes its sender with it. One stopped in the middle of a step (on another worker) may still
        // hand effects to a new sender: the senders are waited for once every actor is gone.
        let mut actors: Vec<Handle> =
            std::mem::take(&mut *self.actors.lock().expect("actors lock")).into_values().collect();
        for handle in &actors {
            handle.task.abort();
        }
        let gone = async {
            // A stopped task is dropped at its next turn on a worker: a few yields, then short waits (a task stuck in
            // blocking code must not have this loop spin a worker).
            for round in 0u32.. {
                actors.retain(|handle| !handle.task.is_finished());
                if actors.is_empty() {
                    break;
                }
                if round < 64 {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
            self.env.tasks.close();
            self.env.tasks.wait().await;
        };
        if tokio::time::timeout(STOPPED_GONE_WAIT, gone).await.is_err() {
            tracing::warn!(
                "some channel tasks still running after being stopped; letting go of the channels all the same"
            );
        }
    }

    fn handles(&self) -> Vec<Handle> {
        self.actors.lock().expect("actors lock").values().cloned().collect()
    }

    fn send(&self, channel: ChannelId, mut input: Input, start: bool) {
        if self.closing.load(Ordering::SeqCst) {
            return;
        }
        loop {
            let handle = {
                let mut actors = self.actors.lock().expect("actors lock");
                match actors.get(&channel) {
                    Some(handle) => handle.clone(),
                    None if start => self.spawn_locked(&mut actors, channel, Origin::Load, Vec::new()),
                    None => return,
                }
            };
            let message = matches!(input, Input::Message(_));
            if message && !handle.backlog.admit() {
                if handle.backlog.leave_in_history() {
                    let _ = handle.inbox.send(Input::ReadAgain);
                }
                return;
            }
            match handle.inbox.send(input) {
                Ok(()) => return,
                // The actor retired after we took its handle: the next one (or none) takes the input.
                Err(back) => {
                    if message {
                        handle.backlog.taken();
                    }
                    input = back;
                    let mut actors = self.actors.lock().expect("actors lock");
                    if actors.get(&channel).is_some_and(|h| h.generation == handle.generation) {
                        actors.remove(&channel);
                    }
                }
            }
        }
    }

    fn spawn_locked(
        &self,
        actors: &mut HashMap<ChannelId, Handle>,
        channel: ChannelId,
        origin: Origin,
        queued: Vec<Input>,
    ) -> Handle {
        let (inbox, receiver) = inbox();
        let backlog = Arc::new(Backlog::default());
        for input in queued {
            if matches!(input, Input::Message(_)) {
                backlog.admit_anyway();
            }
            let _ = inbox.send(input);
        }
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let router = self.myself.clone();
        let retire: Retire = Box::new(move |receiver| match router.upgrade() {
            Some(router) => router.retire(channel, generation, receiver),
            None => true,
        });
        let task = Actor::spawn(channel, origin, self.env.clone(), (receiver, backlog.clone()), inbox.clone(), retire);
        let handle = Handle { inbox, backlog, generation, task };
        actors.insert(channel, handle.clone());
        handle
    }

    /// Removes a stopped channel's actor. Inputs that reached its inbox meanwhile go, in order, to a new actor, which
    /// reads the saved (stopped) session from disk.
    fn retire(&self, channel: ChannelId, generation: u64, receiver: &mut Inbox) -> bool {
        let mut actors = self.actors.lock().expect("actors lock");
        if actors.get(&channel).is_none_or(|h| h.generation != generation) {
            return true;
        }
        if !receiver.is_empty() {
            return false; // Something came in: the session may start again here.
        }
        receiver.close();
        let mut leftovers = Vec::new();
        while let Some(input) = receiver.try_recv() {
            leftovers.push(input);
        }
        actors.remove(&channel);
        // Under the lock: a new actor for the channel (spawned under it too) claims only after this.
        self.env.saver.let_go(channel);
        if !leftovers.is_empty() {
            self.spawn_locked(&mut actors, channel, Origin::Load, leftovers);
        }
        true
    }
}
