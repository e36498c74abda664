//! A local Discord server set up for turn-manager: a guild owned by a human operator, a channel, one bot account
//! per persona (their ids replace the ones in the persona files), and the bot's own account with the permissions
//! it uses. The demo plays on it; the end-to-end tests build their scenes on it.

use crate::core::config::Config;
use crate::core::ids::UserId;
use crate::core::persona::{Persona, PersonaCatalog};
use crate::core::shards::ShardRange;
use crate::discord::{self, BotOptions, RunningBot};
use crate::sessions::SessionStore;
use crate::sessions::files::FileSessions;
use local_discord::LocalDiscord;
use local_discord::permissions::Permissions;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait for the bot to connect and register its commands.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Stage {
    pub server: LocalDiscord,
    pub guild: u64,
    pub channel: u64,
    /// The guild's owner: a person who may run every command.
    pub operator: u64,
    pub bot_user: u64,
    /// The bot's token on the local server (a made-up one, worthless anywhere else).
    pub bot_token: String,
    /// The role that gives the bot its permissions.
    pub bot_role: u64,
    /// The personas, each speaking through its own local bot account.
    pub personas: Vec<Persona>,
}

impl Stage {
    /// Starts the server and sets up the guild, the channel and an account per persona.
    pub async fn new(personas: &[Persona]) -> std::io::Result<Self> {
        let server = LocalDiscord::start().await?;
        let operator = server.create_user("operator");
        let guild = server.create_guild("Agents HQ", operator);
        let channel = server.create_channel(guild, "agents");
        let (bot_user, bot_token) = server.create_bot("turn-manager");
        let bot_role = server.create_role(guild, "turn-manager", bot_permissions());
        server.add_member(guild, bot_user, &[bot_role]);
        let personas = personas
            .iter()
            .map(|persona| {
                let (user, _) = server.create_bot(&persona.display_name);
                server.add_member(guild, user, &[]);
                Persona { discord_user_id: UserId(user), ..persona.clone() }
            })
            .collect();
        Ok(Self { server, guild, channel, operator, bot_user, bot_token, bot_role, personas })
    }

    /// Another guild, set up as the stage's own (the bot with its role, every persona's account), without a
    /// channel; answers its id.
    pub fn add_guild(&self, name: &str) -> u64 {
        let guild = self.server.create_guild(name, self.operator);
        let role = self.server.create_role(guild, "turn-manager", bot_permissions());
        self.server.add_member(guild, self.bot_user, &[role]);
        for persona in &self.personas {
            self.server.add_member(guild, persona.discord_user_id.0, &[]);
        }
        guild
    }

    pub fn catalog(&self) -> PersonaCatalog {
        PersonaCatalog::new(self.personas.clone())
    }

    /// The local account of a persona.
    pub fn user_of(&self, persona: &str) -> u64 {
        self.personas.iter().find(|p| p.id.as_str() == persona).map(|p| p.discord_user_id.0).expect("a known persona")
    }

    /// Starts the real bot against the server (through `--api-base`, as `run` does) and waits until it is connected
    /// and its slash commands are registered.
    pub async fn start_bot(&self, config: Config, state_dir: &Path) -> anyhow::Result<RunningBot> {
        self.start_bot_on(config, state_dir, None).await
    }

    /// [`Stage::start_bot`] running only `shards`: one of several processes of the bot. It waits until the bot is
    /// connected, and (where it runs shard 0, which registers them) until the slash commands are registered.
    pub async fn start_bot_on(
        &self,
        config: Config,
        state_dir: &Path,
        shards: Option<ShardRange>,
    ) -> anyhow::Result<RunningBot> {
        self.start_bot_with(config, Arc::new(FileSessions::open(state_dir)?), shards).await
    }

    /// [`Stage::start_bot`], serving Prometheus metrics at `metrics` (once per process: see `crate::metrics`).
    pub async fn start_bot_with_metrics(
        &self,
        config: Config,
        state_dir: &Path,
        metrics: Option<std::net::SocketAddr>,
    ) -> anyhow::Result<RunningBot> {
        self.launch(config, Arc::new(FileSessions::open(state_dir)?), None, metrics).await
    }

    /// [`Stage::start_bot_on`] with the sessions kept in `store` (a database shared by several bots, say).
    pub async fn start_bot_with(
        &self,
        config: Config,
        store: Arc<dyn SessionStore>,
        shards: Option<ShardRange>,
    ) -> anyhow::Result<RunningBot> {
        self.launch(config, store, shards, None).await
    }

    async fn launch(
        &self,
        config: Config,
        store: Arc<dyn SessionStore>,
        shards: Option<ShardRange>,
        metrics: Option<std::net::SocketAddr>,
    ) -> anyhow::Result<RunningBot> {
        let options = BotOptions {
            token: self.bot_token.clone(),
            api_base: Some(self.server.base_url()),
            config,
            personas: self.catalog(),
            store,
            shards,
            metrics,
        };
        let bot = discord::start(options).await?;
        let me = self.bot_user;
        let registers = crate::core::shards::registers_commands(shards);
        self.server
            .wait_for("the bot to connect and register its commands", CONNECT_TIMEOUT, |w| {
                let registered = !registers || w.commands.iter().any(|c| c.application_id == me);
                let connected = match shards {
                    None => w.is_connected(me),
                    Some(range) => (range.first..=range.last)
                        .all(|id| w.is_connected_on(me, [u64::from(id), u64::from(range.total)])),
                };
                (connected && registered).then_some(())
            })
            .await?;
        Ok(bot)
    }

    /// The operator types a message (a command) in the channel.
    pub fn operator_says(&self, text: &str) -> u64 {
        self.server.post(self.channel, self.operator, text)
    }
}

/// What the bot's role grants: exactly what `invite` asks for.
fn bot_permissions() -> Permissions {
    Permissions::from_bits(discord::permissions_used().bits())
}
