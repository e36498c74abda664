//! A scripted preset played until its task is done (`demo --preset review-workflow`): each persona's agent answers
//! its calls with its script's replies, and the demo ends when the session holds the task at stage `done` (a
//! `finishTask` signal). The turns are read back from the history log: every event that ends a turn.

use super::script::Script;
use super::show::{Part, Show};
use crate::core::config::Config;
use crate::core::persona::Persona;
use crate::core::session::history::{EventKind, HistoryEvent};
use anyhow::bail;
use local_discord::agents::Behavior;
use local_discord::world::SeenMessage;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// The scripted workflow gives up if its task is not done by then (a few turns of a second or two each).
const TASK_LIMIT: Duration = Duration::from_secs(40);
/// The stage of a finished task.
const DONE: &str = "done";

/// What the scripted workflow showed.
#[derive(Clone, Debug)]
pub struct TaskOutcome {
    pub task: String,
    /// The turns, in order, until the task was finished (or the demo gave up).
    pub steps: Vec<Step>,
    /// The task's stage in the session when the demo ended (`done` once finished).
    pub stage: Option<String>,
    /// The path the script is meant to show: who holds the floor, turn by turn.
    pub expected: Vec<String>,
    /// From the operator's `!turn start` to the task finished (or the demo giving up).
    pub elapsed: Duration,
    pub rest_calls: usize,
    /// The channel's full history log.
    pub history: Vec<HistoryEvent>,
    /// The channel as a person sees it at the end.
    pub channel: Vec<SeenMessage>,
}

/// One turn of the workflow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Who held the floor.
    pub persona: String,
    /// How the turn ended: its history event (`routed`, `task_finished`, `turn_timeout`...).
    pub event: String,
    /// The signal that ended it, if one did.
    pub signal: Option<String>,
    /// The stage the turn moved the task to, if it moved it.
    pub stage: Option<String>,
}

impl TaskOutcome {
    /// Whether the task was finished.
    pub fn finished(&self) -> bool {
        self.stage.as_deref() == Some(DONE)
    }

    /// Who held the floor, turn by turn, then `done` when the task was finished.
    pub fn path(&self) -> Vec<String> {
        let mut path: Vec<String> = self.steps.iter().map(|s| s.persona.clone()).collect();
        if self.finished() {
            path.push(DONE.into());
        }
        path
    }

    /// The path with the stage each persona got the task at: `developer → critic (review) → … → done`.
    pub fn path_with_stages(&self) -> String {
        let mut shown: Vec<String> = Vec::new();
        let mut stage: Option<&str> = None;
        for step in &self.steps {
            shown.push(match stage {
                Some(stage) => format!("{} ({stage})", step.persona),
                None => step.persona.clone(),
            });
            stage = step.stage.as_deref();
        }
        if self.finished() {
            shown.push(DONE.into());
        }
        shown.join(" → ")
    }

    /// The signals that passed the floor, in order.
    pub fn signals(&self) -> Vec<&str> {
        self.steps.iter().filter_map(|s| s.signal.as_deref()).collect()
    }

    pub fn timeouts(&self) -> usize {
        self.steps.iter().filter(|s| s.event == "turn_timeout").count()
    }

    /// The messages of the channel that still show one of the signals used at the start of a line.
    pub fn signal_lines_shown(&self) -> Vec<&SeenMessage> {
        let signals = self.signals();
        self.channel
            .iter()
            .filter(|m| m.content.lines().any(|line| signals.iter().any(|s| line.trim_start().starts_with(s))))
            .collect()
    }
}

/// Plays `script` with `personas` (already set up for a demo) under `config`, until its task is done.
pub async fn run(
    script: &Script,
    title: &str,
    config: Config,
    personas: Vec<Persona>,
    state_dir: &Path,
) -> anyhow::Result<TaskOutcome> {
    let unknown: Vec<&str> = script.speakers().filter(|s| !personas.iter().any(|p| p.id.as_str() == *s)).collect();
    if !unknown.is_empty() {
        bail!("the script speaks for {}, which the preset's personas do not define", unknown.join(", "));
    }
    let behaviors: Vec<Behavior> =
        personas.iter().map(|p| Behavior::Replies(script.replies_of(p.id.as_str()))).collect();
    let cast: Vec<String> = personas
        .iter()
        .map(|p| {
            let n = script.replies_of(p.id.as_str()).len();
            format!("{} ({n} {})", p.id, if n == 1 { "reply" } else { "replies" })
        })
        .collect();
    let intro = format!(
        "{title} Scripted agents speak its protocol: {}. Every turn lasts {}s; the demo ends when {} is done.",
        cast.join(", "),
        config.default_timeout_seconds,
        script.task
    );
    let parts = behaviors.into_iter().map(Part::from).collect();
    let show = Show::open(&personas, parts, &intro, config, state_dir).await?;
    let started = Instant::now();
    let mut stage = None;
    show.until(TASK_LIMIT, |s| {
        stage = s.tasks.get(script.task).map(|t| t.stage.clone());
        stage.as_deref() == Some(DONE)
    })
    .await;
    let elapsed = started.elapsed();
    let closed = show.close().await?;
    Ok(TaskOutcome {
        task: script.task.to_owned(),
        steps: steps(&closed.history, script.task),
        stage,
        expected: script.path.iter().map(|p| (*p).to_owned()).collect(),
        elapsed,
        rest_calls: closed.rest_calls,
        history: closed.history,
        channel: closed.view,
    })
}

/// Prints the task's path and handoffs, and checks that the demo showed the whole workflow.
pub fn summarize(outcome: &TaskOutcome) -> anyhow::Result<()> {
    let signals = outcome.signals();
    println!("\nSummary: {}: {}, in {:.1}s.", outcome.task, outcome.path_with_stages(), outcome.elapsed.as_secs_f64());
    println!(
        "{} handoff(s) by signal ({}), each stripped from what the channel shows; {} turn(s) timed out.",
        signals.len(),
        signals.join(", "),
        outcome.timeouts()
    );
    println!("REST calls made by the bot: {} in all, including start-up.", outcome.rest_calls);
    if !outcome.finished() {
        bail!("{} was not finished within {}s", outcome.task, TASK_LIMIT.as_secs());
    }
    let mut expected = outcome.expected.clone();
    expected.push("done".into());
    if outcome.path() != expected {
        bail!("the task went {}, not {}", outcome.path().join(" → "), expected.join(" → "));
    }
    if let Some(shown) = outcome.signal_lines_shown().first() {
        bail!("the channel still shows a signal line: {:?}", shown.content);
    }
    Ok(())
}

/// The turns in `history`, up to the one that finished `task`.
fn steps(history: &[HistoryEvent], task: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for event in history {
        let Some(step) = step(event) else { continue };
        steps.push(step);
        if matches!(&event.kind, EventKind::TaskFinished(finished) if finished.task == *task) {
            break;
        }
    }
    steps
}

/// The turn `event` ended, if it ended one: its holder, and the signal and task stage it ended with.
fn step(event: &HistoryEvent) -> Option<Step> {
    let (signal, stage) = match &event.kind {
        EventKind::Routed(routed) => (Some(routed.signal.as_str()), Some(routed.stage.clone())),
        EventKind::TaskFinished(finished) => (Some(finished.signal.as_str()), Some(DONE.to_owned())),
        EventKind::TurnComplete { keyword, .. } => (Some(keyword.as_str()), None),
        EventKind::Passed { signal, .. } | EventKind::HandedOff { signal, .. } => (Some(&**signal), None),
        EventKind::TurnTimeout { .. }
        | EventKind::TurnSilent { .. }
        | EventKind::AgentSignalFailure { .. }
        | EventKind::Skipped { .. } => (None, None),
        _ => return None,
    };
    Some(Step {
        persona: event.agent_id.as_ref()?.to_string(),
        event: event.kind.name().to_owned(),
        signal: signal.map(str::to_owned),
        stage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: serde_json::Value) -> HistoryEvent {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_turns_and_the_tasks_stages_are_read_from_the_events_that_end_turns() {
        let at = "2025-01-01T00:00:00Z";
        let history = vec![
            event(serde_json::json!({"at": at, "round": 1, "event": "session_started",
                "details": {"roster": ["developer", "critic", "auditor"]}})),
            event(serde_json::json!({"at": at, "round": 1, "agentId": "developer", "event": "routed",
                "details": {"messageId": "5", "signal": "READY_FOR_REVIEW", "task": "task-1", "stage": "review",
                "nextAgent": "critic"}})),
            event(serde_json::json!({"at": at, "round": 1, "agentId": "critic", "event": "turn_timeout",
                "details": {"durationSeconds": 3, "nextAgent": "auditor"}})),
            event(serde_json::json!({"at": at, "round": 1, "agentId": "critic", "event": "late_signal",
                "details": {"messageId": "9", "text": "sorry", "hadSignal": false}})),
            event(serde_json::json!({"at": at, "round": 2, "agentId": "auditor", "event": "turn_complete",
                "details": {"messageId": "11", "keyword": "TURN_COMPLETE", "nextAgent": "developer"}})),
        ];
        let steps = steps(&history, "task-1");
        assert_eq!(steps.len(), 3, "{steps:?}");
        let routed = Step {
            persona: "developer".into(),
            event: "routed".into(),
            signal: Some("READY_FOR_REVIEW".into()),
            stage: Some("review".into()),
        };
        assert_eq!(steps[0], routed);
        assert_eq!((steps[1].signal.as_deref(), steps[1].stage.as_deref()), (None, None));
        assert_eq!(steps[2].signal.as_deref(), Some("TURN_COMPLETE"));
        let mut outcome = TaskOutcome {
            task: "task-1".into(),
            steps,
            stage: Some("review".into()),
            expected: vec![],
            elapsed: Duration::ZERO,
            rest_calls: 0,
            history,
            channel: vec![],
        };
        assert_eq!(outcome.path(), ["developer", "critic", "auditor"], "no `done` before the task is finished");
        assert_eq!(outcome.path_with_stages(), "developer → critic (review) → auditor");
        assert_eq!(outcome.timeouts(), 1);
        assert_eq!(outcome.signals(), ["READY_FOR_REVIEW", "TURN_COMPLETE"]);
        outcome.stage = Some(DONE.into());
        assert_eq!(outcome.path().last().map(String::as_str), Some(DONE));
    }
}
