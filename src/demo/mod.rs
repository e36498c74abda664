//! `turn-manager demo`: the whole bot with no Discord account and no network. It starts the local
//! Discord-compatible server, scripted agents for the personas, and the real bot connected through `--api-base`;
//! the operator starts a session, and the channel is printed live until the rounds are done.
//!
//! With `--preset NAME`, it plays `examples/presets/NAME/` instead: its configuration and personas, and agents that
//! speak its protocol from a script (review-workflow: a task from developer to critic, back for rework, to the
//! auditor, done); the demo ends when the task is done.
//!
//! - [`stage`]: the local server set up for turn-manager (also used by the end-to-end tests).
//! - [`printer`]: the channel as a person sees it.
//! - `show`: one performance: server, bot, agents and printer, from `!turn start` to `!turn stop`.
//! - [`preset`]: finding and reading a preset, and what a demo overrides in it.
//! - [`script`]: what the scripted agents say, per preset.
//! - [`workflow`]: a scripted preset played until its task is done, and its summary.

pub mod preset;
pub mod printer;
pub mod script;
mod show;
pub mod stage;
pub mod workflow;

use crate::core::config::Config;
use crate::core::persona::Persona;
use crate::core::session::SessionStatus;
use crate::core::session::history::HistoryEvent;
use crate::core::signals::{Action, DEFAULT_KEYWORD};
use anyhow::bail;
use local_discord::agents::Behavior;
use preset::Preset;
use show::{Part, Show, THINKING};
use std::path::Path;
use std::time::Duration;
pub use workflow::TaskOutcome;

/// Every persona's turn in the demo, so a round takes seconds.
pub const DEMO_TIMEOUT_SECONDS: u32 = 3;
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
    let config = Config { default_timeout_seconds: DEMO_TIMEOUT_SECONDS, ..Config::default() };
    run_rounds(config, personas, rounds, state_dir, "").await
}

/// Runs a preset (see [`preset`]): its scripted workflow until the task is done when it has a script, else the
/// default behaviours for `rounds` rounds under its configuration.
pub async fn run_preset(preset: Preset, rounds: u32, state_dir: &Path) -> anyhow::Result<PresetOutcome> {
    for warning in preset.warnings.0.iter() {
        eprintln!("{warning}");
    }
    let script = script::for_preset(&preset.name);
    if script.is_none() && !ends_turns_with_the_default_keyword(&preset) {
        let root = preset.dir.parent().unwrap_or(Path::new("."));
        bail!(
            "the preset \"{}\" has no demo script, and under its rules the default agents' {DEFAULT_KEYWORD} does not \
             end a turn; the presets the demo plays are: {}",
            preset.name,
            playable(root).join(", ")
        );
    }
    let (config, personas) = preset::for_demo(preset.config, preset.personas, DEMO_TIMEOUT_SECONDS, state_dir);
    let title = format!("Preset {} ({}).", preset.name, preset.dir.display());
    match script {
        Some(script) => workflow::run(script, &title, config, personas, state_dir).await.map(PresetOutcome::Task),
        None => run_rounds(config, personas, rounds, state_dir, &format!("{title} ")).await.map(PresetOutcome::Rounds),
    }
}

/// The presets of `root` the demo plays: those with a script, and those whose rules let the default agents' keyword
/// end a turn (found by a newcomer: only the scripted ones were named, though round-robin plays as well).
fn playable(root: &Path) -> Vec<String> {
    preset::available(root)
        .into_iter()
        .filter(|name| {
            script::for_preset(name).is_some()
                || preset::load(root, name).is_ok_and(|preset| ends_turns_with_the_default_keyword(&preset))
        })
        .collect()
}

/// Whether a message ending with `TURN_COMPLETE` completes a turn under the preset's rules, for every persona: what
/// the default agents need to play it.
fn ends_turns_with_the_default_keyword(preset: &Preset) -> bool {
    let text = format!("my answer\n\n{DEFAULT_KEYWORD}");
    preset
        .personas
        .iter()
        .all(|p| preset.config.signals.detect(&text, &p.id).is_some_and(|found| found.rule.action == Action::Complete))
}

/// What a preset's demo saw.
#[derive(Clone, Debug)]
pub enum PresetOutcome {
    /// A preset without a script: the default behaviours, for some rounds.
    Rounds(Outcome),
    /// A scripted workflow.
    Task(TaskOutcome),
}

/// Prints a preset's summary and checks that it showed what it is meant to show.
pub fn summarize_preset(outcome: &PresetOutcome) -> anyhow::Result<()> {
    match outcome {
        PresetOutcome::Rounds(outcome) => summarize(outcome),
        PresetOutcome::Task(outcome) => workflow::summarize(outcome),
    }
}

/// The default behaviours for `rounds` rounds, under `config` (already set up for a demo).
async fn run_rounds(
    config: Config,
    personas: Vec<Persona>,
    rounds: u32,
    state_dir: &Path,
    title: &str,
) -> anyhow::Result<Outcome> {
    if personas.len() < 2 {
        bail!("the demo needs at least two personas in the personas folder (found {})", personas.len());
    }
    let personas: Vec<Persona> =
        personas.into_iter().map(|p| Persona { timeout_seconds: Some(DEMO_TIMEOUT_SECONDS), ..p }).collect();
    let cast: Vec<String> = personas
        .iter()
        .zip(parts(personas.len()))
        .map(|(persona, part)| format!("{} ({})", persona.id, describe(&part.behavior)))
        .collect();
    let intro = format!("{title}Agents: {}. Every turn lasts {DEMO_TIMEOUT_SECONDS}s.", cast.join(", "));
    let show = Show::open(&personas, parts(personas.len()), &intro, config, state_dir).await?;
    // Done when the rounds are over and no late reply is still on its way.
    let done = show
        .until(DEMO_LIMIT, |s| {
            s.round > rounds && s.agents.values().all(|a| !a.awaiting_late_reply) && s.status == SessionStatus::Running
        })
        .await;
    if !done {
        bail!("the demo did not finish {rounds} round(s) within {}s", DEMO_LIMIT.as_secs());
    }
    let closed = show.close().await?;
    let history = &closed.history;
    Ok(Outcome {
        completed: count(history, "turn_complete"),
        timeouts: count(history, "turn_timeout"),
        late_signals: count(history, "late_signal"),
        out_of_turn: count(history, "out_of_turn"),
        rest_calls: closed.rest_calls,
        max_lateness_ms: closed.max_lateness_ms,
        mean_lateness_ms: closed.mean_lateness_ms,
    })
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
/// the last one always answers a second after its timeout (a timeout, then a late signal).
fn parts(count: usize) -> Vec<Part> {
    let timeout = Duration::from_secs(u64::from(DEMO_TIMEOUT_SECONDS));
    let late_by = Duration::from_secs(1);
    (0..count)
        .map(|i| match i {
            // A late signal is one that comes in another persona's turn. With two, the next turn after the last
            // one's is the first one's, which ended at once, so the late answer came in its author's own next turn
            // and was taken as its answer: the demo failed for want of a late signal (found by a newcomer). The first
            // one thinks for 2 s: the late answer comes 1.5 s into its turn (the last one's own thinking, then the
            // second past its timeout), half a second before the first one answers, a second before its timeout.
            0 if count == 2 => Part { behavior: Behavior::OutOfTurn, thinking: THINKING + late_by + THINKING },
            0 => Behavior::OutOfTurn.into(),
            i if i + 1 == count => Behavior::FinishLate(timeout + late_by).into(),
            _ => Behavior::StreamByEditing(3).into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn preset_with(config: &str) -> Preset {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("p");
        std::fs::create_dir_all(dir.join("personas")).unwrap();
        std::fs::write(dir.join("turn-manager.json"), config).unwrap();
        std::fs::write(dir.join("personas/a.json"), r#"{"id": "a", "discordUserId": "1"}"#).unwrap();
        preset::load(root.path(), "p").unwrap()
    }

    #[test]
    fn the_presets_named_as_playable_are_the_scripted_ones_and_those_turn_complete_ends() {
        assert_eq!(playable(Path::new(preset::PRESETS_DIR)), ["review-workflow", "round-robin"]);
    }

    #[test]
    fn a_preset_without_a_script_plays_only_if_turn_complete_ends_its_turns() {
        assert!(ends_turns_with_the_default_keyword(&preset_with("{}")));
        let tags = r#"{"signals": {"rules": [{"name": "DONE", "pattern": "<done/>", "action": "complete"}]}}"#;
        assert!(!ends_turns_with_the_default_keyword(&preset_with(tags)));
    }
}
