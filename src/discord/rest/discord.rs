//! The network seam implemented against Discord: the effects go through [`DiscordHttp`] (rate-limit buckets, Discord's
//! `retry_after`), lookups through serenity's cache and client.

use super::http::DiscordHttp;
use super::http::PageMessage;
use super::webhooks::Webhooks;
use super::{Carried, Page, REPOST_SEARCH_PAGES, Rest, RestError, Voice};
use crate::core::ids::{ChannelId, GuildId, MessageId, UserId};
use crate::core::session::IncomingMessage;
use crate::core::session::effects::{Announcement, shows_announcement};
use crate::discord::access::Access;
use crate::discord::identity::Identity;
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;

pub struct DiscordRest {
    http: Arc<DiscordHttp>,
    access: Arc<Access>,
    identity: Arc<Identity>,
    webhooks: Webhooks,
}

impl DiscordRest {
    pub fn new(http: Arc<DiscordHttp>, access: Arc<Access>, identity: Arc<Identity>) -> Self {
        Self { webhooks: Webhooks::new(http.clone(), access.clone(), identity.clone()), http, access, identity }
    }
}

#[async_trait]
impl Rest for DiscordRest {
    async fn announce(&self, channel: ChannelId, announcement: &Announcement) -> Result<MessageId, RestError> {
        // Ping the persona whose turn starts and nobody else: never @everyone or @here, and roles only when the
        // managers are called (then only the control roles).
        let users: Vec<String> = announcement.mention.iter().map(|u| u.to_string()).collect();
        let roles: Vec<String> = if announcement.ping_managers {
            match self.access.control_role_ids(channel).await {
                Ok(roles) => roles.iter().map(u64::to_string).collect(),
                // Not connected yet (an escalation replayed at start-up): tried again in a moment, as the
                // announcement is. Any other failure posts it calling nobody rather than hold it, and every later
                // announcement of the channel behind it, for the sender's ten minutes of retries.
                // A refusal by Discord's network too: an escalation must not go out calling no manager for it.
                Err(e @ (RestError::Unavailable(_) | RestError::NetworkRefused(_))) => return Err(e),
                Err(e) => {
                    tracing::warn!(%channel, "could not read the control roles to call, calling nobody: {e}");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let content = if roles.is_empty() {
            announcement.text.clone()
        } else {
            let mentions: Vec<String> = roles.iter().map(|id| format!("<@&{id}>")).collect();
            format!("{} {}", mentions.join(" "), announcement.text)
        };
        let mut body = json!({
            "content": crate::core::session::effects::fit_message(content),
            "nonce": announcement.nonce,
            "enforce_nonce": true,
            "allowed_mentions": {"parse": [], "users": users, "roles": roles, "replied_user": announcement.reply_to.is_some()},
        });
        if let Some(reply_to) = announcement.reply_to {
            body["message_reference"] = json!({"message_id": reply_to.to_string(), "fail_if_not_exists": false});
        }
        let id = match self.http.create_message(channel.0, &body).await {
            // Discord refuses a reply from a bot without Read Message History (403, code 160002), a permission a
            // session may run without: the answer is posted as a message that mentions its agent instead (found by
            // a review: the refusal was taken for "I may not post here" and paused the session without a word).
            // Any 403, as `RestError` keeps no JSON code: one for another reason (Send Messages) is refused again,
            // one invalid request more before the session pauses for it. The same nonce: the refused call made no
            // message.
            Err(RestError::Status { status: 403, .. }) if announcement.reply_to.is_some() => {
                body.as_object_mut().expect("a JSON object").remove("message_reference");
                body["allowed_mentions"]["replied_user"] = json!(false);
                if let Some(author) = announcement.mention {
                    let shown = body["content"].as_str().unwrap_or_default();
                    body["content"] = json!(crate::core::session::effects::fit_message(format!("<@{author}> {shown}")));
                }
                self.http.create_message(channel.0, &body).await?
            }
            made => made?,
        };
        Ok(MessageId(id.parse().unwrap_or_default()))
    }

    async fn announcement_made(
        &self,
        channel: ChannelId,
        after: MessageId,
        text: &str,
    ) -> Result<Option<MessageId>, RestError> {
        // Before the gateway's READY the bot does not know its own id yet: asked again in a moment.
        let me = self.identity.user().ok_or_else(|| RestError::Unavailable("not connected yet".into()))?.to_string();
        let mut found = None;
        let searched = self
            .search_after(channel, after, |m| {
                let shows = m.webhook_id.is_none() && m.author.id == me && shows_announcement(&m.content, text);
                if shows {
                    found = Some(MessageId(page_id(m)));
                }
                shows
            })
            .await?;
        if searched == Searched::TooFar {
            tracing::warn!(%channel, "no announcement found in {REPOST_SEARCH_PAGES} pages from where it may be; posting it");
        }
        Ok(found)
    }

    async fn notice(&self, channel: ChannelId, text: &str, nonce: &str) -> Result<MessageId, RestError> {
        let text = crate::core::session::effects::fit_message(text.to_owned());
        let body = json!({"content": text, "allowed_mentions": {"parse": []}, "nonce": nonce, "enforce_nonce": true});
        let id = self.http.create_message(channel.0, &body).await?;
        Ok(MessageId(id.parse().unwrap_or_default()))
    }

    async fn repost(
        &self,
        channel: ChannelId,
        voice: Voice<'_>,
        text: &str,
        carries: &Carried,
    ) -> Result<MessageId, RestError> {
        self.webhooks.repost(channel, voice, text, carries).await
    }

    async fn carried(&self, channel: ChannelId, message: MessageId) -> Result<Carried, RestError> {
        super::carried::fetch(&self.http, channel.0, message.0).await
    }

    async fn reposts_made(
        &self,
        channel: ChannelId,
        after: MessageId,
        name: &str,
        parts: &[String],
    ) -> Result<Vec<MessageId>, RestError> {
        let mut found = Vec::new();
        // The parts were posted in order: each one found moves on to the next. Compared without the whitespace around
        // them, which Discord drops (a part cut at a blank line ends with a line break).
        let searched = self
            .search_after(channel, after, |message| {
                let part = parts.get(found.len());
                if part.is_some_and(|p| {
                    message.webhook_id.is_some()
                        && message.author.username == name
                        && message.content.trim() == p.trim()
                }) {
                    found.push(MessageId(page_id(message)));
                }
                found.len() == parts.len()
            })
            .await?;
        if searched == Searched::TooFar {
            tracing::warn!(%channel, "no repost found in {REPOST_SEARCH_PAGES} pages after the original; reposting");
        }
        Ok(found)
    }

    async fn delete(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError> {
        self.http.delete_message(channel.0, message.0).await
    }

    async fn take_back(&self, channel: ChannelId, message: MessageId) -> Result<(), RestError> {
        match self.webhooks.take_back(channel, message).await {
            Ok(true) => Ok(()),
            // Not the webhook's (or none found, or finding it failed): the bot's own token may still do.
            Ok(false) | Err(_) => self.delete(channel, message).await,
        }
    }

    async fn react(&self, channel: ChannelId, message: MessageId, emoji: &str) -> Result<(), RestError> {
        self.http.react(channel.0, message.0, emoji).await
    }

    async fn messages_after(&self, channel: ChannelId, after: MessageId, limit: u8) -> Result<Page, RestError> {
        let mut read = self.http.messages_after(channel.0, after.0, limit).await?;
        read.sort_by_key(page_id);
        let id = page_id;
        let messages = read
            .iter_mut()
            .filter(|m| Identity::is_written(m.kind))
            .filter_map(|m| {
                let author = UserId(m.author.id.parse().unwrap_or_default());
                let webhook = m.webhook_id.as_deref().and_then(|w| w.parse().ok());
                // Only the ids and the count of the page are read after this: its texts move, not copied.
                let text = std::mem::take(&mut m.content);
                let message = self.identity.incoming(author, webhook, MessageId(id(m)), text, None, m.has_files())?;
                let message = IncomingMessage { edited_at: m.edited_timestamp, ..message.with_flags(m.flags) };
                Some(match &m.mentions {
                    Some(users) => message.with_mentions(users.iter().filter_map(|u| u.id.parse().ok())),
                    None => message,
                })
            })
            .collect();
        Ok(Page { messages, newest: read.last().map(|m| MessageId(id(m))), read: read.len() })
    }

    async fn relay_permissions_missing(&self, channel: ChannelId) -> Result<Vec<&'static str>, RestError> {
        self.access.relay_permissions_missing(channel).await
    }

    async fn control_roles_unpingable(&self, channel: ChannelId) -> Result<Vec<String>, RestError> {
        self.access.control_roles_unpingable(channel).await
    }

    async fn not_members(
        &self,
        channel: ChannelId,
        guild: Option<GuildId>,
        users: &[UserId],
    ) -> Result<Vec<UserId>, RestError> {
        self.access.not_members(channel, guild, users).await
    }

    async fn guild_of(&self, channel: ChannelId) -> Result<Option<GuildId>, RestError> {
        self.access.guild_of(channel).await.map(Some)
    }

    async fn may_manage(&self, channel: ChannelId, user: UserId) -> Result<(), Option<String>> {
        self.access.may_manage_user(channel, user).await
    }
}

/// How a search of the channel's messages ended.
#[derive(PartialEq, Eq)]
enum Searched {
    /// The look said it found what it wanted.
    Found,
    /// The channel's newest message was read first.
    Ended,
    /// [`REPOST_SEARCH_PAGES`] pages were read first.
    TooFar,
}

impl DiscordRest {
    /// Reads the channel's messages after `after`, oldest first, a page at a time, showing each to `look` until it
    /// answers true, for at most [`REPOST_SEARCH_PAGES`] pages.
    async fn search_after(
        &self,
        channel: ChannelId,
        after: MessageId,
        mut look: impl FnMut(&PageMessage) -> bool,
    ) -> Result<Searched, RestError> {
        let mut from = after.0;
        for _ in 0..REPOST_SEARCH_PAGES {
            let mut page = self.http.messages_after(channel.0, from, 100).await?;
            page.sort_by_key(page_id);
            if page.iter().any(&mut look) {
                return Ok(Searched::Found);
            }
            if page.len() < 100 {
                return Ok(Searched::Ended);
            }
            from = page.last().map_or(from, page_id);
        }
        Ok(Searched::TooFar)
    }
}

/// A page message's id as a number (0 if Discord ever sent an unreadable one).
fn page_id(message: &PageMessage) -> u64 {
    message.id.parse().unwrap_or_default()
}
