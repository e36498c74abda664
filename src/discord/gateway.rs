//! serenity's event handler: routes each gateway event to its channel's actor, with no logic of its own. serenity
//! runs every handler call in its own task, so nothing here waits: ordering and judging are the actors' job.

use super::actor::Input;
use super::configured::ConfiguredStarts;
use super::identity::Identity;
use super::router::Router;
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::session::lost::Unreachable;
use serenity::all as discord;
use serenity::async_trait;
use std::sync::Arc;

pub struct Gateway {
    router: Arc<Router>,
    identity: Arc<Identity>,
    configured: Arc<ConfiguredStarts>,
}

impl Gateway {
    pub fn new(router: Arc<Router>, identity: Arc<Identity>, configured: Arc<ConfiguredStarts>) -> Self {
        Self { router, identity, configured }
    }
}

#[async_trait]
impl discord::EventHandler for Gateway {
    /// Every new gateway session (start-up, or a re-IDENTIFY after the old one was lost) missed what happened
    /// meanwhile: each channel reads it back before its deadline may end a turn.
    async fn ready(&self, _ctx: discord::Context, ready: discord::Ready) {
        self.identity.set_user(UserId(ready.user.id.get()));
        tracing::info!(user = %ready.user.name, guilds = ready.guilds.len(), "connected to the gateway");
        self.router.broadcast(|| Input::CatchUp);
    }

    /// A server's channels are in the cache now, so their display mode can be checked against the permissions; and
    /// it is on this process's shards, so the configuration's sessions in it start.
    async fn guild_create(&self, _ctx: discord::Context, guild: discord::Guild, _is_new: Option<bool>) {
        for channel in channels_of(&guild) {
            self.router.deliver(channel, Input::CheckDisplayMode);
        }
        self.configured.start_seen(&self.router, channels_of(&guild));
    }

    /// The bot was removed from a server (kicked or banned): its channels' sessions end. An outage (`unavailable`)
    /// ends nothing: the server comes back with a GUILD_CREATE.
    async fn guild_delete(
        &self,
        _ctx: discord::Context,
        incomplete: discord::UnavailableGuild,
        full: Option<discord::Guild>,
    ) {
        if incomplete.unavailable {
            return;
        }
        let Some(guild) = full else {
            tracing::warn!(
                guild = %incomplete.id,
                "removed from a server the cache did not hold; its sessions stop at their next refused announcement"
            );
            return;
        };
        for channel in channels_of(&guild) {
            self.router.deliver(channel, Input::Unreachable(Unreachable::LeftServer));
        }
    }

    async fn message(&self, _ctx: discord::Context, message: discord::Message) {
        let webhook = message.webhook_id.map(|w| w.get());
        let id = MessageId(message.id.get());
        let author = UserId(message.author.id.get());
        let has_files = carries_files(&message.attachments, &message.embeds);
        // The message is ours (poise has its own copy): its text is moved, not copied.
        if let Some(incoming) = self.identity.incoming(author, webhook, id, message.content, None, has_files) {
            self.router.deliver(ChannelId(message.channel_id.get()), Input::Message(Box::new(incoming)));
        }
    }

    async fn message_update(
        &self,
        _ctx: discord::Context,
        _old: Option<discord::Message>,
        _new: Option<discord::Message>,
        mut event: discord::MessageUpdateEvent,
    ) {
        // Only a change of content matters (embeds being resolved also arrive as updates, without content).
        let (Some(author), Some(content)) = (event.author.as_ref(), event.content.take()) else { return };
        let webhook = event.webhook_id.flatten().map(|w| w.get());
        let id = MessageId(event.id.get());
        // Discord's time of the edit; the time it reached us only if Discord did not say.
        let edited_at = event.edited_timestamp.map_or_else(chrono::Utc::now, |t| *t);
        let has_files = carries_files(
            event.attachments.as_deref().unwrap_or_default(),
            event.embeds.as_deref().unwrap_or_default(),
        );
        let author = UserId(author.id.get());
        if let Some(incoming) = self.identity.incoming(author, webhook, id, content, Some(edited_at), has_files) {
            self.router.deliver(ChannelId(event.channel_id.get()), Input::Message(Box::new(incoming)));
        }
    }
}

/// A server's channels and active threads (a session may run in either).
fn channels_of(guild: &discord::Guild) -> impl Iterator<Item = ChannelId> + '_ {
    guild.channels.keys().copied().chain(guild.threads.iter().map(|t| t.id)).map(|c| ChannelId(c.get()))
}

/// Whether a message carries what a repost must carry over: files, or embeds of its own ("rich"; link previews are
/// made again from the reposted text).
fn carries_files(attachments: &[discord::Attachment], embeds: &[discord::Embed]) -> bool {
    !attachments.is_empty() || embeds.iter().any(|e| super::rest::is_own_embed(e.kind.as_deref()))
}
