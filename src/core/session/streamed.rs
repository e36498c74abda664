//! A line that looks like a signal (an unknown signal, or a near miss of one) left by the holder's edits: a streaming
//! agent's message passes through such moments on its way to the signal, so the line is answered only once the
//! message has been left alone for [`SIGNAL_LIKE_QUIET`], as a new message's is answered at once (recovery.rs). Each
//! message of the turn that showed such a line is followed on its own, by its newest edit, and a line answered once
//! for a message is not answered again.

use super::{Context, EDITABLE_MESSAGES_KEPT, IncomingMessage, Repeats, Session, SessionStatus, Transition};
use crate::core::ids::{MessageId, PersonaId};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// How long the holder's message whose newest edit left a line that looks like a signal (and is none) must stay
/// unedited before that line is answered. A streaming agent's edits pass through such states on their way to the
/// signal (`**TURN_COMPLETE*`, one character short of `**TURN_COMPLETE**`, itself a near miss on its way to
/// `**TURN_COMPLETE**\n\nTURN_COMPLETE`); five seconds outlasts the pauses between its edits (Discord lets a bot edit
/// five times in five seconds in a channel) at little cost to a turn that lasts minutes.
pub const SIGNAL_LIKE_QUIET: TimeDelta = TimeDelta::seconds(5);

/// Lines answered per message that are remembered (by digest): enough for an agent rewriting its last line a few
/// times.
const ANSWERED_KEPT: usize = 4;

/// How much of a waiting line is kept: more than a reply quotes (templates::QUOTED_TEXT_MAX_CHARS).
const LINE_KEPT_CHARS: usize = 200;

/// One of the holder's messages this turn that showed a line that looks like a signal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalLike {
    pub message: MessageId,
    /// Its newest edit handled (Discord's time; the message's own for one answered as it came): an older edit
    /// delivered late, or again around a reconnect, changes nothing.
    pub edited_at: DateTime<Utc>,
    /// The line its newest edit left (its first [`LINE_KEPT_CHARS`] characters), to be answered once the message has
    /// been left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Digests ([`Repeats::digest_of`]) of the lines answered already, as the message came or once it was quiet:
    /// not answered again, even when a catch-up after a restart reads the message again as an edit.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "answeredDigests")]
    pub answered: Vec<u64>,
}

fn kept(line: String) -> String {
    match line.char_indices().nth(LINE_KEPT_CHARS) {
        Some((cut, _)) => line[..cut].to_owned(),
        None => line,
    }
}

/// What is remembered of a line answered for a message ([`SignalLike::answered`]).
fn answered_digest(line: &str) -> u64 {
    Repeats::digest_of(&kept(line.to_owned()))
}

impl Session {
    /// The holder's edit, in its turn, of a message it ends nothing with (or beside whose signal, acted on without
    /// ending the turn, the message stays as written): a line in it that looks like a signal (and is none, nor a line
    /// a rule reads) waits until the message has been left alone for [`SIGNAL_LIKE_QUIET`]; a line answered already
    /// for the message waits for nothing, and an edit that takes the line away answers nothing. Followed during a
    /// pause too (answered once the session runs).
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
        // Never a line a rule reads, such as the progress or record line of a message kept in the channel (found by
        // a review: `PROGRESS: 40` was answered as one); a mistyped line beside it is answered.
        let line = signals.signal_like(&message.text, persona);
        let known = self.signal_like.as_deref().and_then(|followed| followed.iter().find(|k| k.message == message.id));
        match (known, &line) {
            // Edits of one message are made in order: an older one, late or delivered again, changes nothing.
            (Some(known), _) if known.edited_at > written => return,
            // A message that never showed such a line is not followed (its entry would only cost a save).
            (None, None) => return,
            _ => {}
        }
        let known = self.followed(message.id, written);
        let waiting = line.map(kept).filter(|line| !known.answered.contains(&answered_digest(line)));
        if (known.edited_at, &known.waiting) != (written, &waiting) {
            (known.edited_at, known.waiting) = (written, waiting);
            t.changed = true;
        }
    }

    /// The holder's edit gave `message` a signal that was acted on, or made a loop: a line an earlier edit left is no
    /// longer there to answer (found by a review: it was answered 5 s later, for a message already reposted).
    pub(super) fn signal_like_taken_up(&mut self, message: MessageId, written: DateTime<Utc>) {
        let mut followed = self.signal_like.as_deref_mut().into_iter().flatten();
        if let Some(known) = followed.find(|k| k.message == message && k.edited_at <= written) {
            (known.edited_at, known.waiting) = (written, None);
        }
    }

    /// Whether `line` was answered for `message` already (as it came, or once quiet).
    pub(super) fn answered_already(&self, message: MessageId, line: &str) -> bool {
        let digest = answered_digest(line);
        let mut followed = self.signal_like.as_deref().into_iter().flatten();
        followed.any(|known| known.message == message && known.answered.contains(&digest))
    }

    /// A line of `message` was answered (as it came, or once quiet): it is not answered again.
    pub(super) fn answered_signal_like(&mut self, message: MessageId, line: &str) {
        // Its waiting line, if it was one, was taken by `answer_signal_likes` before it was answered.
        let known = self.followed(message, message.created_at());
        known.answered.push(answered_digest(line));
        if known.answered.len() > ANSWERED_KEPT {
            known.answered.remove(0);
        }
    }

    /// The entry of `message`, made (as of `edited_at`) if there is none. Past [`EDITABLE_MESSAGES_KEPT`] messages,
    /// the oldest with nothing waiting is forgotten first.
    fn followed(&mut self, message: MessageId, edited_at: DateTime<Utc>) -> &mut SignalLike {
        let followed = self.signal_like.get_or_insert_default();
        if let Some(at) = followed.iter().position(|k| k.message == message) {
            return &mut followed[at];
        }
        if followed.len() >= EDITABLE_MESSAGES_KEPT {
            let idle = followed.iter().position(|k| k.waiting.is_none()).unwrap_or(0);
            followed.remove(idle);
        }
        followed.push(SignalLike { message, edited_at, waiting: None, answered: Vec::new() });
        followed.last_mut().expect("pushed")
    }

    /// Whether `message`'s edits are followed this turn (entries go with the turn that made them).
    pub(super) fn follows(&self, message: MessageId) -> bool {
        self.signal_like.as_deref().is_some_and(|followed| followed.iter().any(|k| k.message == message))
    }

    /// When the first line left by an edit is to be answered, if one waits, the session runs and the holder has been
    /// told it has the floor (as for its deadline: found by a review, lines could be answered, and the turn ended
    /// at the limit, before Discord accepted the announcement asking it again).
    pub(crate) fn signal_like_due(&self) -> Option<DateTime<Utc>> {
        if self.status != SessionStatus::Running || self.awaiting_floor_announcement() {
            return None;
        }
        let followed = self.signal_like.as_deref()?;
        followed.iter().filter(|known| known.waiting.is_some()).map(|known| known.edited_at + SIGNAL_LIKE_QUIET).min()
    }

    /// Answers each line left by an edit whose message has been left alone long enough, in the order they fell
    /// due, as a new message's is answered (the turn ends at the `unknownLimit`-th in a row, now). A turn whose
    /// deadline (or silence) came before a line fell due ends there, and answers no more: checked before each line
    /// (found by a review: a late tick answered the lines that fell due after the deadline, then timed out).
    pub(super) fn answer_signal_likes(&mut self, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        let limit = ctx.config.signals.recovery.unknown_limit;
        while let Some(due) = self.signal_like_due().filter(|due| *due <= now) {
            self.expire_if_due(due, now, ctx, t);
            let (Some(holder), Some(followed)) = (self.active_agent.clone(), self.signal_like.as_deref_mut()) else {
                return; // the turn ended there: a new one follows nothing yet
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
