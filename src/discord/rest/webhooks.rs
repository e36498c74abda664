//! The one webhook per channel that reposts go through, with the persona's name and avatar. It is found or made on
//! first use, reused after that, and made again if someone deleted it. Threads use their parent's webhook.

use super::form;
use super::http::{DiscordHttp, Posted};
use super::serenity::call;
use super::{Carried, RestError, Voice, delete_in_a_few_tries};
use crate::core::ids::{ChannelId, MessageId};
use crate::discord::access::Access;
use crate::discord::identity::Identity;
use secrecy::ExposeSecret;
use serenity::all as discord;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The name the bot gives its webhooks, and finds them by.
pub const WEBHOOK_NAME: &str = "turn-manager";

/// A channel's webhook, once known. Each has its own lock, held while it is looked up or made, so two reposts never
/// make two webhooks and no channel ever waits for another's REST calls.
type Slot = Arc<tokio::sync::Mutex<Option<discord::Webhook>>>;

pub struct Webhooks {
    http: Arc<DiscordHttp>,
    access: Arc<Access>,
    identity: Arc<Identity>,
    /// Channel (a thread's parent) -> its webhook.
    hooks: Mutex<HashMap<ChannelId, Slot>>,
}

impl Webhooks {
    pub fn new(http: Arc<DiscordHttp>, access: Arc<Access>, identity: Arc<Identity>) -> Self {
        Self { http, access, identity, hooks: Mutex::default() }
    }

    /// Posts `text` as the persona in `channel`, with the files and embeds it `carries`; reposts ping the voice's
    /// `pings` at most, never @everyone, @here or roles.
    pub async fn repost(
        &self,
        channel: ChannelId,
        voice: Voice<'_>,
        text: &str,
        carries: &Carried,
    ) -> Result<MessageId, RestError> {
        let (owner, thread) = self.access.webhook_route(channel).await?;
        let mut body = serde_json::json!({
            "content": text,
            "username": voice.name,
            "allowed_mentions": {"parse": [], "users": voice.pings.iter().map(u64::to_string).collect::<Vec<_>>()},
        });
        // Left out rather than null when the persona has none: Discord documents a string (found by a review).
        if let Some(avatar) = voice.avatar_url {
            body["avatar_url"] = avatar.into();
        }
        if !carries.embeds.is_empty() {
            body["embeds"] = serde_json::Value::Array(carries.embeds.clone());
        }
        if !carries.files.is_empty() {
            body["attachments"] = form::describe(&carries.files);
        }
        if !carries.flags.is_none() {
            body["flags"] = carries.flags.bits().into();
        }
        let slot = self.hooks.lock().expect("webhooks lock").entry(owner).or_default().clone();
        for attempt in 0..2 {
            // Held only to find or make the webhook: the threads of one parent share it, and each thread is a
            // channel of its own whose reposts must not wait for another's (found by a review: a slow upload in one
            // thread held every other thread's relays and announcements).
            let hook = {
                let mut known = slot.lock().await;
                match known.as_ref() {
                    Some(hook) => hook.clone(),
                    None => known.insert(self.find_or_create(owner).await?).clone(),
                }
            };
            let token = hook.token.as_ref().map(|t| t.expose_secret().to_owned()).unwrap_or_default();
            match self.http.execute_webhook(hook.id.get(), &token, thread.map(|t| t.0), &body, &carries.files).await {
                Ok(posted) if posted.channel == thread.unwrap_or(owner).0 => return Ok(MessageId(posted.id)),
                // Someone moved the webhook to another channel (Server Settings let them): the text went there. It is
                // taken back, and a webhook of this channel is found or made; the original stays until a repost
                // lands here.
                Ok(posted) => {
                    tracing::warn!(
                        channel = %owner,
                        elsewhere = posted.channel,
                        "my webhook was moved to another channel; taking the repost back and making a webhook here"
                    );
                    self.take_back_misplaced(hook.id.get(), &token, posted).await;
                    forget(&slot, &hook).await;
                }
                // 404: someone deleted the webhook; make a new one and try once more. Its token refused (401, code
                // 50027): the same.
                Err(e)
                    if attempt == 0 && (e.status() == Some(404) || matches!(e, RestError::WebhookTokenRefused(_))) =>
                {
                    tracing::info!(channel = %owner, "my webhook was deleted or its token refused ({e}); finding or making one");
                    forget(&slot, &hook).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(RestError::Unavailable("the webhook kept disappearing or moving".into()))
    }

    /// Deletes a repost that went to another channel, with the webhook's token: it may show the agent's text to
    /// people it was not meant for. Tried a few times over some seconds (not the sender's ten minutes, which would
    /// hold the channel's repost and its announcements).
    async fn take_back_misplaced(&self, hook: u64, token: &str, posted: Posted) {
        if let Err(e) = delete_in_a_few_tries(|| self.http.delete_webhook_message(hook, token, None, posted.id)).await {
            tracing::warn!(channel = posted.channel, "could not take back the misplaced repost: {e}");
        }
    }

    /// Deletes a repost made in `channel` through the bot's webhook there, with the webhook's token: no permission
    /// is needed, so a repost is taken back even after the bot lost Manage Messages (which is what refuses the
    /// deletion of the original). `Ok(false)` when no webhook of the bot's is there, Discord does not know the
    /// message as that webhook's (made through one since replaced, or gone already), or the webhook's token was
    /// refused (the webhook is then forgotten, found again on its next use).
    pub async fn take_back(&self, channel: ChannelId, message: MessageId) -> Result<bool, RestError> {
        let (owner, thread) = self.access.webhook_route(channel).await?;
        let slot = self.hooks.lock().expect("webhooks lock").entry(owner).or_default().clone();
        let hook = {
            let mut known = slot.lock().await;
            match known.as_ref() {
                Some(hook) => hook.clone(),
                None => match self.find(owner).await? {
                    Some(hook) => known.insert(hook).clone(),
                    None => return Ok(false),
                },
            }
        };
        let token = hook.token.as_ref().map(|t| t.expose_secret().to_owned()).unwrap_or_default();
        match self.http.delete_webhook_message(hook.id.get(), &token, thread.map(|t| t.0), message.0).await {
            Ok(()) => Ok(true),
            Err(e) if e.status() == Some(404) => Ok(false),
            // The webhook's token refused: the bot's own deletion is tried instead, and the webhook found again next.
            Err(RestError::WebhookTokenRefused(_)) => {
                forget(&slot, &hook).await;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The bot's webhook in `channel`, found by its owner (whatever its name now), or made. Before READY the bot does not know who it is,
    /// so it could not tell its own webhook from another's and would make a second one: it waits instead
    /// (`Unavailable` is transient, so the sender's retry policy waits and tries again).
    async fn find_or_create(&self, channel: ChannelId) -> Result<discord::Webhook, RestError> {
        if let Some(hook) = self.find(channel).await? {
            return Ok(hook);
        }
        let http = self.access.http()?.as_ref();
        let made = discord::ChannelId::new(channel.0).create_webhook(http, discord::CreateWebhook::new(WEBHOOK_NAME));
        let hook = call(self.access.budget(), "POST /channels/{id}/webhooks", made).await?;
        self.identity.add_webhook(hook.id.get());
        Ok(hook)
    }

    /// The bot's webhook in `channel`, if it has one there. Any webhook the bot made will do (each repost gives its
    /// own name and avatar); the one still named as the bot names them first. One that someone renamed is used rather
    /// than a new one made at every start, which would reach Discord's 15 per channel.
    async fn find(&self, channel: ChannelId) -> Result<Option<discord::Webhook>, RestError> {
        let me = self.identity.user().map(|u| discord::UserId::new(u.0)).ok_or_else(|| {
            RestError::Unavailable("not connected yet: my webhook is found by my user id, known at READY".into())
        })?;
        let http = self.access.http()?.as_ref();
        let id = discord::ChannelId::new(channel.0);
        let existing = call(self.access.budget(), "GET /channels/{id}/webhooks", http.get_channel_webhooks(id)).await?;
        let mut mine: Vec<_> = existing
            .into_iter()
            .filter(|hook| hook.token.is_some() && hook.user.as_ref().map(|u| u.id) == Some(me))
            .collect();
        mine.sort_by_key(|hook| (hook.name.as_deref() != Some(WEBHOOK_NAME), hook.id));
        let found = mine.into_iter().next();
        if let Some(hook) = &found {
            self.identity.add_webhook(hook.id.get());
        }
        Ok(found)
    }
}

/// Forgets `hook`, deleted or moved, unless another repost already put its successor in the slot.
async fn forget(slot: &Slot, hook: &discord::Webhook) {
    let mut known = slot.lock().await;
    if known.as_ref().is_some_and(|k| k.id == hook.id) {
        *known = None;
    }
}
