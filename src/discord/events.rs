//! The gateway event handler: new and edited messages go to their channel's queue; READY brings sessions up.

use super::bot::Bot;
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::session::IncomingMessage;
use serenity::all as discord;
use serenity::async_trait;
use std::sync::Arc;

pub struct Events {
    bot: Arc<Bot>,
}

impl Events {
    pub fn new(bot: Arc<Bot>) -> Self {
        Self { bot }
    }
}

#[async_trait]
impl discord::EventHandler for Events {
    async fn ready(&self, ctx: discord::Context, ready: discord::Ready) {
        self.bot.on_ready(&ctx, &ready).await;
    }

    async fn message(&self, _ctx: discord::Context, message: discord::Message) {
        // Queued before the first await, so the queue sees messages in nearly the order the gateway sent them.
        let Some(slot) = self.bot.slot(ChannelId(message.channel_id.get())) else { return };
        if let Some(incoming) =
            incoming(&self.bot, message.author.id, message.webhook_id, message.id, &message.content, false)
        {
            slot.enqueue(incoming);
        }
    }

    async fn message_update(
        &self,
        _ctx: discord::Context,
        _old: Option<discord::Message>,
        _new: Option<discord::Message>,
        event: discord::MessageUpdateEvent,
    ) {
        // Only a change of content matters (embeds being resolved also arrive as updates, without content).
        let (Some(author), Some(content)) = (&event.author, &event.content) else { return };
        let Some(slot) = self.bot.slot(ChannelId(event.channel_id.get())) else { return };
        let webhook = event.webhook_id.flatten();
        if let Some(incoming) = incoming(&self.bot, author.id, webhook, event.id, content, true) {
            slot.enqueue(incoming);
        }
    }
}

/// A message as the engine takes it, or `None` for the bot's own messages and its own webhooks' reposts (never
/// react to yourself) and while shutting down.
pub(super) fn incoming(
    bot: &Bot,
    author: discord::UserId,
    webhook: Option<discord::WebhookId>,
    id: discord::MessageId,
    text: &str,
    edited: bool,
) -> Option<IncomingMessage> {
    if bot.is_closing() || bot.user_id() == Some(author) {
        return None;
    }
    if webhook.is_some_and(|hook| bot.webhooks.is_own(hook)) {
        return None;
    }
    let id = MessageId(id.get());
    // An edit is judged by when it was made; its arrival is the closest this layer knows of that.
    let written_at = if edited { chrono::Utc::now() } else { id.created_at() };
    Some(IncomingMessage { id, author: UserId(author.get()), text: text.to_owned(), edited, written_at })
}
