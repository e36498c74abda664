//! Routes that act for an application rather than as a channel member: webhooks (create, list, execute with
//! `wait`, `username`, `avatar_url`, `thread_id`, embeds and files), interaction callbacks and follow-ups, and
//! application commands.

use crate::multipart::Upload;
use crate::rest::{ApiError, Reply};
use crate::routes::draft_from;
use crate::world::{AppCommand, Author, World};
use serde_json::{Value, json};
use std::collections::HashMap;

pub(crate) fn execute_webhook(
    w: &mut World,
    hook: u64,
    token: &str,
    query: &HashMap<String, String>,
    body: &Value,
    files: &[Upload],
) -> Reply {
    if let Some(interaction) = w.interactions.values().find(|i| i.application_id == hook && i.token == token).cloned() {
        // A follow-up to an interaction is executed on the application's webhook.
        let draft = draft_from(w, body, files)?;
        let message = w.create_message(interaction.channel_id, Author::User(hook), draft)?;
        keep_ephemeral(w, message, body);
        return Ok((200, w.message_json(&w.messages[&message])));
    }
    let webhook = by_token(w, hook, token)?.clone();
    let channel = match query.get("thread_id").and_then(|t| t.parse::<u64>().ok()) {
        Some(thread) => {
            let parent = w.channels.get(&thread).and_then(|c| c.parent_id);
            if parent != Some(webhook.channel_id) {
                return Err(ApiError::not_found("Channel", 10003));
            }
            thread
        }
        None => webhook.channel_id,
    };
    let author = Author::Webhook {
        webhook_id: webhook.id,
        name: body["username"].as_str().map_or(webhook.name.clone(), str::to_owned),
        avatar_url: body["avatar_url"].as_str().map(str::to_owned),
    };
    let draft = crate::messages::Draft { reply_to: None, nonce: None, ..draft_from(w, body, files)? };
    let message = w.create_message(channel, author, draft)?;
    if query.get("wait").is_some_and(|v| v == "true") {
        Ok((200, w.message_json(&w.messages[&message])))
    } else {
        Ok((204, Value::Null))
    }
}

/// The webhook `hook` called with `token`, as Discord answers: an unknown webhook is 404 (code 10015), a known one
/// with another token 401 (code 50027).
pub(crate) fn by_token<'w>(w: &'w World, hook: u64, token: &str) -> Result<&'w crate::world::Webhook, ApiError> {
    let webhook = w.webhooks.get(&hook).ok_or(ApiError::not_found("Webhook", 10015))?;
    if webhook.token != token {
        return Err(ApiError::new(401, 50027, "Invalid Webhook Token"));
    }
    Ok(webhook)
}

/// An interaction's answer or follow-up asked to be `EPHEMERAL` (seen by its invoker alone) says so in its flags,
/// which a later edit of it keeps: only these messages may have it.
fn keep_ephemeral(w: &mut World, message: u64, body: &Value) {
    if body["flags"].as_u64().unwrap_or(0) & crate::messages::EPHEMERAL != 0 {
        w.messages.get_mut(&message).expect("created").flags |= crate::messages::EPHEMERAL;
    }
}

pub(crate) fn interaction_callback(w: &mut World, interaction: u64, token: &str, body: &Value) -> Reply {
    let found = w.interactions.get(&interaction).filter(|i| i.token == token).cloned();
    let mut found = found.ok_or(ApiError::new(404, 10062, "Unknown interaction"))?;
    if found.response.is_some() {
        return Err(ApiError::new(400, 40060, "Interaction has already been acknowledged."));
    }
    let author = Author::User(found.application_id);
    let message = match body["type"].as_u64() {
        // CHANNEL_MESSAGE_WITH_SOURCE: the answer is a message from the application.
        Some(4) => {
            let draft = crate::messages::Draft { reply_to: None, nonce: None, ..draft_from(w, &body["data"], &[])? };
            Some(w.create_message(found.channel_id, author, draft)?)
        }
        // DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: an empty "thinking" message that editing @original fills in.
        Some(5) => Some(w.insert_message(found.channel_id, author, Default::default(), Default::default())?),
        _ => None,
    };
    if let Some(message) = message {
        keep_ephemeral(w, message, &body["data"]);
        w.messages.get_mut(&message).expect("created").interaction_id = Some(interaction);
        found.response_message = Some(message);
    }
    found.response = Some(body.clone());
    w.interactions.insert(interaction, found);
    Ok((204, Value::Null))
}

pub(crate) fn interaction_message(
    w: &mut World,
    m: &str,
    app: u64,
    token: &str,
    which: &str,
    query: &HashMap<String, String>,
    body: &Value,
) -> Reply {
    let interaction = w.interactions.values().find(|i| i.application_id == app && i.token == token).cloned();
    let message = match interaction {
        Some(interaction) if which == "@original" => interaction.response_message,
        Some(_) => which.parse().ok(),
        // A channel webhook's own message, by its token; one in a thread only with that thread's `thread_id`.
        None => {
            let home = by_token(w, app, token)?.channel_id;
            let channel = query.get("thread_id").and_then(|t| t.parse::<u64>().ok()).unwrap_or(home);
            which.parse().ok().filter(|id| {
                w.messages.get(id).is_some_and(|msg| {
                    msg.channel_id == channel
                        && matches!(msg.author, Author::Webhook { webhook_id, .. } if webhook_id == app)
                })
            })
        }
    };
    let message = message.filter(|id| w.messages.get(id).is_some_and(|msg| !msg.deleted));
    let message = message.ok_or(ApiError::not_found("Message", 10008))?;
    match m {
        "PATCH" => {
            w.edit_message_with(message, body["content"].as_str(), embeds_of(body))?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        "DELETE" => {
            w.delete_message(message);
            Ok((204, Value::Null))
        }
        _ => Ok((200, w.message_json(&w.messages[&message]))),
    }
}

pub(crate) fn commands(w: &mut World, m: &str, me: u64, guild: Option<u64>, body: &Value) -> Reply {
    let to_json = |c: &AppCommand| {
        let mut value = c.body.clone();
        value["id"] = json!(c.id.to_string());
        value["application_id"] = json!(c.application_id.to_string());
        value["version"] = json!(c.id.to_string());
        value["default_member_permissions"] = value.get("default_member_permissions").cloned().unwrap_or(Value::Null);
        value["type"] = value.get("type").cloned().unwrap_or(json!(1));
        if let Some(g) = c.guild_id {
            value["guild_id"] = json!(g.to_string());
        }
        value
    };
    let create = |w: &mut World, body: &Value| {
        let name = body["name"].as_str().unwrap_or_default().to_owned();
        w.commands.retain(|c| !(c.application_id == me && c.guild_id == guild && c.body["name"] == name.as_str()));
        let command = AppCommand { id: w.snowflake(), application_id: me, guild_id: guild, body: body.clone() };
        w.commands.push(command.clone());
        command
    };
    match m {
        "PUT" => {
            w.commands.retain(|c| !(c.application_id == me && c.guild_id == guild));
            let list = body.as_array().cloned().unwrap_or_default();
            let created: Vec<Value> = list.iter().map(|b| to_json(&create(w, b))).collect();
            Ok((200, Value::Array(created)))
        }
        "POST" => {
            let command = create(w, body);
            Ok((201, to_json(&command)))
        }
        "GET" => {
            let list =
                w.commands.iter().filter(|c| c.application_id == me && c.guild_id == guild).map(to_json).collect();
            Ok((200, Value::Array(list)))
        }
        _ => Err(ApiError::new(405, 0, "405: Method Not Allowed")),
    }
}

/// Every application here has the privileged intents enabled, as a developer does in the portal: presence,
/// guild members and message content (OpenClaw warns, and may ignore channel messages, without the last).
pub(crate) const APPLICATION_FLAGS: u64 = (1 << 12) | (1 << 14) | (1 << 18);

pub(crate) fn application_json(w: &World, me: u64) -> Value {
    let owner = w.guilds.values().next().map_or(me, |g| g.owner_id);
    json!({
        "id": me.to_string(), "name": w.users.get(&me).map_or("bot", |u| u.name.as_str()), "icon": null,
        "description": "", "bot_public": true, "bot_require_code_grant": false, "owner": w.user_json(owner),
        "verify_key": "0", "team": null, "flags": APPLICATION_FLAGS, "summary": "", "rpc_origins": [], "bot": w.user_json(me),
    })
}

pub(crate) fn webhook_json(w: &World, hook: u64) -> Value {
    let h = &w.webhooks[&hook];
    json!({
        "id": h.id.to_string(), "type": 1, "guild_id": h.guild_id.to_string(), "channel_id": h.channel_id.to_string(),
        "name": h.name, "avatar": null, "token": h.token, "application_id": h.creator.to_string(),
        "user": w.user_json(h.creator),
    })
}

/// The embeds of a request body, when it has the key.
pub(crate) fn embeds_of(body: &Value) -> Option<Vec<Value>> {
    body.get("embeds").map(|e| e.as_array().cloned().unwrap_or_default())
}
