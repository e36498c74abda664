//! Gateway order: a shard's messages reach the channels' actors in the order the shard received them. serenity runs
//! every event handler call in a task of its own, and a busy runtime may run those tasks in any order (tokio's LIFO
//! slot runs the newest first; two workers run two at once), so two messages of a channel sent in one burst could be
//! judged newest first, and the older one then taken as overtaken. A collector callback, which serenity calls on the
//! shard's own task for each event before it spawns the handlers, delivers them instead, and the handler calls skip
//! what it took. A runner's collector is put in place when its READY is handled (serenity offers no earlier hook):
//! what the shard dispatched before that still goes through the handlers, as before. A command (a `!turn` message,
//! a `/turn` interaction) is parsed and authorised by poise in its handler task; the collector tells the channel it
//! is coming, so that what follows it waits for it (`actor/awaited.rs`), and [`CommandSettles`] says when poise is
//! done with it. A resumed connection keeps its runner, so RESUMED, which Discord sends after the replay, reaches the
//! actors after every replayed message: it lets their held deadlines run again.

use super::actor::{Input, ShardServers};
use super::commands::{COMMAND_NAME, CommandGate, may_run_command};
use super::identity::Identity;
use super::router::Router;
use crate::core::ids::{ChannelId, GuildId, MessageId, UserId};
use crate::core::session::IncomingMessage;
use crate::core::shards::Shard;
use serenity::all as discord;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// An event a collector delivered, as its handler call knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Taken {
    Ready {
        session: String,
    },
    Created(u64),
    /// An edit: the message, Discord's time of the edit and the text's length (one message is edited many times).
    Edited {
        message: u64,
        at_ms: Option<i64>,
        len: usize,
    },
}

pub struct InOrder {
    router: Arc<Router>,
    identity: Arc<Identity>,
    /// Per shard, the generation of the collector that delivers: the newest one put on the shard's runner.
    current: Mutex<HashMap<u32, Arc<AtomicU64>>>,
    generations: AtomicU64,
    taken: TakenEvents,
}

/// Events a collector delivered, counted (Discord may send one twice), until their handler call skips them: serenity
/// makes exactly one handler call for each event its collectors saw, so nothing stays here for long.
#[derive(Default)]
struct TakenEvents(Mutex<HashMap<Taken, u32>>);

impl TakenEvents {
    fn mark(&self, event: Taken) {
        *self.0.lock().expect("taken lock").entry(event).or_default() += 1;
    }

    /// Whether the event was marked; one mark is used up.
    fn take(&self, event: &Taken) -> bool {
        let mut taken = self.0.lock().expect("taken lock");
        let Some(count) = taken.get_mut(event) else { return false };
        *count -= 1;
        if *count == 0 {
            taken.remove(event);
        }
        true
    }
}

impl InOrder {
    pub fn new(router: Arc<Router>, identity: Arc<Identity>) -> Arc<Self> {
        Arc::new(Self {
            router,
            identity,
            current: Mutex::default(),
            generations: AtomicU64::new(1),
            taken: TakenEvents::default(),
        })
    }

    /// Puts a collector on the runner `shard` belongs to; from the next event on, it delivers in order. The one put
    /// there before (if any) steps down: the new one is added first and made current second, so every event is
    /// delivered by exactly one of them or, if the messenger's runner has ended, by the handlers.
    pub fn collect(self: &Arc<Self>, shard: &discord::ShardMessenger, shard_id: u32) {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let current = self.current.lock().expect("collectors lock").entry(shard_id).or_default().clone();
        let me = Arc::downgrade(self);
        let slot = current.clone();
        let noted = AtomicBool::new(false);
        shard.add_collector(discord::CollectorCallback(Box::new(move |event| {
            let Some(me) = me.upgrade() else { return false };
            match generation.cmp(&slot.load(Ordering::Acquire)) {
                std::cmp::Ordering::Less => false,   // A newer collector delivers now.
                std::cmp::Ordering::Greater => true, // Not current yet.
                std::cmp::Ordering::Equal => {
                    // Only a current collector, which will see RESUMED, lets a resume hold the shard's deadlines.
                    if !noted.swap(true, Ordering::Relaxed) {
                        super::reconnecting::note_runner(&me, shard_id);
                    }
                    me.on_event(event, shard_id);
                    true
                }
            }
        })));
        current.store(generation, Ordering::Release);
    }

    /// Whether a collector delivered this event already; if so its handler call does nothing.
    pub fn was_taken(&self, event: &Taken) -> bool {
        self.taken.take(event)
    }

    /// serenity began to reconnect the shard (see `reconnecting.rs`), on the shard's task: its channels' deadlines
    /// wait for RESUMED, or a new session's READY, instead of ending turns while their signals cannot be seen.
    pub fn reconnecting(&self, shard_id: u32) {
        let shards = &self.router.env().shards;
        let shard = Some(shards.shard(shard_id));
        if shards.reconnecting(shard_id, || self.router.broadcast(|| Input::Disconnected(shard))) {
            tracing::info!(
                shard = shard_id,
                "the gateway connection was lost and is being re-established; deadlines wait"
            );
        }
    }

    fn on_event(&self, event: &discord::Event, shard_id: u32) {
        let taken = match event {
            discord::Event::Ready(e) => {
                ready(&self.router, &self.identity, &e.ready);
                Taken::Ready { session: e.ready.session_id.clone() }
            }
            discord::Event::MessageCreate(e) => {
                let message = &e.message;
                deliver(&self.router, created(&self.identity, message, message.content.clone()));
                let bot = || self.identity.user().map(|user| discord::UserId::new(user.0));
                if CommandGate::wants(message) && bot().is_some_and(|bot| may_run_command(message, bot)) {
                    let (channel, coming) =
                        (ChannelId(message.channel_id.get()), Input::CommandComing(MessageId(message.id.get())));
                    // A `!turn` command starts the channel's actor, as it will when handed over: else a channel
                    // without one (no session yet) would take two commands typed one after the other in whatever
                    // order poise finished checking them (found by a review). Other `!` chat starts none.
                    if crate::discord::commands::typed(&message.content).is_some() {
                        self.router.deliver_or_start(channel, coming);
                    } else {
                        self.router.deliver(channel, coming);
                    }
                }
                Taken::Created(message.id.get())
            }
            discord::Event::MessageUpdate(e) => {
                deliver(&self.router, edited(&self.identity, e, e.content.clone()));
                edit_of(e)
            }
            discord::Event::Resumed(_) => {
                resumed(&self.router, shard_id);
                return;
            }
            discord::Event::InteractionCreate(e) => {
                if let discord::Interaction::Command(command) = &e.interaction {
                    if command.data.name == COMMAND_NAME {
                        let (channel, id) = (ChannelId(command.channel_id.get()), MessageId(command.id.get()));
                        self.router.deliver_or_start(channel, Input::CommandComing(id));
                    }
                }
                return;
            }
            _ => return,
        };
        self.taken.mark(taken);
    }
}

/// Tells the command's channel, when dropped, that poise is done with the command however it ended (handed over,
/// refused, not a command at all, or a panic), so that nothing waits behind it any longer.
pub struct CommandSettles {
    router: Arc<Router>,
    channel: ChannelId,
    command: MessageId,
}

impl CommandSettles {
    /// For a command given by a message or an interaction, by its id.
    pub fn new(router: Arc<Router>, channel: u64, command: u64) -> Self {
        Self { router, channel: ChannelId(channel), command: MessageId(command) }
    }
}

impl Drop for CommandSettles {
    fn drop(&mut self) {
        self.router.deliver(self.channel, Input::CommandGone(self.command));
    }
}

/// A new gateway session (start-up, or a re-IDENTIFY after the old one was lost) missed what happened meanwhile:
/// each channel of its shard's servers reads it back before its deadline may end a turn. The channels of the
/// process's other shards wait for their own shard's READY: serenity connects one shard every 5 s.
pub fn ready(router: &Router, identity: &Identity, ready: &discord::Ready) {
    let me = UserId(ready.user.id.get());
    if identity.user().is_none()
        && let Some(persona) = router.env().personas.by_user(me)
    {
        // Its messages are the bot's own, never judged: its turns could only time out (found by a review).
        tracing::error!(
            "persona {} ({}) has this bot's own account ({}) as its discordUserId: I ignore my own messages, so its \
             turns can only time out; give it the user id of the agent's own bot account",
            persona.id,
            persona.source,
            me.0
        );
    }
    identity.set_user(me);
    let listed = Arc::new(servers_of(ready));
    let shard = listed.shard;
    let shard_id = shard.map_or(0, |s| s.id);
    tracing::info!(user = %ready.user.name, guilds = ready.guilds.len(), shard = shard_id, "connected to the gateway");
    // Before their catch-up, which a server the bot was removed from refuses (found by a review: the overdue turn
    // then ended blind, and the refused announcement paused the session for a missing permission).
    router.broadcast(|| Input::ServersOfShard(listed.clone()));
    // Marked up as the channels are told: a channel that finds it down after this is sure to hear of it.
    router.env().shards.came_up(shard_id, || router.broadcast(|| Input::CatchUp(shard)));
}

/// The servers a READY lists: all those of its shard the bot is in.
pub fn servers_of(ready: &discord::Ready) -> ShardServers {
    let shard = ready.shard.map(|info| Shard { id: info.id.0, total: info.total });
    let mut servers: Vec<GuildId> = ready.guilds.iter().map(|guild| GuildId(guild.id.get())).collect();
    servers.sort_unstable();
    ShardServers { shard, servers }
}

/// RESUMED: Discord has replayed what the shard missed, and this collector has delivered it, so the shard's channels
/// may let their deadlines run again without reading. They are told if the shard was marked lost (by
/// [`InOrder::reconnecting`], or by the connection watch) and nothing brought it back since.
fn resumed(router: &Router, shard_id: u32) {
    let shards = &router.env().shards;
    let shard = Some(shards.shard(shard_id));
    shards.resumed(shard_id, || router.broadcast(|| Input::Resumed(shard)));
    tracing::info!(shard = shard_id, "the gateway connection was resumed: Discord replayed what it carried meanwhile");
}

pub fn deliver(router: &Router, message: Option<(ChannelId, IncomingMessage)>) {
    if let Some((channel, incoming)) = message {
        router.deliver(channel, Input::Message(Box::new(incoming)));
    }
}

/// A new message as the engine takes it, with its channel; `None` for the bot's own and for Discord's system messages
/// ([`Identity::is_written`]).
pub fn created(identity: &Identity, message: &discord::Message, text: String) -> Option<(ChannelId, IncomingMessage)> {
    if !Identity::is_written(message.kind.into()) {
        return None;
    }
    let webhook = message.webhook_id.map(|w| w.get());
    let (id, author) = (MessageId(message.id.get()), UserId(message.author.id.get()));
    let more = !message.sticker_items.is_empty() || message.poll.is_some() || !message.components.is_empty();
    let has_files = more || carries_files(&message.attachments, &message.embeds);
    let flags = message.flags.map_or(0, |flags| flags.bits());
    let incoming = identity.incoming(author, webhook, id, text, None, has_files)?.with_flags(flags);
    let incoming = incoming.with_mentions(message.mentions.iter().map(|user| user.id.get()));
    Some((ChannelId(message.channel_id.get()), incoming))
}

/// An edit as the engine takes it; `None` for the bot's own, for Discord's system messages, and for an update that
/// did not change the text: embeds being resolved arrive as updates without content, and since Discord sends the
/// whole message with every update, a pin, a thread started on it or a preview resolved arrive with the content but
/// without an edit time (found by a review: taken for an edit made now, a pin restarted the holder's silence). `text`
/// is the event's content.
pub fn edited(
    identity: &Identity,
    event: &discord::MessageUpdateEvent,
    text: Option<String>,
) -> Option<(ChannelId, IncomingMessage)> {
    let (author, text) = (event.author.as_ref()?, text?);
    if event.kind.is_some_and(|kind| !Identity::is_written(kind.into())) {
        return None;
    }
    let webhook = event.webhook_id.flatten().map(|w| w.get());
    let edited_at = *event.edited_timestamp?;
    let stickers = event.sticker_items.as_ref().is_some_and(|s| !s.is_empty());
    let components = event.components.as_ref().is_some_and(|c| !c.is_empty());
    let has_files = stickers
        || components
        || carries_files(event.attachments.as_deref().unwrap_or_default(), event.embeds.as_deref().unwrap_or_default());
    let id = MessageId(event.id.get());
    let flags = event.flags.flatten().map_or(0, |flags| flags.bits());
    let incoming = identity.incoming(UserId(author.id.get()), webhook, id, text, Some(edited_at), has_files)?;
    let incoming = incoming.with_flags(flags);
    let incoming = match &event.mentions {
        Some(users) => incoming.with_mentions(users.iter().map(|user| user.id.get())),
        None => incoming,
    };
    Some((ChannelId(event.channel_id.get()), incoming))
}

pub fn edit_of(event: &discord::MessageUpdateEvent) -> Taken {
    Taken::Edited {
        message: event.id.get(),
        at_ms: event.edited_timestamp.map(|t| t.timestamp_millis()),
        len: event.content.as_ref().map_or(0, String::len),
    }
}

/// Whether a message carries what a repost must carry over: files, or embeds of its own ("rich"; link previews are
/// made again from the reposted text). A sticker or a poll is marked too (by the caller): a webhook cannot post
/// one, and the relay must find that out rather than drop it.
fn carries_files(attachments: &[discord::Attachment], embeds: &[discord::Embed]) -> bool {
    !attachments.is_empty() || embeds.iter().any(|e| super::rest::is_own_embed(e.kind.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::{Taken, TakenEvents};

    /// A message from the gateway, as serenity reads it, with `extra` fields.
    fn message(extra: serde_json::Value) -> serenity::all::Message {
        let mut json = serde_json::json!({
            "id": "2000", "channel_id": "1", "content": "Shipped! TURN_COMPLETE",
            "author": {"id": "101", "username": "pm", "discriminator": "0", "avatar": null},
            "timestamp": "2026-05-01T12:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
            "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
            "pinned": false, "type": 0,
        });
        for (key, value) in extra.as_object().unwrap() {
            json[key] = value.clone();
        }
        serde_json::from_value(json).unwrap()
    }

    /// Found by a review: a sticker or a poll was not marked, so the relay posted the text alone and deleted the
    /// original, sticker and all. Marked, the relay looks at the message first and leaves it be.
    #[test]
    fn a_message_with_a_sticker_or_a_poll_is_marked_as_carrying_more_than_text() {
        let identity = crate::discord::identity::Identity::default();
        let marked = |extra| super::created(&identity, &message(extra), "Shipped!".into()).unwrap().1.has_files;
        assert!(!marked(serde_json::json!({})), "plain text");
        assert!(marked(
            serde_json::json!({"sticker_items": [{"id": "749054660769218631", "name": "Wave", "format_type": 1}]})
        ));
        let poll = serde_json::json!({"question": {"text": "Ship it?"}, "answers": [], "expiry": null,
                                      "allow_multiselect": false, "layout_type": 1});
        assert!(marked(serde_json::json!({ "poll": poll })));
        let button = serde_json::json!({"type": 2, "style": 1, "label": "Ship", "custom_id": "ship"});
        assert!(marked(serde_json::json!({"components": [{"type": 1, "components": [button]}]})), "buttons");
    }

    /// Found by a review: Discord sends the whole message with every update, so a pin arrived with the content and
    /// without an edit time, and was taken for an edit made when it arrived (restarting the holder's silence).
    #[test]
    fn an_update_without_an_edit_time_is_no_edit() {
        let identity = crate::discord::identity::Identity::default();
        let update = |edited: serde_json::Value| {
            let mut json = serde_json::to_value(message(serde_json::json!({"pinned": true}))).unwrap();
            json["edited_timestamp"] = edited;
            let event: serenity::all::MessageUpdateEvent = serde_json::from_value(json).unwrap();
            super::edited(&identity, &event, event.content.clone())
        };
        assert!(update(serde_json::Value::Null).is_none(), "a pin");
        let (_, edit) = update(serde_json::json!("2026-05-01T12:00:09.000000+00:00")).expect("an edit");
        assert_eq!(edit.written_at.to_rfc3339(), "2026-05-01T12:00:09+00:00", "judged by Discord's edit time");
    }

    /// A new message and an edit carry the flags a repost keeps (`@silent`, previews hidden), and only those.
    #[test]
    fn a_message_and_an_edit_carry_the_flags_a_repost_keeps() {
        let identity = crate::discord::identity::Identity::default();
        let flags = serde_json::json!({"flags": 4096 | 4 | 32});
        let (_, created) = super::created(&identity, &message(flags), "Shipped!".into()).unwrap();
        assert_eq!(created.flags.bits(), 4096 | 4, "HAS_THREAD (32) is not a repost's");
        let mut json = serde_json::to_value(message(serde_json::json!({"flags": 4096}))).unwrap();
        json["edited_timestamp"] = serde_json::json!("2026-05-01T12:00:09.000000+00:00");
        let event: serenity::all::MessageUpdateEvent = serde_json::from_value(json).unwrap();
        let (_, edit) = super::edited(&identity, &event, event.content.clone()).expect("an edit");
        assert_eq!(edit.flags.bits(), 4096);
    }

    #[test]
    fn an_event_delivered_twice_is_skipped_twice_and_another_edit_of_the_message_is_not() {
        let taken = TakenEvents::default();
        let edit = |len| Taken::Edited { message: 7, at_ms: Some(1_000), len };
        taken.mark(Taken::Created(7));
        taken.mark(Taken::Created(7)); // Discord sent it twice.
        taken.mark(edit(12));
        assert!(taken.take(&Taken::Created(7)) && taken.take(&Taken::Created(7)));
        assert!(!taken.take(&Taken::Created(7)), "each mark is used once");
        assert!(!taken.take(&edit(13)), "another edit of the same message at the same time");
        assert!(taken.take(&edit(12)));
        assert!(taken.0.lock().unwrap().is_empty(), "nothing left behind");
    }
}
