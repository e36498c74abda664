//! REST API v10: the routes serenity and poise call for this bot, with Discord's errors, permission checks,
//! nonce deduplication, and the route faults applied. Unknown routes answer 404 and are logged loudly.

use crate::Shared;
use crate::faults::RouteAction;
use crate::permissions::Permissions;
use crate::world::{AppCommand, Author, LogKind, Webhook, World};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Discord's most webhooks in one channel.
const WEBHOOKS_PER_CHANNEL_MAX: usize = 15;

/// An error answered the way Discord answers it.
pub struct ApiError {
    pub status: u16,
    pub code: u32,
    pub message: String,
    pub errors: Option<Value>,
}

impl ApiError {
    pub fn new(status: u16, code: u32, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), errors: None }
    }

    fn missing(what: Permissions) -> Self {
        tracing::debug!("missing {}", what.name_of());
        Self::new(403, 50013, "Missing Permissions")
    }

    pub(crate) fn not_found(what: &str, code: u32) -> Self {
        Self::new(404, code, format!("Unknown {what}"))
    }

    /// Discord's answer to content over the message limit.
    pub(crate) fn too_long(limit: usize) -> Self {
        let mut e = Self::new(400, 50035, "Invalid Form Body");
        e.errors = Some(json!({"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
            "message": format!("Must be {limit} or fewer in length.")}]}}));
        e
    }
}

type Reply = Result<(u16, Value), ApiError>;

pub async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query: HashMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let action = shared.world.lock().expect("world lock").faults.take_route_action(method.as_str(), &path);
    match action {
        Some(RouteAction::RateLimit { retry_after }) => {
            let secs = retry_after.as_secs_f64();
            let body = json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
            let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
            let h = response.headers_mut();
            h.insert("retry-after", HeaderValue::from_str(&format!("{}", secs.ceil() as u64)).expect("digits"));
            h.insert("x-ratelimit-global", HeaderValue::from_static("false"));
            h.insert("x-ratelimit-scope", HeaderValue::from_static("user"));
            log_call(&shared, &method, &path, 429);
            return response;
        }
        Some(RouteAction::ServerError(status)) => {
            log_call(&shared, &method, &path, status);
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (code, "upstream connect error").into_response();
        }
        Some(RouteAction::Slow(delay)) => tokio::time::sleep(delay).await,
        None => {}
    }
    let body: Value = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).unwrap_or(Value::Null) };
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let result = {
        let mut world = shared.world.lock().expect("world lock");
        let bot = world.bot_by_token(&token).map(|u| u.id);
        let route = path.strip_prefix("/api/v10/").unwrap_or(&path).trim_end_matches('/').to_owned();
        let segments: Vec<&str> = route.split('/').collect();
        let result = route_call(&mut world, &shared.gateway_url, &method, &segments, &query, &body, bot);
        if let Err(e) = &result
            && e.status == 404
            && e.code == 0
        {
            world.record(LogKind::Refused { what: format!("unknown route {method} {path}") });
        }
        result
    };
    shared.changed.notify_waiters();
    let (status, value) = match result {
        Ok(ok) => ok,
        Err(e) => {
            let mut value = json!({"message": e.message, "code": e.code});
            if let Some(errors) = e.errors {
                value["errors"] = errors;
            }
            (e.status, value)
        }
    };
    log_call(&shared, &method, &path, status);
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    if status == 204 { code.into_response() } else { (code, axum::Json(value)).into_response() }
}

fn log_call(shared: &Shared, method: &Method, path: &str, status: u16) {
    let mut world = shared.world.lock().expect("world lock");
    world.record(LogKind::Rest { method: method.to_string(), path: path.to_owned(), status });
}

fn id(segment: &str) -> Result<u64, ApiError> {
    segment.parse().map_err(|_| ApiError::new(404, 0, "404: Not Found"))
}

fn route_call(
    w: &mut World,
    gateway_url: &str,
    method: &Method,
    seg: &[&str],
    query: &HashMap<String, String>,
    body: &Value,
    bot: Option<u64>,
) -> Reply {
    let m = method.as_str();
    // Routes that need no bot token: gateway discovery, webhooks by token, interaction callbacks.
    match (m, seg) {
        ("GET", ["gateway"]) => return Ok((200, json!({"url": gateway_url}))),
        ("POST", ["interactions", interaction, token, "callback"]) => {
            return interaction_callback(w, id(interaction)?, token, body);
        }
        ("POST", ["webhooks", hook, token]) => return execute_webhook(w, id(hook)?, token, query, body),
        ("GET" | "DELETE", ["webhooks", hook, token]) => {
            let hook = id(hook)?;
            w.webhooks.get(&hook).filter(|h| h.token == *token).ok_or(ApiError::not_found("Webhook", 10015))?;
            if m == "DELETE" {
                w.webhooks.remove(&hook);
                return Ok((204, Value::Null));
            }
            return Ok((200, webhook_json(w, hook)));
        }
        ("GET" | "PATCH" | "DELETE", ["webhooks", app, token, "messages", which]) => {
            return interaction_message(w, m, id(app)?, token, which, body);
        }
        _ => {}
    }
    let Some(me) = bot else {
        return Err(ApiError::new(401, 0, "401: Unauthorized"));
    };
    match (m, seg) {
        ("GET", ["gateway", "bot"]) => Ok((
            200,
            json!({"url": gateway_url, "shards": 1, "session_start_limit":
                {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}}),
        )),
        ("GET", ["users", "@me"]) => Ok((200, w.user_json(me))),
        ("GET", ["users", user]) => {
            let user = id(user)?;
            if !w.users.contains_key(&user) {
                return Err(ApiError::not_found("User", 10013));
            }
            Ok((200, w.user_json(user)))
        }
        ("GET", ["oauth2", "applications", "@me"] | ["applications", "@me"]) => Ok((200, application_json(w, me))),
        (_, ["applications", _app, "commands"]) => commands(w, m, me, None, body),
        (_, ["applications", _app, "guilds", guild, "commands"]) => commands(w, m, me, Some(id(guild)?), body),
        ("GET", ["channels", channel]) => {
            let channel = w.channels.get(&id(channel)?).ok_or(ApiError::not_found("Channel", 10003))?;
            Ok((200, w.channel_json(channel)))
        }
        ("GET", ["channels", channel, "messages"]) => list_messages(w, me, id(channel)?, query),
        ("POST", ["channels", channel, "messages"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::VIEW_CHANNEL | Permissions::SEND_MESSAGES)?;
            let reply_to = body["message_reference"]["message_id"].as_str().and_then(|s| s.parse().ok());
            let nonce = body["enforce_nonce"].as_bool().unwrap_or(false).then(|| body["nonce"].as_str()).flatten();
            let content = body["content"].as_str().unwrap_or_default();
            let message =
                w.create_message(channel, Author::User(me), content, nonce, body.get("allowed_mentions"), reply_to)?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        ("GET", ["channels", channel, "messages", message]) => {
            let message = find_message(w, id(channel)?, id(message)?)?;
            require(w, me, message.channel_id, Permissions::VIEW_CHANNEL | Permissions::READ_MESSAGE_HISTORY)?;
            Ok((200, w.message_json(message)))
        }
        ("PATCH", ["channels", channel, "messages", message]) => {
            let message = find_message(w, id(channel)?, id(message)?)?.id;
            if w.messages[&message].author != Author::User(me) {
                return Err(ApiError::new(403, 50005, "Cannot edit a message authored by another user"));
            }
            let content = body["content"].as_str().unwrap_or_default();
            w.edit_message(message, content)?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        ("DELETE", ["channels", channel, "messages", message]) => {
            let message = find_message(w, id(channel)?, id(message)?)?;
            let (message, channel) = (message.id, message.channel_id);
            if w.messages[&message].author != Author::User(me) {
                require(w, me, channel, Permissions::MANAGE_MESSAGES)?;
            }
            w.delete_message(message);
            Ok((204, Value::Null))
        }
        ("PUT" | "DELETE", ["channels", channel, "messages", message, "reactions", emoji, "@me"]) => {
            let message = find_message(w, id(channel)?, id(message)?)?;
            let (message, channel) = (message.id, message.channel_id);
            require(w, me, channel, Permissions::ADD_REACTIONS | Permissions::READ_MESSAGE_HISTORY)?;
            let emoji = percent_decode(emoji);
            w.react(message, me, &emoji, m == "PUT");
            Ok((204, Value::Null))
        }
        ("POST", ["channels", channel, "webhooks"]) => {
            let channel = id(channel)?;
            require(w, me, channel, Permissions::MANAGE_WEBHOOKS)?;
            if w.webhooks.values().filter(|h| h.channel_id == channel).count() >= WEBHOOKS_PER_CHANNEL_MAX {
                return Err(ApiError::new(400, 30007, "Maximum number of webhooks reached (15)"));
            }
            let name = body["name"].as_str().unwrap_or("webhook").to_owned();
            let guild_id = w.channels[&channel].guild_id;
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
        ("GET", ["webhooks", hook]) => {
            let hook = id(hook)?;
            w.webhooks.get(&hook).ok_or(ApiError::not_found("Webhook", 10015))?;
            Ok((200, webhook_json(w, hook)))
        }
        ("DELETE", ["webhooks", hook]) => {
            let hook = w.webhooks.get(&id(hook)?).ok_or(ApiError::not_found("Webhook", 10015))?.clone();
            require(w, me, hook.channel_id, Permissions::MANAGE_WEBHOOKS)?;
            w.webhooks.remove(&hook.id);
            Ok((204, Value::Null))
        }
        ("GET", ["guilds", guild]) => {
            let guild = w.guilds.get(&id(guild)?).ok_or(ApiError::not_found("Guild", 10004))?;
            Ok((200, w.guild_json(guild)))
        }
        ("GET", ["guilds", guild, "roles"]) => {
            let guild = w.guilds.get(&id(guild)?).ok_or(ApiError::not_found("Guild", 10004))?;
            Ok((200, Value::Array(guild.roles.iter().enumerate().map(|(i, r)| World::role_json(r, i)).collect())))
        }
        ("GET", ["guilds", guild, "channels"]) => {
            let guild = id(guild)?;
            let channels = w.channels.values().filter(|c| c.guild_id == guild).map(|c| w.channel_json(c)).collect();
            Ok((200, Value::Array(channels)))
        }
        ("GET", ["guilds", guild, "members", user]) => {
            let guild = w.guilds.get(&id(guild)?).ok_or(ApiError::not_found("Guild", 10004))?;
            let user = id(user)?;
            if !guild.members.contains_key(&user) {
                return Err(ApiError::not_found("Member", 10007));
            }
            Ok((200, w.member_json(guild, user)))
        }
        _ => Err(ApiError::new(404, 0, "404: Not Found")),
    }
}

fn require(w: &World, user: u64, channel: u64, needed: Permissions) -> Result<(), ApiError> {
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

fn find_message(w: &World, channel: u64, message: u64) -> Result<&crate::world::Message, ApiError> {
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
    let mut chosen: Vec<&crate::world::Message> = match (param("after"), param("before")) {
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

fn execute_webhook(w: &mut World, hook: u64, token: &str, query: &HashMap<String, String>, body: &Value) -> Reply {
    if let Some(interaction) = w.interactions.values().find(|i| i.application_id == hook && i.token == token).cloned() {
        // A follow-up to an interaction is executed on the application's webhook.
        let content = body["content"].as_str().unwrap_or_default();
        let message = w.create_message(
            interaction.channel_id,
            Author::User(hook),
            content,
            None,
            body.get("allowed_mentions"),
            None,
        )?;
        return Ok((200, w.message_json(&w.messages[&message])));
    }
    let webhook =
        w.webhooks.get(&hook).filter(|h| h.token == token).ok_or(ApiError::not_found("Webhook", 10015))?.clone();
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
    let content = body["content"].as_str().unwrap_or_default();
    let message = w.create_message(channel, author, content, None, body.get("allowed_mentions"), None)?;
    if query.get("wait").is_some_and(|v| v == "true") {
        Ok((200, w.message_json(&w.messages[&message])))
    } else {
        Ok((204, Value::Null))
    }
}

fn interaction_callback(w: &mut World, interaction: u64, token: &str, body: &Value) -> Reply {
    let found = w.interactions.get(&interaction).filter(|i| i.token == token).cloned();
    let mut found = found.ok_or(ApiError::new(404, 10062, "Unknown interaction"))?;
    if found.response.is_some() {
        return Err(ApiError::new(400, 40060, "Interaction has already been acknowledged."));
    }
    let author = Author::User(found.application_id);
    let message = match body["type"].as_u64() {
        // CHANNEL_MESSAGE_WITH_SOURCE: the answer is a message from the application.
        Some(4) => {
            let content = body["data"]["content"].as_str().unwrap_or_default();
            let allowed = body["data"].get("allowed_mentions");
            Some(w.create_message(found.channel_id, author, content, None, allowed, None)?)
        }
        // DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: an empty "thinking" message that editing @original fills in.
        Some(5) => Some(w.insert_message(found.channel_id, author, "", None, Default::default(), None)?),
        _ => None,
    };
    if let Some(message) = message {
        w.messages.get_mut(&message).expect("created").interaction_id = Some(interaction);
        found.response_message = Some(message);
    }
    found.response = Some(body.clone());
    w.interactions.insert(interaction, found);
    Ok((204, Value::Null))
}

fn interaction_message(w: &mut World, m: &str, app: u64, token: &str, which: &str, body: &Value) -> Reply {
    let interaction = w
        .interactions
        .values()
        .find(|i| i.application_id == app && i.token == token)
        .cloned()
        .ok_or(ApiError::new(404, 10015, "Unknown Webhook"))?;
    let message = if which == "@original" { interaction.response_message } else { which.parse().ok() };
    let message = message.filter(|id| w.messages.get(id).is_some_and(|msg| !msg.deleted));
    let message = message.ok_or(ApiError::not_found("Message", 10008))?;
    match m {
        "PATCH" => {
            w.edit_message(message, body["content"].as_str().unwrap_or_default())?;
            Ok((200, w.message_json(&w.messages[&message])))
        }
        "DELETE" => {
            w.delete_message(message);
            Ok((204, Value::Null))
        }
        _ => Ok((200, w.message_json(&w.messages[&message]))),
    }
}

fn commands(w: &mut World, m: &str, me: u64, guild: Option<u64>, body: &Value) -> Reply {
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

fn application_json(w: &World, me: u64) -> Value {
    let owner = w.guilds.values().next().map_or(me, |g| g.owner_id);
    json!({
        "id": me.to_string(), "name": w.users.get(&me).map_or("bot", |u| u.name.as_str()), "icon": null,
        "description": "", "bot_public": true, "bot_require_code_grant": false, "owner": w.user_json(owner),
        "verify_key": "0", "team": null, "flags": 0, "summary": "", "rpc_origins": [], "bot": w.user_json(me),
    })
}

fn webhook_json(w: &World, hook: u64) -> Value {
    let h = &w.webhooks[&hook];
    json!({
        "id": h.id.to_string(), "type": 1, "guild_id": h.guild_id.to_string(), "channel_id": h.channel_id.to_string(),
        "name": h.name, "avatar": null, "token": h.token, "application_id": h.creator.to_string(),
        "user": w.user_json(h.creator),
    })
}

/// Decodes `%E2%9C%85` and friends in a path segment (reaction emoji).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn percent_decoding_handles_emoji_and_stray_percent_signs() {
        assert_eq!(percent_decode("%E2%9C%85"), "✅");
        assert_eq!(percent_decode("✅"), "✅");
        assert_eq!(percent_decode("%✅"), "%✅", "a % before a multi-byte character must not panic");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
