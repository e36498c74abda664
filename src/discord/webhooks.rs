//! The one webhook per channel that reposts go through, with the persona's name and avatar. It is found or made on
//! first use, reused after that, and made again if someone deleted it. Threads use their parent's webhook.

use super::access;
use super::bot::Bot;
use super::effects::rest;
use super::to_channel;
use crate::core::ids::{ChannelId, PersonaId};
use serenity::all as discord;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The name the bot gives its webhooks, and finds them by.
pub const WEBHOOK_NAME: &str = "turn-manager";

#[derive(Default)]
pub struct Webhooks {
    /// Channel (a thread's parent) -> its webhook.
    hooks: tokio::sync::Mutex<HashMap<ChannelId, discord::Webhook>>,
    /// Channel -> (the channel that owns webhooks, the thread to post in).
    routes: Mutex<HashMap<ChannelId, (ChannelId, Option<ChannelId>)>>,
    /// Every webhook of ours seen, so their messages are never taken for someone else's.
    own: Mutex<HashSet<discord::WebhookId>>,
}

impl Webhooks {
    pub fn is_own(&self, id: discord::WebhookId) -> bool {
        self.own.lock().expect("webhook ids lock").contains(&id)
    }

    /// Posts `text` as the persona in `channel`; reposts ping users at most, never @everyone, @here or roles.
    pub async fn repost(&self, bot: &Bot, channel: ChannelId, persona: &PersonaId, text: &str) -> Result<(), String> {
        let (owner, thread) = self.route(bot, channel).await?;
        let mut builder = discord::ExecuteWebhook::new()
            .content(text)
            .allowed_mentions(discord::CreateAllowedMentions::new().all_users(true));
        if let Some(found) = bot.personas.get(persona) {
            builder = builder.username(&found.display_name);
            if let Some(avatar) = &found.avatar_url {
                builder = builder.avatar_url(avatar);
            }
        }
        if let Some(thread) = thread {
            builder = builder.in_thread(to_channel(thread));
        }
        for attempt in 0..2 {
            let hook = self.hook_for(bot, owner).await?;
            match rest(hook.execute(bot.http(), false, builder.clone())).await {
                Ok(_) => return Ok(()),
                // 404: someone deleted the webhook; make a new one and try once more.
                Err(e) if attempt == 0 && e.starts_with("status: 404") => {
                    tracing::info!(channel = %owner, "my webhook was deleted; making a new one");
                    self.hooks.lock().await.remove(&owner);
                }
                Err(e) => return Err(e),
            }
        }
        Err("the webhook kept disappearing".into())
    }

    /// The channel's webhook, found or made on first use. The lock is held only while one is being made, so two
    /// reposts never make two webhooks, and posting in one channel never waits for another.
    async fn hook_for(&self, bot: &Bot, owner: ChannelId) -> Result<discord::Webhook, String> {
        let mut hooks = self.hooks.lock().await;
        if let Some(hook) = hooks.get(&owner) {
            return Ok(hook.clone());
        }
        let hook = self.find_or_create(bot, owner).await?;
        hooks.insert(owner, hook.clone());
        Ok(hook)
    }

    /// Where a channel's webhook lives: the channel itself, or a thread's parent with the thread to post in.
    async fn route(&self, bot: &Bot, channel: ChannelId) -> Result<(ChannelId, Option<ChannelId>), String> {
        if let Some(route) = self.routes.lock().expect("routes lock").get(&channel) {
            return Ok(*route);
        }
        let (home, thread) = access::home_channel(bot, channel).await?;
        let route = (ChannelId(home.id.get()), thread);
        self.routes.lock().expect("routes lock").insert(channel, route);
        Ok(route)
    }

    async fn find_or_create(&self, bot: &Bot, channel: ChannelId) -> Result<discord::Webhook, String> {
        let http = bot.http();
        let me = bot.user_id();
        let existing = rest(http.get_channel_webhooks(to_channel(channel))).await?;
        let mine = existing.into_iter().find(|hook| {
            hook.token.is_some() && hook.name.as_deref() == Some(WEBHOOK_NAME) && hook.user.as_ref().map(|u| u.id) == me
        });
        let hook = match mine {
            Some(hook) => hook,
            None => rest(to_channel(channel).create_webhook(http, discord::CreateWebhook::new(WEBHOOK_NAME))).await?,
        };
        self.own.lock().expect("webhook ids lock").insert(hook.id);
        Ok(hook)
    }
}
