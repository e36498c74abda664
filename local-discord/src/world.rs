//! The server's state: users, guilds, roles, channels, messages, webhooks, commands, interactions, and the log.
//! Plain data behind one std `Mutex`; never held across an `.await`.

use crate::permissions::{self, Permissions};
use serde_json::Value;
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
    /// "Allow anyone to @mention this role": otherwise only a member with Mention @everyone, @here, and All Roles
    /// pings it (Discord's default is off).
    pub mentionable: bool,
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
    pub kind: ChannelKind,
    /// Threads: who started it.
    pub owner_id: Option<u64>,
    /// DM channels: the two users in it (a DM belongs to no guild; its `guild_id` is 0).
    pub recipients: Vec<u64>,
    pub topic: Option<String>,
    /// Threads: archived (no longer among the server's active threads that GUILD_CREATE lists).
    pub archived: bool,
}

/// The channel types this server knows, with Discord's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelKind {
    Text = 0,
    Dm = 1,
    PublicThread = 11,
    PrivateThread = 12,
}

impl ChannelKind {
    pub fn is_thread(self) -> bool {
        matches!(self, Self::PublicThread | Self::PrivateThread)
    }
}

/// A file uploaded with a message (multipart/form-data); its bytes are served back at its `url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    pub id: u64,
    pub filename: String,
    pub content_type: Option<String>,
    pub description: Option<String>,
    pub size: usize,
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
    /// Embeds as the client sent them (after Discord's limits were checked).
    pub embeds: Vec<Value>,
    pub attachments: Vec<Attachment>,
    /// The flags it was created with (`SUPPRESS_EMBEDS`, `SUPPRESS_NOTIFICATIONS`); `HAS_THREAD` is added when shown.
    pub flags: u64,
    /// The thread started from this message (Discord gives it the message's id).
    pub thread_id: Option<u64>,
    /// When it was pinned, if it is.
    pub pinned_ms: Option<u64>,
    /// A system message's type ([`crate::messages::Draft::kind`]).
    pub kind: Option<u8>,
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
    /// See [`Message::flags`].
    pub flags: u64,
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
    /// Uploaded files' bytes by attachment id.
    pub files: HashMap<u64, Vec<u8>>,
    /// Who started typing where (channel, user), in order.
    pub typing: Vec<(u64, u64)>,
    /// Where the server listens (`http://127.0.0.1:PORT`), for attachment URLs.
    pub base_url: String,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A snowflake as Discord accepts it in a request body or a gateway payload: a string of digits or a number.
pub fn snowflake_of(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => text.parse().ok(),
        Value::Number(number) => number.as_u64(),
        _ => None,
    }
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
        if let Some(dm) = self.channels.get(&channel_id).filter(|c| c.kind == ChannelKind::Dm) {
            return if dm.recipients.contains(&user) { Permissions::IN_DM } else { Permissions::empty() };
        }
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
    pub fn resolve_mentions(
        &self,
        guild_id: u64,
        channel: u64,
        author: &Author,
        content: &str,
        allowed: Option<&Value>,
    ) -> Mentions {
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
                .map(|ids| ids.iter().filter_map(snowflake_of).collect())
                .unwrap_or_default()
        };
        let (allowed_users, allowed_roles) = (listed("users"), listed("roles"));
        let mentions: Vec<u64> = users_in_text
            .into_iter()
            .filter(|u| parse.contains(&"users") || allowed_users.contains(u))
            .filter(|u| self.users.contains_key(u))
            .collect();
        // In the channel, its overwrites applied, as Discord judges it.
        let may_ping_everyone = match author {
            Author::User(id) => {
                guild.is_some() && self.permissions_in(*id, channel).contains(Permissions::MENTION_EVERYONE)
            }
            Author::Webhook { .. } => true,
        };
        // A role that is not mentionable is named, not pinged, unless the author may mention every role.
        let mentionable = |r: &u64| {
            guild.and_then(|g| g.roles.iter().find(|role| role.id == *r)).is_some_and(|role| role.mentionable)
        };
        let mention_roles: Vec<u64> = roles_in_text
            .into_iter()
            .filter(|r| parse.contains(&"roles") || allowed_roles.contains(r))
            .filter(|r| may_ping_everyone || mentionable(r))
            .collect();
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
                    flags: m.flags,
                }
            })
            .collect()
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
