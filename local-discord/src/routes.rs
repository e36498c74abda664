//! The REST routes as a bot calls them: gateway discovery, users and DM channels, channels (read, edit), messages
//! (with embeds, files, replies; bulk delete), pins, reactions, typing, threads, guilds, members and emojis; webhook, interaction and command
//! routes are in `hooks`. Permissions are checked as Discord checks them.

use crate::hooks::{self, embeds_of, webhook_json};
use crate::messages::Draft;
use crate::multipart::Upload;
use crate::permissions::Permissions;
use crate::rest::{ApiError, Call, Reply};
use crate::world::{Attachment, Author, ChannelKind, Message, Webhook, World, snowflake_of};
use serde_json::{Value, json};
use std::collections::HashMap;

/// Discord's most webhooks in one channel.
const WEBHOOKS_PER_CHANNEL_MAX: usize = 15;
/// Discord's most webhooks in one server.
const WEBHOOKS_PER_GUILD_MAX: usize = 1_000;
/// Discord's largest upload for a bot without boosts, per file.
pub const ATTACHMENT_SIZE_MAX: usize = 10 * 1024 * 1024;
/// Discord's most pinned messages in one channel.
const PINS_PER_CHANNEL_MAX: usize = 250;
/// Discord's most files on one message.
pub const ATTACHMENTS_PER_MESSAGE_MAX: usize = 10;

fn id(segment: &str) -> Result<u64, ApiError> {
    segment.parse().map_err(|_| ApiError::new(404, 0, "404: Not Found"))
}

pub(crate) fn route_call(w: &mut World, gateway_url: &str, call: &Call<'_>, bot: Option<u64>) -> Reply {
    let (m, seg, query, body) = (call.method, call.seg, call.query, call.body);
    // Routes that need no bot token: gateway discovery, webhooks by token, interaction callbacks.
    match (m, seg) {
        ("GET", ["gateway"]) => return Ok((200, json!({"url": gateway_url}))),
        ("POST", ["interactions", interaction, token, "callback"]) => {
            return hooks::interaction_callback(w, id(interaction)?, token, body);
        }
        ("POST", ["webhooks", hook, token]) => {
            return hooks::execute_webhook(w, id(hook)?, token, query, body, call.files);
        }
        ("GET" | "DELETE", ["webhooks", hook, token]) => {
            let hook = id(hook)?;
            hooks::by_token(w, hook, token)?;
            if m == "DELETE" {
                w.webhooks.remove(&hook);
                return Ok((204, Value::Null));
            }
            return Ok((200, webhook_json(w, hook)));
        }
        ("GET" | "PATCH" | "DELETE", ["webhooks", app, token, "messages", which]) => {
            return hooks::interaction_message(w, m, id(app)?, token, which, query, body);
        }
        _ => {}
    }
    let Some(me) = bot else {
        return Err(ApiError::new(401, 0, "401: Unauthorized"));
    };
    match seg {
        ["channels", channel, "messages", ..] => message_routes(w, me, id(channel)?, call),
        ["channels", ..] => channel_routes(w, me, call),
        _ => other_routes(w, me, gateway_url, m, seg, body),
    }
}

/// Users, DM channels, the application and its commands, guilds and members.
fn other_routes(w: &mut World, me: u64, gateway_url: &str, m: &str, seg: &[&str], body: &Value) -> Reply {
    match (m, seg) {
        ("GET", ["gateway", "bot"]) => Ok((
            200,
            json!({"url": gateway_url, "shards": 1, "session_start_limit":
                {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}}),
        )),
        ("GET", ["users", "@me"]) => Ok((200, w.user_json(me))),
        ("POST", ["users", "@me", "channels"]) => {
            let other =
                snowflake_of(&body["recipient_id"]).ok_or_else(|| ApiError::new(400, 50035, "Invalid Form Body"))?;
            let dm = w.open_dm(me, other)?;
            Ok((200, w.dm_json_for(&w.channels[&dm], me)))
        }
        ("GET", ["users", "@me", "channels"]) => {
            let dms = w.channels.values().filter(|c| c.kind == ChannelKind::Dm && c.recipients.contains(&me));
            Ok((200, Value::Array(dms.map(|c| w.dm_json_for(c, me)).collect())))
        }
        ("GET", ["users", "@me", "guilds"]) => {
            let guilds = w.guilds.values().filter(|g| g.members.contains_key(&me));
            let list = guilds.map(|g| {
                json!({"id": g.id.to_string(), "name": g.name, "icon": null,
                "owner": g.owner_id == me, "permissions": crate::permissions::base(g, me).bits().to_string(),
                "features": []})
            });
            Ok((200, Value::Array(list.collect())))
        }
        ("GET", ["users", user]) => {
            let user = id(user)?;
            if !w.users.contains_key(&user) {
                return Err(ApiError::not_found("User", 10013));
            }
            Ok((200, w.user_json(user)))
        }
        ("GET", ["oauth2", "applications", "@me"] | ["applications", "@me"]) => {
            Ok((200, hooks::application_json(w, me)))
        }
        (_, ["applications", _app, "commands"]) => hooks::commands(w, m, me, None, body),
        (_, ["applications", _app, "guilds", guild, "commands"]) => hooks::commands(w, m, me, Some(id(guild)?), body),
        ("DELETE", ["webhooks", hook]) => {
            let hook = w.webhooks.get(&id(hook)?).ok_or(ApiError::not_found("Webhook", 10015))?.clone();
            require(w, me, hook.channel_id, Permissions::MANAGE_WEBHOOKS)?;
            w.webhooks.remove(&hook.id);
            Ok((204, Value::Null))
        }
        ("GET", ["webhooks", hook]) => {
            let hook = id(hook)?;
            w.webhooks.get(&hook).ok_or(ApiError::not_found("Webhook", 10015))?;
            Ok((200, webhook_json(w, hook)))
        }
        ("GET", ["guilds", guild, ..]) => guild_routes(w, id(guild)?, &seg[2..]),
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

fn guild_routes(w: &World, guild: u64, rest: &[&str]) -> Reply {
    let g = w.guilds.get(&guild).ok_or(ApiError::not_found("Guild", 10004))?;
    match rest {
        [] => Ok((200, w.guild_json(g))),
        ["roles"] => Ok((200, Value::Array(g.roles.iter().enumerate().map(|(i, r)| World::role_json(r, i)).collect()))),
        ["channels"] => {
            let channels = w.channels.values().filter(|c| c.guild_id == guild && !c.kind.is_thread());
            Ok((200, Value::Array(channels.map(|c| w.channel_json(c)).collect())))
        }
        ["threads", "active"] => {
            let threads = w.channels.values().filter(|c| c.guild_id == guild && c.kind.is_thread() && !c.archived);
            Ok((200, json!({"threads": threads.map(|c| w.channel_json(c)).collect::<Vec<_>>(), "members": []})))
        }
        ["emojis"] => Ok((200, json!([]))),
        ["members"] => Ok((200, Value::Array(g.members.keys().map(|u| w.member_json(g, *u)).collect()))),
        ["members", user] => {
            let user = id(user)?;
            // As Discord: an id that is no account at all is told from an account that is not in the guild.
            if !w.users.contains_key(&user) {
                return Err(ApiError::not_found("User", 10013));
            }
            if !g.members.contains_key(&user) {
                return Err(ApiError::not_found("Member", 10007));
            }
            Ok((200, w.member_json(g, user)))
        }
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

/// A channel, its webhooks, typing, and threads started without a message.
fn channel_routes(w: &mut World, me: u64, call: &Call<'_>) -> Reply {
    let body = call.body;
    match (call.method, call.seg) {
        ("PATCH", ["channels", channel]) => {
            let channel = id(channel)?;
            let owner = w.channels.get(&channel).and_then(|c| c.owner_id);
            if owner != Some(me) {
                require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::MANAGE_CHANNELS)?;
            }
            let topic = body.get("topic").map(Value::as_str);
            w.edit_channel(channel, body["name"].as_str(), topic)?;
            Ok((200, w.channel_json(&w.channels[&channel])))
        }
        ("GET", ["channels", channel, "pins"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
            Ok((200, Value::Array(pinned(w, channel).into_iter().map(|m| w.message_json(m)).collect())))
        }
        ("PUT" | "DELETE", ["channels", channel, "pins", message]) => {
            pin_route(w, me, id(channel)?, id(message)?, call.method == "PUT")
        }
        ("GET", ["channels", channel]) => {
            let channel = w.channels.get(&id(channel)?).ok_or(ApiError::not_found("Channel", 10003))?;
            let value =
                if channel.kind == ChannelKind::Dm { w.dm_json_for(channel, me) } else { w.channel_json(channel) };
            Ok((200, value))
        }
        ("POST", ["channels", channel, "typing"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::SEND_MESSAGES)?;
            w.start_typing(channel, me);
            Ok((204, Value::Null))
        }
        ("POST", ["channels", channel, "threads"]) => {
            let channel = id(channel)?;
            // Without a message, Discord makes a private thread unless told otherwise.
            let (kind, needed) = match body["type"].as_u64() {
                Some(11) => (ChannelKind::PublicThread, Permissions::CREATE_PUBLIC_THREADS),
                _ => (ChannelKind::PrivateThread, Permissions::CREATE_PRIVATE_THREADS),
            };
            require(w, me, channel, Permissions::VIEW_CHANNEL | needed)?;
            let thread = w.start_thread(channel, me, body["name"].as_str().unwrap_or_default(), kind, None)?;
            Ok((201, w.channel_json(&w.channels[&thread])))
        }
        ("POST", ["channels", channel, "webhooks"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::MANAGE_WEBHOOKS)?;
            if w.webhooks.values().filter(|h| h.channel_id == channel).count() >= WEBHOOKS_PER_CHANNEL_MAX {
                return Err(ApiError::new(400, 30007, "Maximum number of webhooks reached (15)"));
            }
            let guild_id = w.channels[&channel].guild_id;
            if w.webhooks.values().filter(|h| h.guild_id == guild_id).count() >= WEBHOOKS_PER_GUILD_MAX {
                return Err(ApiError::new(400, 30058, "Maximum number of webhooks per guild reached (1000)"));
            }
            let name = body["name"].as_str().unwrap_or("webhook").to_owned();
            let (hook, token) = (w.snowflake(), format!("tok{:x}", w.snowflake()));
            w.webhooks.insert(hook, Webhook { id: hook, token, channel_id: channel, guild_id, name, creator: me });
            Ok((200, webhook_json(w, hook)))
        }
        ("GET", ["channels", channel, "webhooks"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::MANAGE_WEBHOOKS)?;
            let hooks: Vec<Value> =
                w.webhooks.values().filter(|h| h.channel_id == channel).map(|h| webhook_json(w, h.id)).collect();
            Ok((200, Value::Array(hooks)))
        }
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

/// `/channels/{channel}/messages/...`: list, create, read, edit, delete, react, start a thread.
fn message_routes(w: &mut World, me: u64, channel: u64, call: &Call<'_>) -> Reply {
    let body = call.body;
    match (call.method, &call.seg[3..]) {
        ("GET", []) => list_messages(w, me, channel, call.query),
        ("POST", []) => {
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::SEND_MESSAGES)?;
            if !call.files.is_empty() {
                require(w, me, channel, Permissions::ATTACH_FILES)?;
            }
            // Discord: "When creating a message as a reply to another message, the current user must have the
            // READ_MESSAGE_HISTORY permission."
            let replying = snowflake_of(&body["message_reference"]["message_id"]).is_some();
            if replying && !w.permissions_in(me, channel).contains(Permissions::READ_MESSAGE_HISTORY) {
                return Err(ApiError::new(403, 160002, "Cannot reply without permission to read message history"));
            }
            let draft = draft_from(w, body, call.files)?;
            let message = w.create_message(channel, Author::User(me), draft)?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        ("POST", ["bulk-delete"]) => {
            require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            let ids: Vec<u64> =
                body["messages"].as_array().map_or(&[][..], Vec::as_slice).iter().filter_map(snowflake_of).collect();
            w.bulk_delete(channel, &ids)?;
            Ok((204, Value::Null))
        }
        ("GET", ["pins"]) => {
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
            let items: Vec<Value> = pinned(w, channel)
                .into_iter()
                .map(|m| json!({"pinned_at": m.pinned_ms.map(crate::world::iso), "message": w.message_json(m)}))
                .collect();
            Ok((200, json!({"items": items, "has_more": false})))
        }
        ("PUT" | "DELETE", ["pins", message]) => pin_route(w, me, channel, id(message)?, call.method == "PUT"),
        ("GET", [message]) => {
            let message = find_message(w, channel, id(message)?)?;
            require(w, me, message.channel_id, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
            Ok((200, w.message_json(message)))
        }
        ("PATCH", [message]) => {
            let message = find_message(w, channel, id(message)?)?.id;
            if w.messages[&message].author != Author::User(me) {
                return Err(ApiError::new(403, 50005, "Cannot edit a message authored by another user"));
            }
            w.edit_message_with(message, body["content"].as_str(), embeds_of(body))?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        ("DELETE", [message]) => {
            let message = find_message(w, channel, id(message)?)?.id;
            if w.messages[&message].author != Author::User(me) {
                require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            }
            w.delete_message(message);
            Ok((204, Value::Null))
        }
        ("DELETE", [message, "reactions"]) => {
            let message = find_message(w, channel, id(message)?)?.id;
            require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            w.clear_reactions(message, None);
            Ok((204, Value::Null))
        }
        ("POST", [message, "threads"]) => {
            let message = find_message(w, channel, id(message)?)?.id;
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::CREATE_PUBLIC_THREADS)?;
            let name = body["name"].as_str().unwrap_or_default();
            let thread = w.start_thread(channel, me, name, ChannelKind::PublicThread, Some(message))?;
            Ok((201, w.channel_json(&w.channels[&thread])))
        }
        (method, [message, "reactions", emoji, who @ ..]) => {
            let message = find_message(w, channel, id(message)?)?.id;
            reaction_route(w, me, channel, message, method, emoji, who)
        }
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

/// Add or remove one's own reaction, remove someone else's (Manage Messages), or list who reacted.
fn reaction_route(w: &mut World, me: u64, channel: u64, message: u64, m: &str, emoji: &str, who: &[&str]) -> Reply {
    match (m, who) {
        ("PUT" | "DELETE", ["@me"]) => {
            let mut needed = Permissions::READ_MESSAGE_HISTORY;
            if m == "PUT" {
                needed = needed | Permissions::ADD_REACTIONS;
            }
            require(w, me, channel, needed)?;
            w.react(message, me, emoji, m == "PUT");
            Ok((204, Value::Null))
        }
        ("DELETE", [user]) => {
            require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            w.react(message, id(user)?, emoji, false);
            Ok((204, Value::Null))
        }
        ("DELETE", []) => {
            require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            w.clear_reactions(message, Some(emoji));
            Ok((204, Value::Null))
        }
        ("GET", []) => {
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
            let users = w.messages[&message].reactions.iter().find(|(e, _)| e == emoji).map(|(_, u)| u.clone());
            Ok((200, Value::Array(users.unwrap_or_default().iter().map(|u| w.user_json(*u)).collect())))
        }
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

/// A message's parts from a request body and its uploaded files: content, nonce (with `enforce_nonce`), allowed
/// mentions, reply, embeds, and attachments (described by the body's `attachments`, matched by `files[n]`).
pub(crate) fn draft_from<'a>(w: &mut World, body: &'a Value, files: &[Upload]) -> Result<Draft<'a>, ApiError> {
    if files.len() > ATTACHMENTS_PER_MESSAGE_MAX {
        return Err(ApiError::new(400, 50035, "Invalid Form Body"));
    }
    let described = body["attachments"].as_array().map_or(&[][..], Vec::as_slice);
    let mut attachments = Vec::new();
    for (n, upload) in files.iter().enumerate() {
        if upload.bytes.len() > ATTACHMENT_SIZE_MAX {
            return Err(ApiError::new(413, 40005, "Request entity too large"));
        }
        let index = upload.field.strip_prefix("files[").and_then(|f| f.strip_suffix(']')).and_then(|i| i.parse().ok());
        let index = index.unwrap_or(n as u64);
        let entry = described.iter().find(|a| snowflake_of(&a["id"]) == Some(index)).unwrap_or(&Value::Null);
        let id = w.snowflake();
        w.files.insert(id, upload.bytes.clone());
        attachments.push(Attachment {
            id,
            filename: entry["filename"].as_str().unwrap_or(&upload.filename).to_owned(),
            content_type: upload.content_type.clone(),
            description: entry["description"].as_str().map(str::to_owned),
            size: upload.bytes.len(),
        });
    }
    Ok(Draft {
        content: body["content"].as_str().unwrap_or_default(),
        nonce: body["enforce_nonce"].as_bool().unwrap_or(false).then(|| body["nonce"].as_str()).flatten(),
        allowed_mentions: body.get("allowed_mentions").filter(|a| !a.is_null()),
        reply_to: snowflake_of(&body["message_reference"]["message_id"]),
        embeds: embeds_of(body).unwrap_or_default(),
        attachments,
        flags: body["flags"].as_u64().unwrap_or(0),
        kind: None,
    })
}

/// Pins or unpins (Manage Messages, as Discord has long asked; at most 250 pins a channel).
fn pin_route(w: &mut World, me: u64, channel: u64, message: u64, pin: bool) -> Reply {
    let message = find_message(w, channel, message)?.id;
    require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::MANAGE_MESSAGES)?;
    if pin && pinned(w, channel).len() >= PINS_PER_CHANNEL_MAX {
        return Err(ApiError::new(400, 30003, "Maximum number of pins reached (250)"));
    }
    w.pin(message, pin, me);
    Ok((204, Value::Null))
}

/// A channel's pinned messages, the most recently pinned first.
fn pinned(w: &World, channel: u64) -> Vec<&Message> {
    let mut pins: Vec<&Message> =
        w.messages.values().filter(|m| m.channel_id == channel && !m.deleted && m.pinned_ms.is_some()).collect();
    pins.sort_by_key(|m| std::cmp::Reverse(m.pinned_ms));
    pins
}

pub(crate) fn require(w: &World, user: u64, channel: u64, needed: Permissions) -> Result<(), ApiError> {
    if !w.channels.contains_key(&channel) {
        return Err(ApiError::not_found("Channel", 10003));
    }
    let have = w.permissions_in(user, channel);
    for bit in (0..64).map(|b| Permissions::from_bits(1 << b)).filter(|p| needed.contains(*p)) {
        if !have.contains(bit) {
            return Err(ApiError::missing(bit));
        }
    }
    Ok(())
}

fn find_message(w: &World, channel: u64, message: u64) -> Result<&Message, ApiError> {
    w.messages
        .get(&message)
        .filter(|m| m.channel_id == channel && !m.deleted)
        .ok_or(ApiError::not_found("Message", 10008))
}

fn list_messages(w: &World, me: u64, channel: u64, query: &HashMap<String, String>) -> Reply {
    require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
    let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok()).unwrap_or(50).clamp(1, 100);
    let param = |k: &str| query.get(k).and_then(|v| v.parse::<u64>().ok());
    let visible = w.messages.values().filter(|m| m.channel_id == channel && !m.deleted);
    // Discord answers newest first; with `after`, the oldest `limit` after the id, still newest first.
    let mut chosen: Vec<&Message> = match (param("after"), param("before")) {
        (Some(after), _) => visible.filter(|m| m.id > after).take(limit).collect(),
        (None, Some(before)) => {
            let all: Vec<_> = visible.filter(|m| m.id < before).collect();
            all[all.len().saturating_sub(limit)..].to_vec()
        }
        (None, None) => {
            let all: Vec<_> = visible.collect();
            all[all.len().saturating_sub(limit)..].to_vec()
        }
    };
    chosen.reverse();
    Ok((200, Value::Array(chosen.into_iter().map(|m| w.message_json(m)).collect())))
}
