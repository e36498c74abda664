//! History events: what happened in a session, in the seed's shape (`event`, `agentId`, `details`).

use crate::core::ids::{MessageId, PersonaId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One entry of a session's history, as saved in the session file and the JSON-lines log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEvent {
    #[serde(serialize_with = "crate::core::timestamp::serialize")]
    pub at: DateTime<Utc>,
    pub round: u32,
    /// The persona the event is about, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<PersonaId>,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", content = "details", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum EventKind {
    SessionStarted {
        roster: Vec<PersonaId>,
    },
    /// The active persona ended its turn with a signal.
    TurnComplete {
        message_id: MessageId,
        keyword: String,
        next_agent: PersonaId,
    },
    /// The deadline passed; `duration_seconds` is the turn's real length (the time it ran, pauses left out), rounded.
    TurnTimeout {
        duration_seconds: u64,
        next_agent: PersonaId,
    },
    /// The first message of a persona after its turn timed out (or an edit finishing a past turn): shown, no advance.
    LateSignal {
        message_id: MessageId,
        text: String,
        had_signal: bool,
    },
    /// A persona spoke without the floor. `removed`: the message was deleted; its text is kept here.
    OutOfTurn {
        message_id: MessageId,
        text: String,
        removed: bool,
    },
    Skipped {
        next_agent: PersonaId,
    },
    FloorGiven {
        from: Option<PersonaId>,
    },
    Extended {
        seconds: u32,
    },
    Paused {
        remaining_seconds: u64,
    },
    Resumed {
        remaining_seconds: u64,
    },
    RosterChanged {
        roster: Vec<PersonaId>,
    },
    DisplayModeChanged {
        mode: super::DisplayMode,
    },
    SessionStopped {},
    /// The holder ended its turn with nothing to say (a `pass` rule).
    Passed {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
        next_agent: PersonaId,
    },
    /// The holder handed the floor to a persona of its choice (a `handoff` rule).
    HandedOff {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
        next_agent: PersonaId,
    },
    /// A handoff or route named a persona that is not in the session: refused, the turn goes on.
    HandoffRefused {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
        target: String,
    },
    /// A workflow signal moved a task to a new stage and the floor on (a `route` rule). Boxed, like the other
    /// events with many fields, so that every event stays small: a session holds a tail of them.
    Routed(Box<Routed>),
    /// A task is done (a `finishTask` rule).
    TaskFinished(Box<TaskFinished>),
    /// The holder keeps the floor for another turn (a `keep` rule).
    Kept(Box<Kept>),
    /// A progress figure (a `progress` rule): `percent` clamped to 0-100, and the seconds the deadline moved.
    Progress {
        message_id: MessageId,
        signal: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        percent: Option<u8>,
        extended_seconds: u32,
    },
    /// The holder called for a person (an `escalate` rule): the session is paused.
    Escalated {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A signal only recorded (a `record` rule).
    Recorded {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<String>,
    },
    /// The session ended by a signal (an `end` rule) or by `maxRounds`.
    SessionEnded {
        reason: String,
    },
    /// A line that looks like a signal but matches no rule; `count` in a row from this persona.
    UnknownSignal {
        message_id: MessageId,
        line: String,
        count: u32,
    },
    /// The holder's unknown signals reached the limit: its turn ends as a timeout would (seed 000).
    AgentSignalFailure {
        count: u32,
        next_agent: PersonaId,
    },
    /// The turn ended by auto-detection: that much silence after the holder's last message.
    TurnSilent {
        silent_seconds: u64,
        next_agent: PersonaId,
    },
    /// A persona timed out `timeouts` times in a row: skipped in the rotation.
    Benched {
        timeouts: u32,
    },
    /// A benched persona is back: it spoke (`by` "message") or a manager added it (`by` "add").
    Unbenched {
        by: String,
    },
    /// The same text (or payload) `count` times in a row: the session is paused.
    LoopDetected {
        count: u32,
        text: String,
    },
    /// The holder signalled while the session was paused: shown as any signal is, not acted on; `resume` asks the
    /// holder again.
    SignalHeld {
        message_id: MessageId,
        /// The rule's name (a boxed `str`: it keeps every event within the size of the largest older one).
        signal: Box<str>,
    },
    /// Discord refused an effect for good (a 4xx other than 401 and 429), or it could not be done in time.
    EffectFailed {
        effect: String,
        status: Option<u16>,
    },
    /// Discord refused the bot's announcements in the channel (`status` 403): the session is paused until a manager
    /// resumes it, with `remaining_seconds` left to the turn.
    PostingRefused {
        status: u16,
        remaining_seconds: u64,
    },
}

/// The details of a `routed` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routed {
    pub message_id: MessageId,
    pub signal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub stage: String,
    pub next_agent: PersonaId,
}

/// The details of a `task_finished` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskFinished {
    pub message_id: MessageId,
    pub signal: String,
    pub task: String,
    pub next_agent: PersonaId,
}

/// The details of a `kept` event: `count` keeps in a row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    pub message_id: MessageId,
    pub signal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub count: u32,
}

impl EventKind {
    /// The snake_case name used in the files, e.g. `turn_timeout`.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::SessionStarted { .. } => "session_started",
            EventKind::TurnComplete { .. } => "turn_complete",
            EventKind::TurnTimeout { .. } => "turn_timeout",
            EventKind::LateSignal { .. } => "late_signal",
            EventKind::OutOfTurn { .. } => "out_of_turn",
            EventKind::Skipped { .. } => "skipped",
            EventKind::FloorGiven { .. } => "floor_given",
            EventKind::Extended { .. } => "extended",
            EventKind::Paused { .. } => "paused",
            EventKind::Resumed { .. } => "resumed",
            EventKind::RosterChanged { .. } => "roster_changed",
            EventKind::DisplayModeChanged { .. } => "display_mode_changed",
            EventKind::SessionStopped {} => "session_stopped",
            EventKind::EffectFailed { .. } => "effect_failed",
            EventKind::PostingRefused { .. } => "posting_refused",
            EventKind::Passed { .. } => "passed",
            EventKind::HandedOff { .. } => "handed_off",
            EventKind::HandoffRefused { .. } => "handoff_refused",
            EventKind::Routed(_) => "routed",
            EventKind::TaskFinished(_) => "task_finished",
            EventKind::Kept(_) => "kept",
            EventKind::Progress { .. } => "progress",
            EventKind::Escalated { .. } => "escalated",
            EventKind::Recorded { .. } => "recorded",
            EventKind::SessionEnded { .. } => "session_ended",
            EventKind::UnknownSignal { .. } => "unknown_signal",
            EventKind::AgentSignalFailure { .. } => "agent_signal_failure",
            EventKind::TurnSilent { .. } => "turn_silent",
            EventKind::Benched { .. } => "benched",
            EventKind::Unbenched { .. } => "unbenched",
            EventKind::LoopDetected { .. } => "loop_detected",
            EventKind::SignalHeld { .. } => "signal_held",
        }
    }
}

impl HistoryEvent {
    /// One line for people (`history` command): event, persona and the details that matter. The time is left to the
    /// caller, which shows it in its own format.
    pub fn summary(&self) -> String {
        let who = self.agent_id.as_ref().map(|a| format!(" {a}")).unwrap_or_default();
        let detail = match &self.kind {
            EventKind::SessionStarted { roster } | EventKind::RosterChanged { roster } => {
                format!(": {}", join_ids(roster))
            }
            EventKind::TurnComplete { next_agent, .. }
            | EventKind::Skipped { next_agent }
            | EventKind::Passed { next_agent, .. }
            | EventKind::HandedOff { next_agent, .. } => {
                format!(" -> {next_agent}")
            }
            EventKind::HandoffRefused { target, .. } => format!(": no {} in the session", quoted(target)),
            EventKind::Routed(routed) => {
                let Routed { task, stage, next_agent, .. } = routed.as_ref();
                let task = task.as_deref().map(|t| format!(" {}", quoted(t))).unwrap_or_default();
                format!(":{task} -> {stage} ({next_agent})")
            }
            EventKind::TaskFinished(finished) => {
                format!(": {} done -> {}", quoted(&finished.task), finished.next_agent)
            }
            EventKind::Kept(kept) => {
                let Kept { reason, count, .. } = kept.as_ref();
                format!(
                    " ({count} in a row){}",
                    reason.as_deref().map(|r| format!(": {}", quoted(r))).unwrap_or_default()
                )
            }
            EventKind::Progress { percent, extended_seconds, .. } => {
                let figure = percent.map_or_else(|| "?".to_owned(), |p| format!("{p}%"));
                let more = if *extended_seconds > 0 { format!(" (+{extended_seconds}s)") } else { String::new() };
                format!(": {figure}{more}")
            }
            EventKind::Escalated { reason, .. } => {
                reason.as_deref().map(|r| format!(": {}", quoted(r))).unwrap_or_default()
            }
            EventKind::Recorded { signal, payload, .. } => {
                format!(": {signal}{}", payload.as_deref().map(|p| format!(" {}", quoted(p))).unwrap_or_default())
            }
            EventKind::SessionEnded { reason } => format!(": {reason}"),
            EventKind::UnknownSignal { line, count, .. } => format!(": {} ({count} in a row)", quoted(line)),
            EventKind::AgentSignalFailure { count, next_agent } => {
                format!(" after {count} unknown signals -> {next_agent}")
            }
            EventKind::TurnSilent { silent_seconds, next_agent } => {
                format!(" after {silent_seconds}s of silence -> {next_agent}")
            }
            EventKind::Benched { timeouts } => format!(" after {timeouts} timeouts in a row"),
            EventKind::Unbenched { by } => format!(" ({by})"),
            EventKind::LoopDetected { count, text } => format!(": {} {count} times", quoted(text)),
            EventKind::SignalHeld { signal, .. } => format!(": {signal} (paused: not acted on)"),
            EventKind::TurnTimeout { duration_seconds, next_agent } => {
                format!(" after {duration_seconds}s -> {next_agent}")
            }
            EventKind::LateSignal { text, .. } | EventKind::OutOfTurn { text, .. } => format!(": {}", quoted(text)),
            EventKind::FloorGiven { from } => from.as_ref().map(|f| format!(" (from {f})")).unwrap_or_default(),
            EventKind::Extended { seconds } => format!(" +{seconds}s"),
            EventKind::Paused { remaining_seconds } | EventKind::Resumed { remaining_seconds } => {
                format!(" ({remaining_seconds}s left)")
            }
            EventKind::DisplayModeChanged { mode } => format!(": {mode:?}"),
            EventKind::SessionStopped {} => String::new(),
            EventKind::EffectFailed { effect, status } => match status {
                Some(status) => format!(": {effect} refused ({status})"),
                None => format!(": {effect} given up"),
            },
            EventKind::PostingRefused { status, remaining_seconds } => {
                format!(": announcements refused ({status}); paused with {remaining_seconds}s left")
            }
        };
        format!("{}{who}{detail}", self.kind.name())
    }
}

pub(crate) fn join_ids(ids: &[PersonaId]) -> String {
    ids.iter().map(PersonaId::as_str).collect::<Vec<_>>().join(", ")
}

/// What an agent wrote, in a code span: Discord shows it as written, never as Markdown (found by a review: a code fence
/// in one event's text and another's made one code block of every line between them), mentions included.
fn quoted(text: &str) -> String {
    let text = crate::core::templates::quotable_within(text, 60);
    if text.is_empty() { "\"\"".to_owned() } else { format!("`{text}`") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_event_has_the_seed_shape() {
        let event = HistoryEvent {
            at: "2026-02-04T21:21:30Z".parse().unwrap(),
            round: 2,
            agent_id: Some(PersonaId::parse("pm").unwrap()),
            kind: EventKind::TurnTimeout { duration_seconds: 90, next_agent: PersonaId::parse("dev").unwrap() },
        };
        let json: serde_json::Value = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "at": "2026-02-04T21:21:30Z", "round": 2, "agentId": "pm", "event": "turn_timeout",
                "details": {"durationSeconds": 90, "nextAgent": "dev"}
            })
        );
        assert_eq!(serde_json::from_value::<HistoryEvent>(json).unwrap(), event);
        assert_eq!(event.summary(), "turn_timeout pm after 90s -> dev", "no time: the caller prints it");
    }

    #[test]
    fn events_stay_small_and_boxed_details_keep_the_json_shape() {
        assert!(std::mem::size_of::<HistoryEvent>() <= 96, "{} bytes", std::mem::size_of::<HistoryEvent>());
        let kept = EventKind::Kept(Box::new(Kept {
            message_id: MessageId(7),
            signal: "MORE".into(),
            reason: Some("tool failed".into()),
            count: 2,
        }));
        let event = HistoryEvent { at: chrono::DateTime::UNIX_EPOCH, round: 1, agent_id: None, kind: kept };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["event"], "kept");
        assert_eq!(
            json["details"],
            serde_json::json!({"messageId": "7", "signal": "MORE", "reason": "tool failed", "count": 2})
        );
        assert_eq!(serde_json::from_value::<HistoryEvent>(json).unwrap(), event);
    }

    /// Found by a review: `history` showed agents' text as Markdown, so a code fence in one event and another in a
    /// later one made one code block of every line between them.
    #[test]
    fn what_agents_wrote_is_shown_in_a_code_span_never_as_markdown() {
        let event = |kind| HistoryEvent { at: chrono::DateTime::UNIX_EPOCH, round: 1, agent_id: None, kind };
        let out = |text: &str| EventKind::OutOfTurn { message_id: MessageId(1), text: text.into(), removed: true };
        let lines = [event(out("```rust\nfn a() {")), event(out("``` done **now** <@42>")), event(out(""))];
        let shown: Vec<String> = lines.iter().map(HistoryEvent::summary).collect();
        assert_eq!(
            shown,
            ["out_of_turn: `'''rust fn a() {`", "out_of_turn: `''' done **now** <@42>`", "out_of_turn: \"\""]
        );
        let refused =
            EventKind::HandoffRefused { message_id: MessageId(2), signal: "HANDOFF".into(), target: "`x`".into() };
        assert_eq!(event(refused).summary(), "handoff_refused: no `'x'` in the session");
    }

    #[test]
    fn every_event_name_matches_its_serialized_tag() {
        let kinds = [
            EventKind::SessionStopped {},
            EventKind::OutOfTurn { message_id: MessageId(1), text: "hi".into(), removed: true },
            EventKind::Extended { seconds: 5 },
            EventKind::SignalHeld { message_id: MessageId(3), signal: "TURN_COMPLETE".into() },
        ];
        for kind in kinds {
            let event = HistoryEvent { at: chrono::DateTime::UNIX_EPOCH, round: 1, agent_id: None, kind };
            let json = serde_json::to_value(&event).unwrap();
            assert_eq!(json["event"], event.kind.name());
            assert_eq!(serde_json::from_value::<HistoryEvent>(json).unwrap(), event);
        }
    }
}
