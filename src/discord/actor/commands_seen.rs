//! The commands a channel ran lately, by id, kept for a while after its actor retired: the gateway may deliver a
//! command again around a reconnect, after the `stop` that retired the actor which ran it, and the next actor of the
//! channel must know it ran (spec 5.6: each message handled once).

use crate::core::ids::{ChannelId, MessageId};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How long a retired actor's commands are remembered: far longer than a reconnect takes to replay what it missed.
const KEPT_FOR: Duration = Duration::from_secs(15 * 60);

/// The retired actors' commands, by channel, with when each actor retired.
#[derive(Debug, Default)]
pub struct RetiredCommands(Mutex<HashMap<ChannelId, (Instant, Vec<MessageId>)>>);

impl RetiredCommands {
    /// Keeps a retiring actor's commands (and forgets those kept longer than [`KEPT_FOR`]).
    pub(super) fn keep(&self, channel: ChannelId, commands: Vec<MessageId>) {
        let now = Instant::now();
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|_, (retired, _)| now.duration_since(*retired) < KEPT_FOR);
        if !commands.is_empty() {
            kept.insert(channel, (now, commands));
        }
    }

    /// The commands the channel's last actor ran, if it retired lately: for the channel's new actor.
    pub(super) fn take(&self, channel: ChannelId) -> Vec<MessageId> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.remove(&channel).map(|(_, commands)| commands).unwrap_or_default()
    }
}
