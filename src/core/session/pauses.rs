//! The pauses a session went through, kept a while after each `resume`: a message the holder wrote during one is
//! held however late it is handled (spec 5.7: judged by when it was written), as it would have been in order.

use super::{IncomingMessage, Session};
use crate::core::ids::MessageId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// At most this many pauses are kept: older ones are forgotten (a message written then and handled later still is
/// acted on as if written while the session ran).
const PAUSES_KEPT: usize = 8;

/// One pause of the session (see [`Session::pauses`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseSpan {
    /// From when a message counts as written while paused: when the `pause` was given, or when the message that made
    /// the session pause itself (an escalation, a loop) was written.
    pub from: DateTime<Utc>,
    /// The `resume` that ended it, on Discord's clock (its own id, or the first id of the instant it was run);
    /// `None` while the pause lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<MessageId>,
}

impl PauseSpan {
    /// Whether a message (or an edit) was written during this pause, once it is over.
    fn holds(&self, message: &IncomingMessage) -> bool {
        let Some(until) = self.until else { return false };
        // A new message's id orders it exactly against the `resume`; an edit has only its time.
        let before_resume = if message.edited { message.written_at < until.created_at() } else { message.id < until };
        message.written_at >= self.from && before_resume
    }
}

impl Session {
    /// The session pauses; messages written from `from` on are held. Pauses over before the current turn began are
    /// forgotten: no message of this turn was written during them.
    pub(super) fn pause_begins(&mut self, from: DateTime<Utc>) {
        let began_after = self.turn_began_after;
        let pauses = self.pauses.get_or_insert_default();
        pauses.retain(|pause| pause.until.is_none_or(|until| Some(until) > began_after));
        if pauses.len() >= PAUSES_KEPT {
            pauses.remove(0);
        }
        pauses.push(PauseSpan { from, until: None });
    }

    /// The pause is over: `resume` was given at `until`.
    pub(super) fn pause_ends(&mut self, until: MessageId) {
        for pause in self.pauses.iter_mut().flat_map(|pauses| pauses.iter_mut()) {
            pause.until.get_or_insert(until);
        }
    }

    /// Whether a message was written during a pause that is over.
    pub(super) fn written_while_paused(&self, message: &IncomingMessage) -> bool {
        self.pauses.iter().flat_map(|pauses| pauses.iter()).any(|pause| pause.holds(message))
    }

    /// The holder was called on (its turn announced, with a mention) after it wrote `message`: a signal it held
    /// needs no new call. Both on Discord's clock, so that ours running behind or ahead of it misjudges nothing.
    pub(super) fn called_since(&self, message: &IncomingMessage) -> bool {
        let Some(called) = self.holder_called_at else { return false };
        if message.edited { message.written_at < called.created_at() } else { message.id < called }
    }
}
