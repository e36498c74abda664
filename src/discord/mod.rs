//! The Discord layer (serenity and poise): turns gateway events into engine inputs, carries out the engine's
//! decisions, and owns the timeout task. Everything about *what* should happen lives in `crate::core`.
//!
//! - [`bot`]: the state shared by every part of a running bot, and how it connects and shuts down.
//! - `channel`: one managed channel: its session, the ordered queue of its messages, saving before acting.
//! - `events`: the gateway event handler (messages, edits, ready).
//! - `effects`: carrying out the engine's effects (reposts, deletions, reactions, announcements).
//! - `webhooks`: the one webhook per channel that reposts go through.
//! - `access`: permissions: relay or observe, and who may run which command.
//! - `timeouts`: the task that ends turns at their deadline.
//! - `commands`: `!turn ...` and `/turn ...` (poise).

mod access;
pub mod bot;
mod channel;
mod commands;
mod effects;
mod events;
pub mod timeouts;
mod webhooks;

pub use bot::{BotOptions, RunningBot, Stats, start};

use crate::core::ids::{ChannelId, MessageId, UserId};
use serenity::all as discord;

fn to_channel(id: ChannelId) -> discord::ChannelId {
    discord::ChannelId::new(id.0)
}

fn to_message(id: MessageId) -> discord::MessageId {
    discord::MessageId::new(id.0)
}

fn to_user(id: UserId) -> discord::UserId {
    discord::UserId::new(id.0)
}

/// Exactly the permissions the bot uses: read and post in channels and threads, read history (to catch up after a
/// restart), react (observe mode), and relay: delete agents' messages and repost through a webhook.
pub fn permissions_used() -> discord::Permissions {
    discord::Permissions::VIEW_CHANNEL
        | discord::Permissions::SEND_MESSAGES
        | discord::Permissions::SEND_MESSAGES_IN_THREADS
        | discord::Permissions::READ_MESSAGE_HISTORY
        | discord::Permissions::ADD_REACTIONS
        | discord::Permissions::MANAGE_MESSAGES
        | discord::Permissions::MANAGE_WEBHOOKS
}
