//! The scene every end-to-end test plays on: the local Discord-compatible server, three personas (pm, dev, critic)
//! each speaking through its own bot account, a human operator, and the real turn-manager bot connected to it.
#![allow(dead_code)] // Each test file uses its own part of the scene.

pub mod scrape;

use local_discord::world::{LogKind, SeenMessage};
use std::collections::BTreeMap;
use std::time::Duration;
use turn_manager::core::config::Config;
use turn_manager::core::ids::{ChannelId, MessageId, PersonaId, UserId};
use turn_manager::core::persona::Persona;
use turn_manager::core::session::Session;
use turn_manager::core::session::history::{EventKind, HistoryEvent};
use turn_manager::demo::stage::Stage;
use turn_manager::discord::RunningBot;
use turn_manager::soak::invariants::{ChannelRecord, Posted, Violation, check_settled};

/// Generous: conditions are waited on, never slept for; this only bounds a failing test.
pub const PATIENCE: Duration = Duration::from_secs(15);

pub struct Scene {
    pub stage: Stage,
    pub bot: Option<RunningBot>,
    pub state: tempfile::TempDir,
    pub config: Config,
}

/// pm, dev and critic, in that order, with these turn lengths in seconds.
pub fn personas(timeouts: [u32; 3]) -> Vec<Persona> {
    [("pm", "PM"), ("dev", "Developer"), ("critic", "Critic")]
        .iter()
        .zip(timeouts)
        .enumerate()
        .map(|(i, ((id, name), timeout))| Persona {
            id: PersonaId::parse(id).unwrap(),
            display_name: (*name).into(),
            discord_user_id: UserId(0),
            avatar_url: Some(format!("https://example.org/{id}.png")),
            timeout_seconds: Some(timeout),
            order: Some(i as i64 + 1),
            source: format!("personas/{id}.json"),
        })
        .collect()
}

impl Scene {
    /// Default configuration; turns long enough never to time out during a test.
    pub async fn new() -> Self {
        Self::with(Config::default(), [60, 60, 60]).await
    }

    pub async fn with(config: Config, timeouts: [u32; 3]) -> Self {
        Self::build(timeouts, |_| config).await
    }

    /// A scene whose configuration depends on the stage (its channel ids...).
    pub async fn build(timeouts: [u32; 3], config: impl FnOnce(&Stage) -> Config) -> Self {
        logs();
        let stage = Stage::new(&personas(timeouts)).await.expect("local server");
        let config = config(&stage);
        let state = tempfile::tempdir().expect("state folder");
        let bot = stage.start_bot(config.clone(), state.path()).await.expect("bot connects");
        Self { stage, bot: Some(bot), state, config }
    }

    /// A scene where the operator has started a session and pm has the floor.
    pub async fn started() -> Self {
        let scene = Self::new().await;
        scene.start_session().await;
        scene
    }

    pub async fn start_session(&self) {
        self.stage.operator_says("!turn start");
        self.until("pm to get the floor", |view| view.iter().any(|m| is_floor(m, "pm")).then_some(())).await;
    }

    pub fn bot(&self) -> &RunningBot {
        self.bot.as_ref().expect("the bot is running")
    }

    pub fn user(&self, persona: &str) -> u64 {
        self.stage.user_of(persona)
    }

    /// A persona's agent posts a message.
    pub fn say(&self, persona: &str, text: &str) -> u64 {
        self.stage.server.post(self.stage.channel, self.user(persona), text)
    }

    pub fn view(&self) -> Vec<SeenMessage> {
        self.stage.server.view(self.stage.channel)
    }

    /// Waits until `condition` holds for the channel as a person sees it.
    pub async fn until<T>(&self, what: &str, mut condition: impl FnMut(&[SeenMessage]) -> Option<T>) -> T {
        let channel = self.stage.channel;
        match self.stage.server.wait_for(what, PATIENCE, |w| condition(&w.view(channel))).await {
            Ok(found) => found,
            Err(e) => {
                let calls = self.rest_calls();
                let recent = calls[calls.len().saturating_sub(8)..].join("\n  ");
                panic!("{e}; the channel shows:\n{}\nthe last REST calls:\n  {recent}", render(&self.view()))
            }
        }
    }

    /// Waits until message `id` no longer shows (a relay deletes the original while the next announcement is posted,
    /// so it may be gone only just after that), and answers the channel then.
    pub async fn until_gone(&self, id: u64) -> Vec<SeenMessage> {
        self.until(&format!("message {id} to be deleted"), |v| v.iter().all(|m| m.id != id).then(|| v.to_vec())).await
    }

    /// The session as the bot holds it now.
    pub async fn session(&self) -> Session {
        self.bot().session(ChannelId(self.stage.channel)).await.expect("a session here")
    }

    /// Waits until the channel's actor has handled message `id`, then until its sender has carried out everything
    /// decided so far.
    pub async fn handled(&self, id: u64) {
        self.handled_in(self.stage.channel, id).await;
    }

    /// [`Scene::handled`] in another channel of the server (a thread).
    pub async fn handled_in(&self, channel: u64, id: u64) {
        let (bot, channel) = (self.bot(), ChannelId(channel));
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !bot.handled(channel, MessageId(id)).await {
            assert!(tokio::time::Instant::now() < deadline, "message {id} was never handled");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        bot.settle(channel).await;
    }

    /// The full history log of the channel.
    pub fn history(&self) -> Vec<HistoryEvent> {
        self.bot().store().read_log(ChannelId(self.stage.channel)).expect("history log")
    }

    pub fn events(&self, kind: &str) -> Vec<HistoryEvent> {
        self.history().into_iter().filter(|e| e.kind.name() == kind).collect()
    }

    /// `persona`, who does not hold the floor, posts `n` messages at once (a burst the gateway sends in one go); once
    /// each is handled, answers their ids as posted and as the channel's actor took them (each is recorded as out of
    /// turn when handled).
    pub async fn burst_out_of_turn(&self, persona: &str, n: usize) -> (Vec<u64>, Vec<u64>) {
        let posted: Vec<u64> = (0..n).map(|i| self.say(persona, &format!("Me next, {i}."))).collect();
        for id in &posted {
            self.handled(*id).await;
        }
        let handled = self
            .events("out_of_turn")
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::OutOfTurn { message_id, .. } if posted.contains(&message_id.0) => Some(message_id.0),
                _ => None,
            })
            .collect();
        (posted, handled)
    }

    /// REST calls made so far (every REST call on the local server is the bot's: people and agents act through
    /// the server's handle).
    pub fn rest_calls(&self) -> Vec<String> {
        self.stage
            .server
            .log()
            .into_iter()
            .filter_map(|e| match e.kind {
                LogKind::Rest { method, path, status } => Some(format!("{method} {path} -> {status}")),
                _ => None,
            })
            .collect()
    }

    /// Every message of a channel, deleted ones included, in id order.
    pub fn messages(&self, channel: u64) -> Vec<Posted> {
        self.stage.server.with(|w| w.messages.values().filter(|m| m.channel_id == channel).map(Posted::from).collect())
    }

    /// The soak's invariants over a channel once it is still (its actor settled): every signal ended exactly one
    /// turn, every turn was announced exactly once and in roster order, one timeout line per timeout, nonces unique,
    /// no signal left showing (before `relay_until_ms`, when observe mode began on purpose).
    pub async fn violations(&self, channel: u64, relay_until_ms: Option<u64>) -> Vec<Violation> {
        self.bot().settle(ChannelId(channel)).await;
        let personas: BTreeMap<String, u64> =
            self.stage.personas.iter().map(|p| (p.id.to_string(), p.discord_user_id.0)).collect();
        let roster: Vec<String> = self.stage.personas.iter().map(|p| p.id.to_string()).collect();
        let messages = self.messages(channel);
        let history = self.bot().store().read_log(ChannelId(channel)).expect("history log");
        let record = ChannelRecord {
            channel,
            bot: self.stage.bot_user,
            personas: &personas,
            roster: &roster,
            messages: &messages,
            history: &history,
            relay_until_ms,
        };
        check_settled(&record)
    }

    /// Asserts the soak's invariants over the scene's channel, relay mode throughout.
    pub async fn assert_invariants(&self) {
        let found = self.violations(self.stage.channel, None).await;
        assert!(found.is_empty(), "{}\nthe channel shows:\n{}", list(&found), render(&self.view()));
    }

    pub async fn stop_bot(&mut self) {
        if let Some(bot) = self.bot.take() {
            bot.shutdown().await;
        }
    }

    pub async fn restart_bot(&mut self) {
        self.stop_bot().await;
        let bot = self.stage.start_bot(self.config.clone(), self.state.path()).await.expect("bot reconnects");
        self.bot = Some(bot);
    }
}

/// The announcement that gives `persona` the floor.
/// Waits until the bot's connection watch has looked at the shards twice more (so at least once wholly after this
/// call began) and one look more after `channels` handled what it told them, so that a test can check the watch
/// asked them for nothing (a read it should not have asked for, say) without assuming a sleep was long enough.
pub async fn connection_watch_looked(bot: &RunningBot, channels: &[u64]) {
    let looks = || bot.stats().connection_checks;
    let until_looks = async |n: u64| {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while looks() < n {
            assert!(tokio::time::Instant::now() < deadline, "the connection watch stopped looking");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    until_looks(looks() + 2).await;
    for channel in channels {
        bot.settle(ChannelId(*channel)).await;
    }
    // A read the watch asked for is a task the channel starts: its first call is on its way within a look's time.
    until_looks(looks() + 1).await;
}

pub fn is_floor(m: &SeenMessage, persona: &str) -> bool {
    m.author == "turn-manager" && m.content.contains(&format!("({persona}) has the floor"))
}

pub fn count_floor(view: &[SeenMessage], persona: &str) -> usize {
    view.iter().filter(|m| is_floor(m, persona)).count()
}

pub fn render(view: &[SeenMessage]) -> String {
    view.iter()
        .map(|m| {
            let via = if m.from_webhook { " (webhook)" } else { "" };
            format!("  {}{via}: {:?} reactions={:?} pinged={:?}", m.author, m.content, m.reactions, m.pinged)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn list(violations: &[Violation]) -> String {
    violations.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n")
}

/// Logs to the test's output when RUST_LOG is set; and lets the bots see serenity reconnect (as `main` does).
pub fn logs() {
    use tracing_subscriber::prelude::*;
    let log = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(tracing_subscriber::EnvFilter::from_default_env());
    let _ = tracing_subscriber::registry().with(log).with(turn_manager::discord::reconnecting::layer()).try_init();
}

/// Writes the stage's personas (with their local accounts) as persona files, for the bot run as a process.
pub fn write_personas(stage: &Stage, dir: &std::path::Path) {
    for persona in &stage.personas {
        let json = serde_json::json!({
            "id": persona.id.as_str(),
            "displayName": persona.display_name,
            "discordUserId": persona.discord_user_id.0.to_string(),
            "turnBehavior": {"timeoutSeconds": 60},
            "order": persona.order,
        });
        std::fs::write(dir.join(format!("{}.json", persona.id)), json.to_string()).unwrap();
    }
}

/// The shard of two that a server's events come on.
pub fn shard_of_two(guild: u64) -> u32 {
    ((guild >> 22) % 2) as u32
}

/// A second server like the stage's, on the other of two shards, with the operator, the bot and every persona in
/// it; answers it and its channel.
pub fn server_on_the_other_shard(stage: &Stage) -> (u64, u64) {
    let guild = loop {
        let guild = stage.add_guild("Second HQ");
        if shard_of_two(guild) != shard_of_two(stage.guild) {
            break guild;
        }
        std::thread::sleep(Duration::from_millis(2)); // a snowflake of the next millisecond
    };
    (guild, stage.server.create_channel(guild, "agents"))
}
