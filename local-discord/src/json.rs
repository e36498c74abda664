//! The server's objects as Discord sends them: users, members, roles, channels (text, threads, DMs), guilds,
//! messages (with embeds, attachments and references) and reaction emoji. Every field a common client requires is
//! here: serenity, discord.py and discord.js each refuse or crash on a different missing one.

use crate::world::{Attachment, Author, Channel, ChannelKind, Guild, Message, Role, World, iso, now_ms, snowflake_ms};
use serde_json::{Value, json};

impl World {
    pub fn user_json(&self, id: u64) -> Value {
        let user = self.users.get(&id);
        json!({
            "id": id.to_string(),
            "username": user.map_or("unknown", |u| u.name.as_str()),
            "global_name": user.map(|u| u.name.clone()),
            "discriminator": "0",
            "avatar": null,
            "bot": user.is_some_and(|u| u.bot),
        })
    }

    pub fn member_json(&self, guild: &Guild, user: u64) -> Value {
        let roles: Vec<String> = guild.members.get(&user).into_iter().flatten().map(u64::to_string).collect();
        json!({
            "user": self.user_json(user), "roles": roles, "joined_at": iso(snowflake_ms(guild.id)),
            "deaf": false, "mute": false, "flags": 0, "pending": false,
        })
    }

    /// A member without its `user` (as inside MESSAGE_CREATE and reactions), when `user` is in the guild.
    pub fn partial_member_json(&self, guild_id: u64, user: u64) -> Option<Value> {
        let guild = self.guilds.get(&guild_id).filter(|g| g.members.contains_key(&user))?;
        let mut member = self.member_json(guild, user);
        member.as_object_mut().map(|o| o.remove("user"));
        Some(member)
    }

    pub fn role_json(role: &Role, position: usize) -> Value {
        json!({
            "id": role.id.to_string(), "name": role.name, "color": 0, "colors": {"primary_color": 0},
            "hoist": false, "managed": false, "mentionable": role.mentionable, "position": position,
            "permissions": role.permissions.bits().to_string(), "flags": 0,
        })
    }

    pub fn channel_json(&self, channel: &Channel) -> Value {
        if channel.kind == ChannelKind::Dm {
            return self.dm_json(channel);
        }
        let overwrites: Vec<Value> = channel
            .overwrites
            .iter()
            .map(|o| {
                let (id, kind) = match o.target {
                    crate::world::OverwriteTarget::Role(id) => (id, 0),
                    crate::world::OverwriteTarget::Member(id) => (id, 1),
                };
                json!({"id": id.to_string(), "type": kind, "allow": o.allow.bits().to_string(), "deny": o.deny.bits().to_string()})
            })
            .collect();
        let mut value = json!({
            "id": channel.id.to_string(), "guild_id": channel.guild_id.to_string(), "name": channel.name,
            "type": channel.kind as u8, "position": 0, "permission_overwrites": overwrites, "nsfw": false,
            "topic": channel.topic, "rate_limit_per_user": 0, "flags": 0, "last_message_id": self.last_message_id(channel.id),
        });
        if let Some(parent) = channel.parent_id {
            let in_thread = self.messages.values().filter(|m| m.channel_id == channel.id);
            let total = in_thread.clone().count();
            let shown = in_thread.clone().filter(|m| !m.deleted).count();
            let mut members: Vec<u64> = in_thread.filter_map(|m| m.author_user()).collect();
            let owner =
                channel.owner_id.unwrap_or_else(|| self.guilds.get(&channel.guild_id).map_or(0, |g| g.owner_id));
            members.push(owner);
            members.sort_unstable();
            members.dedup();
            value["parent_id"] = json!(parent.to_string());
            value["owner_id"] = json!(owner.to_string());
            value["message_count"] = json!(shown);
            value["total_message_sent"] = json!(total);
            value["member_count"] = json!(members.len().min(50));
            value["thread_metadata"] = json!({
                "archived": channel.archived, "auto_archive_duration": 1440, "archive_timestamp": iso(now_ms()), "locked": false,
                "invitable": true, "create_timestamp": iso(snowflake_ms(channel.id)),
            });
        }
        value
    }

    fn dm_json(&self, channel: &Channel) -> Value {
        json!({
            "id": channel.id.to_string(), "type": ChannelKind::Dm as u8, "flags": 0,
            "last_message_id": self.last_message_id(channel.id),
            "recipients": channel.recipients.iter().map(|u| self.user_json(*u)).collect::<Vec<_>>(),
        })
    }

    /// A DM channel as one of its two users sees it: `recipients` lists only the other one.
    pub fn dm_json_for(&self, channel: &Channel, me: u64) -> Value {
        let mut value = self.dm_json(channel);
        let others: Vec<Value> = channel.recipients.iter().filter(|u| **u != me).map(|u| self.user_json(*u)).collect();
        value["recipients"] = json!(others);
        value
    }

    fn last_message_id(&self, channel: u64) -> Value {
        let last = self.messages.values().rev().find(|m| m.channel_id == channel && !m.deleted);
        last.map_or(Value::Null, |m| json!(m.id.to_string()))
    }

    pub fn guild_json(&self, guild: &Guild) -> Value {
        let roles: Vec<Value> = guild.roles.iter().enumerate().map(|(i, r)| Self::role_json(r, i)).collect();
        let members: Vec<Value> = guild.members.keys().map(|u| self.member_json(guild, *u)).collect();
        let (threads, channels): (Vec<&Channel>, Vec<&Channel>) =
            self.channels.values().filter(|c| c.guild_id == guild.id && !c.archived).partition(|c| c.kind.is_thread());
        json!({
            "id": guild.id.to_string(), "name": guild.name, "owner_id": guild.owner_id.to_string(),
            "icon": null, "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
            "roles": roles, "emojis": [], "features": [], "mfa_level": 0, "system_channel_flags": 0,
            "premium_tier": 0, "preferred_locale": "en-US", "nsfw_level": 0, "stickers": [],
            "premium_progress_bar_enabled": false, "joined_at": iso(snowflake_ms(guild.id)), "large": false,
            "member_count": guild.members.len(), "voice_states": [], "members": members,
            "channels": channels.iter().map(|c| self.channel_json(c)).collect::<Vec<_>>(),
            "threads": threads.iter().map(|c| self.channel_json(c)).collect::<Vec<_>>(),
            "presences": [], "stage_instances": [], "guild_scheduled_events": [], "unavailable": false,
        })
    }

    pub fn attachment_json(&self, channel: u64, a: &Attachment) -> Value {
        let url = format!("{}/attachments/{channel}/{}/{}", self.base_url, a.id, a.filename);
        let mut value = json!({
            "id": a.id.to_string(), "filename": a.filename, "size": a.size, "url": url, "proxy_url": url,
            "content_type": a.content_type,
        });
        if let Some(description) = &a.description {
            value["description"] = json!(description);
        }
        value
    }

    pub fn message_json(&self, m: &Message) -> Value {
        let mut value = self.message_json_alone(m);
        if let Some(reply) = m.reply_to {
            value["referenced_message"] =
                self.messages.get(&reply).filter(|r| !r.deleted).map_or(Value::Null, |r| self.message_json_alone(r));
        }
        value
    }

    /// A message without the message it replies to.
    fn message_json_alone(&self, m: &Message) -> Value {
        let author = match &m.author {
            Author::User(id) => self.user_json(*id),
            Author::Webhook { webhook_id, name, .. } => json!({
                "id": webhook_id.to_string(), "username": name, "discriminator": "0000", "avatar": null, "bot": true,
            }),
        };
        let reactions: Vec<Value> = m
            .reactions
            .iter()
            .map(|(emoji, users)| json!({"count": users.len(), "me": false, "emoji": emoji_json(emoji),
                "count_details": {"burst": 0, "normal": users.len()}, "burst_colors": [], "me_burst": false, "burst_count": 0}))
            .collect();
        let attachments: Vec<Value> = m.attachments.iter().map(|a| self.attachment_json(m.channel_id, a)).collect();
        let mut value = json!({
            "id": m.id.to_string(), "channel_id": m.channel_id.to_string(),
            "author": author, "content": m.content, "timestamp": iso(m.created_ms),
            "edited_timestamp": m.edited_ms.map(iso), "tts": false, "mention_everyone": m.mention_everyone,
            "mentions": m.mentions.iter().map(|u| self.user_json(*u)).collect::<Vec<_>>(),
            "mention_roles": m.mention_roles.iter().map(u64::to_string).collect::<Vec<_>>(),
            "attachments": attachments, "embeds": m.embeds, "reactions": reactions, "pinned": m.pinned_ms.is_some(),
            "type": m.kind.unwrap_or(if m.reply_to.is_some() { 19 } else { 0 }), "flags": m.flags | if m.thread_id.is_some() { 32 } else { 0 },
            "components": [],
        });
        if m.guild_id != 0 {
            value["guild_id"] = json!(m.guild_id.to_string());
        }
        if let Author::Webhook { webhook_id, .. } = &m.author {
            value["webhook_id"] = json!(webhook_id.to_string());
        }
        if let Some(member) = m.author_user().and_then(|id| self.partial_member_json(m.guild_id, id)) {
            value["member"] = member;
        }
        if let Some(nonce) = &m.nonce {
            value["nonce"] = json!(nonce);
        }
        if let Some(reply) = m.reply_to {
            value["message_reference"] = json!({"type": 0, "message_id": reply.to_string(),
                "channel_id": m.channel_id.to_string()});
            if m.guild_id != 0 {
                value["message_reference"]["guild_id"] = json!(m.guild_id.to_string());
            }
        }
        if let Some(thread) = m.thread_id.and_then(|t| self.channels.get(&t)) {
            value["thread"] = self.channel_json(thread);
        }
        value
    }
}

impl Message {
    /// The user who wrote it, unless a webhook did.
    pub fn author_user(&self) -> Option<u64> {
        match self.author {
            Author::User(id) => Some(id),
            Author::Webhook { .. } => None,
        }
    }
}

/// A reaction's emoji: a unicode one (`✅`) or a custom one written `name:id` in the route.
pub fn emoji_json(emoji: &str) -> Value {
    match emoji.split_once(':') {
        Some((name, id)) if id.parse::<u64>().is_ok() => json!({"id": id, "name": name}),
        _ => json!({"id": null, "name": emoji}),
    }
}
