//! The running bot: the state its parts share, how it connects to Discord, resumes saved sessions, and shuts down.

use super::channel::ChannelSlot;
use super::events::Events;
use super::webhooks::Webhooks;
use super::{commands, timeouts};
use crate::core::config::Config;
use crate::core::ids::ChannelId;
use crate::core::persona::PersonaCatalog;
use crate::core::session::{Command, Context, Session};
use crate::store::Store;
use anyhow::Context as _;
use chrono::{DateTime, Utc};
use serenity::all as discord;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// What the bot needs to run. The token is never printed: this type has no `Debug`.
pub struct BotOptions {
    pub token: String,
    /// Send every REST call here instead of discord.com (a rate-limiting proxy, or a local server).
    pub api_base: Option<String>,
    pub config: Config,
    pub personas: PersonaCatalog,
    pub store: Store,
}

/// Figures the bot keeps, for the demo, the logs and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Turns ended by the timeout task.
    pub timeouts: u64,
    /// How long after its deadline the latest and the latest-ending turn were ended, in milliseconds.
    pub max_lateness_ms: i64,
    pub total_lateness_ms: i64,
    /// Messages and edits given to the engine.
    pub messages_handled: u64,
}

/// The state shared by the event handler, the commands and the timeout task.
pub struct Bot {
    pub personas: PersonaCatalog,
    pub config: Config,
    pub store: Store,
    http: OnceLock<Arc<discord::Http>>,
    cache: OnceLock<Arc<discord::Cache>>,
    user_id: OnceLock<discord::UserId>,
    channels: Mutex<HashMap<ChannelId, Arc<ChannelSlot>>>,
    /// Woken whenever a deadline may have changed, so the timeout task can sleep until the earliest one.
    pub(super) deadlines_changed: Notify,
    pub(super) webhooks: Webhooks,
    /// Set when shutting down: no new events are taken.
    closing: AtomicBool,
    resumed: AtomicBool,
    stats: Mutex<Stats>,
}

impl Bot {
    pub fn context(&self) -> Context<'_> {
        Context { personas: &self.personas, config: &self.config }
    }

    /// The bot's own user id, known once the gateway said READY.
    pub fn user_id(&self) -> Option<discord::UserId> {
        self.user_id.get().copied()
    }

    /// The REST client (the gateway client's own, set before it connects).
    pub fn http(&self) -> &Arc<discord::Http> {
        self.http.get().expect("the REST client is set before the gateway connects")
    }

    pub(super) fn cache(&self) -> Option<&Arc<discord::Cache>> {
        self.cache.get()
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> Stats {
        *self.stats.lock().expect("stats lock")
    }

    pub(super) fn record_message(&self) {
        self.stats.lock().expect("stats lock").messages_handled += 1;
    }

    pub(super) fn record_timeout(&self, lateness_ms: i64) {
        let mut stats = self.stats.lock().expect("stats lock");
        stats.timeouts += 1;
        stats.max_lateness_ms = stats.max_lateness_ms.max(lateness_ms);
        stats.total_lateness_ms += lateness_ms;
    }

    /// The channel's slot if it has ever had a session.
    pub fn slot(&self, channel: ChannelId) -> Option<Arc<ChannelSlot>> {
        self.channels.lock().expect("channels lock").get(&channel).cloned()
    }

    /// The channel's slot, made (with no session running) if it has none.
    pub(super) fn slot_or_create(self: &Arc<Self>, channel: ChannelId) -> Arc<ChannelSlot> {
        let mut channels = self.channels.lock().expect("channels lock");
        channels
            .entry(channel)
            .or_insert_with(|| ChannelSlot::spawn(Arc::downgrade(self), Session::new(channel)))
            .clone()
    }

    pub(super) fn slots(&self) -> Vec<Arc<ChannelSlot>> {
        self.channels.lock().expect("channels lock").values().cloned().collect()
    }

    /// A copy of a channel's session as it is now.
    pub async fn session(&self, channel: ChannelId) -> Option<Session> {
        let slot = self.slot(channel)?;
        let session = slot.session.lock().await;
        Some(session.clone())
    }

    /// The earliest deadline of all sessions.
    pub(super) fn earliest_deadline(&self) -> Option<DateTime<Utc>> {
        self.slots().iter().filter_map(|slot| slot.deadline()).min()
    }

    /// Called on every READY: learns who the bot is; the first time, brings saved and configured sessions up to
    /// date (overdue turns end now, with their true duration); every time, reads what was missed while away.
    pub(super) async fn on_ready(self: &Arc<Self>, ctx: &discord::Context, ready: &discord::Ready) {
        let _ = self.user_id.set(ready.user.id);
        let _ = self.cache.set(ctx.cache.clone());
        tracing::info!(user = %ready.user.name, guilds = ready.guilds.len(), "connected to the gateway");
        if !self.resumed.swap(true, Ordering::SeqCst) {
            self.resume_sessions().await;
        }
        for slot in self.slots() {
            slot.catch_up(self).await;
        }
    }

    async fn resume_sessions(self: &Arc<Self>) {
        for managed in &self.config.channels {
            let slot = self.slot_or_create(managed.channel_id);
            if slot.session.lock().await.is_active() {
                continue;
            }
            let roster = managed.roster.iter().map(|p| p.as_str().to_owned()).collect();
            if let Err(refusal) = slot.run_command(self, &Command::Start { roster }).await {
                tracing::error!(channel = %managed.channel_id, "could not start the configured session: {refusal}");
            }
        }
        for slot in self.slots() {
            slot.bring_up_to_date(self).await;
        }
    }
}

/// A bot connected (or connecting) to Discord.
pub struct RunningBot {
    pub bot: Arc<Bot>,
    shard_manager: Arc<discord::ShardManager>,
    client: JoinHandle<Result<(), discord::Error>>,
    timeouts: JoinHandle<()>,
    stop_timeouts: watch::Sender<bool>,
}

impl RunningBot {
    /// Waits until the gateway connection ends by itself (an error such as a refused intent or token).
    pub async fn finished(&mut self) -> anyhow::Result<()> {
        match (&mut self.client).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(explain_gateway_error(e)),
            Err(e) => Err(anyhow::anyhow!("the gateway task failed: {e}")),
        }
    }

    /// Graceful shutdown: stop taking events, finish what is in hand (each transition is saved before its
    /// effects), stop the timeout task, then close the gateway.
    pub async fn shutdown(self) {
        self.bot.closing.store(true, Ordering::SeqCst);
        let _ = self.stop_timeouts.send(true);
        let _ = self.timeouts.await;
        for slot in self.bot.slots() {
            slot.drain().await;
        }
        self.shard_manager.shutdown_all().await;
        let _ = self.client.await;
        tracing::info!("turn-manager stopped");
    }
}

/// The token as serenity wants it (trimmed, a pasted `Bot ` prefix dropped), or why it cannot be one. Checked
/// before connecting; the token itself is never printed.
pub fn clean_token(raw: &str) -> anyhow::Result<String> {
    let token = raw.trim().trim_start_matches("Bot ").trim();
    if token.is_empty() {
        anyhow::bail!("the token is empty");
    }
    discord::validate_token(token).map(|()| token.to_owned()).map_err(|_| {
        anyhow::anyhow!(
            "the token does not look like a Discord bot token (three parts separated by dots, no spaces); \
             copy it again from the Bot page of your application in the developer portal"
        )
    })
}

/// Connects the bot: REST client, sessions from the state folder, commands, gateway, timeout task.
pub async fn start(options: BotOptions) -> anyhow::Result<RunningBot> {
    let token = clean_token(&options.token)?;
    let mut http = discord::HttpBuilder::new(&token);
    if let Some(base) = &options.api_base {
        // serenity's rate limiter builds its requests without the proxy, so it must be off with a base URL.
        http = http.proxy(base.trim_end_matches('/')).ratelimiter_disabled(true);
    }
    let http = http.build();

    let report = options.store.load_all().context("reading the saved sessions")?;
    for problem in &report.problems {
        tracing::warn!("{problem}");
    }
    let bot = Arc::new(Bot {
        personas: options.personas,
        config: options.config,
        store: options.store,
        http: OnceLock::new(),
        cache: OnceLock::new(),
        user_id: OnceLock::new(),
        channels: Mutex::new(HashMap::new()),
        deadlines_changed: Notify::new(),
        webhooks: Webhooks::default(),
        closing: AtomicBool::new(false),
        resumed: AtomicBool::new(false),
        stats: Mutex::new(Stats::default()),
    });
    {
        let mut channels = bot.channels.lock().expect("channels lock");
        for session in report.sessions {
            channels.insert(session.channel_id, ChannelSlot::spawn(Arc::downgrade(&bot), session));
        }
    }

    let intents = discord::GatewayIntents::GUILDS
        | discord::GatewayIntents::GUILD_MESSAGES
        | discord::GatewayIntents::MESSAGE_CONTENT;
    let mut client = discord::ClientBuilder::new_with_http(http, intents)
        .event_handler(Events::new(bot.clone()))
        .framework(commands::framework(bot.clone()))
        .await
        .context("building the Discord client")?;
    let _ = bot.http.set(client.http.clone());
    let shard_manager = client.shard_manager.clone();
    let client = tokio::spawn(async move { client.start().await });

    let (stop_timeouts, stopped) = watch::channel(false);
    let timeouts = tokio::spawn(timeouts::run(bot.clone(), stopped));
    Ok(RunningBot { bot, shard_manager, client, timeouts, stop_timeouts })
}

/// Turns the gateway errors people meet on a real server into what to do about them.
fn explain_gateway_error(e: discord::Error) -> anyhow::Error {
    use discord::GatewayError;
    match &e {
        discord::Error::Gateway(GatewayError::DisallowedGatewayIntents) => anyhow::anyhow!(
            "Discord refused the Message Content intent: enable \"Message Content Intent\" on the Bot page of your \
             application in the developer portal, then start again"
        ),
        discord::Error::Gateway(GatewayError::InvalidAuthentication) => anyhow::anyhow!(
            "Discord refused the token (DISCORD_TOKEN): reset it on the Bot page of the developer portal"
        ),
        _ => anyhow::anyhow!("the gateway connection ended: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::clean_token;

    #[test]
    fn a_token_is_trimmed_and_a_pasted_bot_prefix_dropped() {
        assert_eq!(clean_token("  Bot MTIz.abc.def-ghi\n").unwrap(), "MTIz.abc.def-ghi");
        assert_eq!(clean_token("MTIz.abc.def").unwrap(), "MTIz.abc.def");
    }

    #[test]
    fn an_empty_or_malformed_token_is_refused_without_echoing_it() {
        assert_eq!(clean_token(" ").unwrap_err().to_string(), "the token is empty");
        let error = clean_token("secret words").unwrap_err().to_string();
        assert!(error.contains("does not look like a Discord bot token") && !error.contains("secret"), "{error}");
    }
}
