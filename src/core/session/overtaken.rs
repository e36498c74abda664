//! Messages overtaken by the signal that gave their author the floor (spec 5, step 7: a message is judged by when
//! it was written). Persona B may write just after A's signal, and B's message may reach the manager first (each
//! gateway event has its own task; a dispatch can be late): B does not hold the floor yet, so it is taken for out of
//! turn. When A's signal then arrives and gives B the floor, B's turn began when that signal was written, so B's
//! messages written after it are judged again, in turn, oldest first; one that was removed is reposted.

use super::effects::{Effect, KeptFlags};
use super::{Context, DisplayMode, IncomingMessage, REORDER_WINDOW, Session, Transition};
use crate::core::ids::{MessageId, PersonaId, UserId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How many out-of-turn messages are kept for a possible second judgement.
const KEPT: usize = 8;

/// A message taken for out of turn, kept for a reorder window in case the floor reaches its author by a signal
/// written before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutOfTurnNote {
    pub message_id: MessageId,
    pub persona: PersonaId,
    pub text: String,
    /// Deleted under the `remove` policy: judged in turn, it is reposted.
    pub removed: bool,
    /// It carries files or embeds of its own (kept as posted under the `allow` policy: a relay carries them over).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub has_files: bool,
    #[serde(default, skip_serializing_if = "KeptFlags::is_none")]
    pub flags: KeptFlags,
    /// Whom it pinged (see [`IncomingMessage::mentions`]): a repost of it pings no one else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<Vec<UserId>>,
}

impl Session {
    /// Keeps an out-of-turn message for a second judgement (the newest [`KEPT`], within the reorder window).
    pub(super) fn note_out_of_turn(&mut self, message: &IncomingMessage, persona: &PersonaId, removed: bool) {
        let note = OutOfTurnNote {
            message_id: message.id,
            persona: persona.clone(),
            text: message.text.clone(),
            removed,
            has_files: message.has_files,
            flags: message.flags,
            mentions: message.mentions.clone(),
        };
        self.out_of_turn_lately.push(note);
        let newest = self.last_message_id.unwrap_or(message.id);
        let window_start = MessageId::first_at(newest.created_at() - REORDER_WINDOW);
        self.out_of_turn_lately.retain(|n| n.message_id >= window_start);
        let excess = self.out_of_turn_lately.len().saturating_sub(KEPT);
        self.out_of_turn_lately.drain(..excess);
    }

    /// A new turn began with message `signal`, handled after newer messages: the turn began when `signal` was
    /// written, and the holder's messages written after it, taken for out of turn meanwhile, are judged again in
    /// turn, oldest first. One of them may end this turn too; each note is judged once.
    pub(super) fn take_up_overtaken(
        &mut self,
        signal: MessageId,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        // Paused too: a taken-up message's signal is held, or ends the turn if written before the pause was given,
        // as any holder's message during a pause.
        if !self.is_active() || self.turn_began_after.is_none_or(|after| after <= signal) {
            return;
        }
        // A holder awaited for a late reply is given the floor when the manager gives it, not when the signal was
        // written (see `floor_reaches_holder`); having not spoken since its timeout, it has nothing to take up.
        if self.active_agent.as_ref().and_then(|a| self.agents.get(a)).is_some_and(|a| a.awaiting_late_reply) {
            return;
        }
        self.turn_began_after = Some(signal);
        while let Some((holder, note)) = self.next_overtaken() {
            let Some(user) = ctx.personas.get(&holder).map(|p| p.discord_user_id) else { return };
            let message = IncomingMessage {
                id: note.message_id,
                author: user,
                text: note.text,
                edited: false,
                written_at: note.message_id.created_at(),
                edited_at: None,
                // A deleted message's files are gone: a relay cannot carry them over.
                has_files: note.has_files && !note.removed,
                flags: note.flags,
                mentions: note.mentions,
            };
            let detected = ctx.config.signals.detect(&message.text, &holder);
            let judged_from = t.effects.len();
            self.judge_in_turn(&message, &holder, detected, message.written_at, now, ctx, t);
            let mut shown = false;
            for effect in &mut t.effects[judged_from..] {
                if let Effect::Relay { message_id, already_deleted, .. } = effect
                    && *message_id == message.id
                {
                    shown = true;
                    *already_deleted = note.removed;
                }
            }
            let text = Some(message.text).filter(|text| !text.trim().is_empty());
            if note.removed && self.display_mode == DisplayMode::Relay && !shown && text.is_some() {
                // Deleted as out of turn, but it was said in turn, and its judgement left it as written (no signal,
                // a refused handoff, a rule that does not strip): its text is shown again, as the persona (its files
                // went with the deletion), before what its judgement says.
                let relay = Effect::Relay {
                    message_id: message.id,
                    persona: holder.clone(),
                    text,
                    has_files: false,
                    already_deleted: true,
                    flags: note.flags,
                    mentions: message.mentions,
                };
                t.effects.insert(judged_from, relay);
            }
        }
    }

    /// The oldest note of the holder (running or paused) written after its turn began, taken out of the notes.
    fn next_overtaken(&mut self) -> Option<(PersonaId, OutOfTurnNote)> {
        if !self.is_active() {
            return None;
        }
        let (holder, after) = (self.active_agent.clone()?, self.turn_began_after?);
        let position = self
            .out_of_turn_lately
            .iter()
            .enumerate()
            .filter(|(_, n)| n.persona == holder && n.message_id > after)
            .min_by_key(|(_, n)| n.message_id)
            .map(|(i, _)| i)?;
        Some((holder, self.out_of_turn_lately.remove(position)))
    }
}
