//! local-discord: a Discord-compatible server on 127.0.0.1 that the real, unmodified serenity client connects to
//! as it connects to Discord (REST API v10 and the JSON gateway), for turn-manager's demo and end-to-end tests.
//!
//! Layout:
//! - [`world`]: the state (users, guilds, channels, messages, webhooks...), its JSON as Discord sends it, and the
//!   log of every REST call and gateway frame.
//! - [`permissions`]: permissions from roles and channel overwrites.
//! - `json`: every object as Discord sends it (the fields serenity, discord.py and discord.js require).
//! - [`messages`]: message changes (create, edit, delete, react, typing) with Discord's checks (length, embeds,
//!   nonce), dispatched to the bots that see the channel.
//! - `channels`: DM channels and threads (from a message or on their own).
//! - `rest`: the HTTP side: JSON and [`multipart`] bodies, decoded path segments, errors, the log, files served.
//! - `routes`, `hooks`: the REST routes (channels, messages, reactions, typing, threads, DMs, guilds; webhooks,
//!   interactions, commands), with Discord's errors, permission checks and nonce deduplication. Snowflakes are
//!   accepted as strings or numbers everywhere.
//! - `gateway`: the websocket: HELLO, IDENTIFY, READY, GUILD_CREATE, heartbeats, RESUME with replay, request guild
//!   members (op 8) answered with GUILD_MEMBERS_CHUNK.
//! - [`faults`]: injected faults (closed sockets, invalid sessions, dropped, duplicated or delayed dispatches, 429s,
//!   5xx, slow routes).
//! - [`agents`]: scripted agent bots that answer when mentioned.
//! - [`LocalDiscord`]: the server and its in-process handle, for tests and the demo.

pub mod agents;
mod channels;
pub mod faults;
pub mod feed;
mod gateway;
mod hooks;
mod json;
pub mod messages;
pub mod multipart;
pub mod permissions;
mod rest;
mod routes;
pub mod world;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State, WebSocketUpgrade};
use axum::routing::get;
use faults::Faults;
use messages::Draft;
use permissions::Permissions;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use world::{
    Author, Channel, ChannelKind, Guild, LogEntry, Overwrite, OverwriteTarget, Role, SeenMessage, User, World,
};

pub use gateway::{CLOSE_AUTHENTICATION_FAILED, CLOSE_UNKNOWN_ERROR, HEARTBEAT_INTERVAL_MS};

/// State shared by the HTTP handlers, the websocket connections and the handle.
pub struct Shared {
    pub(crate) world: Mutex<World>,
    /// Woken on every change, for [`LocalDiscord::wait_for`].
    pub(crate) changed: Notify,
    pub(crate) gateway_url: String,
}

/// A running server; cloning gives another handle to the same server. It stops when the runtime does.
#[derive(Clone)]
pub struct LocalDiscord {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

/// A condition that did not come true in time.
#[derive(Debug)]
pub struct TimedOut(pub String);

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out waiting for {}", self.0)
    }
}

impl std::error::Error for TimedOut {}

impl LocalDiscord {
    /// Starts the server on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on(0).await
    }

    /// Starts the server on this port of 127.0.0.1 (0: any free one).
    pub async fn start_on(port: u16) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let mut world = World::default();
        world.base_url = format!("http://{addr}");
        let shared = Arc::new(Shared {
            world: Mutex::new(world),
            changed: Notify::new(),
            gateway_url: format!("ws://{addr}/gateway"),
        });
        // Room for a message's files (10 of at most 10 MiB each) and its JSON.
        let body_limit =
            DefaultBodyLimit::max(routes::ATTACHMENTS_PER_MESSAGE_MAX * routes::ATTACHMENT_SIZE_MAX + 65_536);
        let app = Router::new()
            .route("/gateway", get(upgrade))
            .fallback(rest::handle)
            .layer(body_limit)
            .with_state(shared.clone());
        tokio::spawn(async move {
            // As Discord's edge does: without TCP_NODELAY, a small frame written while the previous one is not yet
            // acknowledged waits for the client's delayed ACK (40 ms on Linux).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("local-discord stopped: {e}");
            }
        });
        Ok(Self { shared, addr })
    }

    /// The base URL to give serenity (`HttpBuilder::proxy`) or turn-manager (`--api-base`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The gateway's address, as `GET /api/v10/gateway` gives it.
    pub fn gateway_url(&self) -> String {
        self.shared.gateway_url.clone()
    }

    /// Runs `f` on the state, then wakes whoever waits for a change.
    pub fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let result = f(&mut self.world());
        self.shared.changed.notify_waiters();
        result
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.shared.world.lock().expect("world lock")
    }

    // --- set-up ------------------------------------------------------------------------------------------

    /// A person's account.
    pub fn create_user(&self, name: &str) -> u64 {
        self.with(|w| {
            let id = w.snowflake();
            w.users.insert(id, User { id, name: name.into(), bot: false, token: None });
            id
        })
    }

    /// A bot account and its token. The application id is the bot's user id.
    pub fn create_bot(&self, name: &str) -> (u64, String) {
        self.with(|w| {
            let id = w.snowflake();
            let token = format!("{}.local.{:x}", id, w.snowflake());
            w.users.insert(id, User { id, name: name.into(), bot: true, token: Some(token.clone()) });
            (id, token)
        })
    }

    /// A guild owned by `owner`, who is its first member. @everyone gets the usual default permissions.
    pub fn create_guild(&self, name: &str, owner: u64) -> u64 {
        self.with(|w| {
            let id = w.snowflake();
            let everyone =
                Role { id, name: "@everyone".into(), permissions: Permissions::EVERYONE_DEFAULT, mentionable: false };
            let mut guild =
                Guild { id, name: name.into(), owner_id: owner, roles: vec![everyone], members: Default::default() };
            guild.members.insert(owner, Vec::new());
            w.guilds.insert(id, guild);
            id
        })
    }

    /// A role; if the guild is live, bots connected to it see GUILD_ROLE_CREATE.
    pub fn create_role(&self, guild: u64, name: &str, permissions: Permissions) -> u64 {
        self.with(|w| {
            let id = w.snowflake();
            let roles = &mut w.guilds.get_mut(&guild).expect("guild").roles;
            roles.push(Role { id, name: name.into(), permissions, mentionable: false });
            let role = World::role_json(&roles[roles.len() - 1], roles.len() - 1);
            w.dispatch(Some(guild), "GUILD_ROLE_CREATE", json!({"guild_id": guild.to_string(), "role": role}));
            id
        })
    }

    /// Sets whether anyone may @mention a role (Server Settings → Roles).
    pub fn set_role_mentionable(&self, guild: u64, role: u64, mentionable: bool) {
        self.update_role(guild, role, |role| role.mentionable = mentionable);
    }

    /// Changes a role (its permissions, whether it is mentionable); bots connected see GUILD_ROLE_UPDATE.
    pub fn update_role(&self, guild: u64, role: u64, change: impl FnOnce(&mut Role)) {
        self.with(|w| {
            let roles = &mut w.guilds.get_mut(&guild).expect("guild").roles;
            let at = roles.iter().position(|r| r.id == role).expect("role");
            change(&mut roles[at]);
            let json = World::role_json(&roles[at], at);
            w.dispatch(Some(guild), "GUILD_ROLE_UPDATE", json!({"guild_id": guild.to_string(), "role": json}));
        })
    }

    /// Adds a member with roles; if the guild is live, bots connected to it see GUILD_MEMBER_ADD, and a bot added
    /// (invited back, say) gets the server's GUILD_CREATE, as on Discord.
    pub fn add_member(&self, guild: u64, user: u64, roles: &[u64]) {
        self.with(|w| {
            w.guilds.get_mut(&guild).expect("guild").members.insert(user, roles.to_vec());
            let g = &w.guilds[&guild];
            let mut member = w.member_json(g, user);
            member["guild_id"] = json!(guild.to_string());
            w.dispatch(Some(guild), "GUILD_MEMBER_ADD", member);
            if w.users.get(&user).is_some_and(|u| u.bot) {
                let created = w.guild_json(&w.guilds[&guild]);
                w.dispatch_to_users(Some(guild), &[user], "GUILD_CREATE", created);
            }
        })
    }

    /// Removes a member (a kick or a ban): a bot removed gets GUILD_DELETE without `unavailable`, as on Discord.
    pub fn remove_member(&self, guild: u64, user: u64) {
        self.with(|w| {
            w.guilds.get_mut(&guild).expect("guild").members.remove(&user);
            w.dispatch_to_users(Some(guild), &[user], "GUILD_DELETE", json!({"id": guild.to_string()}));
        })
    }

    /// A short server outage: its members' bots get GUILD_DELETE with `unavailable: true`, then GUILD_CREATE when it
    /// is back; nobody leaves.
    pub fn guild_outage(&self, guild: u64) {
        self.guild_goes_out(guild);
        self.with(|w| {
            let back = w.guild_json(&w.guilds[&guild]);
            w.dispatch(Some(guild), "GUILD_CREATE", back);
        })
    }

    /// A server outage that lasts: its members' bots get GUILD_DELETE with `unavailable: true` (serenity drops the
    /// server from its cache), and nothing more until a member is added ([`LocalDiscord::add_member`]).
    pub fn guild_goes_out(&self, guild: u64) {
        self.with(|w| w.dispatch(Some(guild), "GUILD_DELETE", json!({"id": guild.to_string(), "unavailable": true})))
    }

    pub fn create_channel(&self, guild: u64, name: &str) -> u64 {
        self.with(|w| {
            let id = w.snowflake();
            let kind = ChannelKind::Text;
            w.channels.insert(
                id,
                Channel {
                    id,
                    guild_id: guild,
                    name: name.into(),
                    parent_id: None,
                    overwrites: Vec::new(),
                    kind,
                    owner_id: None,
                    recipients: Vec::new(),
                    topic: None,
                    archived: false,
                },
            );
            let value = w.channel_json(&w.channels[&id]);
            w.dispatch(Some(guild), "CHANNEL_CREATE", value);
            id
        })
    }

    /// Deletes a message as its author or a moderator would: it disappears, and bots see MESSAGE_DELETE.
    pub fn delete_message(&self, message: u64) {
        self.with(|w| w.delete_message(message));
    }

    /// Deletes a channel or a thread (see [`World::delete_channel`]).
    pub fn delete_channel(&self, channel: u64) {
        self.with(|w| w.delete_channel(channel)).unwrap_or_else(|e| panic!("channel not deleted: {}", e.message))
    }

    /// Archives a thread (see [`World::archive_thread`]).
    pub fn archive_thread(&self, thread: u64) {
        self.with(|w| w.archive_thread(thread)).unwrap_or_else(|e| panic!("thread not archived: {}", e.message))
    }

    /// A public thread under `parent`, started by the guild's owner; bots see THREAD_CREATE.
    pub fn create_thread(&self, parent: u64, name: &str) -> u64 {
        self.with(|w| {
            let owner = w.guild_of_channel(parent).expect("a guild channel").owner_id;
            w.start_thread(parent, owner, name, ChannelKind::PublicThread, None)
        })
        .unwrap_or_else(|e| panic!("thread not created: {}", e.message))
    }

    /// The DM channel between two users (made on first use).
    pub fn open_dm(&self, user: u64, other: u64) -> u64 {
        self.with(|w| w.open_dm(user, other)).unwrap_or_else(|e| panic!("no DM channel: {}", e.message))
    }

    /// Sets a channel overwrite for a role or a member (replacing the one it had).
    pub fn set_overwrite(&self, channel: u64, target: OverwriteTarget, allow: Permissions, deny: Permissions) {
        self.with(|w| {
            let c = w.channels.get_mut(&channel).expect("channel");
            c.overwrites.retain(|o| o.target != target);
            c.overwrites.push(Overwrite { target, allow, deny });
            let value = w.channel_json(&w.channels[&channel]);
            let guild = w.channels[&channel].guild_id;
            w.dispatch(Some(guild), "CHANNEL_UPDATE", value);
        })
    }

    // --- acting as people and agents ---------------------------------------------------------------------

    /// Posts as `author` (a person or an agent bot) with Discord's default mention parsing.
    pub fn post(&self, channel: u64, author: u64, content: &str) -> u64 {
        self.post_draft(channel, author, Draft::text(content))
    }

    /// Posts as `author` with embeds, a reply or files, after the same checks a client's request gets.
    pub fn post_draft(&self, channel: u64, author: u64, draft: Draft<'_>) -> u64 {
        self.with(|w| w.create_message(channel, Author::User(author), draft))
            .unwrap_or_else(|e| panic!("posting failed: {} ({})", e.message, e.code))
    }

    /// `by` pins a message: Discord posts its notice of the pin (a system message by `by`).
    pub fn pin(&self, message: u64, by: u64) {
        self.with(|w| w.pin(message, true, by));
    }

    /// A user starts typing in a channel (bots see TYPING_START).
    pub fn start_typing(&self, channel: u64, user: u64) {
        self.with(|w| w.start_typing(channel, user));
    }

    /// A user adds (or removes) a reaction (bots see MESSAGE_REACTION_ADD / REMOVE).
    pub fn react(&self, message: u64, user: u64, emoji: &str, add: bool) {
        self.with(|w| w.react(message, user, emoji, add));
    }

    /// Replaces the content of a message, as its author editing it.
    pub fn edit(&self, message: u64, content: &str) {
        self.with(|w| w.edit_message(message, content)).unwrap_or_else(|e| panic!("edit failed: {}", e.message));
    }

    /// A person runs a slash command: INTERACTION_CREATE goes to the application's bot. Returns the interaction id.
    pub fn invoke_command(
        &self,
        channel: u64,
        user: u64,
        application: u64,
        name: &str,
        options: serde_json::Value,
    ) -> u64 {
        self.with(|w| {
            let id = w.snowflake();
            let token = format!("itok{:x}", w.snowflake());
            let command_id = w
                .commands
                .iter()
                .find(|c| c.application_id == application && c.body["name"] == name)
                .map_or(0, |c| c.id);
            let guild_id = w.channels[&channel].guild_id;
            let guild = &w.guilds[&guild_id];
            let mut member = w.member_json(guild, user);
            member["permissions"] = json!(w.permissions_in(user, channel).bits().to_string());
            let data = json!({
                "id": id.to_string(), "application_id": application.to_string(), "type": 2, "token": token,
                "version": 1, "guild_id": guild_id.to_string(), "channel_id": channel.to_string(),
                "channel": {"id": channel.to_string(), "type": 0},
                "member": member, "locale": "en-US", "guild_locale": "en-US", "entitlements": [],
                "app_permissions": w.permissions_in(application, channel).bits().to_string(),
                "authorizing_integration_owners": {}, "context": 0, "attachment_size_limit": 8_388_608,
                "data": {"id": command_id.to_string(), "name": name, "type": 1, "options": options, "guild_id": guild_id.to_string()},
            });
            w.interactions.insert(
                id,
                world::Interaction { id, token, application_id: application, channel_id: channel, user_id: user, response: None, response_message: None },
            );
            w.dispatch_to_users(Some(guild_id), &[application], "INTERACTION_CREATE", data);
            id
        })
    }

    // --- reading -----------------------------------------------------------------------------------------

    /// The channel as a person sees it, oldest first.
    pub fn view(&self, channel: u64) -> Vec<SeenMessage> {
        self.world().view(channel)
    }

    /// Every REST call and gateway frame so far.
    pub fn log(&self) -> Vec<LogEntry> {
        self.world().log.clone()
    }

    /// Waits until `condition` returns something, checking after every change; no blind sleeps.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut condition: impl FnMut(&World) -> Option<T>,
    ) -> Result<T, TimedOut> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(found) = condition(&self.world()) {
                return Ok(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return condition(&self.world()).ok_or_else(|| TimedOut(what.to_owned()));
            }
        }
    }

    // --- faults ------------------------------------------------------------------------------------------

    /// Arms dispatch and route faults.
    pub fn faults(&self, f: impl FnOnce(&mut Faults)) {
        self.with(|w| f(&mut w.faults));
    }

    /// Closes a bot's websocket; with `resumable` false the session is forgotten too.
    pub fn close_gateway(&self, bot: u64, resumable: bool) {
        self.with(|w| w.close_connections(bot, resumable));
    }

    /// Sends INVALID_SESSION (not resumable) to a bot.
    pub fn invalidate_session(&self, bot: u64) {
        self.with(|w| w.invalidate_sessions(bot));
    }

    /// Whether a bot has a live, identified gateway connection.
    pub fn is_connected(&self, bot: u64) -> bool {
        self.world().is_connected(bot)
    }
}

async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> axum::response::Response {
    ws.on_upgrade(move |socket| gateway::serve_connection(shared, socket))
}
