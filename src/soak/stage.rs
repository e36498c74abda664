//! The soak's world: the local Discord-compatible server with three channels managed from start-up by the
//! configuration (a restart needs no command), the persona and configuration files `turn-manager run` reads, and a
//! scripted agent per persona and channel, each with its own way of answering.

use super::invariants::{ChannelRecord, Posted};
use crate::core::ids::{PersonaId, UserId};
use crate::core::persona::Persona;
use crate::demo::stage::Stage;
use local_discord::agents::{self, Behavior, ScriptedAgent};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::task::JoinHandle;

/// Channels under management.
pub const CHANNELS: usize = 3;
/// The personas, their turn lengths in seconds: short, so that turns also end by timeout and late signals come.
const CAST: [(&str, &str, u32); 3] = [("pm", "PM", 3), ("dev", "Developer", 4), ("critic", "Critic", 2)];

pub struct SoakStage {
    pub stage: Stage,
    pub channels: Vec<u64>,
    /// Persona id -> its account.
    pub personas: BTreeMap<String, u64>,
    pub roster: Vec<String>,
    pub config_file: PathBuf,
    pub personas_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl SoakStage {
    /// Starts the server and writes the files the bot reads into `work`.
    pub async fn new(work: &Path) -> anyhow::Result<Self> {
        let personas: Vec<Persona> = CAST
            .iter()
            .enumerate()
            .map(|(i, (id, name, timeout))| Persona {
                id: PersonaId::parse(id).expect("a valid persona id"),
                display_name: (*name).into(),
                discord_user_id: UserId(0),
                avatar_url: None,
                timeout_seconds: Some(*timeout),
                order: Some(i as i64 + 1),
                source: String::new(),
            })
            .collect();
        let stage = Stage::new(&personas).await?;
        let mut channels = vec![stage.channel];
        for n in 2..=CHANNELS {
            channels.push(stage.server.create_channel(stage.guild, &format!("agents-{n}")));
        }
        let soak = Self {
            personas: stage.personas.iter().map(|p| (p.id.to_string(), p.discord_user_id.0)).collect(),
            roster: CAST.iter().map(|(id, _, _)| (*id).to_owned()).collect(),
            channels,
            config_file: work.join("turn-manager.json"),
            personas_dir: work.join("personas"),
            state_dir: work.join("state"),
            stage,
        };
        soak.write_files()?;
        Ok(soak)
    }

    fn write_files(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.personas_dir)?;
        std::fs::create_dir_all(&self.state_dir)?;
        for persona in &self.stage.personas {
            let file = json!({
                "id": persona.id.as_str(),
                "displayName": persona.display_name,
                "discordUserId": persona.discord_user_id.0.to_string(),
                "turnBehavior": {"timeoutSeconds": persona.timeout_seconds},
                "order": persona.order,
            });
            std::fs::write(self.personas_dir.join(format!("{}.json", persona.id)), file.to_string())?;
        }
        let channels: Vec<_> =
            self.channels.iter().map(|c| json!({"channelId": c.to_string(), "roster": self.roster})).collect();
        // The soak checks that nothing is lost or doubled against a strict round-robin; its agents time out and
        // repeat themselves on purpose, so benching and loop pauses (tested on their own) are off here.
        let signals = json!({"benchAfter": 0, "loopAfter": 0});
        std::fs::write(&self.config_file, json!({ "channels": channels, "signals": signals }).to_string())
    }

    /// One agent per persona and channel. Each channel has its own mix: plain answers, several messages, a streamed
    /// answer finished by an edit, an answer that always comes after the timeout, one that never ends its turn.
    pub fn spawn_agents(&self, rng: &mut fastrand::Rng) -> Vec<JoinHandle<()>> {
        let mut agents = Vec::new();
        for (c, channel) in self.channels.iter().enumerate() {
            for (p, persona) in self.stage.personas.iter().enumerate() {
                let timeout = Duration::from_secs(u64::from(persona.timeout_seconds.unwrap_or(60)));
                let behavior = match (c % CHANNELS, p) {
                    (0, 1) => Behavior::SeveralThenFinish(2),
                    (1, 1) => Behavior::StreamByEditing(2),
                    (1, 2) => Behavior::FinishLate(timeout + Duration::from_millis(100)),
                    (2, 0) => Behavior::NeverFinish,
                    _ => Behavior::Finish,
                };
                let agent = ScriptedAgent {
                    user: persona.discord_user_id.0,
                    name: persona.id.to_string(),
                    channel: *channel,
                    delay: Duration::from_millis(rng.u64(150..=450)),
                    behavior,
                    signal: "TURN_COMPLETE".into(),
                };
                agents.push(agents::spawn(self.stage.server.clone(), agent));
            }
        }
        agents
    }

    /// The newest message id of the whole server now: everything posted so far is at or below it.
    pub fn newest_message(&self) -> u64 {
        self.stage.server.with(|w| w.messages.keys().next_back().copied().unwrap_or(0))
    }

    /// A channel's messages, deleted ones included, in id order.
    pub fn messages(&self, channel: u64) -> Vec<Posted> {
        self.stage.server.with(|w| w.messages.values().filter(|m| m.channel_id == channel).map(Posted::from).collect())
    }

    /// Whether a message was written by one of the agents.
    pub fn is_agent(&self, message: &Posted) -> bool {
        message.author.is_some_and(|user| self.personas.values().any(|p| *p == user))
    }

    /// A channel's record for the invariant checks.
    pub fn record<'a>(
        &'a self,
        channel: u64,
        messages: &'a [Posted],
        history: &'a [crate::core::session::history::HistoryEvent],
    ) -> ChannelRecord<'a> {
        ChannelRecord {
            channel,
            bot: self.stage.bot_user,
            personas: &self.personas,
            roster: &self.roster,
            messages,
            history,
            relay_until_ms: None,
        }
    }
}
