//! Channels made at a client's request: DM channels (one per pair of users) and threads, started from a message
//! (the thread takes the message's id, as on Discord) or on their own.

use crate::rest::ApiError;
use crate::world::{Channel, ChannelKind, World};
use serde_json::json;

/// Discord's longest channel or thread name.
pub const CHANNEL_NAME_LENGTH_MAX: usize = 100;

impl World {
    /// The DM channel between two users, made on first use.
    pub fn open_dm(&mut self, me: u64, other: u64) -> Result<u64, ApiError> {
        if !self.users.contains_key(&other) {
            return Err(ApiError::new(400, 50035, "Invalid Form Body"));
        }
        let pair =
            |c: &&Channel| c.kind == ChannelKind::Dm && c.recipients.contains(&me) && c.recipients.contains(&other);
        if let Some(existing) = self.channels.values().find(pair) {
            return Ok(existing.id);
        }
        let id = self.snowflake();
        self.channels.insert(
            id,
            Channel {
                id,
                guild_id: 0,
                name: String::new(),
                parent_id: None,
                overwrites: Vec::new(),
                kind: ChannelKind::Dm,
                owner_id: None,
                recipients: vec![me, other],
                topic: None,
                archived: false,
            },
        );
        Ok(id)
    }

    /// A thread under `parent` started by `owner`: from `message` (the thread takes its id) or on its own (a new
    /// id). Dispatches THREAD_CREATE (the message's `thread` shows it from then on; no MESSAGE_UPDATE, so that
    /// bots that read edits as streamed text are not disturbed).
    pub fn start_thread(
        &mut self,
        parent: u64,
        owner: u64,
        name: &str,
        kind: ChannelKind,
        message: Option<u64>,
    ) -> Result<u64, ApiError> {
        let parent_channel = self.channels.get(&parent).ok_or(ApiError::not_found("Channel", 10003))?;
        if parent_channel.kind != ChannelKind::Text {
            return Err(ApiError::new(400, 50024, "Cannot execute action on this channel type"));
        }
        let guild_id = parent_channel.guild_id;
        let name_length = name.chars().count();
        if name_length == 0 || name_length > CHANNEL_NAME_LENGTH_MAX {
            let mut e = ApiError::new(400, 50035, "Invalid Form Body");
            e.errors = Some(json!({"name": {"_errors": [{"code": "BASE_TYPE_BAD_LENGTH",
                "message": format!("Must be between 1 and {CHANNEL_NAME_LENGTH_MAX} in length.")}]}}));
            return Err(e);
        }
        let id = match message {
            Some(message) => {
                let m = self.messages.get(&message).filter(|m| m.channel_id == parent && !m.deleted);
                let m = m.ok_or(ApiError::not_found("Message", 10008))?;
                if m.thread_id.is_some() {
                    return Err(ApiError::new(400, 160004, "A thread has already been created for this message"));
                }
                message
            }
            None => self.snowflake(),
        };
        self.channels.insert(
            id,
            Channel {
                id,
                guild_id,
                name: name.to_owned(),
                parent_id: Some(parent),
                overwrites: Vec::new(),
                kind,
                owner_id: Some(owner),
                recipients: Vec::new(),
                topic: None,
                archived: false,
            },
        );
        let mut thread = self.channel_json(&self.channels[&id]);
        thread["newly_created"] = json!(true);
        self.dispatch(Some(guild_id), "THREAD_CREATE", thread);
        if let Some(message) = message {
            self.messages.get_mut(&message).expect("checked").thread_id = Some(id);
        }
        Ok(id)
    }
}

impl World {
    /// Deletes a channel or a thread, as a person in Server Settings would: CHANNEL_DELETE (THREAD_DELETE for a
    /// thread, with Discord's short payload) goes out first, then the channel, its threads, their messages and its
    /// webhooks are gone, and every call naming it answers 404 Unknown Channel. A channel's threads go with it
    /// without events of their own, as on Discord.
    pub fn delete_channel(&mut self, channel: u64) -> Result<(), ApiError> {
        let c = self.channels.get(&channel).ok_or(ApiError::not_found("Channel", 10003))?;
        let (event, value) = if c.kind.is_thread() {
            let short = json!({
                "id": channel.to_string(),
                "guild_id": c.guild_id.to_string(),
                "parent_id": c.parent_id.map(|p| p.to_string()),
                "type": self.channel_json(c)["type"],
            });
            ("THREAD_DELETE", short)
        } else {
            ("CHANNEL_DELETE", self.channel_json(c))
        };
        self.dispatch_in_channel(channel, event, value);
        let gone: Vec<u64> =
            self.channels.values().filter(|c| c.id == channel || c.parent_id == Some(channel)).map(|c| c.id).collect();
        self.channels.retain(|id, _| !gone.contains(id));
        self.messages.retain(|_, m| !gone.contains(&m.channel_id));
        self.webhooks.retain(|_, h| !gone.contains(&h.channel_id));
        Ok(())
    }

    /// Archives a thread, as Discord does once it has been quiet for its auto-archive time: THREAD_UPDATE with
    /// `archived`, and GUILD_CREATE lists it no more among the server's active threads.
    pub fn archive_thread(&mut self, thread: u64) -> Result<(), ApiError> {
        let c = self.channels.get_mut(&thread).ok_or(ApiError::not_found("Channel", 10003))?;
        if !c.kind.is_thread() {
            return Err(ApiError::new(400, 50024, "Cannot execute action on this channel type"));
        }
        c.archived = true;
        let value = self.channel_json(&self.channels[&thread]);
        self.dispatch_in_channel(thread, "THREAD_UPDATE", value);
        Ok(())
    }

    /// Renames a channel or changes its topic (what is `None` stays) and dispatches CHANNEL_UPDATE (THREAD_UPDATE
    /// for a thread).
    pub fn edit_channel(
        &mut self,
        channel: u64,
        name: Option<&str>,
        topic: Option<Option<&str>>,
    ) -> Result<(), ApiError> {
        if let Some(name) = name
            && !(1..=CHANNEL_NAME_LENGTH_MAX).contains(&name.chars().count())
        {
            return Err(ApiError::new(400, 50035, "Invalid Form Body"));
        }
        let c = self.channels.get_mut(&channel).ok_or(ApiError::not_found("Channel", 10003))?;
        if let Some(name) = name {
            c.name = name.to_owned();
        }
        if let Some(topic) = topic {
            c.topic = topic.map(str::to_owned);
        }
        let event = if c.kind.is_thread() { "THREAD_UPDATE" } else { "CHANNEL_UPDATE" };
        let value = self.channel_json(&self.channels[&channel]);
        self.dispatch_in_channel(channel, event, value);
        Ok(())
    }
}
