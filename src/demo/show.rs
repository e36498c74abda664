//! One demo performance, whatever it plays: the local server, the real bot, the scripted agents and the printer,
//! from the operator's `!turn start` until a condition on the session holds, then `!turn stop` and what was seen.

use super::printer;
use super::stage::Stage;
use crate::core::config::Config;
use crate::core::ids::ChannelId;
use crate::core::persona::Persona;
use crate::core::session::history::HistoryEvent;
use crate::core::session::{Session, SessionStatus};
use crate::discord::RunningBot;
use anyhow::Context as _;
use local_discord::agents::{self, Behavior, ScriptedAgent};
use local_discord::world::{LogKind, SeenMessage};
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long an agent "thinks" before answering, unless its part says otherwise.
pub(super) const THINKING: Duration = Duration::from_millis(500);
/// How often the session is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);

/// What one scripted agent does when called, and how long it thinks first.
pub(super) struct Part {
    pub behavior: Behavior,
    pub thinking: Duration,
}

impl From<Behavior> for Part {
    fn from(behavior: Behavior) -> Self {
        Self { behavior, thinking: THINKING }
    }
}

pub(super) struct Show {
    stage: Stage,
    bot: RunningBot,
    printer: JoinHandle<()>,
    agents: Vec<JoinHandle<()>>,
    channel: ChannelId,
}

/// What the channel and the bot went through, once the show is over.
pub(super) struct Closed {
    /// The channel's full history log.
    pub history: Vec<HistoryEvent>,
    /// The channel as a person sees it at the end.
    pub view: Vec<SeenMessage>,
    pub rest_calls: usize,
    pub max_lateness_ms: i64,
    pub mean_lateness_ms: i64,
}

impl Show {
    /// Starts the server; prints where it is, then `intro` (which may name the cast); starts the bot, the printer
    /// and one agent per persona with its part (in the personas' order); and has the operator start a session.
    pub async fn open(
        personas: &[Persona],
        parts: Vec<Part>,
        intro: &str,
        config: Config,
        state_dir: &Path,
    ) -> anyhow::Result<Self> {
        let stage = Stage::new(personas).await.context("starting the local Discord-compatible server")?;
        println!("Local Discord-compatible server on {}; channel #agents.", stage.server.base_url());
        println!("{intro}\n");
        let bot = stage.start_bot(config, state_dir).await?;
        let printer = tokio::spawn(printer::print_channel(stage.server.clone(), stage.channel));
        let agents = stage
            .personas
            .iter()
            .zip(parts)
            .map(|(persona, Part { behavior, thinking })| {
                agents::spawn(
                    stage.server.clone(),
                    ScriptedAgent {
                        user: persona.discord_user_id.0,
                        name: persona.id.to_string(),
                        channel: stage.channel,
                        delay: thinking,
                        behavior,
                        signal: "TURN_COMPLETE".into(),
                    },
                )
            })
            .collect();
        let channel = ChannelId(stage.channel);
        stage.operator_says("!turn start");
        Ok(Self { stage, bot, printer, agents, channel })
    }

    /// Waits until `done` holds for the session, for at most `limit`; whether it did.
    pub async fn until(&self, limit: Duration, mut done: impl FnMut(&Session) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.bot.session(self.channel).await.as_ref().is_some_and(&mut done) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Silences the agents, lets the bot carry out what it has decided (so the channel shows it before the stop),
    /// has the operator stop the session, and shuts the bot down.
    pub async fn close(self) -> anyhow::Result<Closed> {
        for agent in &self.agents {
            agent.abort();
        }
        self.bot.settle(self.channel).await;
        self.stage.operator_says("!turn stop");
        let stopped = self.until(Duration::from_secs(10), |s| s.status == SessionStatus::Stopped).await;
        anyhow::ensure!(stopped, "the session did not stop");
        self.bot.settle(self.channel).await;
        let history = self.bot.store().read_log(self.channel)?;
        let stats = self.bot.stats();
        self.bot.shutdown().await;
        // Let the printer show the last messages.
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.printer.abort();
        let server = &self.stage.server;
        Ok(Closed {
            history,
            view: server.view(self.stage.channel),
            rest_calls: server.log().iter().filter(|e| matches!(e.kind, LogKind::Rest { .. })).count(),
            max_lateness_ms: stats.max_lateness_ms(),
            mean_lateness_ms: stats.mean_lateness_ms(),
        })
    }
}
