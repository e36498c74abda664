//! A phase's world: local-discord with N channels over one guild per bot process (each guild on its own shard) and
//! three agent accounts (pm, dev, critic), the files `turn-manager run` reads (personas, configuration, state
//! folder), where the bot keeps its sessions ([`PhaseStore`]), and the bot itself as one or more separate processes,
//! watched from outside.

use super::layout::{Layout, guild_index};
use super::phase_store::PhaseStore;
use super::procfs;
use crate::core::ids::{GuildId, PersonaId, UserId};
use crate::core::persona::{Persona, PersonaCatalog};
use crate::core::shards::{ShardRange, registers_commands};
use crate::demo::stage::Stage;
use anyhow::{Context as _, bail};
use local_discord::world::{LogEntry, LogKind};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The roster of every channel, in turn order.
pub const ROSTER: [(&str, &str); 3] = [("pm", "PM"), ("dev", "Developer"), ("critic", "Critic")];
/// How long the bot may take to connect and register its commands.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);
/// How long a graceful shutdown may take before the bot is killed.
const STOP_LIMIT: Duration = Duration::from_secs(20);

pub struct Scene {
    pub stage: Stage,
    /// Every channel, the stage's own first.
    pub channels: Vec<u64>,
    /// Each channel's guild.
    pub guild_of: HashMap<u64, u64>,
    pub dir: PathBuf,
    pub layout: Layout,
    pub store: PhaseStore,
}

impl Scene {
    /// A fresh server with `channels` channels in one guild and personas whose turns last `timeout_seconds`, for one
    /// bot process on the state folder; their files are written under `dir`.
    pub async fn new(dir: &Path, channels: usize, timeout_seconds: u32) -> anyhow::Result<Self> {
        Self::laid_out(dir, channels, timeout_seconds, &Layout::default()).await
    }

    /// [`Scene::new`] with the channels spread over one guild per process of `layout`, and an empty store of its
    /// kind.
    pub async fn laid_out(dir: &Path, channels: usize, timeout_seconds: u32, layout: &Layout) -> anyhow::Result<Self> {
        let personas: Vec<Persona> = ROSTER
            .iter()
            .enumerate()
            .map(|(i, (id, name))| Persona {
                id: PersonaId::parse(id).expect("a valid persona id"),
                display_name: (*name).into(),
                discord_user_id: UserId(0),
                avatar_url: None,
                timeout_seconds: Some(timeout_seconds),
                order: Some(i as i64 + 1),
                source: format!("personas/{id}.json"),
            })
            .collect();
        let stage = Stage::new(&personas).await.context("starting local-discord")?;
        let guilds = guilds_on_every_shard(&stage, layout.guilds());
        let mut all = vec![stage.channel];
        all.extend((1..channels).map(|i| {
            let guild = guilds[guild_index(i, guilds.len())];
            stage.server.create_channel(guild, &format!("agents-{i}"))
        }));
        let guild_of = all.iter().enumerate().map(|(i, c)| (*c, guilds[guild_index(i, guilds.len())])).collect();
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.join("personas")).with_context(|| format!("creating {}", dir.display()))?;
        let store = PhaseStore::new(&layout.store, &dir.join("state")).await?;
        let scene = Self { stage, channels: all, guild_of, dir: dir.to_owned(), layout: layout.clone(), store };
        for persona in &scene.stage.personas {
            let file = json!({
                "id": persona.id.as_str(),
                "displayName": persona.display_name,
                "discordUserId": persona.discord_user_id.0.to_string(),
                "turnBehavior": {"timeoutSeconds": timeout_seconds},
                "order": persona.order,
            });
            std::fs::write(scene.dir.join("personas").join(format!("{}.json", persona.id)), file.to_string())?;
        }
        scene.write_config(&[])?;
        Ok(scene)
    }

    /// The configuration, the same for every process as in a real deployment (each starts only the channels of the
    /// servers on its shards): these channels managed from start-up with the whole roster, everything else default
    /// but the global REST budget, which is off: local-discord has no global limit, and the bench measures the bot
    /// (on Discord, the default 45 calls/s bounds one bot to about 15 relayed turns/s).
    pub fn write_config(&self, managed: &[u64]) -> anyhow::Result<()> {
        let roster: Vec<&str> = ROSTER.iter().map(|(id, _)| *id).collect();
        let channels: Vec<_> =
            managed.iter().map(|c| json!({"channelId": c.to_string(), "roster": roster.clone()})).collect();
        let config = json!({ "channels": channels, "restRequestsPerSecond": 0 });
        std::fs::write(self.config_path(), config.to_string())?;
        Ok(())
    }

    /// The state folder of the bot's processes (the file store's sessions; unused with a database).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("turn-manager.json")
    }

    /// Each channel's guild as the bot's sessions record it: `(channel, guild)`.
    pub fn channels_with_guilds(&self) -> Vec<(u64, u64)> {
        self.channels.iter().map(|c| (*c, self.guild_of[c])).collect()
    }

    /// The agents' accounts, in roster order.
    pub fn agent_users(&self) -> Vec<u64> {
        self.stage.personas.iter().map(|p| p.discord_user_id.0).collect()
    }

    pub fn catalog(&self) -> PersonaCatalog {
        self.stage.catalog()
    }

    /// The server's log from `from` on.
    pub fn log_since(&self, from: usize) -> Vec<LogEntry> {
        self.stage.server.with(|w| w.log[from.min(w.log.len())..].to_vec())
    }

    pub fn log_len(&self) -> usize {
        self.stage.server.with(|w| w.log.len())
    }
}

/// One guild per shard of `shards` (`(guild id >> 22) % shards`), the stage's own first, each with the bot (its
/// role and permissions) and every agent in it; the guilds in shard order.
fn guilds_on_every_shard(stage: &Stage, shards: usize) -> Vec<u64> {
    let shard_of = |guild: u64| ShardRange::whole(shards as u32).shard_of(GuildId(guild)) as usize;
    let mut guilds = vec![None; shards];
    guilds[shard_of(stage.guild)] = Some(stage.guild);
    while guilds.iter().any(Option::is_none) {
        // A guild's shard comes from its snowflake's millisecond: a guild of a shard already covered is left unused,
        // and the next one is made a millisecond later.
        let guild = stage.add_guild("Agents HQ, another shard");
        let slot = &mut guilds[shard_of(guild)];
        if slot.is_some() {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        *slot = Some(guild);
    }
    let mut guilds: Vec<u64> = guilds.into_iter().flatten().collect();
    // The stage's guild first, so the stage's channel is the first channel of the first guild.
    guilds.sort_by_key(|g| *g != stage.guild);
    guilds
}

/// A bot build to measure, and the log filter it runs with (`RUST_LOG`; each process logs to `bot.log`, or
/// `bot-<i>.log` when there are several, in the phase's folder).
#[derive(Clone, Debug)]
pub struct Bot {
    pub binary: PathBuf,
    pub log_filter: String,
}

/// One process of the bot.
struct Process {
    child: Child,
    pid: u32,
    log: PathBuf,
    shards: Option<ShardRange>,
}

/// `turn-manager run` against the scene's server, as one process or one per shard, watched from outside: memory
/// and CPU are those of all of them together.
pub struct BotProcesses {
    processes: Vec<Process>,
    /// Just before the first process was spawned (they are spawned one after the other at once).
    pub spawned: Instant,
}

impl BotProcesses {
    pub fn spawn(bot: &Bot, scene: &Scene) -> anyhow::Result<Self> {
        let count = scene.layout.processes;
        let spawned = Instant::now();
        let mut processes = Vec::new();
        for process in 0..count {
            let log = scene.dir.join(if count == 1 { "bot.log".to_owned() } else { format!("bot-{process}.log") });
            let stderr = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
            let binary = &bot.binary;
            let shards = scene.layout.shards_of(process);
            let mut command = Command::new(binary);
            for name in crate::cli::RUN_ENVIRONMENT {
                command.env_remove(name);
            }
            command
                .args(["run", "--api-base", &scene.stage.server.base_url()])
                .arg("--personas")
                .arg(scene.dir.join("personas"))
                .arg("--state")
                .arg(scene.state_dir())
                .arg("--config")
                .arg(scene.config_path())
                .env("DISCORD_TOKEN", &scene.stage.bot_token)
                .env("RUST_LOG", &bot.log_filter)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr);
            if let Some(range) = shards {
                command.args(["--shards", &format!("{}-{}", range.first, range.last)]);
                command.args(["--total-shards", &range.total.to_string()]);
            }
            // `run --store`, through its variable: the URL may hold a password, which `ps` would show.
            if let Some(database) = scene.store.database() {
                command.env("TM_STORE", database.expose());
            }
            let child = command.spawn().with_context(|| format!("starting {}", binary.display()))?;
            processes.push(Process { pid: child.id(), child, log, shards });
        }
        Ok(Self { processes, spawned })
    }

    /// How many processes there are.
    pub fn count(&self) -> usize {
        self.processes.len()
    }

    /// Waits until every process is connected to the gateway (on its shard) and the one that registers the slash
    /// commands has registered them.
    pub async fn connected(&mut self, scene: &Scene) -> anyhow::Result<()> {
        let me = scene.stage.bot_user;
        let shards: Vec<Option<ShardRange>> = self.processes.iter().map(|p| p.shards).collect();
        let registers = shards.iter().any(|s| registers_commands(*s));
        let until = Instant::now() + CONNECT_LIMIT;
        loop {
            let ready = scene
                .stage
                .server
                .wait_for("the bot to connect", Duration::from_millis(250), |w| {
                    let connected = shards.iter().all(|s| match s {
                        None => w.is_connected(me),
                        Some(range) => w.is_connected_on(me, [u64::from(range.first), u64::from(range.total)]),
                    });
                    let commands = !registers || w.commands.iter().any(|c| c.application_id == me);
                    (connected && commands).then_some(())
                })
                .await;
            if ready.is_ok() {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() > until {
                bail!("the bot did not connect within {CONNECT_LIMIT:?}; its log:\n{}", self.log_tails());
            }
        }
    }

    /// Fails with the end of the log of a process that has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for process in &mut self.processes {
            if let Some(status) = process.child.try_wait()? {
                bail!("the bot exited ({status}); the end of its log:\n{}", log_tail(&process.log));
            }
        }
        Ok(())
    }

    /// Resident memory of all the processes together.
    pub fn rss_kib(&self) -> Option<u64> {
        self.processes.iter().map(|p| procfs::rss_kib(p.pid)).sum()
    }

    /// CPU time of all the processes together.
    pub fn cpu_time(&self) -> Duration {
        self.processes.iter().map(|p| procfs::cpu_time(p.pid).unwrap_or_default()).sum()
    }

    /// Freezes the processes (SIGSTOP): what the server sends them meanwhile waits in their sockets and the server's
    /// queue.
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal("-STOP")
    }

    /// Lets frozen processes go on (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, which: &str) -> anyhow::Result<()> {
        let pids: Vec<String> = self.processes.iter().map(|p| p.pid.to_string()).collect();
        let status = Command::new("kill").arg(which).args(&pids).status()?;
        anyhow::ensure!(status.success(), "kill {which} {} failed", pids.join(" "));
        Ok(())
    }

    /// SIGTERM (a graceful shutdown), then SIGKILL if it takes too long.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.signal("-TERM");
        let until = Instant::now() + STOP_LIMIT;
        while Instant::now() < until {
            let mut running = false;
            for process in &mut self.processes {
                running |= process.child.try_wait()?.is_none();
            }
            if !running {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for process in &mut self.processes {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
        bail!("the bot did not stop within {STOP_LIMIT:?} of SIGTERM and was killed")
    }

    fn log_tails(&self) -> String {
        let tails: Vec<String> =
            self.processes.iter().map(|p| format!("{}:\n{}", p.log.display(), log_tail(&p.log))).collect();
        tails.join("\n")
    }
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl Drop for BotProcesses {
    /// A phase that fails never leaves its bot running.
    fn drop(&mut self) {
        for process in &mut self.processes {
            if matches!(process.child.try_wait(), Ok(None)) {
                let _ = Command::new("kill").args(["-CONT", &process.pid.to_string()]).status();
                let _ = process.child.kill();
                let _ = process.child.wait();
            }
        }
    }
}

/// When the server had received `count` IDENTIFYs (gateway op 2) in a log: one per process started together.
pub fn identified_at(log: &[LogEntry], count: usize) -> Option<Instant> {
    log.iter()
        .filter(|e| matches!(e.kind, LogKind::GatewayReceived { op: 2, .. }))
        .nth(count.saturating_sub(1))
        .map(|e| e.at)
}

#[cfg(test)]
mod tests {
    use super::identified_at;
    use local_discord::world::{LogEntry, LogKind};
    use std::time::{Duration, Instant};

    #[test]
    fn start_up_lasts_until_every_process_has_identified() {
        let t0 = Instant::now();
        let at = |ms: u64, kind: LogKind| LogEntry { at: t0 + Duration::from_millis(ms), kind };
        let log = vec![
            at(1, LogKind::GatewayReceived { user: None, op: 1 }),
            at(5, LogKind::GatewayReceived { user: None, op: 2 }),
            at(7, LogKind::GatewayReceived { user: Some(9), op: 1 }),
            at(9, LogKind::GatewayReceived { user: None, op: 2 }),
        ];
        assert_eq!(identified_at(&log, 1), Some(t0 + Duration::from_millis(5)));
        assert_eq!(identified_at(&log, 2), Some(t0 + Duration::from_millis(9)));
        assert_eq!(identified_at(&log, 3), None, "a third process has not identified yet");
    }
}
