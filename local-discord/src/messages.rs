//! Message changes as Discord makes them: create (length, emptiness, embeds' limits, nonce, mentions), edit,
//! delete, react; each dispatched to the bots that can see the channel (a guild's members, a DM's two users).

use crate::rest::ApiError;
use crate::world::{
    Attachment, Author, ChannelKind, MESSAGE_CONTENT_LENGTH_MAX, Mentions, Message, World, now_ms, snowflake_ms,
};
use serde_json::{Value, json};

/// Discord's limits on embeds: how many per message, and characters in all of them and in each part.
pub const EMBEDS_PER_MESSAGE_MAX: usize = 10;
pub const EMBEDS_TOTAL_LENGTH_MAX: usize = 6000;
const EMBED_FIELD_LIMITS: [(&str, usize); 2] = [("title", 256), ("description", 4096)];
const EMBED_FIELDS_MAX: usize = 25;

/// What a new message is made of, besides its channel and author.
#[derive(Clone, Debug, Default)]
pub struct Draft<'a> {
    pub content: &'a str,
    pub nonce: Option<&'a str>,
    pub allowed_mentions: Option<&'a Value>,
    pub reply_to: Option<u64>,
    pub embeds: Vec<Value>,
    pub attachments: Vec<Attachment>,
    /// Message flags asked for; only those a client may set are kept ([`SETTABLE_FLAGS`]).
    pub flags: u64,
    /// A system message's type (a pin's notice: 6), set by the server itself, never by a request; `None` for a
    /// message someone wrote (0, or 19 for a reply).
    pub kind: Option<u8>,
}

/// `SUPPRESS_EMBEDS`: no link previews.
pub const SUPPRESS_EMBEDS: u64 = 1 << 2;
/// `SUPPRESS_NOTIFICATIONS` (`@silent`): its mentions are listed, but nobody is notified.
pub const SUPPRESS_NOTIFICATIONS: u64 = 1 << 12;
/// `EPHEMERAL`: an interaction's answer seen by its invoker alone (kept in the channel here, flagged).
pub const EPHEMERAL: u64 = 1 << 6;
/// The type of Discord's notice that a message was pinned (a system message).
pub const CHANNEL_PINNED_MESSAGE: u8 = 6;
/// The flags a message may be created with, by a user, a bot or a webhook (of those this server models).
pub const SETTABLE_FLAGS: u64 = SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS;

impl<'a> Draft<'a> {
    pub fn text(content: &'a str) -> Self {
        Self { content, ..Self::default() }
    }
}

impl World {
    /// Posts a message after Discord's checks (length, emptiness, embeds, nonce) and dispatches MESSAGE_CREATE.
    pub fn create_message(&mut self, channel: u64, author: Author, draft: Draft<'_>) -> Result<u64, ApiError> {
        let guild_id = self.channels.get(&channel).ok_or(ApiError::not_found("Channel", 10003))?.guild_id;
        if draft.content.trim().is_empty() && draft.embeds.is_empty() && draft.attachments.is_empty() {
            return Err(ApiError::new(400, 50006, "Cannot send an empty message"));
        }
        if draft.content.chars().count() > MESSAGE_CONTENT_LENGTH_MAX {
            return Err(ApiError::too_long(MESSAGE_CONTENT_LENGTH_MAX));
        }
        check_embeds(&draft.embeds)?;
        if let (Some(nonce), Author::User(user)) = (draft.nonce, &author)
            && let Some(first) = self.nonce_seen(*user, nonce)
        {
            return Ok(first);
        }
        let mut mentions = self.resolve_mentions(guild_id, channel, &author, draft.content, draft.allowed_mentions);
        self.mention_replied_user(&mut mentions, &author, draft.reply_to, draft.allowed_mentions);
        if draft.flags & SUPPRESS_NOTIFICATIONS != 0 {
            mentions.pinged.clear();
        }
        let nonce = draft.nonce;
        let id = self.insert_message(channel, author.clone(), draft, mentions)?;
        if let (Some(nonce), Author::User(user)) = (nonce, &author) {
            self.remember_nonce(*user, nonce, id);
        }
        Ok(id)
    }

    /// A reply mentions and pings the author of the message it answers, as Discord does: always without
    /// `allowed_mentions`, and with it only when `replied_user` is true. Nobody is pinged by a reply to themself.
    fn mention_replied_user(
        &self,
        mentions: &mut Mentions,
        author: &Author,
        reply_to: Option<u64>,
        allowed: Option<&Value>,
    ) {
        let replied = reply_to.and_then(|id| self.messages.get(&id)).filter(|m| !m.deleted);
        let Some(replied) = replied.and_then(Message::author_user) else { return };
        let wanted = allowed.is_none_or(|a| a["replied_user"].as_bool().unwrap_or(false));
        if !wanted || *author == Author::User(replied) {
            return;
        }
        if !mentions.mentions.contains(&replied) {
            mentions.mentions.push(replied);
        }
        if !mentions.pinged.contains(&replied) {
            mentions.pinged.push(replied);
        }
    }

    /// Adds a message as it is, without the checks a client's request gets, and dispatches MESSAGE_CREATE.
    pub(crate) fn insert_message(
        &mut self,
        channel: u64,
        author: Author,
        draft: Draft<'_>,
        mentions: Mentions,
    ) -> Result<u64, ApiError> {
        let guild_id = self.channels.get(&channel).ok_or(ApiError::not_found("Channel", 10003))?.guild_id;
        let id = self.snowflake();
        let message = Message {
            id,
            channel_id: channel,
            guild_id,
            author,
            content: draft.content.to_owned(),
            created_ms: snowflake_ms(id),
            edited_ms: None,
            deleted: false,
            nonce: draft.nonce.map(str::to_owned),
            mentions: mentions.mentions,
            mention_everyone: mentions.mention_everyone,
            mention_roles: mentions.mention_roles,
            pinged: mentions.pinged,
            reactions: Vec::new(),
            reply_to: draft.reply_to,
            interaction_id: None,
            embeds: draft.embeds,
            attachments: draft.attachments,
            flags: draft.flags & SETTABLE_FLAGS,
            thread_id: None,
            pinned_ms: None,
            kind: draft.kind,
        };
        let json = self.message_json(&message);
        self.feed.publish(&message);
        self.messages.insert(id, message);
        self.dispatch_in_channel(channel, "MESSAGE_CREATE", json);
        Ok(id)
    }

    /// Replaces a message's content and dispatches MESSAGE_UPDATE.
    pub fn edit_message(&mut self, message: u64, content: &str) -> Result<(), ApiError> {
        self.edit_message_with(message, Some(content), None)
    }

    /// Replaces a message's content and/or embeds (what is `None` stays) and dispatches MESSAGE_UPDATE.
    pub fn edit_message_with(
        &mut self,
        message: u64,
        content: Option<&str>,
        embeds: Option<Vec<Value>>,
    ) -> Result<(), ApiError> {
        if content.is_some_and(|c| c.chars().count() > MESSAGE_CONTENT_LENGTH_MAX) {
            return Err(ApiError::too_long(MESSAGE_CONTENT_LENGTH_MAX));
        }
        if let Some(embeds) = &embeds {
            check_embeds(embeds)?;
        }
        let m = self.messages.get_mut(&message).ok_or(ApiError::not_found("Message", 10008))?;
        if let Some(content) = content {
            m.content = content.to_owned();
        }
        if let Some(embeds) = embeds {
            m.embeds = embeds;
        }
        m.edited_ms = Some(now_ms());
        let channel = m.channel_id;
        let value = self.message_json(&self.messages[&message]);
        self.dispatch_in_channel(channel, "MESSAGE_UPDATE", value);
        Ok(())
    }

    /// Deletes a message (it disappears for people) and dispatches MESSAGE_DELETE.
    pub fn delete_message(&mut self, message: u64) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        m.deleted = true;
        let mut data = json!({"id": m.id.to_string(), "channel_id": m.channel_id.to_string()});
        if m.guild_id != 0 {
            data["guild_id"] = json!(m.guild_id.to_string());
        }
        let channel = m.channel_id;
        self.dispatch_in_channel(channel, "MESSAGE_DELETE", data);
    }

    /// Adds or removes `user`'s reaction; when that changes anything, dispatches MESSAGE_REACTION_ADD / REMOVE.
    pub fn react(&mut self, message: u64, user: u64, emoji: &str, add: bool) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        let position = m.reactions.iter().position(|(e, _)| e == emoji);
        let changed = match (position, add) {
            (Some(i), true) if !m.reactions[i].1.contains(&user) => {
                m.reactions[i].1.push(user);
                true
            }
            (None, true) => {
                m.reactions.push((emoji.to_owned(), vec![user]));
                true
            }
            (Some(i), false) if m.reactions[i].1.contains(&user) => {
                m.reactions[i].1.retain(|u| *u != user);
                if m.reactions[i].1.is_empty() {
                    m.reactions.remove(i);
                }
                true
            }
            _ => false,
        };
        if !changed {
            return;
        }
        let (channel, guild, author) = (m.channel_id, m.guild_id, m.author_user());
        let mut data = json!({
            "user_id": user.to_string(), "channel_id": channel.to_string(), "message_id": message.to_string(),
            "emoji": crate::json::emoji_json(emoji), "burst": false, "type": 0,
        });
        if guild != 0 {
            data["guild_id"] = json!(guild.to_string());
        }
        let event = if add {
            if let Some(mut member) = self.partial_member_json(guild, user) {
                member["user"] = self.user_json(user);
                data["member"] = member;
            }
            if let Some(author) = author {
                data["message_author_id"] = json!(author.to_string());
            }
            data["burst_colors"] = json!([]);
            "MESSAGE_REACTION_ADD"
        } else {
            "MESSAGE_REACTION_REMOVE"
        };
        self.dispatch_in_channel(channel, event, data);
    }

    /// A user starts typing: TYPING_START goes to whoever sees the channel.
    pub fn start_typing(&mut self, channel: u64, user: u64) {
        let Some(c) = self.channels.get(&channel) else { return };
        let guild = c.guild_id;
        let mut data =
            json!({"channel_id": channel.to_string(), "user_id": user.to_string(), "timestamp": now_ms() / 1000});
        if guild != 0 {
            data["guild_id"] = json!(guild.to_string());
            if let Some(mut member) = self.partial_member_json(guild, user) {
                member["user"] = self.user_json(user);
                data["member"] = member;
            }
        }
        self.typing.push((channel, user));
        self.dispatch_in_channel(channel, "TYPING_START", data);
    }

    /// Sends a dispatch about something in a channel to those who see it: a DM's two users, or the guild.
    pub fn dispatch_in_channel(&mut self, channel: u64, event: &str, data: Value) {
        match self.channels.get(&channel) {
            Some(c) if c.kind == ChannelKind::Dm => {
                let recipients = c.recipients.clone();
                self.dispatch_to_users(None, &recipients, event, data);
            }
            Some(c) => {
                let guild = c.guild_id;
                self.dispatch(Some(guild), event, data);
            }
            None => {}
        }
    }
}

/// Discord's limits on embeds; over them, 400 with code 50035 as Discord answers.
fn check_embeds(embeds: &[Value]) -> Result<(), ApiError> {
    let invalid = |field: String, message: String| {
        let mut e = ApiError::new(400, 50035, "Invalid Form Body");
        e.errors = Some(json!({ field: {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": message}]}}));
        Err(e)
    };
    if embeds.len() > EMBEDS_PER_MESSAGE_MAX {
        return invalid("embeds".into(), format!("Must be {EMBEDS_PER_MESSAGE_MAX} or fewer in length."));
    }
    let length = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let mut total = 0;
    for (i, embed) in embeds.iter().enumerate() {
        for (field, limit) in EMBED_FIELD_LIMITS {
            if length(&embed[field]) > limit {
                return invalid(format!("embeds.{i}.{field}"), format!("Must be {limit} or fewer in length."));
            }
        }
        let fields = embed["fields"].as_array().map_or(&[][..], Vec::as_slice);
        if fields.len() > EMBED_FIELDS_MAX {
            return invalid(format!("embeds.{i}.fields"), format!("Must be {EMBED_FIELDS_MAX} or fewer in length."));
        }
        total += length(&embed["title"])
            + length(&embed["description"])
            + length(&embed["footer"]["text"])
            + length(&embed["author"]["name"])
            + fields.iter().map(|f| length(&f["name"]) + length(&f["value"])).sum::<usize>();
    }
    if total > EMBEDS_TOTAL_LENGTH_MAX {
        return invalid("embeds".into(), format!("Embed size exceeds maximum size of {EMBEDS_TOTAL_LENGTH_MAX}"));
    }
    Ok(())
}

/// Discord's bounds on a bulk delete: how many messages, and how old they may be.
pub const BULK_DELETE_MIN: usize = 2;
pub const BULK_DELETE_MAX: usize = 100;
const BULK_DELETE_MAX_AGE_MS: u64 = 14 * 24 * 3600 * 1000;

impl World {
    /// Pins or unpins a message, `by` a user, and dispatches CHANNEL_PINS_UPDATE: a pin posts Discord's notice of
    /// it, a system message (type 6, `CHANNEL_PINNED_MESSAGE`) by that user, with no content, referring to it.
    pub fn pin(&mut self, message: u64, pinned: bool, by: u64) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        if m.pinned_ms.is_some() == pinned {
            return;
        }
        m.pinned_ms = pinned.then(now_ms);
        let channel = m.channel_id;
        if pinned {
            let notice = Draft { reply_to: Some(message), kind: Some(CHANNEL_PINNED_MESSAGE), ..Draft::default() };
            let _ = self.insert_message(channel, Author::User(by), notice, Mentions::default());
        }
        let last = self.messages.values().filter(|m| m.channel_id == channel).filter_map(|m| m.pinned_ms).max();
        let mut data = json!({"channel_id": channel.to_string(), "last_pin_timestamp": last.map(crate::world::iso)});
        if let Some(guild) = self.channels.get(&channel).map(|c| c.guild_id).filter(|g| *g != 0) {
            data["guild_id"] = json!(guild.to_string());
        }
        self.dispatch_in_channel(channel, "CHANNEL_PINS_UPDATE", data);
    }

    /// Removes every reaction of a message (or every one with `emoji`) and dispatches MESSAGE_REACTION_REMOVE_ALL
    /// (or MESSAGE_REACTION_REMOVE_EMOJI).
    pub fn clear_reactions(&mut self, message: u64, emoji: Option<&str>) {
        let Some(m) = self.messages.get_mut(&message) else { return };
        let before = m.reactions.len();
        m.reactions.retain(|(e, _)| emoji.is_some_and(|only| only != e));
        if m.reactions.len() == before {
            return;
        }
        let (channel, guild) = (m.channel_id, m.guild_id);
        let mut data = json!({"channel_id": channel.to_string(), "message_id": message.to_string()});
        if guild != 0 {
            data["guild_id"] = json!(guild.to_string());
        }
        let event = match emoji {
            Some(emoji) => {
                data["emoji"] = crate::json::emoji_json(emoji);
                "MESSAGE_REACTION_REMOVE_EMOJI"
            }
            None => "MESSAGE_REACTION_REMOVE_ALL",
        };
        self.dispatch_in_channel(channel, event, data);
    }

    /// Deletes 2 to 100 messages of a channel, none older than two weeks, and dispatches MESSAGE_DELETE_BULK.
    pub fn bulk_delete(&mut self, channel: u64, ids: &[u64]) -> Result<(), ApiError> {
        if !(BULK_DELETE_MIN..=BULK_DELETE_MAX).contains(&ids.len()) {
            return Err(ApiError::new(
                400,
                50016,
                "You must provide at least 2 and fewer than 100 messages to delete.",
            ));
        }
        if ids.iter().any(|id| now_ms().saturating_sub(snowflake_ms(*id)) > BULK_DELETE_MAX_AGE_MS) {
            return Err(ApiError::new(400, 50034, "You can only bulk delete messages that are under 14 days old."));
        }
        let found: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| self.messages.get(id).is_some_and(|m| m.channel_id == channel && !m.deleted))
            .collect();
        for id in &found {
            self.messages.get_mut(id).expect("found").deleted = true;
        }
        let mut data =
            json!({"ids": found.iter().map(u64::to_string).collect::<Vec<_>>(), "channel_id": channel.to_string()});
        if let Some(guild) = self.channels.get(&channel).map(|c| c.guild_id).filter(|g| *g != 0) {
            data["guild_id"] = json!(guild.to_string());
        }
        self.dispatch_in_channel(channel, "MESSAGE_DELETE_BULK", data);
        Ok(())
    }
}
