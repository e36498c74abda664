//! The Discord layer (serenity and poise). Data flows one way:
//!
//! - [`gateway`] (serenity's event handler) and [`commands`] (poise: parse, authorise) hand inputs to
//! - [`router`], which owns the map from channel to
//! - [`actor`]: one task per channel that owns its session, asks the core, saves through [`persist`], and hands the
//!   effects to
//! - [`sender`]: the channel's effects, in order, through
//! - [`rest`]: the network seam (a trait, its serenity implementation, the typed error), with the webhooks.
//!
//! [`access`] (permissions) and [`identity`] (who the bot is) are services for those; [`clock`] and [`stats`] are
//! plain helpers. This file wires them and is the only one that knows them all. What *should* happen lives in
//! `crate::core`.

pub mod access;
pub mod actor;
pub mod clock;
mod commands;
mod configured;
mod gateway;
pub mod identity;
mod in_order;
mod memory;
pub mod persist;
pub mod reconnecting;
pub mod rest;
pub mod router;
pub mod sender;
pub mod shards_up;
pub mod stats;

use crate::core::config::Config;
use crate::core::ids::{ChannelId, MessageId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::Session;
use crate::core::shards::ShardRange;
use crate::errors::SetupError;
use crate::sessions::SessionStore;
use crate::store::Store;
use access::Access;
use actor::{Env, HandledQuery, Input};
use anyhow::Context as _;
use clock::Clock;
use identity::Identity;
use rest::budget::RestBudget;
use rest::discord::DiscordRest;
use rest::http::DiscordHttp;
use router::Router;
use serenity::all as discord;
use shards_up::ShardsUp;
use stats::{Stats, StatsSnapshot};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// How many channels read their missed messages at once after a new gateway session.
const CATCH_UP_CONCURRENCY: usize = 8;
/// How often the gateway's connection stage is looked at: serenity 0.12.5 has no event for a lost connection, so its
/// shard manager's record of the stage is read. (A session Discord invalidates on a live connection is not seen this
/// way: serenity keeps the stage `Connected` for the ~5 s it waits before identifying again.)
const CONNECTION_POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// Where serenity is sent to connect once the bot is stopping: nothing listens on port 0.
const GATEWAY_CLOSED: &str = "ws://127.0.0.1:0";
/// How long a shutdown waits for serenity to close the gateway connections (it gives each shard's runner up to 5 s,
/// one after another).
const GATEWAY_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What the bot needs to run. The token is never printed: this type has no `Debug`.
pub struct BotOptions {
    pub token: String,
    /// Send every REST call here instead of discord.com (a rate-limiting proxy, or a local server).
    pub api_base: Option<String>,
    pub config: Config,
    pub personas: PersonaCatalog,
    /// Where the sessions are kept: the state folder (locked for this process) or a database shared by every process.
    pub store: Arc<dyn SessionStore>,
    /// The gateway shards this process runs (spec 12); `None`: the whole bot on one connection.
    pub shards: Option<ShardRange>,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (once per process: see `crate::metrics`).
    pub metrics: Option<std::net::SocketAddr>,
}

/// A bot connected (or connecting) to Discord.
pub struct RunningBot {
    router: Arc<Router>,
    store: Arc<dyn SessionStore>,
    stats: Arc<Stats>,
    shard_manager: Arc<discord::ShardManager>,
    /// The gateway's address, as serenity reads it at each connection and each resume.
    gateway_url: Arc<tokio::sync::Mutex<String>>,
    /// `None` once [`RunningBot::finished`] saw it end: a task is awaited once only.
    client: Option<JoinHandle<Result<(), discord::Error>>>,
    connection_watch: JoinHandle<()>,
    /// Hands memory a burst freed back to the system once the bot is quiet (see `memory`).
    trimmer: JoinHandle<()>,
    /// Renews the leases and takes over the channels another process left (a shared store only).
    lease_watch: Option<JoinHandle<()>>,
}

impl RunningBot {
    /// Waits until the gateway connection ends by itself (an error such as a refused intent or token), or the store
    /// breaks for good (then the process must exit: a restart recovers what was saved).
    pub async fn finished(&mut self) -> anyhow::Result<()> {
        let Some(client) = self.client.as_mut() else { return Ok(()) };
        let ended = tokio::select! {
            ended = client => ended,
            why = self.store.broken() => {
                anyhow::bail!("{why}: no session can be saved any more, so the bot stops; a restart recovers every \
                               save made (from the journal)")
            }
        };
        self.client = None;
        match ended {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(explain_gateway_error(e)),
            Err(e) => Err(anyhow::anyhow!("the gateway task failed: {e}")),
        }
    }

    /// Graceful shutdown: stop taking events, let every channel finish what is in hand (each transition is saved
    /// before its effects), write what is still queued, then close the gateway.
    pub async fn shutdown(mut self) {
        self.connection_watch.abort();
        self.trimmer.abort();
        // The leases are renewed until the channels' actors and senders have stopped: one expiring meanwhile (a
        // short lease time) would let another process claim a channel this one still posts in. Once closing, the
        // router starts no actor for a channel found left.
        self.router.shutdown().await;
        if let Some(lease_watch) = &self.lease_watch {
            lease_watch.abort();
        }
        // Writes what is queued, then lets go of the folder or of this process's leases.
        self.store.close().await;
        // From here no connection or resume can succeed: serenity's queuer and runners read the address at each
        // try, and one left going (below) would otherwise connect again with this bot's handler.
        *self.gateway_url.lock().await = GATEWAY_CLOSED.to_owned();
        // serenity's `shutdown_all` does nothing while no shard runs (Discord unreachable since the start, a shard
        // between two tries): its queuer would go on trying, and the client never return. Spawned, it stops every
        // shard and the queuer even when the wait for it is cut short.
        let nothing_connected = self.shard_manager.runners.lock().await.is_empty();
        let manager = self.shard_manager.clone();
        let stopping = tokio::spawn(async move { manager.shutdown_all().await });
        let mut client = self.client.take();
        let mut ended = false;
        let closed = tokio::time::timeout(GATEWAY_CLOSE_WAIT, async {
            let _ = stopping.await;
            if let (false, Some(task)) = (nothing_connected, client.as_mut()) {
                let _ = task.await;
                ended = true;
            }
        })
        .await;
        if closed.is_err() {
            tracing::warn!("the gateway connections did not close within {GATEWAY_CLOSE_WAIT:?}; stopping anyway");
        }
        if let (false, Some(task)) = (ended, client) {
            task.abort();
            let _ = task.await;
        }
        tracing::info!("turn-manager stopped");
    }

    /// The channel's session as its actor holds it now (read from disk when the channel has no actor).
    pub async fn session(&self, channel: ChannelId) -> Option<Session> {
        self.router.ask(channel, Input::Snapshot).await
    }

    /// Whether the channel's actor has handled message `id`.
    pub async fn handled(&self, channel: ChannelId, id: MessageId) -> bool {
        self.router.ask(channel, |reply| Input::Handled(Box::new(HandledQuery { id, reply }))).await.unwrap_or(false)
    }

    /// Waits until everything the channel's actor decided so far has been carried out.
    pub async fn settle(&self, channel: ChannelId) {
        self.router.ask(channel, Input::Flush).await;
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Where the sessions are kept.
    pub fn sessions(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The state folder's store, for the tests and the demo that read the files. Panics for a bot whose sessions are
    /// in a database: use [`RunningBot::sessions`] there.
    pub fn store(&self) -> &Store {
        self.store.files().expect("this bot keeps its sessions in a database, not a state folder")
    }
}

/// The token as serenity wants it (trimmed, the quotes around it and a pasted `Bot ` prefix dropped), or why it
/// cannot be one. Checked before connecting; the token itself is never printed.
pub fn clean_token(raw: &str) -> anyhow::Result<String> {
    let token = raw.trim();
    // Quotes that an env file kept (Docker's `--env-file` and systemd's `EnvironmentFile` differ on them): no token
    // has any (found by a review: the token was sent with them, and Discord's refusal sent people to reset it).
    let unquote = |token: &'_ str| {
        let unquoted = ['"', '\''].iter().find_map(|q| token.strip_prefix(*q).and_then(|t| t.strip_suffix(*q)));
        unquoted.unwrap_or(token).trim().to_owned()
    };
    let token = unquote(unquote(token).trim_start_matches("Bot ").trim());
    let token = token.as_str();
    if token.is_empty() {
        anyhow::bail!("the token is empty");
    }
    if token.contains(char::is_whitespace) || token.contains(['"', '\'']) {
        anyhow::bail!(
            "the token has a space, a line break or a quotation mark inside it, which no token has; copy it again \
             from the Bot page of your application in the developer portal"
        );
    }
    discord::validate_token(token).map(|()| token.to_owned()).map_err(|_| {
        anyhow::anyhow!(
            "the token does not look like a Discord bot token (three parts separated by dots, no spaces); \
             copy it again from the Bot page of your application in the developer portal"
        )
    })
}

/// Connects the bot: REST client, saved sessions (each channel's actor), commands, gateway.
pub async fn start(options: BotOptions) -> anyhow::Result<RunningBot> {
    let token = clean_token(&options.token)?;
    if let Some(addr) = options.metrics {
        crate::metrics::serve(addr)?;
    }
    let mut http = discord::HttpBuilder::new(&token);
    if let Some(base) = &options.api_base {
        // serenity's rate limiter builds its requests without the proxy, so it must be off with a base URL.
        http = http.proxy(base.trim_end_matches('/')).ratelimiter_disabled(true);
    }
    let http = http.build();
    // Every REST call the bot makes spends from one budget: the effects, the lookups, the command replies.
    let budget = Arc::new(RestBudget::new(options.config.rest_requests_per_second));
    // Asked before the saved sessions are read: with a wrong token their leases were claimed and their announcements
    // tried, each refused with a 401 that counts toward Discord's limit on invalid requests (a restarting service
    // spent them at every start), before the bot exited (found by a review). A wrong API base stops the start before
    // anything is read, too.
    if let Some(base) = &options.api_base {
        check_api_base(&http, base, &budget).await?;
    }
    check_token(&http, &budget).await?;

    let store = options.store;
    let report = store
        .load_all(options.shards)
        .await
        .with_context(|| format!("reading the saved sessions from {}", store.describe()))?;
    // Each problem of `report` was logged where it was met (found by a review: logging them here said each twice).
    let identity = Arc::new(Identity::default());
    let access = Arc::new(Access::new(identity.clone(), options.config.control_roles.clone(), budget.clone()));
    let stats = Arc::new(Stats::default());
    let env = Arc::new(Env {
        personas: Arc::new(options.personas),
        config: Arc::new(options.config),
        rest: Arc::new(DiscordRest::new(
            Arc::new(DiscordHttp::new(&token, options.api_base.as_deref(), budget.clone())),
            access.clone(),
            identity.clone(),
        )),
        saver: store.clone().into_saver(),
        clock: Clock::system(),
        stats: stats.clone(),
        catch_up_permits: Arc::new(Semaphore::new(CATCH_UP_CONCURRENCY)),
        shards: Arc::new(ShardsUp::starting(options.shards.unwrap_or(ShardRange::whole(1)))),
        tasks: tokio_util::task::TaskTracker::new(),
        retired_commands: Default::default(),
        elsewhere: Default::default(),
        process_started: tokio::time::Instant::now(),
    });
    tell_lost_sessions(&env, report.lost);
    let router = Router::new(env);
    let sessions = keep_own_sessions(report.sessions, options.shards);
    let configured =
        Arc::new(configured::ConfiguredStarts::new(&router.env().config, &router.env().personas, &sessions));
    if configured.waiting() > 0 {
        tracing::info!(
            "{} configured channel(s) start when their server is seen on this process's shards",
            configured.waiting()
        );
    }
    router.resume(sessions);
    // Renewed from here on: the leases `load_all` claimed run while the client is built, a network call that may take
    // a while (found by a review: the first renewal came only after it).
    // Stopped if the start fails before the running bot takes it.
    let lease_watch = store.lease_period().map(|period| {
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(tend_leases(
            store.clone(),
            router.clone(),
            options.shards,
            period,
        )))
    });

    let intents = discord::GatewayIntents::GUILDS
        | discord::GatewayIntents::GUILD_MESSAGES
        | discord::GatewayIntents::MESSAGE_CONTENT;
    let registers = crate::core::shards::registers_commands(options.shards);
    let commands = Arc::new(commands::Commands {
        router: router.clone(),
        access: access.clone(),
        store: store.clone(),
        registers,
    });
    // Building the client asks for the gateway's address (GET /gateway), once: that call spends from the budget
    // too. Reconnections use the address it got.
    budget.take().await;
    let poise = Arc::new(std::sync::OnceLock::new());
    let gateway = gateway::Gateway::new(router.clone(), identity.clone(), configured, poise.clone());
    let client = discord::ClientBuilder::new_with_http(http, intents).event_handler(gateway).await;
    let mut client = client.context("building the Discord client")?;
    let mut gate = commands::framework(commands);
    gate.init(&client).await;
    let _ = poise.set(gate);
    access.connect(client.http.clone(), client.cache.clone());
    let shard_manager = client.shard_manager.clone();
    let gateway_url = client.ws_url.clone();
    let client = tokio::spawn(async move {
        match options.shards {
            // serenity's range end is inclusive here: `first..last` runs `first` to `last`, both included.
            Some(range) => client.start_shard_range(range.first..range.last, range.total).await,
            None => client.start().await,
        }
    });
    let trimmer = memory::trim_when_quiet(stats.clone());
    let connection_watch = tokio::spawn(watch_connection(shard_manager.clone(), router.clone()));
    let lease_watch = lease_watch.map(tokio_util::task::AbortOnDropHandle::detach);
    let client = Some(client);
    Ok(RunningBot { router, store, stats, shard_manager, gateway_url, client, connection_watch, trimmer, lease_watch })
}

/// With a store shared by several processes: renews this process's leases, well before they expire, and takes over
/// the channels of these shards that no live process holds (their process stopped or died): each gets an actor
/// that claims its lease, reads the session as the other process left it, and reads the messages posted since
/// before acting, as after a restart.
async fn tend_leases(store: Arc<dyn SessionStore>, router: Arc<Router>, shards: Option<ShardRange>, period: Duration) {
    every_period(period, || async {
        match store.tend_leases(shards).await {
            Ok(orphans) => {
                // Their actors here are stale: stopped now, with what their senders still had to do.
                for channel in store.lost_channels() {
                    router.lost(channel);
                }
                if !orphans.is_empty() {
                    tracing::info!("taking over {} channel(s) that no live process holds", orphans.len());
                }
                for channel in orphans {
                    if router.take_over(channel) {
                        crate::metrics::lease_taken_over();
                    }
                }
                true
            }
            Err(e) => {
                tracing::warn!("could not renew the leases (trying again in {RENEWAL_RETRY:?}): {e}");
                false
            }
        }
    })
    .await
}

/// How soon a lease round that failed is tried again: the leases last three periods, and a round that waited a
/// whole period again after one failure (a connection waited for 10 s) could let every lease expire.
const RENEWAL_RETRY: Duration = Duration::from_secs(1);

/// Runs `round` at once, then a `period` after the start of the last one that worked (the time a round takes is not
/// added to the wait), and [`RENEWAL_RETRY`] after one that failed, forever. At once: the leases loaded at start-up
/// have run since their page was claimed, and a slow start (thousands of sessions) could otherwise let them expire
/// before the first renewal (found by a review).
async fn every_period<F, Fut>(period: Duration, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::time::sleep_until(next).await;
        let started = tokio::time::Instant::now();
        next = if round().await { started + period } else { tokio::time::Instant::now() + RENEWAL_RETRY.min(period) };
    }
}

/// Tells the channels of a shard when its gateway connection is lost (a close, a session Discord invalidated), so
/// that their deadlines wait instead of ending turns while signals go unseen, and when it is back, so that they read
/// what they missed (the catch-up) and arm their deadlines again. A shard not connected yet is starting, not lost:
/// its READY marks it up and brings its channels' catch-up (`in_order::ready`). The other shards' channels go on.
/// serenity's own reconnections (a resume, a restart its runner asks for) are seen sooner, and without the manager's
/// stale "connected" during a resume, by `reconnecting.rs`.
async fn watch_connection(shard_manager: Arc<discord::ShardManager>, router: Arc<Router>) {
    let shards = router.env().shards.clone();
    let mut shard_gauges = crate::metrics::Shards::default();
    loop {
        tokio::time::sleep(CONNECTION_POLL).await;
        // Taken before the snapshot: a shard marked after it (RESUMED, READY) is judged at the next poll.
        let changes: Vec<u64> = shards.ids().map(|id| shards.changes(id)).collect();
        let runners = shard_manager.runners.lock().await;
        // A shard being restarted has no runner for a while: it is not connected.
        let connected: HashSet<u32> = runners
            .iter()
            .filter(|(_, r)| r.stage == discord::ConnectionStage::Connected)
            .map(|(id, _)| id.0)
            .collect();
        shard_gauges.observe(shard_states(shards.ids(), |id| {
            let runner = runners.get(&discord::ShardId(id))?;
            Some((runner.stage == discord::ConnectionStage::Connected, runner.latency))
        }));
        drop(runners);
        for (id, seen) in shards.ids().zip(changes) {
            let shard = Some(shards.shard(id));
            if connected.contains(&id) {
                shards.seen_connected(id, || router.broadcast(|| Input::CatchUp(shard)));
            } else if shards.went_down(id, seen, || router.broadcast(|| Input::Disconnected(shard))) {
                tracing::info!(
                    shard = id,
                    "the gateway connection was lost; its channels' deadlines wait for the catch-up after reconnecting"
                );
            }
        }
        router.env().stats.connection_checked();
    }
}

/// Each shard of the process, `(id, connected, latency)`: one without a runner (waiting its turn to connect, 5 s
/// after the one before, or being restarted) is not connected. Before, only the shards with a runner had a gauge, so
/// `health` called a process healthy while a shard still waited (found by a review).
fn shard_states(
    ids: impl Iterator<Item = u32>,
    runner: impl Fn(u32) -> Option<(bool, Option<std::time::Duration>)>,
) -> Vec<(u32, bool, Option<std::time::Duration>)> {
    ids.map(|id| {
        let (connected, latency) = runner(id).unwrap_or((false, None));
        (id, connected, latency)
    })
    .collect()
}

/// The saved sessions this process keeps: those of servers on its shards, and those whose server is not known yet
/// (saved before sessions recorded it; it is found when the channel is next used). The others stay on disk for the
/// process that runs their shard.
fn keep_own_sessions(sessions: Vec<Session>, shards: Option<ShardRange>) -> Vec<Session> {
    let Some(range) = shards else { return sessions };
    let (own, others): (Vec<Session>, Vec<Session>) =
        sessions.into_iter().partition(|s| s.guild_id.is_none_or(|guild| range.owns(guild)));
    if !others.is_empty() {
        tracing::info!(
            "{} saved session(s) belong to servers on other shards than {range}: left on disk, not resumed here",
            others.len()
        );
    }
    own
}

/// A channel whose saved session could not be read (and had no good copy) is told once, rather than going silent:
/// the unreadable file is moved aside, so the next start does not see it again.
fn tell_lost_sessions(env: &Arc<Env>, lost: Vec<ChannelId>) {
    for channel in lost {
        let rest = env.rest.clone();
        tokio::spawn(async move {
            let text = "⚠️ I could not restore the turn-management session of this channel: its saved state could not \
                        be read (it is kept aside for inspection; see my logs). Start a new one with `!turn start`.";
            let nonce = sender::notice_nonce();
            if let Err(e) = sender::retrying(|| rest.notice(channel, text, &nonce)).await {
                tracing::warn!(channel = %channel, "could not say that the session was lost: {e}");
            }
        });
    }
}

/// Asks the API base for the gateway's address before the client does: serenity, when that fails, connects to
/// Discord's own gateway with the token, while every REST call goes to the base. A few tries while nothing answers
/// (a local server still starting), none after a refusal; the error says which setting to check.
async fn check_api_base(http: &discord::Http, base: &str, budget: &RestBudget) -> anyhow::Result<()> {
    // A proxy's password in the base never reaches a log, nor does it in the error's own copy of the address.
    let password = reqwest::Url::parse(base).ok().and_then(|url| url.password().map(str::to_owned));
    let hidden = |text: String| match password.as_deref() {
        Some(password) if !password.is_empty() => text.replace(password, "***"),
        _ => text,
    };
    let shown = crate::sessions::location::redact(base);
    const TRIES: u32 = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        budget.take().await;
        // serenity's client has no time limit: a proxy that takes the connection and never answers held the start
        // for good, without a word (found by a review). No answer is tried again, as a server failing is.
        let asked = match tokio::time::timeout(rest::http::REST_TIMEOUT, http.get_gateway()).await {
            Ok(answer) => answer,
            Err(_) => Err(discord::Error::Other("no answer within the REST time limit")),
        };
        match asked {
            Ok(_) => return Ok(()),
            Err(e) => {
                let status = refusal_of(&e);
                // An answer, but not the address (a 404 from a wrong path): trying again changes nothing, nor would
                // restarting the bot. A server only failing or busy (a 5xx, a 408, a proxy's 429) is tried again,
                // and once the tries run out is worth a restart (found by a review: exit status 2 kept the bot down
                // after a rate limit).
                let refused = status.is_some_and(|status| !passing(status));
                let why = hidden(format!(
                    "{}{}",
                    status.map(|status| format!("status {status}: ")).unwrap_or_default(),
                    crate::errors::with_causes(&e)
                ));
                if refused || attempt == TRIES {
                    let text = format!(
                        "the API base {shown} did not give the gateway's address (GET /api/v10/gateway: {why}); check \
                         --api-base (DISCORD_API_BASE): it is the server's address, such as http://127.0.0.1:3710 \
                         (with or without /api/v10), and no other path"
                    );
                    return Err(if refused { SetupError(text).into() } else { anyhow::anyhow!(text) });
                }
                tracing::warn!("the API base {shown} did not give the gateway's address ({why}); trying again in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Asks Discord who the token is (GET /users/@me) before the gateway is opened with it: a refused token is said in
/// one line, rather than after serenity's own errors for the identify Discord closes (4004). Any other failure, or
/// no answer within the REST time limit, is left to the gateway, which says its own.
async fn check_token(http: &discord::Http, budget: &RestBudget) -> anyhow::Result<()> {
    match rest::serenity::call(budget, "GET /users/@me", http.get_current_user()).await {
        Err(e) if e.status() == Some(401) => Err(refused_token()),
        Err(e) => {
            tracing::debug!("could not ask Discord who the token is ({e}); the gateway will tell");
            Ok(())
        }
        Ok(_) => Ok(()),
    }
}

/// The status of an answer that is an error, if `e` is one.
fn refusal_of(e: &discord::Error) -> Option<u16> {
    match e {
        discord::Error::Http(http) => http.status_code().map(|status| status.as_u16()),
        _ => None,
    }
}

/// Whether an error status may pass by itself: the server failing, timing out or rate limiting.
fn passing(status: u16) -> bool {
    matches!(status, 408 | 429) || status >= 500
}

/// Turns the gateway errors people meet on a real server into what to do about them; a refusal that only a change of
/// setting can get past is a [`SetupError`].
fn explain_gateway_error(e: discord::Error) -> anyhow::Error {
    use discord::GatewayError;
    match &e {
        discord::Error::Gateway(GatewayError::DisallowedGatewayIntents) => SetupError(
            "Discord refused the Message Content intent: enable \"Message Content Intent\" on the Bot page of your \
             application in the developer portal, then start again"
                .into(),
        )
        .into(),
        discord::Error::Gateway(GatewayError::InvalidAuthentication) => refused_token(),
        _ => anyhow::anyhow!("the gateway connection ended: {e}"),
    }
}

fn refused_token() -> anyhow::Error {
    SetupError("Discord refused the token (DISCORD_TOKEN): reset it on the Bot page of the developer portal".into())
        .into()
}

/// Exactly the permissions the bot uses: read and post in channels and threads, read history (to catch up after a
/// restart), react (observe mode), and relay: delete agents' messages and repost through a webhook.
pub fn permissions_used() -> discord::Permissions {
    discord::Permissions::VIEW_CHANNEL
        | discord::Permissions::SEND_MESSAGES
        | discord::Permissions::SEND_MESSAGES_IN_THREADS
        | discord::Permissions::READ_MESSAGE_HISTORY
        | discord::Permissions::ADD_REACTIONS
        | discord::Permissions::MANAGE_MESSAGES
        | discord::Permissions::MANAGE_WEBHOOKS
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shard_of_the_process_without_a_runner_yet_is_not_connected() {
        let latency = Some(std::time::Duration::from_millis(40));
        let states = super::shard_states(2..=4, |id| (id == 2).then_some((true, latency)));
        assert_eq!(states, [(2, true, latency), (3, false, None), (4, false, None)]);
    }

    /// Found by a review: an unreachable --api-base was reported as "Error while sending HTTP request." only.
    #[tokio::test]
    async fn an_unreachable_api_base_is_reported_with_why() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(); // closed again
        let error = reqwest::get(format!("http://127.0.0.1:{port}/api/v10/gateway")).await.unwrap_err();
        let said = crate::errors::with_causes(&serenity::Error::Http(serenity::all::HttpError::Request(error)));
        assert!(said.starts_with("Error while sending HTTP request.") && said.contains("refused"), "{said}");
    }

    /// Found by a review: an API base that takes the connection and never answers held the start for good, without a
    /// word. Each look gets the REST time limit, and the last one's failure says what to check.
    #[tokio::test(start_paused = true)]
    async fn an_api_base_that_never_answers_fails_the_start_after_its_tries() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let http = serenity::all::HttpBuilder::new("a.b.c").proxy(base.clone()).ratelimiter_disabled(true).build();
        let budget = super::RestBudget::new(0);
        let checked =
            tokio::time::timeout(std::time::Duration::from_secs(600), super::check_api_base(&http, &base, &budget));
        let error = checked.await.expect("the start is not held for good").unwrap_err();
        assert!(error.to_string().contains("no answer within the REST time limit"), "{error}");
        silent.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_round_that_fails_is_tried_again_within_a_second_and_a_slow_one_does_not_push_the_next() {
        let start = tokio::time::Instant::now();
        let rounds = std::sync::Mutex::new(Vec::new());
        let round = || async {
            let n = {
                let mut rounds = rounds.lock().unwrap();
                rounds.push(start.elapsed().as_secs_f64());
                rounds.len()
            };
            // The second round waits 8 s for a connection and fails; the third fails at once; the fourth is slow.
            match n {
                2 => tokio::time::sleep(std::time::Duration::from_secs(8)).await,
                4 => tokio::time::sleep(std::time::Duration::from_secs(4)).await,
                _ => {}
            }
            !(2..=3).contains(&n)
        };
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(45),
            super::every_period(std::time::Duration::from_secs(10), round),
        )
        .await;
        assert_eq!(*rounds.lock().unwrap(), [0.0, 10.0, 19.0, 20.0, 30.0, 40.0]);
    }

    use super::clean_token;

    #[test]
    fn a_token_is_trimmed_and_a_pasted_bot_prefix_dropped() {
        assert_eq!(clean_token("  Bot MTIz.abc.def-ghi\n").unwrap(), "MTIz.abc.def-ghi");
        assert_eq!(clean_token("MTIz.abc.def").unwrap(), "MTIz.abc.def");
        // Quotes an env file kept (found by a review: sent with them, the token was refused).
        assert_eq!(clean_token("\"MTIz.abc.def\"\n").unwrap(), "MTIz.abc.def");
        assert_eq!(clean_token("'Bot MTIz.abc.def'").unwrap(), "MTIz.abc.def");
        assert_eq!(clean_token("Bot \"MTIz.abc.def\"").unwrap(), "MTIz.abc.def", "quoted after the prefix");
    }

    #[test]
    fn an_empty_or_malformed_token_is_refused_without_echoing_it() {
        assert_eq!(clean_token(" ").unwrap_err().to_string(), "the token is empty");
        let error = clean_token("secret words").unwrap_err().to_string();
        assert!(error.contains("a space") && !error.contains("secret"), "{error}");
        for broken in ["MTIz.abc.def\"", "MTIz.a bc.def", "\"MTIz.abc.def'", "MTIz.abc"] {
            let error = clean_token(broken).unwrap_err().to_string();
            assert!(!error.contains("abc"), "never echoed: {error}");
        }
        assert!(clean_token("MTIz.abc").unwrap_err().to_string().contains("does not look like a Discord bot token"));
    }

    #[test]
    fn a_process_keeps_the_sessions_of_servers_on_its_shards_and_those_whose_server_is_not_known() {
        use super::{ChannelId, Session, ShardRange, keep_own_sessions};
        use crate::core::ids::GuildId;
        let on_shard = |shard: u64| GuildId((shard + 2 * 77) << 22);
        let session =
            |channel: u64, guild: Option<GuildId>| Session { guild_id: guild, ..Session::new(ChannelId(channel)) };
        let saved = vec![session(1, Some(on_shard(0))), session(2, Some(on_shard(1))), session(3, None)];
        let kept = |shards| keep_own_sessions(saved.clone(), shards).iter().map(|s| s.channel_id.0).collect::<Vec<_>>();
        assert_eq!(kept(Some(ShardRange::parse("0", 2).unwrap())), [1, 3]);
        assert_eq!(kept(Some(ShardRange::parse("1", 2).unwrap())), [2, 3]);
        assert_eq!(kept(None), [1, 2, 3], "one connection keeps everything");
    }
}
