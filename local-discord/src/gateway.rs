//! The JSON gateway (no compression): HELLO, IDENTIFY (sharded or not), READY, GUILD_CREATE, heartbeats, RESUME
//! with replay of missed dispatches, INVALID_SESSION, request guild members (op 8, answered with
//! GUILD_MEMBERS_CHUNK), and dispatches to every connected bot, with the dispatch faults applied. A session that
//! identified with `shard: [id, total]` gets the events of the guilds with `(guild_id >> 22) % total == id` only, and
//! direct messages only on shard 0, as on Discord.

use crate::Shared;
use crate::faults::DispatchAction;
use crate::world::{LogKind, World, snowflake_of};
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

/// How often clients are asked to heartbeat, in milliseconds (Discord's usual value).
pub const HEARTBEAT_INTERVAL_MS: u64 = 41_250;
/// Dispatches kept per session for RESUME.
const REPLAY_BUFFER: usize = 5_000;

/// Close codes with Discord's meaning.
pub const CLOSE_UNKNOWN_ERROR: u16 = 4000;
pub const CLOSE_AUTHENTICATION_FAILED: u16 = 4004;
pub const CLOSE_INVALID_SHARD: u16 = 4010;

/// What the writer task of a connection sends.
#[derive(Debug)]
pub enum Outgoing {
    Frame(String),
    Close(u16),
}

/// A bot's gateway session; it outlives its connection so that it can be resumed.
#[derive(Debug)]
pub struct GatewaySession {
    pub id: String,
    pub user_id: u64,
    pub seq: u64,
    /// `[shard id, shard count]` from IDENTIFY; `None` is the whole bot on one connection.
    pub shard: Option<[u64; 2]>,
    /// Recent dispatches for RESUME: sequence, event name, frame.
    buffer: VecDeque<(u64, String, String)>,
    pub connection: Option<UnboundedSender<Outgoing>>,
}

impl World {
    /// Whether a bot has a live, identified gateway connection.
    pub fn is_connected(&self, bot: u64) -> bool {
        self.sessions.values().any(|s| s.user_id == bot && s.connection.is_some())
    }

    /// How many live, identified gateway connections a bot has (two processes on one shard, in a rolling deploy).
    pub fn connections_of(&self, bot: u64) -> usize {
        self.sessions.values().filter(|s| s.user_id == bot && s.connection.is_some()).count()
    }

    /// Whether a bot has a live, identified gateway connection as shard `[id, total]`.
    pub fn is_connected_on(&self, bot: u64, shard: [u64; 2]) -> bool {
        self.sessions.values().any(|s| s.user_id == bot && s.connection.is_some() && s.shard == Some(shard))
    }

    /// Sends a dispatch to every session of a bot in `guild_id` (every session when `None`).
    pub fn dispatch(&mut self, guild_id: Option<u64>, event: &str, data: Value) {
        let members: Vec<u64> = match guild_id {
            Some(g) => self.guilds.get(&g).map(|g| g.members.keys().copied().collect()).unwrap_or_default(),
            None => self.users.keys().copied().collect(),
        };
        self.dispatch_to_users(guild_id, &members, event, data);
    }

    /// Sends a dispatch to the sessions of these users only (an interaction goes to its application alone), each on
    /// the shard of `guild_id` (shard 0 when `None`: a direct message).
    pub fn dispatch_to_users(&mut self, guild_id: Option<u64>, members: &[u64], event: &str, data: Value) {
        let targets: Vec<String> = self
            .sessions
            .values()
            .filter(|s| members.contains(&s.user_id) && on_shard(s.shard, guild_id))
            .map(|s| s.id.clone())
            .collect();
        for session_id in targets {
            let action = self.faults.take_dispatch_action(event);
            self.send_dispatch(&session_id, event, data.clone(), action);
        }
    }

    fn send_dispatch(&mut self, session_id: &str, event: &str, data: Value, action: Option<DispatchAction>) {
        let Some(session) = self.sessions.get_mut(session_id) else { return };
        let user = session.user_id;
        if action == Some(DispatchAction::Drop) {
            self.record(LogKind::Refused { what: format!("fault: dropped {event} for user {user}") });
            return;
        }
        session.seq += 1;
        let seq = session.seq;
        let frame = json!({"op": 0, "t": event, "s": seq, "d": data}).to_string();
        session.buffer.push_back((seq, event.to_owned(), frame.clone()));
        if session.buffer.len() > REPLAY_BUFFER {
            session.buffer.pop_front();
        }
        // Without a connection the dispatch is only kept for RESUME, and logged when the replay sends it.
        let Some(tx) = session.connection.clone() else { return };
        self.record(LogKind::GatewaySent { user: Some(user), op: 0, event: Some(event.to_owned()), seq: Some(seq) });
        match action {
            Some(DispatchAction::Delay(delay)) => {
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Outgoing::Frame(frame));
                });
            }
            Some(DispatchAction::Duplicate) => {
                let _ = tx.send(Outgoing::Frame(frame.clone()));
                let _ = tx.send(Outgoing::Frame(frame));
            }
            _ => {
                let _ = tx.send(Outgoing::Frame(frame));
            }
        }
    }

    /// Sends a frame that is not a dispatch (HELLO, heartbeat ACK, INVALID_SESSION) and logs it.
    fn send_op(&mut self, tx: &UnboundedSender<Outgoing>, user: Option<u64>, op: u8, d: Option<Value>) {
        let frame = match d {
            Some(d) => json!({"op": op, "d": d}),
            None => json!({"op": op}),
        };
        let _ = tx.send(Outgoing::Frame(frame.to_string()));
        self.record(LogKind::GatewaySent { user, op, event: None, seq: None });
    }

    /// Closes a bot's connections. A session that is not `resumable` is forgotten, so a RESUME gets
    /// INVALID_SESSION and the client identifies again.
    pub fn close_connections(&mut self, user: u64, resumable: bool) {
        let ids: Vec<String> = self.sessions.values().filter(|s| s.user_id == user).map(|s| s.id.clone()).collect();
        for id in ids {
            let session = self.sessions.get_mut(&id).expect("listed");
            if let Some(tx) = session.connection.take() {
                let _ = tx.send(Outgoing::Close(CLOSE_UNKNOWN_ERROR));
            }
            if !resumable {
                self.sessions.remove(&id);
            }
        }
    }

    /// Sends INVALID_SESSION (not resumable) on a bot's live connections and forgets the sessions.
    pub fn invalidate_sessions(&mut self, user: u64) {
        let ids: Vec<String> = self.sessions.values().filter(|s| s.user_id == user).map(|s| s.id.clone()).collect();
        for id in ids {
            if let Some(session) = self.sessions.remove(&id)
                && let Some(tx) = session.connection
            {
                self.send_op(&tx, Some(user), 9, Some(json!(false)));
            }
        }
    }
}

/// Runs one websocket connection until it closes.
pub async fn serve_connection(shared: Arc<Shared>, socket: WebSocket) {
    use futures_util::{SinkExt, StreamExt};
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = unbounded_channel::<Outgoing>();
    let writer = tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let result = match out {
                Outgoing::Frame(text) => sink.send(WsMessage::Text(text.into())).await,
                Outgoing::Close(code) => {
                    let frame = CloseFrame { code, reason: "closed by the server".into() };
                    let _ = sink.send(WsMessage::Close(Some(frame))).await;
                    // Flushed before the socket goes: answering a client's close, the frame was dropped unsent and
                    // the client saw the connection reset (serenity warned "error awaiting close frame" at every
                    // clean stop).
                    let _ = sink.close().await;
                    break;
                }
            };
            if result.is_err() {
                break;
            }
        }
    });
    let hello = json!({"heartbeat_interval": HEARTBEAT_INTERVAL_MS});
    shared.world.lock().expect("world lock").send_op(&tx, None, 10, Some(hello));

    let mut session_id: Option<String> = None;
    while let Some(Ok(frame)) = stream.next().await {
        let text = match frame {
            WsMessage::Text(text) => text.to_string(),
            WsMessage::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            WsMessage::Close(frame) => {
                // Answer a client's close with the same code, as Discord does, so it shuts down cleanly.
                let _ = tx.send(Outgoing::Close(frame.map_or(1000, |f| f.code)));
                break;
            }
            _ => continue,
        };
        let Ok(payload) = serde_json::from_str::<Value>(&text) else { continue };
        let op = payload["op"].as_u64().unwrap_or(255) as u8;
        let mut world = shared.world.lock().expect("world lock");
        let user = session_id.as_ref().and_then(|id| world.sessions.get(id)).map(|s| s.user_id);
        world.record(LogKind::GatewayReceived { user, op });
        match op {
            1 => world.send_op(&tx, user, 11, None),
            2 => match identify(&mut world, &payload["d"], &tx, &shared.gateway_url) {
                Some(id) => session_id = Some(id),
                None => {
                    let _ = tx.send(Outgoing::Close(CLOSE_AUTHENTICATION_FAILED));
                }
            },
            6 => session_id = resume(&mut world, &payload["d"], &tx),
            8 => {
                if let Some(id) = &session_id {
                    request_guild_members(&mut world, id, &payload["d"]);
                }
            }
            _ => {}
        }
        drop(world);
        shared.changed.notify_waiters();
    }
    if let Some(id) = session_id {
        let mut world = shared.world.lock().expect("world lock");
        if let Some(session) = world.sessions.get_mut(&id)
            && session.connection.as_ref().is_some_and(|c| c.same_channel(&tx))
        {
            session.connection = None;
        }
    }
    // Whoever waits on the world (the sandbox's connection watch, a test's `wait_for`) learns of the disconnection
    // now, not at the next change of anything else (the sandbox said a clean stop late, or never).
    shared.changed.notify_waiters();
    drop(tx);
    let _ = writer.await;
}

/// Whether a session on `shard` gets the events of `guild_id` (Discord's `(guild_id >> 22) % shard_count`).
pub fn on_shard(shard: Option<[u64; 2]>, guild_id: Option<u64>) -> bool {
    match (shard, guild_id) {
        (None, _) => true,
        (Some([id, _]), None) => id == 0,
        (Some([id, total]), Some(guild)) => (guild >> 22) % total.max(1) == id,
    }
}

fn identify(world: &mut World, d: &Value, tx: &UnboundedSender<Outgoing>, gateway_url: &str) -> Option<String> {
    let token = d["token"].as_str().unwrap_or_default();
    let Some(user) = world.bot_by_token(token).map(|u| u.id) else {
        world.record(LogKind::Refused { what: "IDENTIFY with an unknown token".into() });
        return None;
    };
    let shard = match &d["shard"] {
        Value::Null => None,
        Value::Array(pair) => match (pair.first().and_then(Value::as_u64), pair.get(1).and_then(Value::as_u64)) {
            (Some(id), Some(total)) if id < total => Some([id, total]),
            _ => {
                world.record(LogKind::Refused { what: format!("IDENTIFY with an invalid shard {}", d["shard"]) });
                let _ = tx.send(Outgoing::Close(CLOSE_INVALID_SHARD));
                return None;
            }
        },
        other => {
            world.record(LogKind::Refused { what: format!("IDENTIFY with an invalid shard {other}") });
            let _ = tx.send(Outgoing::Close(CLOSE_INVALID_SHARD));
            return None;
        }
    };
    let id = format!("{:x}", world.snowflake());
    world.sessions.insert(
        id.clone(),
        GatewaySession {
            id: id.clone(),
            user_id: user,
            seq: 0,
            shard,
            buffer: VecDeque::new(),
            connection: Some(tx.clone()),
        },
    );
    let guild_ids: Vec<u64> = world
        .guilds
        .values()
        .filter(|g| g.members.contains_key(&user) && on_shard(shard, Some(g.id)))
        .map(|g| g.id)
        .collect();
    let mut me = world.user_json(user);
    me["verified"] = json!(true);
    me["mfa_enabled"] = json!(false);
    me["flags"] = json!(0);
    let ready = json!({
        "v": 10, "user": me, "session_id": id, "resume_gateway_url": gateway_url,
        "guilds": guild_ids.iter().map(|g| json!({"id": g.to_string(), "unavailable": true})).collect::<Vec<_>>(),
        "shard": shard,
        "application": {"id": user.to_string(), "flags": crate::hooks::APPLICATION_FLAGS}, "private_channels": [], "relationships": [],
    });
    world.send_dispatch(&id, "READY", ready, None);
    for guild in guild_ids {
        let data = world.guild_json(&world.guilds[&guild]);
        world.send_dispatch(&id, "GUILD_CREATE", data, None);
    }
    Some(id)
}

/// Discord's most members in one GUILD_MEMBERS_CHUNK.
const MEMBERS_PER_CHUNK: usize = 1000;

/// Op 8: the members of a guild whose name starts with `query` (all for ""), up to `limit` (0: no limit), or the
/// ones in `user_ids`; answered with GUILD_MEMBERS_CHUNK dispatches to the asking session only. Ids may be strings
/// or numbers, as discord.py sends them.
fn request_guild_members(world: &mut World, session_id: &str, d: &Value) {
    let Some(guild_id) = snowflake_of(&d["guild_id"]) else { return };
    let Some(guild) = world.guilds.get(&guild_id) else {
        world.record(LogKind::Refused { what: format!("request guild members of unknown guild {guild_id}") });
        return;
    };
    let wanted: Option<Vec<u64>> = match &d["user_ids"] {
        Value::Array(ids) => Some(ids.iter().filter_map(snowflake_of).collect()),
        Value::Null => None,
        one => Some(snowflake_of(one).into_iter().collect()),
    };
    let query = d["query"].as_str().unwrap_or_default().to_lowercase();
    let limit = d["limit"].as_u64().filter(|l| *l > 0).map_or(usize::MAX, |l| l as usize);
    let mut found = Vec::new();
    let mut not_found = Vec::new();
    match &wanted {
        Some(ids) => {
            for id in ids {
                if guild.members.contains_key(id) { found.push(*id) } else { not_found.push(id.to_string()) }
            }
        }
        None => {
            let names = guild
                .members
                .keys()
                .filter(|u| world.users.get(u).is_some_and(|user| user.name.to_lowercase().starts_with(&query)));
            found.extend(names.take(limit));
        }
    }
    let members: Vec<Value> = found.iter().map(|u| world.member_json(guild, *u)).collect();
    let chunks: Vec<&[Value]> =
        if members.is_empty() { vec![&[]] } else { members.chunks(MEMBERS_PER_CHUNK).collect() };
    let count = chunks.len();
    let frames: Vec<Value> = chunks
        .into_iter()
        .enumerate()
        .map(|(index, chunk)| {
            let mut data = json!({"guild_id": guild_id.to_string(), "members": chunk, "chunk_index": index,
                "chunk_count": count, "not_found": if index == 0 { not_found.clone() } else { Vec::new() }});
            if d["presences"].as_bool() == Some(true) {
                data["presences"] = json!([]);
            }
            if let Some(nonce) = d["nonce"].as_str() {
                data["nonce"] = json!(nonce);
            }
            data
        })
        .collect();
    for data in frames {
        world.send_dispatch(session_id, "GUILD_MEMBERS_CHUNK", data, None);
    }
}

fn resume(world: &mut World, d: &Value, tx: &UnboundedSender<Outgoing>) -> Option<String> {
    let session_id = d["session_id"].as_str().unwrap_or_default().to_owned();
    let seq = snowflake_of(&d["seq"]).unwrap_or(0);
    let token_user = world.bot_by_token(d["token"].as_str().unwrap_or_default()).map(|u| u.id);
    let valid = world.sessions.get(&session_id).is_some_and(|s| Some(s.user_id) == token_user);
    if !valid {
        world.record(LogKind::Refused { what: format!("RESUME of unknown session {session_id}") });
        world.send_op(tx, token_user, 9, Some(json!(false)));
        return None;
    }
    let session = world.sessions.get_mut(&session_id).expect("checked");
    session.connection = Some(tx.clone());
    let user = session.user_id;
    let missed: Vec<(u64, String, String)> = session.buffer.iter().filter(|(s, _, _)| *s > seq).cloned().collect();
    for (seq, event, frame) in missed {
        let _ = tx.send(Outgoing::Frame(frame));
        world.record(LogKind::GatewaySent { user: Some(user), op: 0, event: Some(event), seq: Some(seq) });
    }
    // A fault on RESUMED (a delay) stands for a slow replay: the client stays resuming until it comes.
    let action = world.faults.take_dispatch_action("RESUMED");
    world.send_dispatch(&session_id, "RESUMED", json!({}), action);
    Some(session_id)
}
