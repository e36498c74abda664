//! A line that looks like a signal (an unknown signal, or a near miss of one) left by the holder's edits: a streaming
//! agent's message passes through such moments on its way to the signal, so the line is answered only once the
//! message has been left alone for [`SIGNAL_LIKE_QUIET`], as a new message's is answered at once (recovery.rs). Each
//! message of the turn is followed on its own, by its newest edit, and a line answered once is not answered again.

use super::{Context, EDITABLE_MESSAGES_KEPT, IncomingMessage, Session, SessionStatus, Transition};
use crate::core::ids::{MessageId, PersonaId};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// How long the holder's message whose newest edit left a line that looks like a signal (and is none) must stay
/// unedited before that line is answered. A streaming agent's edits pass through such states on their way to the
/// signal (`**TURN_COMPLETE*`, one character short of `**TURN_COMPLETE**`, itself a near miss on its way to
/// `**TURN_COMPLETE**\n\nTURN_COMPLETE`); five seconds outlasts the pauses between its edits (Discord lets a bot edit
/// five times in five seconds in a channel) at little cost to a turn that lasts minutes.
pub const SIGNAL_LIKE_QUIET: TimeDelta = TimeDelta::seconds(5);

/// Lines answered per message that are remembered: enough for an agent rewriting its last line a few times.
const ANSWERED_KEPT: usize = 4;

/// One of the holder's messages this turn, as its edits left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalLike {
    pub message: MessageId,
    /// Its newest edit handled (Discord's time; the message's own for one answered as it came): an older edit
    /// delivered late, or again around a reconnect, changes nothing.
    pub edited_at: DateTime<Utc>,
    /// The line its newest edit left, to be answered once the message has been left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// The lines answered already (as the message came, or once it was quiet): not answered again, even when a
    /// catch-up after a restart reads the message again as an edit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered: Vec<String>,
}

impl Session {
    /// The holder's edit, in its turn, of a message it ends nothing with: a line in it that looks like a signal (and
    /// is none, nor a line a rule acts on) waits until the message has been left alone for [`SIGNAL_LIKE_QUIET`];
    /// a line answered already for the message waits for nothing, and an edit that takes the line away answers
    /// nothing. Followed during a pause too (answered once the session runs again).
    pub(super) fn edited_signal_like(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        written: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let signals = &ctx.config.signals;
        if signals.recovery.unknown_limit == 0 {
            return;
        }
        // A message whose progress or record was acted on (and stays in the channel) holds a line a rule reads:
        // that is no unknown signal (found by a review: `PROGRESS: 40` was answered as one).
        let line = match signals.detect_among(&message.text, persona, false) {
            Some(_) => None,
            None => signals.unknown_signal(&message.text).or_else(|| signals.near_miss(&message.text, persona)),
        };
        let followed = self.signal_like.get_or_insert_default();
        let known = match followed.iter_mut().find(|known| known.message == message.id) {
            // Edits of one message are made in order: an older one, late or delivered again, changes nothing.
            Some(known) if known.edited_at > written => return,
            Some(known) => known,
            None => {
                followed.push(SignalLike { message: message.id, edited_at: written, waiting: None, answered: vec![] });
                if followed.len() > EDITABLE_MESSAGES_KEPT {
                    followed.remove(0);
                }
                followed.last_mut().expect("pushed")
            }
        };
        let waiting = line.filter(|line| !known.answered.contains(line));
        if (known.edited_at, &known.waiting) != (written, &waiting) {
            (known.edited_at, known.waiting) = (written, waiting);
            t.changed = true;
        }
    }

    /// A line of `message` was answered (as it came, or once quiet): it is not answered again.
    pub(super) fn answered_signal_like(&mut self, message: MessageId, line: String) {
        let followed = self.signal_like.get_or_insert_default();
        let known = match followed.iter_mut().find(|known| known.message == message) {
            Some(known) => known,
            None => {
                let edited_at = message.created_at();
                followed.push(SignalLike { message, edited_at, waiting: None, answered: vec![] });
                if followed.len() > EDITABLE_MESSAGES_KEPT {
                    followed.remove(0);
                }
                followed.last_mut().expect("pushed")
            }
        };
        if known.waiting.as_ref() == Some(&line) {
            known.waiting = None;
        }
        known.answered.push(line);
        if known.answered.len() > ANSWERED_KEPT {
            known.answered.remove(0);
        }
    }

    /// When the first line left by an edit is to be answered, if one waits and the session runs.
    pub(crate) fn signal_like_due(&self) -> Option<DateTime<Utc>> {
        if self.status != SessionStatus::Running {
            return None;
        }
        let followed = self.signal_like.as_deref()?;
        followed.iter().filter(|known| known.waiting.is_some()).map(|known| known.edited_at + SIGNAL_LIKE_QUIET).min()
    }

    /// Answers each line left by an edit whose message has been left alone long enough, oldest first, as a new
    /// message's is answered (the turn ends at the `unknownLimit`-th in a row, now, and answers no more).
    pub(super) fn answer_signal_likes(&mut self, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        let limit = ctx.config.signals.recovery.unknown_limit;
        while let Some(due) = self.signal_like_due().filter(|due| *due <= now) {
            let (Some(holder), Some(followed)) = (self.active_agent.clone(), self.signal_like.as_deref_mut()) else {
                return;
            };
            let known = followed.iter_mut().find(|k| k.waiting.is_some() && k.edited_at + SIGNAL_LIKE_QUIET == due);
            let Some((message, line)) = known.and_then(|k| Some(k.message).zip(k.waiting.take())) else { return };
            t.changed = true;
            if limit > 0 {
                // Answered as of now: the turn it ends, if the last of the row, ends now.
                self.unknown_signal(message, MessageId::first_at(now), &holder, line, limit, now, ctx, t);
            }
        }
    }
}
