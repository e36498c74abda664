//! Commands in gateway order. poise parses and authorises a command asynchronously (a permission may need a REST
//! call), while the shard's collector hands the messages after it to the channel at once: a `!turn pause` could reach
//! the actor after the signal its holder sent just after it, and a paused session would act on that signal. So the
//! collector tells the actor a command is coming (its message's or interaction's id) in its place in the stream;
//! what comes after waits until poise hands the command over, or says it will not (a refusal, `status`, a message
//! that only looked like a command), or [`COMMAND_WAIT`] has passed.

use super::{Actor, Input};
use crate::core::ids::MessageId;
use std::time::Duration;
use tokio::time::Instant;

/// How long what follows a command waits for it at the most. A command reaches its actor in microseconds to a few
/// hundred milliseconds (a member read over REST); one slower than this (Discord failing, a REST backlog) runs when it
/// comes, after what followed it, rather than holding the channel's messages and deadline any longer.
pub const COMMAND_WAIT: Duration = Duration::from_secs(3);

/// The commands awaited, oldest first, with when each is given up on. Each has its place (an
/// [`Input::CommandComing`]) in the actor's held queue.
#[derive(Default)]
pub(super) struct Awaited(Vec<(MessageId, Instant)>);

impl Awaited {
    pub(super) fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// When the oldest awaited command is given up on.
    pub(super) fn give_up_at(&self) -> Option<Instant> {
        self.0.first().map(|(_, at)| *at)
    }

    /// Stops awaiting `id`; false if it was not awaited.
    fn stop(&mut self, id: MessageId) -> bool {
        let Some(position) = self.0.iter().position(|(awaited, _)| *awaited == id) else { return false };
        self.0.remove(position);
        true
    }
}

impl Actor {
    /// A command is on its way: what comes after it waits in the held queue behind its place.
    pub(super) fn await_command(&mut self, id: MessageId) {
        self.awaited.0.push((id, Instant::now() + COMMAND_WAIT));
        self.held.push_back(Input::CommandComing(id));
    }

    /// A command arrived: into its place if it was awaited (handed back otherwise, to be taken like any other).
    pub(super) fn place_awaited(&mut self, input: Input) -> Option<Input> {
        let Input::Command(command) = &input else { return Some(input) };
        let Some(id) = command.origin.filter(|id| self.awaited.stop(*id)) else { return Some(input) };
        let place = self.place_of(id).expect("an awaited command has its place");
        self.held[place] = input;
        None
    }

    /// poise will not hand the command over (or has already): its place, if still empty, is given up.
    pub(super) fn command_gone(&mut self, id: MessageId) {
        if self.awaited.stop(id) {
            self.held.remove(self.place_of(id).expect("an awaited command has its place"));
        }
    }

    /// Gives up on the commands awaited for [`COMMAND_WAIT`]; what followed them goes on.
    pub(super) fn give_up_overdue_commands(&mut self) {
        let now = Instant::now();
        while let Some(&(id, _)) = self.awaited.0.first().filter(|(_, at)| *at <= now) {
            tracing::warn!(
                channel = %self.channel,
                command = %id,
                "a command took more than {COMMAND_WAIT:?} to reach its channel: what followed it goes on, and it runs \
                 when it comes"
            );
            self.command_gone(id);
        }
    }

    /// Whether the next held input is a command still on its way.
    pub(super) fn next_held_is_awaited(&self) -> bool {
        matches!(self.held.front(), Some(Input::CommandComing(_)))
    }

    fn place_of(&self, id: MessageId) -> Option<usize> {
        self.held.iter().position(|held| matches!(held, Input::CommandComing(awaited) if *awaited == id))
    }
}
