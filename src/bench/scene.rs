//! A phase's world: local-discord with a guild of N channels and three agent accounts (pm, dev, critic), the files
//! `turn-manager run` reads (personas, configuration, state folder), and the bot itself as a separate process,
//! watched from outside.

use super::procfs;
use crate::core::ids::{PersonaId, UserId};
use crate::core::persona::{Persona, PersonaCatalog};
use crate::demo::stage::Stage;
use anyhow::{Context as _, bail};
use local_discord::world::{LogEntry, LogKind};
use serde_json::json;
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
    /// Every channel of the guild, the stage's own first.
    pub channels: Vec<u64>,
    pub dir: PathBuf,
}

impl Scene {
    /// A fresh server with `channels` channels and personas whose turns last `timeout_seconds`; their files are
    /// written under `dir`.
    pub async fn new(dir: &Path, channels: usize, timeout_seconds: u32) -> anyhow::Result<Self> {
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
        let mut all = vec![stage.channel];
        all.extend((1..channels).map(|i| stage.server.create_channel(stage.guild, &format!("agents-{i}"))));
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.join("personas")).with_context(|| format!("creating {}", dir.display()))?;
        let scene = Self { stage, channels: all, dir: dir.to_owned() };
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

    /// The configuration: these channels managed from start-up with the whole roster, everything else default but the
    /// global REST budget, which is off: local-discord has no global limit, and the bench measures the bot (on
    /// Discord, the default 45 calls/s bounds one bot to about 15 relayed turns/s).
    pub fn write_config(&self, managed: &[u64]) -> anyhow::Result<()> {
        let roster: Vec<&str> = ROSTER.iter().map(|(id, _)| *id).collect();
        let channels: Vec<_> =
            managed.iter().map(|c| json!({"channelId": c.to_string(), "roster": roster.clone()})).collect();
        let config = json!({ "channels": channels, "restRequestsPerSecond": 0 });
        std::fs::write(self.config_path(), config.to_string())?;
        Ok(())
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("turn-manager.json")
    }

    /// The bot's saved session file of a channel.
    pub fn session_file(&self, channel: u64) -> PathBuf {
        self.state_dir().join("channels").join(format!("{channel}.json"))
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

/// A bot build to measure, and the log filter it runs with (`RUST_LOG`; its log goes to `bot.log` in the phase's
/// folder).
#[derive(Clone, Debug)]
pub struct Bot {
    pub binary: PathBuf,
    pub log_filter: String,
}

/// `turn-manager run` as a separate process against the scene's server.
pub struct BotProcess {
    child: Child,
    pub pid: u32,
    /// Just before the process was spawned.
    pub spawned: Instant,
    log: PathBuf,
}

impl BotProcess {
    pub fn spawn(bot: &Bot, scene: &Scene) -> anyhow::Result<Self> {
        let log = scene.dir.join("bot.log");
        let stderr = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let binary = &bot.binary;
        let mut command = Command::new(binary);
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
        let spawned = Instant::now();
        let child = command.spawn().with_context(|| format!("starting {}", binary.display()))?;
        Ok(Self { pid: child.id(), child, spawned, log })
    }

    /// Waits until the bot is connected to the gateway and has registered its slash commands.
    pub async fn connected(&mut self, scene: &Scene) -> anyhow::Result<()> {
        let me = scene.stage.bot_user;
        let until = Instant::now() + CONNECT_LIMIT;
        loop {
            let ready = scene
                .stage
                .server
                .wait_for("the bot to connect", Duration::from_millis(250), |w| {
                    (w.is_connected(me) && w.commands.iter().any(|c| c.application_id == me)).then_some(())
                })
                .await;
            if ready.is_ok() {
                return Ok(());
            }
            self.check_alive()?;
            if Instant::now() > until {
                bail!("the bot did not connect within {CONNECT_LIMIT:?}; its log:\n{}", self.log_tail());
            }
        }
    }

    /// Fails with the end of the bot's log if it has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the bot exited ({status}); the end of its log:\n{}", self.log_tail());
        }
        Ok(())
    }

    pub fn rss_kib(&self) -> Option<u64> {
        procfs::rss_kib(self.pid)
    }

    pub fn cpu_time(&self) -> Duration {
        procfs::cpu_time(self.pid).unwrap_or_default()
    }

    /// Freezes the process (SIGSTOP): what the server sends it meanwhile waits in its socket and the server's queue.
    pub fn pause(&self) -> anyhow::Result<()> {
        self.signal("-STOP")
    }

    /// Lets a frozen process go on (SIGCONT).
    pub fn resume(&self) -> anyhow::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, which: &str) -> anyhow::Result<()> {
        let status = Command::new("kill").args([which, &self.pid.to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill {which} {} failed", self.pid);
        Ok(())
    }

    /// SIGTERM (a graceful shutdown), then SIGKILL if it takes too long.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.signal("-TERM");
        let until = Instant::now() + STOP_LIMIT;
        while Instant::now() < until {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        bail!("the bot did not stop within {STOP_LIMIT:?} of SIGTERM and was killed")
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for BotProcess {
    /// A phase that fails never leaves its bot running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.resume();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// When the server received the bot's IDENTIFY (gateway op 2), in a log.
pub fn identify_at(log: &[LogEntry]) -> Option<Instant> {
    log.iter().find(|e| matches!(e.kind, LogKind::GatewayReceived { op: 2, .. })).map(|e| e.at)
}
