//! Turns as metrics: how each turn ended (read from the history events a transition records), and each channel's
//! handoff: from the message that ended a turn to Discord accepting the next floor announcement.

use super::{HANDOFF, TIMEOUTS, TURNS_ENDED, enabled};
use crate::core::session::Session;
use crate::core::session::effects::Effect;
use crate::core::session::history::{EventKind, HistoryEvent};
use chrono::{DateTime, Utc};
use metrics::{counter, histogram};

/// How a turn ended: the `reason` label of `turn_manager_turns_ended_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The holder's end-of-turn signal (`TURN_COMPLETE`, or a `complete` rule).
    Signal,
    /// A `pass` rule.
    Pass,
    /// A `handoff` rule: the holder chose who speaks next.
    Handoff,
    /// A `route` rule (a workflow stage).
    Route,
    /// A `finishTask` rule.
    TaskFinished,
    /// A `keep` rule: the holder keeps the floor for a new turn.
    Keep,
    /// The deadline passed.
    Timeout,
    /// Too many unrecognised signals in a row: ended as a timeout would.
    SignalFailure,
    /// Auto-detection: the holder fell silent.
    Silence,
    /// A manager's `skip`.
    Skip,
    /// A manager's `give`.
    Give,
}

impl TurnEnd {
    /// The turn end an event records, if it records one: each way a turn ends writes exactly one of these.
    pub fn of(kind: &EventKind) -> Option<Self> {
        Some(match kind {
            EventKind::TurnComplete { .. } => TurnEnd::Signal,
            EventKind::Passed { .. } => TurnEnd::Pass,
            EventKind::HandedOff { .. } => TurnEnd::Handoff,
            EventKind::Routed(_) => TurnEnd::Route,
            EventKind::TaskFinished(_) => TurnEnd::TaskFinished,
            EventKind::Kept(_) => TurnEnd::Keep,
            EventKind::TurnTimeout { .. } => TurnEnd::Timeout,
            EventKind::AgentSignalFailure { .. } => TurnEnd::SignalFailure,
            EventKind::TurnSilent { .. } => TurnEnd::Silence,
            EventKind::Skipped { .. } => TurnEnd::Skip,
            EventKind::FloorGiven { from: Some(_) } => TurnEnd::Give,
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            TurnEnd::Signal => "signal",
            TurnEnd::Pass => "pass",
            TurnEnd::Handoff => "handoff",
            TurnEnd::Route => "route",
            TurnEnd::TaskFinished => "task_finished",
            TurnEnd::Keep => "keep",
            TurnEnd::Timeout => "timeout",
            TurnEnd::SignalFailure => "signal_failure",
            TurnEnd::Silence => "silence",
            TurnEnd::Skip => "skip",
            TurnEnd::Give => "give",
        }
    }
}

/// Counts the turns a transition ended (its events), once each: called once per transition, as it is committed.
pub fn turns_ended(events: &[HistoryEvent]) {
    if enabled() {
        count_turn_ends(events);
    }
}

pub(super) fn count_turn_ends(events: &[HistoryEvent]) {
    for end in events.iter().filter_map(|e| TurnEnd::of(&e.kind)) {
        counter!(TURNS_ENDED, "reason" => end.label()).increment(1);
        if end == TurnEnd::Timeout {
            counter!(TIMEOUTS).increment(1);
        }
    }
}

/// One channel's handoff under way, owned by its actor: the start of the turn a message began (the instant the
/// actor decided it), until Discord accepts that turn's floor announcement. 16 bytes; set only while metrics are on.
#[derive(Debug, Default)]
pub struct Handoff {
    turn_started: Option<DateTime<Utc>>,
}

impl Handoff {
    /// A message was handled: if it ended a turn and the next turn's floor announcement is on its way, the handoff
    /// starts now (the new turn's start is the instant the message was handled).
    pub fn decided(&mut self, events: &[HistoryEvent], session: &Session) {
        if enabled() {
            self.begin(events, session);
        }
    }

    pub(super) fn begin(&mut self, events: &[HistoryEvent], session: &Session) {
        if events.iter().any(|e| TurnEnd::of(&e.kind).is_some()) {
            self.turn_started = session.turn_started_at.filter(|_| session.awaiting_floor_announcement());
        }
    }

    /// Effect `id` was carried out (`accepted`: when Discord accepted it) or failed (`None`). Called before the
    /// session learns of it: if it is the floor announcement of the turn a message began, the handoff is over, and
    /// timed when the announcement was accepted.
    pub fn reported(&mut self, session: &Session, id: u64, accepted: Option<DateTime<Utc>>) {
        let Some(started) = self.turn_started else { return };
        let floor = session.turn_announcement.as_deref();
        let is_floor = session
            .outbox
            .iter()
            .any(|q| q.id == id && matches!(&q.effect, Effect::Announce(a) if Some(a.nonce.as_str()) == floor));
        if !is_floor {
            return;
        }
        self.turn_started = None;
        if let Some(accepted) = accepted.filter(|_| session.turn_started_at == Some(started)) {
            let took = (accepted - started).to_std().unwrap_or_default();
            histogram!(HANDOFF).record(took.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::{MessageId, PersonaId};

    fn persona(id: &str) -> PersonaId {
        PersonaId::parse(id).unwrap()
    }

    #[test]
    fn every_way_a_turn_ends_has_its_reason_and_other_events_end_none() {
        let dev = persona("dev");
        let ended = [
            (
                EventKind::TurnComplete {
                    message_id: MessageId(1),
                    keyword: "TURN_COMPLETE".into(),
                    next_agent: dev.clone(),
                },
                "signal",
            ),
            (EventKind::TurnTimeout { duration_seconds: 60, next_agent: dev.clone() }, "timeout"),
            (EventKind::Skipped { next_agent: dev.clone() }, "skip"),
            (EventKind::FloorGiven { from: Some(persona("pm")) }, "give"),
            (EventKind::TurnSilent { silent_seconds: 5, next_agent: dev.clone() }, "silence"),
            (EventKind::AgentSignalFailure { count: 3, next_agent: dev.clone() }, "signal_failure"),
        ];
        for (kind, reason) in ended {
            assert_eq!(TurnEnd::of(&kind).map(TurnEnd::label), Some(reason), "{kind:?}");
        }
        let not_ended = [
            EventKind::SessionStopped {},
            EventKind::Extended { seconds: 30 },
            EventKind::Paused { remaining_seconds: 10 },
            EventKind::FloorGiven { from: None },
            EventKind::OutOfTurn { message_id: MessageId(2), text: "hi".into(), removed: true },
        ];
        for kind in not_ended {
            assert_eq!(TurnEnd::of(&kind), None, "{kind:?}");
        }
    }

    #[test]
    fn a_channels_handoff_costs_its_actor_at_most_16_bytes() {
        assert!(std::mem::size_of::<Handoff>() <= 16, "{}", std::mem::size_of::<Handoff>());
    }
}
