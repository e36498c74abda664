//! Message changes as Discord makes them: create (length, emptiness, nonce, mentions), edit, delete, react; each
//! dispatched to the connected bots.

use crate::rest::ApiError;
use crate::world::{Author, MESSAGE_CONTENT_LENGTH_MAX, Mentions, Message, World, now_ms, snowflake_ms};
use serde_json::{Value, json};

impl World {
    /// Posts a message after Discord's checks (length, emptiness, nonce) and dispatches MESSAGE_CREATE.
    pub fn create_message(
        &mut self,
        channel: u64,
        author: Author,
        content: &str,
        nonce: Option<&str>,
        allowed_mentions: Option<&Value>,
        reply_to: Option<u64>,
    ) -> Result<u64, ApiError> {
        let guild_id = self.channels.get(&channel).ok_or(ApiError::not_found("Channel", 10003))?.guild_id;
        if content.trim().is_empty() {
            return Err(ApiError::new(400, 50006, "Cannot send an empty message"));
        }
        if content.chars().count() > MESSAGE_CONTENT_LENGTH_MAX {
            return Err(ApiError::too_long(MESSAGE_CONTENT_LENGTH_MAX));
        }
        if let (Some(nonce), Author::User(user)) = (nonce, &author)
            && let Some(first) = self.nonce_seen(*user, nonce)
        {
            return Ok(first);
        }
        let mentions = self.resolve_mentions(guild_id, &author, content, allowed_mentions);
        let id = self.insert_message(channel, author.clone(), content, nonce, mentions, reply_to)?;
        if let (Some(nonce), Author::User(user)) = (nonce, &author) {
            self.remember_nonce(*user, nonce, id);
        }
        Ok(id)
    }

    /// Adds a message as it is, without the checks a client's request gets, and dispatches MESSAGE_CREATE.
    pub(crate) fn insert_message(
        &mut self,
        channel: u64,
        author: Author,
        content: &str,
        nonce: Option<&str>,
        mentions: Mentions,
        reply_to: Option<u64>,
    ) -> Result<u64, ApiError> {
        let guild_id = self.channels.get(&channel).ok_or(ApiError::not_found("Channel", 10003))?.guild_id;
        let id = self.snowflake();
        let message = Message {
            id,
            channel_id: channel,
            guild_id,
            author,
            content: content.to_owned(),
            created_ms: snowflake_ms(id),
            edited_ms: None,
            deleted: false,
            nonce: nonce.map(str::to_owned),
            mentions: mentions.mentions,
            mention_everyone: mentions.mention_everyone,
            mention_roles: mentions.mention_roles,
            pinged: mentions.pinged,
            reactions: Vec::new(),
            reply_to,
            interaction_id: None,
        };
        let json = self.message_json(&message);
        self.feed.publish(&message);
        self.messages.insert(id, message);
        self.dispatch(Some(guild_id), "MESSAGE_CREATE", json);
        Ok(id)
    }

    /// Replaces a message's content and dispatches MESSAGE_UPDATE.
    pub fn edit_message(&mut self, message: u64, content: &str) -> Result<(), ApiError> {
        if content.chars().count() > MESSAGE_CONTENT_LENGTH_MAX {
            return Err(ApiError::too_long(MESSAGE_CONTENT_LENGTH_MAX));
        }
        let m = self.messages.get_mut(&message).ok_or(ApiError::not_found("Message", 10008))?;
        m.content = content.to_owned();
        m.edited_ms = Some(now_ms());
        let guild = m.guild_id;
        let value = self.message_json(&self.messages[&message]);
        self.dispatch(Some(guild), "MESSAGE_UPDATE", value);
        Ok(())
    }

    /// Deletes a message (it disappears for people) and dispatches MESSAGE_DELETE.
    pub fn delete_message(&mut self, message: u64) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        m.deleted = true;
        let data =
            json!({"id": m.id.to_string(), "channel_id": m.channel_id.to_string(), "guild_id": m.guild_id.to_string()});
        let guild = m.guild_id;
        self.dispatch(Some(guild), "MESSAGE_DELETE", data);
    }

    pub fn react(&mut self, message: u64, user: u64, emoji: &str, add: bool) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        let position = m.reactions.iter().position(|(e, _)| e == emoji);
        match (position, add) {
            (Some(i), true) if !m.reactions[i].1.contains(&user) => m.reactions[i].1.push(user),
            (None, true) => m.reactions.push((emoji.to_owned(), vec![user])),
            (Some(i), false) => {
                m.reactions[i].1.retain(|u| *u != user);
                if m.reactions[i].1.is_empty() {
                    m.reactions.remove(i);
                }
            }
            _ => {}
        }
    }
}
