//! serenity's event handler: routes each gateway event to its channel's actor, with no logic of its own. serenity
//! runs every handler call in its own task, so nothing here waits. READY and messages are delivered in the shard's
//! order by [`InOrder`]'s collectors; a handler call delivers only what came before its runner's collector.

use super::actor::Input;
use super::commands::CommandGate;
use super::configured::ConfiguredStarts;
use super::identity::Identity;
use super::in_order::{self, CommandSettles, InOrder, Taken};
use super::router::Router;
use crate::core::ids::{ChannelId, GuildId, MessageId};
use crate::core::session::lost::Unreachable;
use serenity::all as discord;
use serenity::async_trait;
use std::sync::{Arc, OnceLock};

pub struct Gateway {
    router: Arc<Router>,
    identity: Arc<Identity>,
    configured: Arc<ConfiguredStarts>,
    in_order: Arc<InOrder>,
    /// poise, set once the client it needs is built (before it connects).
    commands: Arc<OnceLock<CommandGate>>,
}

impl Gateway {
    pub fn new(
        router: Arc<Router>,
        identity: Arc<Identity>,
        configured: Arc<ConfiguredStarts>,
        commands: Arc<OnceLock<CommandGate>>,
    ) -> Self {
        let in_order = InOrder::new(router.clone(), identity.clone());
        Self { router, identity, configured, in_order, commands }
    }
}

#[async_trait]
impl discord::EventHandler for Gateway {
    /// A new gateway session: said to every channel first, then this shard's runner gets its collector, so the
    /// messages after it reach the channels in order (see [`InOrder`]), after the catch-up they ask for.
    /// poise then sets itself up on it (the first time: the slash commands are registered).
    async fn ready(&self, ctx: discord::Context, ready: discord::Ready) {
        // A configured channel in a server the bot was removed from while it was not connected starts again when it
        // is added back, as after a GUILD_DELETE (the channels' sessions end as they are told the same READY).
        let listed = in_order::servers_of(&ready);
        self.configured.rearm_unlisted(listed.shard, &listed.servers);
        // Unless this runner's collector is in place already, and delivered it in order.
        if !self.in_order.was_taken(&Taken::Ready { session: ready.session_id.clone() }) {
            in_order::ready(&self.router, &self.identity, &ready);
            self.in_order.collect(&ctx.shard, ctx.shard_id.0);
        }
        if let Some(commands) = self.commands.get() {
            commands.ready(ctx, ready).await;
        }
    }

    async fn interaction_create(&self, ctx: discord::Context, interaction: discord::Interaction) {
        if let Some(commands) = self.commands.get() {
            let settles = interaction.as_command().map(|c| (c.channel_id.get(), c.id.get()));
            let _settles = settles.map(|(channel, id)| CommandSettles::new(self.router.clone(), channel, id));
            commands.interaction(ctx, interaction).await;
        }
    }

    /// A server's channels are in the cache now, so their display mode can be checked against the permissions; and
    /// it is on this process's shards, so the configuration's sessions in it start.
    async fn guild_create(&self, _ctx: discord::Context, guild: discord::Guild, _is_new: Option<bool>) {
        for channel in channels_of(&guild) {
            self.router.deliver(channel, Input::CheckDisplayMode);
        }
        self.configured.start_seen(&self.router, GuildId(guild.id.get()), channels_of(&guild));
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
        match full {
            Some(guild) => {
                for channel in channels_of(&guild) {
                    self.router.deliver(channel, Input::Unreachable(Unreachable::LeftServer));
                }
                // The cache lists active threads only: a session in a thread archived since knows its server
                // (found by a review: it went on).
                let id = GuildId(guild.id.get());
                self.router.broadcast(|| Input::LeftServer(id));
                self.configured.rearm(channels_of(&guild));
                self.configured.rearm_server(id);
            }
            // Not in the cache (removed while the server was out, say): each channel knows its own server.
            None => {
                let guild = GuildId(incomplete.id.get());
                self.router.broadcast(|| Input::LeftServer(guild));
                self.configured.rearm_server(guild);
            }
        }
    }

    /// A channel was deleted: its session ends (a paused one would otherwise wait for an announcement that is never
    /// posted to learn it), and so do those of its threads the cache knows (they go with it, without events of
    /// their own; one it does not know ends at its next read or announcement, which Discord answers 404). A thread
    /// deleted alone comes as THREAD_DELETE.
    async fn channel_delete(
        &self,
        ctx: discord::Context,
        channel: discord::GuildChannel,
        _messages: Option<Vec<discord::Message>>,
    ) {
        let threads: Vec<ChannelId> = ctx
            .cache
            .guild(channel.guild_id)
            .map(|guild| {
                let of_it = guild.threads.iter().filter(|thread| thread.parent_id == Some(channel.id));
                of_it.map(|thread| ChannelId(thread.id.get())).collect()
            })
            .unwrap_or_default();
        for gone in threads.into_iter().chain([ChannelId(channel.id.get())]) {
            self.router.deliver(gone, Input::Unreachable(Unreachable::ChannelDeleted));
        }
    }

    async fn thread_delete(
        &self,
        _ctx: discord::Context,
        thread: discord::PartialGuildChannel,
        _full: Option<discord::GuildChannel>,
    ) {
        self.router.deliver(ChannelId(thread.id.get()), Input::Unreachable(Unreachable::ChannelDeleted));
    }

    /// A relay of a deleted message not begun yet posts nothing (the actor knows whether one waits).
    async fn message_delete(
        &self,
        _ctx: discord::Context,
        channel: discord::ChannelId,
        message: discord::MessageId,
        _guild: Option<discord::GuildId>,
    ) {
        self.router.deliver(ChannelId(channel.get()), Input::Deleted(MessageId(message.get())));
    }

    async fn message_delete_bulk(
        &self,
        _ctx: discord::Context,
        channel: discord::ChannelId,
        messages: Vec<discord::MessageId>,
        _guild: Option<discord::GuildId>,
    ) {
        for message in messages {
            self.router.deliver(ChannelId(channel.get()), Input::Deleted(MessageId(message.get())));
        }
    }

    /// A message opening with the prefix goes to poise too, after the channel's actor has it.
    async fn message(&self, ctx: discord::Context, mut message: discord::Message) {
        let command = self.commands.get().filter(|_| CommandGate::wants(&message)).map(|c| (c, message.clone()));
        if !self.in_order.was_taken(&Taken::Created(message.id.get())) {
            let text = std::mem::take(&mut message.content);
            in_order::deliver(&self.router, in_order::created(&self.identity, &message, text));
        }
        if let Some((commands, message)) = command {
            let _settles = CommandSettles::new(self.router.clone(), message.channel_id.get(), message.id.get());
            commands.message(ctx, message).await;
        }
    }

    async fn message_update(
        &self,
        _ctx: discord::Context,
        _old: Option<discord::Message>,
        _new: Option<discord::Message>,
        mut event: discord::MessageUpdateEvent,
    ) {
        if !self.in_order.was_taken(&in_order::edit_of(&event)) {
            let text = event.content.take();
            in_order::deliver(&self.router, in_order::edited(&self.identity, &event, text));
        }
    }
}

/// A server's channels and active threads (a session may run in either).
fn channels_of(guild: &discord::Guild) -> impl Iterator<Item = ChannelId> + '_ {
    guild.channels.keys().copied().chain(guild.threads.iter().map(|t| t.id)).map(|c| ChannelId(c.get()))
}
