//! `turn-manager demo`: the whole bot with no Discord account and no network. It starts the local
//! Discord-compatible server, scripted agents for the personas, and the real bot connected through `--api-base`;
//! the operator starts a session, and the channel is printed live until the rounds are done.
//!
//! - [`stage`]: the local server set up for turn-manager (also used by the end-to-end tests).
//! - [`printer`]: the channel as a person sees it.

pub mod printer;
pub mod stage;

use crate::core::config::Config;
use crate::core::ids::ChannelId;
use crate::core::persona::Persona;
use crate::core::session::SessionStatus;
use crate::core::session::history::HistoryEvent;
use anyhow::{Context as _, bail};
use local_discord::agents::{self, Behavior, ScriptedAgent};
use local_discord::world::LogKind;
use stage::Stage;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// Every persona's turn in the demo, so a round takes seconds.
pub const DEMO_TIMEOUT_SECONDS: u32 = 3;
/// How long an agent "thinks" before answering.
const THINKING: Duration = Duration::from_millis(500);
/// The demo gives up if the rounds are not done by then.
const DEMO_LIMIT: Duration = Duration::from_secs(120);

/// What the demo saw, for its summary and for tests.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub completed: usize,
    pub timeouts: usize,
    pub late_signals: usize,
    pub out_of_turn: usize,
    pub rest_calls: usize,
    pub max_lateness_ms: i64,
    pub mean_lateness_ms: i64,
}

/// Runs the demo for `rounds` rounds with the personas of `personas_dir`, printing the channel as it goes.
pub async fn run(rounds: u32, personas: Vec<Persona>, state_dir: &Path) -> anyhow::Result<Outcome> {
    if personas.len() < 2 {
        bail!("the demo needs at least two personas in the personas folder (found {})", personas.len());
    }
    let personas: Vec<Persona> =
        personas.into_iter().map(|p| Persona { timeout_seconds: Some(DEMO_TIMEOUT_SECONDS), ..p }).collect();
    let stage = Stage::new(&personas).await.context("starting the local Discord-compatible server")?;
    println!("Local Discord-compatible server on {}; channel #agents.", stage.server.base_url());
    let cast: Vec<String> = stage
        .personas
        .iter()
        .zip(behaviors(stage.personas.len()))
        .map(|(persona, behavior)| format!("{} ({})", persona.id, describe(&behavior)))
        .collect();
    println!("Agents: {}. Every turn lasts {DEMO_TIMEOUT_SECONDS}s.\n", cast.join(", "));

    let config = Config { default_timeout_seconds: DEMO_TIMEOUT_SECONDS, ..Config::default() };
    let bot = stage.start_bot(config, state_dir).await?;
    let printer = tokio::spawn(printer::print_channel(stage.server.clone(), stage.channel));
    let agents: Vec<_> = stage
        .personas
        .iter()
        .zip(behaviors(stage.personas.len()))
        .map(|(persona, behavior)| {
            agents::spawn(
                stage.server.clone(),
                ScriptedAgent {
                    user: persona.discord_user_id.0,
                    name: persona.id.to_string(),
                    channel: stage.channel,
                    delay: THINKING,
                    behavior,
                    signal: "TURN_COMPLETE".into(),
                },
            )
        })
        .collect();

    let channel = ChannelId(stage.channel);
    stage.operator_says("!turn start");
    let deadline = Instant::now() + DEMO_LIMIT;
    // Done when the rounds are over and no late reply is still on its way.
    loop {
        let session = bot.session(channel).await;
        let done = session.as_ref().is_some_and(|s| {
            s.round > rounds && s.agents.values().all(|a| !a.awaiting_late_reply) && s.status == SessionStatus::Running
        });
        if done {
            break;
        }
        if Instant::now() > deadline {
            bail!("the demo did not finish {rounds} round(s) within {}s", DEMO_LIMIT.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for agent in &agents {
        agent.abort();
    }
    stage.operator_says("!turn stop");
    let stopped = async {
        loop {
            if bot.session(channel).await.is_some_and(|s| s.status == SessionStatus::Stopped) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), stopped).await.context("the session did not stop")?;
    bot.settle(channel).await;
    let history = bot.store().read_log(channel)?;
    let stats = bot.stats();
    bot.shutdown().await;
    // Let the printer show the last messages.
    tokio::time::sleep(Duration::from_millis(200)).await;
    printer.abort();

    let rest_calls = stage.server.log().iter().filter(|e| matches!(e.kind, LogKind::Rest { .. })).count();
    let outcome = Outcome {
        completed: count(&history, "turn_complete"),
        timeouts: count(&history, "turn_timeout"),
        late_signals: count(&history, "late_signal"),
        out_of_turn: count(&history, "out_of_turn"),
        rest_calls,
        max_lateness_ms: stats.max_lateness_ms(),
        mean_lateness_ms: stats.mean_lateness_ms(),
    };
    Ok(outcome)
}

/// Prints what happened and checks that the demo showed each thing it is meant to show.
pub fn summarize(outcome: &Outcome) -> anyhow::Result<()> {
    let turns = outcome.completed + outcome.timeouts;
    println!(
        "\nSummary: {} turn(s) ended by TURN_COMPLETE (signal stripped and relayed), {} by timeout, {} late signal(s) \
         shown without advancing, {} out-of-turn message(s) removed.",
        outcome.completed, outcome.timeouts, outcome.late_signals, outcome.out_of_turn
    );
    println!(
        "Timeouts ended {} ms after their deadline at most ({} ms on average).",
        outcome.max_lateness_ms, outcome.mean_lateness_ms
    );
    println!(
        "REST calls made by the bot: {} in all, including start-up (about {:.1} per turn).",
        outcome.rest_calls,
        outcome.rest_calls as f64 / turns.max(1) as f64
    );
    let missing: Vec<&str> = [
        (outcome.completed, "a stripped signal"),
        (outcome.timeouts, "a timeout"),
        (outcome.late_signals, "a late signal"),
        (outcome.out_of_turn, "an out-of-turn message"),
    ]
    .iter()
    .filter(|(n, _)| *n == 0)
    .map(|(_, what)| *what)
    .collect();
    if !missing.is_empty() {
        bail!("the demo did not show {}", missing.join(", "));
    }
    Ok(())
}

/// The first agent finishes and also speaks out of turn once; the middle ones stream their answer by editing it;
/// the last one always answers after its timeout (a timeout, then a late signal).
fn behaviors(count: usize) -> Vec<Behavior> {
    (0..count)
        .map(|i| match i {
            0 => Behavior::OutOfTurn,
            i if i + 1 == count => Behavior::FinishLate(Duration::from_secs(u64::from(DEMO_TIMEOUT_SECONDS) + 1)),
            _ => Behavior::StreamByEditing(3),
        })
        .collect()
}

fn describe(behavior: &Behavior) -> &'static str {
    match behavior {
        Behavior::OutOfTurn => "answers, and once speaks out of turn",
        Behavior::FinishLate(_) => "always answers too late",
        Behavior::StreamByEditing(_) => "streams its answer by editing",
        _ => "answers",
    }
}

fn count(history: &[HistoryEvent], kind: &str) -> usize {
    history.iter().filter(|e| e.kind.name() == kind).count()
}
