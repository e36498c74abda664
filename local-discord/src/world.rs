//! The server's state: users, guilds, roles, channels, messages, webhooks, commands, interactions, and the log.
//! Plain data behind one std `Mutex`; never held across an `.await`.

use crate::permissions::{self, Permissions};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Discord's epoch (2015-01-01) in Unix milliseconds; snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;
/// Discord's limit on a message's content, in characters.
pub const MESSAGE_CONTENT_LENGTH_MAX: usize = 2000;
/// How long Discord remembers a nonce with `enforce_nonce`.
const NONCE_MEMORY: Duration = Duration::from_secs(300);
/// How often expired nonces are forgotten.
const NONCE_PRUNE_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct User {
    pub id: u64,
    pub name: String,
    pub bot: bool,
    /// Bots only: the token they authenticate with.
    pub token: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Role {
    pub id: u64,
    pub name: String,
    pub permissions: Permissions,
}

#[derive(Clone, Debug)]
pub struct Guild {
    pub id: u64,
    pub name: String,
    pub owner_id: u64,
    /// The first role is @everyone, whose id is the guild's.
    pub roles: Vec<Role>,
    /// Member user id -> role ids.
    pub members: BTreeMap<u64, Vec<u64>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverwriteTarget {
    Role(u64),
    Member(u64),
}

#[derive(Clone, Debug)]
pub struct Overwrite {
    pub target: OverwriteTarget,
    pub allow: Permissions,
    pub deny: Permissions,
}

#[derive(Clone, Debug)]
pub struct Channel {
    pub id: u64,
    pub guild_id: u64,
    pub name: String,
    /// Threads have a parent and take its permissions and webhooks.
    pub parent_id: Option<u64>,
    pub overwrites: Vec<Overwrite>,
}

/// Who posted a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Author {
    User(u64),
    Webhook { webhook_id: u64, name: String, avatar_url: Option<String> },
}

#[derive(Clone, Debug)]
pub struct Message {
    pub id: u64,
    pub channel_id: u64,
    pub guild_id: u64,
    pub author: Author,
    pub content: String,
    pub created_ms: u64,
    pub edited_ms: Option<u64>,
    pub deleted: bool,
    pub nonce: Option<String>,
    /// Users whose mention was allowed: listed in `mentions` and pinged.
    pub mentions: Vec<u64>,
    pub mention_everyone: bool,
    pub mention_roles: Vec<u64>,
    /// Everyone this message pinged (users, role members, @everyone), as `allowed_mentions` decided.
    pub pinged: Vec<u64>,
    /// Emoji -> users who reacted.
    pub reactions: Vec<(String, Vec<u64>)>,
    pub reply_to: Option<u64>,
    /// The interaction it answers, for interaction responses.
    pub interaction_id: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Webhook {
    pub id: u64,
    pub token: String,
    pub channel_id: u64,
    pub guild_id: u64,
    pub name: String,
    pub creator: u64,
}

#[derive(Clone, Debug)]
pub struct AppCommand {
    pub id: u64,
    pub application_id: u64,
    pub guild_id: Option<u64>,
    pub body: Value,
}

#[derive(Clone, Debug)]
pub struct Interaction {
    pub id: u64,
    pub token: String,
    pub application_id: u64,
    pub channel_id: u64,
    pub user_id: u64,
    /// The callback the bot answered with (type and data), once it has.
    pub response: Option<Value>,
    pub response_message: Option<u64>,
}

/// One line of the server's log: every REST call and gateway frame, with when it happened.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub at: Instant,
    pub kind: LogKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogKind {
    Rest {
        method: String,
        path: String,
        status: u16,
    },
    /// A frame the server sent: opcode, dispatch name and sequence where it is a dispatch.
    /// A frame the server sent: to which bot (unknown before IDENTIFY), the opcode, and the dispatch name and
    /// sequence where it is a dispatch. A replayed dispatch is logged again with its original sequence.
    GatewaySent {
        user: Option<u64>,
        op: u8,
        event: Option<String>,
        seq: Option<u64>,
    },
    GatewayReceived {
        user: Option<u64>,
        op: u8,
    },
    /// Something the server refused or did not know; logged loudly.
    Refused {
        what: String,
    },
}

/// A message as a person sees it in the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenMessage {
    pub id: u64,
    /// The name shown: the user's name, or the webhook's display name.
    pub author: String,
    pub author_id: u64,
    pub from_webhook: bool,
    pub content: String,
    pub edited: bool,
    pub reactions: Vec<(String, usize)>,
    pub pinged: Vec<u64>,
    pub created_ms: u64,
}

#[derive(Default)]
pub struct World {
    last_snowflake: u64,
    pub users: BTreeMap<u64, User>,
    pub guilds: BTreeMap<u64, Guild>,
    pub channels: BTreeMap<u64, Channel>,
    pub messages: BTreeMap<u64, Message>,
    pub webhooks: BTreeMap<u64, Webhook>,
    pub commands: Vec<AppCommand>,
    pub interactions: BTreeMap<u64, Interaction>,
    nonces: HashMap<(u64, String), (u64, Instant)>,
    nonces_pruned: Option<Instant>,
    pub log: Vec<LogEntry>,
    /// New messages for in-process subscribers ([`crate::feed`]).
    pub feed: crate::feed::Feed,
    pub sessions: HashMap<String, crate::gateway::GatewaySession>,
    pub faults: crate::faults::Faults,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The creation time of a snowflake, in Unix milliseconds.
pub fn snowflake_ms(id: u64) -> u64 {
    (id >> 22) + DISCORD_EPOCH_MS
}

impl World {
    /// A new id that grows with time, like Discord's: milliseconds since 2015 in the top bits.
    pub fn snowflake(&mut self) -> u64 {
        let candidate = (now_ms().saturating_sub(DISCORD_EPOCH_MS)) << 22;
        self.last_snowflake = candidate.max(self.last_snowflake + 1);
        self.last_snowflake
    }

    pub fn record(&mut self, kind: LogKind) {
        if let LogKind::Refused { what } = &kind {
            tracing::warn!("local-discord refused: {what}");
        }
        self.log.push(LogEntry { at: Instant::now(), kind });
    }

    pub fn bot_by_token(&self, token: &str) -> Option<&User> {
        let token = token.strip_prefix("Bot ").unwrap_or(token);
        self.users.values().find(|u| u.token.as_deref() == Some(token))
    }

    pub fn guild_of_channel(&self, channel_id: u64) -> Option<&Guild> {
        self.channels.get(&channel_id).and_then(|c| self.guilds.get(&c.guild_id))
    }

    /// The channel whose permissions and webhooks a channel uses: itself, or a thread's parent.
    pub fn permission_channel(&self, channel_id: u64) -> Option<&Channel> {
        let channel = self.channels.get(&channel_id)?;
        match channel.parent_id {
            Some(parent) => self.channels.get(&parent),
            None => Some(channel),
        }
    }

    pub fn permissions_in(&self, user: u64, channel_id: u64) -> Permissions {
        match (self.guild_of_channel(channel_id), self.permission_channel(channel_id)) {
            (Some(guild), Some(channel)) => permissions::compute(guild, channel, user),
            _ => Permissions::empty(),
        }
    }

    /// The message first posted with this nonce by this author, when that was recent enough to count.
    pub fn nonce_seen(&mut self, author: u64, nonce: &str) -> Option<u64> {
        let now = Instant::now();
        // Forgetting expired nonces is a pass over all of them: once a second, not on every message.
        if self.nonces_pruned.is_none_or(|at| now.saturating_duration_since(at) >= NONCE_PRUNE_EVERY) {
            self.nonces.retain(|_, (_, at)| now.saturating_duration_since(*at) < NONCE_MEMORY);
            self.nonces_pruned = Some(now);
        }
        self.nonces
            .get(&(author, nonce.to_owned()))
            .filter(|(_, at)| now.saturating_duration_since(*at) < NONCE_MEMORY)
            .map(|(id, _)| *id)
    }

    pub fn remember_nonce(&mut self, author: u64, nonce: &str, message: u64) {
        self.nonces.insert((author, nonce.to_owned()), (message, Instant::now()));
    }

    /// Who a new message mentions and pings, as `allowed_mentions` (or Discord's default) says.
    pub fn resolve_mentions(&self, guild_id: u64, author: &Author, content: &str, allowed: Option<&Value>) -> Mentions {
        let guild = self.guilds.get(&guild_id);
        let (users_in_text, roles_in_text) = parse_mentions(content);
        let everyone_in_text = content.contains("@everyone") || content.contains("@here");
        let parse: Vec<&str> = match allowed {
            None => vec!["users", "roles", "everyone"],
            Some(a) => a
                .get("parse")
                .and_then(Value::as_array)
                .map_or_else(Vec::new, |p| p.iter().filter_map(Value::as_str).collect()),
        };
        let listed = |key: &str| -> Vec<u64> {
            allowed
                .and_then(|a| a.get(key))
                .and_then(Value::as_array)
                .map(|ids| ids.iter().filter_map(|v| v.as_str()?.parse().ok()).collect())
                .unwrap_or_default()
        };
        let (allowed_users, allowed_roles) = (listed("users"), listed("roles"));
        let mentions: Vec<u64> = users_in_text
            .into_iter()
            .filter(|u| parse.contains(&"users") || allowed_users.contains(u))
            .filter(|u| self.users.contains_key(u))
            .collect();
        let mention_roles: Vec<u64> =
            roles_in_text.into_iter().filter(|r| parse.contains(&"roles") || allowed_roles.contains(r)).collect();
        let may_ping_everyone = match author {
            Author::User(id) => {
                guild.is_some_and(|g| permissions::base(g, *id).contains(Permissions::MENTION_EVERYONE))
            }
            Author::Webhook { .. } => true,
        };
        let mention_everyone = everyone_in_text && parse.contains(&"everyone") && may_ping_everyone;
        let mut pinged = mentions.clone();
        if let Some(guild) = guild {
            for (member, roles) in &guild.members {
                let by_role = roles.iter().any(|r| mention_roles.contains(r));
                if (mention_everyone || by_role) && !pinged.contains(member) {
                    pinged.push(*member);
                }
            }
        }
        Mentions { mentions, mention_roles, mention_everyone, pinged }
    }

    /// Messages of a channel as a person sees them: deleted ones gone, webhooks under their display name.
    pub fn view(&self, channel_id: u64) -> Vec<SeenMessage> {
        self.messages
            .values()
            .filter(|m| m.channel_id == channel_id && !m.deleted)
            .map(|m| {
                let (author, author_id, from_webhook) = match &m.author {
                    Author::User(id) => {
                        (self.users.get(id).map_or_else(|| id.to_string(), |u| u.name.clone()), *id, false)
                    }
                    Author::Webhook { webhook_id, name, .. } => (name.clone(), *webhook_id, true),
                };
                SeenMessage {
                    id: m.id,
                    author,
                    author_id,
                    from_webhook,
                    content: m.content.clone(),
                    edited: m.edited_ms.is_some(),
                    reactions: m.reactions.iter().map(|(e, users)| (e.clone(), users.len())).collect(),
                    pinged: m.pinged.clone(),
                    created_ms: m.created_ms,
                }
            })
            .collect()
    }

    // --- JSON as Discord sends it ------------------------------------------------------------------------

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

    pub fn role_json(role: &Role, position: usize) -> Value {
        json!({
            "id": role.id.to_string(), "name": role.name, "color": 0, "colors": {"primary_color": 0},
            "hoist": false, "managed": false, "mentionable": false, "position": position,
            "permissions": role.permissions.bits().to_string(),
        })
    }

    pub fn channel_json(&self, channel: &Channel) -> Value {
        let overwrites: Vec<Value> = channel
            .overwrites
            .iter()
            .map(|o| {
                let (id, kind) = match o.target {
                    OverwriteTarget::Role(id) => (id, 0),
                    OverwriteTarget::Member(id) => (id, 1),
                };
                json!({"id": id.to_string(), "type": kind, "allow": o.allow.bits().to_string(), "deny": o.deny.bits().to_string()})
            })
            .collect();
        let mut value = json!({
            "id": channel.id.to_string(), "guild_id": channel.guild_id.to_string(), "name": channel.name,
            "type": if channel.parent_id.is_some() { 11 } else { 0 }, "position": 0,
            "permission_overwrites": overwrites, "nsfw": false,
        });
        if let Some(parent) = channel.parent_id {
            value["parent_id"] = json!(parent.to_string());
            value["thread_metadata"] = json!({
                "archived": false, "auto_archive_duration": 1440, "archive_timestamp": iso(now_ms()), "locked": false
            });
        }
        value
    }

    pub fn guild_json(&self, guild: &Guild) -> Value {
        let roles: Vec<Value> = guild.roles.iter().enumerate().map(|(i, r)| Self::role_json(r, i)).collect();
        let members: Vec<Value> = guild.members.keys().map(|u| self.member_json(guild, *u)).collect();
        let (channels, threads): (Vec<&Channel>, Vec<&Channel>) =
            self.channels.values().filter(|c| c.guild_id == guild.id).partition(|c| c.parent_id.is_none());
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

    pub fn message_json(&self, m: &Message) -> Value {
        let author = match &m.author {
            Author::User(id) => self.user_json(*id),
            Author::Webhook { webhook_id, name, .. } => json!({
                "id": webhook_id.to_string(), "username": name, "discriminator": "0000", "avatar": null, "bot": true,
            }),
        };
        let reactions: Vec<Value> = m
            .reactions
            .iter()
            .map(|(emoji, users)| json!({"count": users.len(), "me": false, "emoji": {"id": null, "name": emoji},
                "count_details": {"burst": 0, "normal": users.len()}, "burst_colors": [], "me_burst": false, "burst_count": 0}))
            .collect();
        let mut value = json!({
            "id": m.id.to_string(), "channel_id": m.channel_id.to_string(), "guild_id": m.guild_id.to_string(),
            "author": author, "content": m.content, "timestamp": iso(m.created_ms),
            "edited_timestamp": m.edited_ms.map(iso), "tts": false, "mention_everyone": m.mention_everyone,
            "mentions": m.mentions.iter().map(|u| self.user_json(*u)).collect::<Vec<_>>(),
            "mention_roles": m.mention_roles.iter().map(u64::to_string).collect::<Vec<_>>(),
            "attachments": [], "embeds": [], "reactions": reactions, "pinned": false,
            "type": if m.reply_to.is_some() { 19 } else { 0 },
        });
        if let Author::Webhook { webhook_id, .. } = &m.author {
            value["webhook_id"] = json!(webhook_id.to_string());
        }
        if let Author::User(id) = &m.author
            && let Some(guild) = self.guilds.get(&m.guild_id)
        {
            let mut member = self.member_json(guild, *id);
            member.as_object_mut().map(|o| o.remove("user"));
            value["member"] = member;
        }
        if let Some(nonce) = &m.nonce {
            value["nonce"] = json!(nonce);
        }
        if let Some(reply) = m.reply_to {
            value["message_reference"] =
                json!({"message_id": reply.to_string(), "channel_id": m.channel_id.to_string()});
        }
        value
    }
}

/// The result of resolving a message's mentions.
#[derive(Clone, Debug, Default)]
pub struct Mentions {
    pub mentions: Vec<u64>,
    pub mention_roles: Vec<u64>,
    pub mention_everyone: bool,
    pub pinged: Vec<u64>,
}

/// User ids (`<@id>`, `<@!id>`) and role ids (`<@&id>`) written in a message.
fn parse_mentions(content: &str) -> (Vec<u64>, Vec<u64>) {
    let (mut users, mut roles) = (Vec::new(), Vec::new());
    for part in content.split("<@").skip(1) {
        let Some((inner, _)) = part.split_once('>') else { continue };
        let (is_role, digits) = match inner.strip_prefix('&') {
            Some(rest) => (true, rest),
            None => (false, inner.strip_prefix('!').unwrap_or(inner)),
        };
        if let Ok(id) = digits.parse::<u64>() {
            let list = if is_role { &mut roles } else { &mut users };
            if !list.contains(&id) {
                list.push(id);
            }
        }
    }
    (users, roles)
}
