//! The network seam implemented with serenity's REST client. Every call has a time limit (serenity's client has
//! none) and every failure becomes a [`RestError`].

use super::webhooks::Webhooks;
use super::{Page, Rest, RestError, Voice};
use crate::core::ids::{ChannelId, MessageId, UserId};
use crate::core::session::effects::Announcement;
use crate::discord::access::Access;
use crate::discord::identity::Identity;
use async_trait::async_trait;
use serenity::all as discord;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The longest a single REST call may take before it is given up.
pub const REST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct SerenityRest {
    access: Arc<Access>,
    identity: Arc<Identity>,
    webhooks: Webhooks,
}

impl SerenityRest {
    pub fn new(access: Arc<Access>, identity: Arc<Identity>) -> Self {
        Self { webhooks: Webhooks::new(access.clone(), identity.clone()), access, identity }
    }

    fn http(&self) -> Result<&discord::Http, RestError> {
        self.access.http().map(|http| http.as_ref())
    }
}

fn channel_of(id: ChannelId) -> discord::ChannelId {
    discord::ChannelId::new(id.0)
}

fn message_of(id: MessageId) -> discord::MessageId {
    discord::MessageId::new(id.0)
}

#[async_trait]
impl Rest for SerenityRest {
    async fn announce(&self, channel: ChannelId, announcement: &Announcement) -> Result<MessageId, RestError> {
        // Ping the persona whose turn starts and nobody else: never @everyone, @here or roles.
        let mentions =
            discord::CreateAllowedMentions::new().users(announcement.mention.map(|user| discord::UserId::new(user.0)));
        let message = discord::CreateMessage::new()
            .content(&announcement.text)
            .nonce(discord::Nonce::String(announcement.nonce.clone()))
            .enforce_nonce(true)
            .allowed_mentions(mentions);
        let posted = call(channel_of(channel).send_message(self.http()?, message)).await?;
        Ok(MessageId(posted.id.get()))
    }

    async fn notice(&self, channel: ChannelId, text: &str) -> Result<(), RestError> {
        let message =
            discord::CreateMessage::new().content(text).allowed_mentions(discord::CreateAllowedMentions::new());
        call(channel_of(channel).send_message(self.http()?, message)).await.map(drop)
    }

    async fn repost(&self, channel: ChannelId, voice: Voice<'_>, text: &str) -> Result<(), RestError> {
        self.webhooks.repost(channel, voice, text).await
    }

    async fn find_repost(
        &self,
        channel: ChannelId,
        after: MessageId,
        name: &str,
        text: &str,
    ) -> Result<bool, RestError> {
        let request = discord::GetMessages::new().after(message_of(after)).limit(100);
        let read = call(channel_of(channel).messages(self.http()?, request)).await?;
        Ok(read.iter().any(|m| m.webhook_id.is_some() && m.author.name == name && m.content == text))
    }

    async fn delete(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError> {
        call(self.http()?.delete_message(channel_of(channel), message_of(message), None)).await
    }

    async fn react(&self, channel: ChannelId, message: MessageId, emoji: &str) -> Result<(), RestError> {
        let reaction = discord::ReactionType::Unicode(emoji.to_owned());
        call(self.http()?.create_reaction(channel_of(channel), message_of(message), &reaction)).await
    }

    async fn messages_after(&self, channel: ChannelId, after: MessageId, limit: u8) -> Result<Page, RestError> {
        let request = discord::GetMessages::new().after(message_of(after)).limit(limit);
        let mut read = call(channel_of(channel).messages(self.http()?, request)).await?;
        read.sort_by_key(|m| m.id);
        let messages = read
            .iter()
            .filter_map(|m| {
                let webhook = m.webhook_id.map(|w| w.get());
                let id = MessageId(m.id.get());
                self.identity.incoming(UserId(m.author.id.get()), webhook, id, &m.content, None)
            })
            .collect();
        Ok(Page { messages, newest: read.last().map(|m| MessageId(m.id.get())), read: read.len() })
    }

    async fn relay_permissions_missing(&self, channel: ChannelId) -> Result<Vec<&'static str>, RestError> {
        self.access.relay_permissions_missing(channel).await
    }
}

/// Runs a REST call with [`REST_TIMEOUT`], turning serenity's failures into a [`RestError`].
pub async fn call<T>(request: impl Future<Output = serenity::Result<T>>) -> Result<T, RestError> {
    match tokio::time::timeout(REST_TIMEOUT, request).await {
        Ok(result) => result.map_err(|e| rest_error(&e)),
        Err(_) => Err(RestError::Timeout(REST_TIMEOUT)),
    }
}

fn rest_error(error: &serenity::Error) -> RestError {
    match error {
        serenity::Error::Http(discord::HttpError::UnsuccessfulRequest(response)) => RestError::Status {
            status: response.status_code.as_u16(),
            message: response.error.message.clone(),
            // serenity does not pass on the Retry-After header; the sender waits by its own rule.
            retry_after: None,
        },
        serenity::Error::Http(discord::HttpError::Request(e)) => RestError::Transport(e.to_string()),
        other => RestError::Transport(other.to_string()),
    }
}
