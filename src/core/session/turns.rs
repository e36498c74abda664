//! Turn transitions: agents' messages (spec 5), deadlines (spec 8), and the helpers that begin and end turns.

use super::effects::{Announcement, COMPLETED_REACTION, Effect, fit_message, nonce_for};
use super::history::{EventKind, HistoryEvent, join_ids};
use super::{
    Context, DisplayMode, EDITABLE_MESSAGES_KEPT, IncomingMessage, Session, SessionStatus, Transition, TurnSpan,
    ceil_seconds, round_seconds, seconds, whole_millis,
};
use crate::core::config::OutOfTurnPolicy;
use crate::core::ids::{MessageId, PersonaId};
use crate::core::signals::{Detected, text::trim_blank};
use crate::core::templates::Template;
use chrono::{DateTime, Utc};

impl Session {
    /// Handles one message of the channel (spec 5, steps 2 to 7), judged by when it was written.
    pub fn handle_message(&mut self, message: &IncomingMessage, now: DateTime<Utc>, ctx: Context) -> Transition {
        let now = whole_millis(now);
        // Discord's clock running ahead of ours must not put a message after our present.
        let written = whole_millis(message.written_at).min(now);
        let mut t = Transition::default();
        if !self.is_active() {
            return t;
        }
        // An edit of a message whose signal was acted on already counts only by a signal that ends the turn.
        let mut only_ending = false;
        if message.edited {
            // An edit only matters when it adds the signal to a message seen without one (or, to one whose progress
            // or record was acted on, a signal ending the turn); each message counts once.
            let Some(position) = self.editable_messages.iter().position(|id| *id == message.id) else {
                return t;
            };
            only_ending = self.editable_after_signal.as_ref().is_some_and(|ids| ids.contains(&message.id));
            let author = ctx.personas.by_user(message.author).map(|p| &p.id);
            let signals = &ctx.config.signals;
            // A completion phrase ends a turn like a signal (auto-detection), added by an edit too.
            let ends = |a: &PersonaId| {
                signals.has_signal_among(&message.text, a, only_ending)
                    || signals.completion_phrase(&message.text).is_some()
            };
            if !author.is_some_and(ends) {
                // An edit of the message the loop row counted last (a streaming agent's placeholder filled in) takes
                // its place there, so that "Thinking…" is not what counts (found by a review).
                let last_counted = self.repeats.as_ref().is_some_and(|r| r.message == message.id.0);
                if let Some(persona) = author.filter(|_| last_counted && self.status == SessionStatus::Running) {
                    let row = self.repeats.clone();
                    let said = trim_blank(&message.text).to_owned();
                    if self.repeated(said, persona, message, now, ctx, &mut t) {
                        // The line an earlier edit left is gone from the message; the loop's own is not answered, as
                        // a new message's making a loop is not (found by a property: it was answered after `resume`).
                        self.signal_like_taken_up(message.id, written);
                        return self.finish(t, ctx);
                    }
                    // The same edit delivered again changes nothing.
                    t.changed |= self.repeats != row;
                }
                // A holder streaming its answer by editing is not silent (auto-detection by silence).
                let silence_on = ctx.config.signals.recovery.silence_seconds.is_some();
                if let Some(holder) = author.filter(|a| silence_on && Some(*a) == self.active_agent.as_ref()) {
                    if self.silence_deadline(ctx).is_some_and(|silence_at| silence_at <= written) {
                        // Made after the silence had ended the turn (handled before the deadline tick): the turn
                        // ends there, as it would have.
                        self.expire_if_due(written, now, ctx, &mut t);
                        return self.finish(t, ctx);
                    }
                    // Only an edit made in this turn is its activity (as a message is): one made at the instant the
                    // silence ended the turn before, handled again, changes nothing.
                    let this_turn = self.turn_started_at.is_none_or(|started| written > started);
                    let agent = self.agents.entry(holder.clone()).or_default();
                    if this_turn && agent.last_activity.is_some_and(|at| at < written) {
                        agent.last_activity = Some(written);
                        t.changed = true;
                    }
                }
                // A line that looks like a signal, added by the holder's edit in its turn, is answered once the
                // message is left alone: before, only a new message's was (a streaming agent's never). Followed
                // during a pause too, answered once the session runs (found by a review: such an edit was lost).
                if let Some(holder) = author.filter(|a| Some(*a) == self.active_agent.as_ref()) {
                    // A message followed already is of this turn (its entries go with the turn), whenever its edit is
                    // handled: one made during a pause and handled after a `resume` asking again, which sets the
                    // turn's start anew, still takes a line away (found by a review).
                    if self.turn_started_at.is_none_or(|started| written > started) || self.follows(message.id) {
                        self.edited_signal_like(message, holder, written, ctx, &mut t);
                    }
                }
                return t;
            }
            self.editable_messages.remove(position);
            self.forget_editable_after_signal(message.id);
            self.signal_like_taken_up(message.id, written);
        } else {
            if !self.recent_ids.claim(message.id, self.last_message_id) {
                return t;
            }
            self.last_message_id = self.last_message_id.max(Some(message.id));
        }
        t.changed = true;
        // Only a message written at or after the deadline finds the turn over; one written before it is judged
        // against the turn it was written in. Nothing expires at `now` here: catch-up replays old messages in order,
        // and the deadline tick ends overdue turns afterwards.
        self.expire_if_due(written, now, ctx, &mut t);

        if !self.is_active() {
            return self.finish(t, ctx); // The deadline that passed ended the session (`maxRounds`).
        }

        let Some(persona) = ctx.personas.by_user(message.author).map(|p| p.id.clone()) else {
            return self.finish(t, ctx); // A person: the message stands.
        };
        let detected = ctx.config.signals.detect_among(&message.text, &persona, only_ending);
        let holds_floor = self.active_agent.as_ref() == Some(&persona);
        // A message is in the turn it was written in, an edit in the turn it was made in (it finishes its message
        // then, whenever the message itself was written): by its snowflake, or the first one of the edit's instant.
        let when = if message.edited { MessageId::first_at(written) } else { message.id };
        let in_turn = holds_floor && self.turn_began_after.is_none_or(|after| when > after);
        let agent = self.agents.entry(persona.clone()).or_default();
        let in_past_turn = !in_turn && agent.last_turn.is_some_and(|span| span.contains(when));
        // An edit adding a signal outside its author's turns is shown as a late signal whatever ended the turn (spec 5
        // step 4 would take it for out of turn after a turn its own signal or a command ended): only messages first
        // seen in their author's turn are edited here, so its text was written in turn and everyone has seen it;
        // removed as out of turn, a streamed answer would vanish when its last edit came after a `skip` (a review
        // weighed both).
        let late = !in_turn && !in_past_turn && (agent.awaiting_late_reply || message.edited);
        if !in_past_turn {
            // A message from an older turn is not the reply to a turn that timed out since.
            agent.awaiting_late_reply = false;
        }
        // Not one the roster has left out: it is in no rotation to be back in (found by a review).
        if !in_turn && !in_past_turn && agent.benched && self.roster.contains(&persona) {
            self.unbench(&persona, "it spoke", now, ctx, &mut t);
        }

        if in_turn {
            self.judge_in_turn(message, &persona, detected, written, now, ctx, &mut t);
        } else if in_past_turn {
            // Written while its author held the floor, handled after that turn ended (by its own signal or a
            // command): in turn, but the turn is over, so it does not advance. Its turn's end is recorded already
            // and a repost keeps its text, so no event is recorded for it.
            match detected {
                None => self.remember_editable(message.id),
                Some(found) => self.show_stripped(&mut t, message, &persona, found.display, found.stripped, true),
            }
        } else if late {
            let had_signal = detected.is_some();
            let text = match detected {
                None => message.text.clone(),
                Some(found) => {
                    let text = found.display.clone().unwrap_or_default();
                    self.show_stripped(&mut t, message, &persona, found.display, found.stripped, false);
                    text
                }
            };
            let kind = EventKind::LateSignal { message_id: message.id, text, had_signal };
            t.events.push(self.event(now, Some(&persona), kind));
        } else {
            let removed = ctx.config.out_of_turn == OutOfTurnPolicy::Remove
                && self.display_mode == DisplayMode::Relay
                && !self.tidying_backed_up();
            if removed {
                t.effects.push(Effect::Delete { message_id: message.id });
            }
            let kind = EventKind::OutOfTurn { message_id: message.id, text: message.text.clone(), removed };
            t.events.push(self.event(now, Some(&persona), kind));
            self.note_out_of_turn(message, &persona, removed);
        }
        self.hold_back_tidying(&mut t, now);
        self.finish(t, ctx)
    }

    /// A message of the floor holder written in its turn (`written` on Discord's clock). If its signal began a new
    /// turn while newer messages had been handled, the new holder's messages among those are judged again.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn judge_in_turn(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        detected: Option<Detected>,
        written: DateTime<Utc>,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let agent = self.agents.entry(persona.clone()).or_default();
        // Never back: a message overtaken by a newer one (handled after it) does not restart the silence earlier.
        agent.last_activity = agent.last_activity.max(Some(written));
        let signalled = detected.is_some();
        let started_before = self.turn_started_at;
        self.turn_message(message, persona, detected, written, now, ctx, t);
        // A turn the holder's signal ended (or kept) did not time out: the row of timeouts is broken. A signal that
        // leaves the turn going (a record, a progress, a refused handoff, one held by a pause) breaks nothing: the
        // turn may still time out (found by a review: an agent that recorded a checkpoint every turn and never
        // finished one was never benched).
        let turn_over = self.active_agent.as_ref() != Some(persona) || self.turn_started_at != started_before;
        // Not a turn that a mistyped line beside the signal ended, at `unknownLimit`: that counts as a timeout (its
        // strike awaits a late reply; found by a review: the strike was undone here).
        let struck = self.agents.get(persona).is_some_and(|agent| agent.awaiting_late_reply);
        if signalled && turn_over && !struck {
            self.agents.entry(persona.clone()).or_default().consecutive_timeouts = 0;
        }
        if !message.edited {
            self.take_up_overtaken(message.id, now, ctx, t);
        }
    }

    /// A message without the signal, which an edit adding the signal may still finish.
    pub(super) fn remember_editable(&mut self, message: MessageId) {
        if self.editable_messages.contains(&message) {
            return; // an edited line answered once quiet: its message is editable already
        }
        self.editable_messages.push(message);
        if self.editable_messages.len() > EDITABLE_MESSAGES_KEPT {
            let forgotten = self.editable_messages.remove(0);
            self.forget_editable_after_signal(forgotten);
        }
    }

    fn forget_editable_after_signal(&mut self, message: MessageId) {
        if let Some(ids) = &mut self.editable_after_signal {
            ids.retain(|id| *id != message);
            if ids.is_empty() {
                self.editable_after_signal = None;
            }
        }
    }

    /// A message whose signal was acted on without ending the turn (a progress, a record): if it stays in the
    /// channel as written (not deleted and reposted without its signal), an edit adding a signal that ends the turn
    /// still finishes it, as it would a message seen without a signal. Not one that holds such a signal already (it
    /// lost to the other on priority): an edit could not tell what it added, and a typo fixed would end the turn.
    pub(super) fn remember_editable_after_signal(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        stripped: bool,
        ctx: Context,
    ) {
        if self.display_mode == DisplayMode::Relay && stripped {
            return; // deleted and reposted: the agent's message is gone
        }
        let signals = &ctx.config.signals;
        if signals.has_signal_among(&message.text, persona, true) || signals.completion_phrase(&message.text).is_some()
        {
            return;
        }
        self.remember_editable(message.id);
        self.editable_after_signal.get_or_insert_default().push(message.id);
    }

    /// Ends the turn if its deadline has come (spec 8). Called by the timeout task, and at start-up for turns that
    /// fell due while the bot was down: their duration is the true one.
    pub fn tick(&mut self, now: DateTime<Utc>, ctx: Context) -> Transition {
        let now = whole_millis(now);
        let mut t = Transition::default();
        self.answer_signal_likes(now, ctx, &mut t);
        self.expire_if_due(now, now, ctx, &mut t);
        self.finish(t, ctx)
    }

    /// A message carrying a signal is shown without it: reposted in relay mode (unless nothing was stripped, when
    /// it stays as posted); in observe mode it stays, and a completed turn gets a reaction.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn show_stripped(
        &self,
        t: &mut Transition,
        message: &IncomingMessage,
        persona: &PersonaId,
        display: Option<String>,
        stripped: bool,
        completed: bool,
    ) {
        match self.display_mode {
            DisplayMode::Relay if !stripped => {}
            DisplayMode::Relay => t.effects.push(Effect::Relay {
                message_id: message.id,
                persona: persona.clone(),
                text: display,
                has_files: message.has_files,
                already_deleted: false,
                flags: message.flags,
                mentions: message.mentions.clone(),
            }),
            DisplayMode::Observe if completed => {
                t.effects.push(Effect::React { message_id: message.id, emoji: COMPLETED_REACTION.into() })
            }
            DisplayMode::Observe => {}
        }
    }

    /// Times the turn out when `reached` (the instant being judged: a message's written time, or now) has reached
    /// its deadline plus the grace period: the turn covers `[start, deadline + grace)`. The timeout itself happens
    /// `now`: the next turn starts then, and the duration announced is the turn's real length. With auto-detection
    /// on, the holder's silence may end the turn first.
    pub(super) fn expire_if_due(
        &mut self,
        reached: DateTime<Utc>,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let (Some(deadline), Some(active)) = (self.next_deadline(), self.active_agent.clone()) else {
            return;
        };
        let timeout_at = deadline + seconds(u64::from(ctx.config.signals.recovery.grace_seconds));
        if let Some(silence_at) = self.silence_deadline(ctx).filter(|s| *s <= timeout_at && reached >= *s) {
            self.end_by_silence(&active, silence_at, now, ctx, t);
            return;
        }
        if reached < timeout_at {
            return;
        }
        let started = self.turn_started_at.unwrap_or(deadline);
        // The time it ran: a pause's is no part of it, as for a turn that began during the pause (found by a review).
        let duration_seconds = round_seconds((now - started).num_milliseconds() - self.turn_paused_ms);
        if ctx.config.announce_timeouts {
            let mut values = self.common_values(ctx, &active);
            values.push(("duration", duration_seconds.to_string()));
            let text = ctx.config.templates.render(Template::Timeout, &values);
            self.announce(t, now, text, None);
        }
        let kind_at = t.events.len();
        self.strike(&active, now, ctx, t);
        let next = self.following(&active);
        let kind = EventKind::TurnTimeout { duration_seconds, next_agent: next };
        t.events.insert(kind_at, self.event(now, Some(&active), kind));
        self.floor_moves(MessageId::first_at(timeout_at));
        self.advance(now, ctx, t);
    }

    /// The persona after `persona` in the roster, wrapping around, skipping the benched (unless all others are).
    pub(super) fn following(&self, persona: &PersonaId) -> PersonaId {
        let start = self.roster.iter().position(|p| p == persona);
        self.first_in_rotation_from(start.map_or(0, |i| i + 1)).0
    }

    /// The first persona of the roster from position `index` on, wrapping around, skipping the benched (unless all
    /// are), and whether reaching it wraps past the roster's end (a new round).
    pub(super) fn first_in_rotation_from(&self, index: usize) -> (PersonaId, bool) {
        let len = self.roster.len();
        let benched = |p: &PersonaId| self.agents.get(p).is_some_and(|a| a.benched);
        let k = (0..len).find(|k| !benched(&self.roster[(index + k) % len])).unwrap_or(0);
        (self.roster[(index + k) % len].clone(), index + k >= len)
    }

    /// Records the span of the holder's turn as it ends by its signal or a command, `until` marking the end in
    /// Discord's clock. Timeouts do not call this: a message after one follows the late-signal rule.
    pub(super) fn end_turn(&mut self, until: MessageId) {
        let Some(active) = self.active_agent.clone() else { return };
        let after = self.turn_began_after;
        self.agents.entry(active).or_default().last_turn = Some(TurnSpan { after, until });
        self.floor_moves(until);
    }

    /// The floor moved `at` (Discord's clock): see `floor_moved_at`. Never back: a command handled late may mark its
    /// turn end before the current turn began.
    pub(super) fn floor_moves(&mut self, at: MessageId) {
        self.floor_moved_at = self.floor_moved_at.max(Some(at));
    }

    /// Passes the floor to the next persona; the round grows when the roster wraps around, and the session ends
    /// when `maxRounds` are done.
    pub(super) fn advance(&mut self, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        let next = match self.active_agent.clone() {
            Some(active) => self.following(&active),
            None => self.roster[0].clone(),
        };
        let from = self.active_agent.as_ref().and_then(|a| self.roster.iter().position(|p| p == a));
        let to = self.roster.iter().position(|p| *p == next);
        let wraps = matches!((from, to), (Some(f), Some(n)) if n <= f);
        self.move_floor(next, wraps, now, ctx, t);
    }

    /// Gives the floor to `persona`, a new round first when `wraps`; ends the session instead when that round is
    /// past `maxRounds`.
    pub(super) fn move_floor(
        &mut self,
        persona: PersonaId,
        wraps: bool,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        if wraps {
            self.round += 1;
            if let Some(max) = ctx.config.signals.recovery.max_rounds.filter(|max| self.round > *max) {
                self.round = max;
                let kind = EventKind::SessionEnded { reason: format!("{max} rounds done (maxRounds)") };
                t.events.push(self.event(now, None, kind));
                let values = [("round", max.to_string()), ("roster", join_ids(&self.roster))];
                let text = ctx.config.templates.render(Template::MaxRounds, &values);
                self.announce(t, now, text, None);
                self.close();
                self.ended_on_purpose = true;
                return;
            }
        }
        self.begin_turn(persona, now, ctx, t);
    }

    /// Ends the session: nobody holds the floor; history is kept.
    pub(super) fn close(&mut self) {
        // Ended by a signal, a deadline or the last round's end, the session ended where the floor last moved: a
        // `start` given before that is refused as one given while it ran (found by a review). A command that ends
        // it marks its own id after this.
        self.bounded_by = self.bounded_by.max(self.floor_moved_at);
        self.status = SessionStatus::Stopped;
        self.active_agent = None;
        self.turn_timeout_at = None;
        self.paused_at = None;
        self.paused_remaining_ms = None;
        self.pause_reason = None;
        self.signal_held = false;
        self.pauses = None;
        self.holder_called_at = None;
        self.editable_messages.clear();
        self.editable_after_signal = None;
        self.out_of_turn_lately.clear();
        self.signal_like = None;
    }

    /// Gives `persona` the floor now. In a paused session the turn waits, unannounced, for `resume`.
    pub(super) fn begin_turn(&mut self, persona: PersonaId, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        self.begin_turn_as(persona, Template::TurnStart, &[], 0, now, ctx, t);
    }

    /// Gives the holder its turn afresh, announced with a mention, so that it is asked again (after a held signal
    /// or an escalation). The turn keeps the time it was given on top (an `extend` while paused was confirmed; a
    /// progress's, not given twice), and stays the same turn: what the holder wrote in it before, handled after, is
    /// still in turn (not out of turn), and a `skip` or `extend` given in it still applies to it.
    /// Its row of keeps goes on too: a `resume` is no way past `maxKeeps` (found by a review), and so do the lines that
    /// look like a signal its edits left (streamed.rs).
    pub(super) fn ask_again(&mut self, holder: PersonaId, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        let (extended, progress_extended) = (self.turn_extended_seconds, self.turn_progress_extended);
        let (began_after, keeps_in_row) = (self.turn_began_after, self.keeps_in_row);
        // Its messages followed for a line that looks like a signal too: a line answered is not answered again
        // (found by a property test: a `resume` asking again made it forget what it had answered).
        let followed = self.signal_like.take();
        self.begin_turn_as(holder, Template::TurnStart, &[], extended, now, ctx, t);
        self.turn_progress_extended = progress_extended;
        self.turn_began_after = began_after;
        self.keeps_in_row = keeps_in_row;
        self.signal_like = followed;
    }

    /// Gives `persona` the floor now, announced with `template` (the turn start, or a kept turn), its persona's
    /// timeout lengthened by `extended` seconds (what the turn it starts afresh had been given).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn begin_turn_as(
        &mut self,
        persona: PersonaId,
        template: Template,
        extra: &[(&'static str, String)],
        extended: u64,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let timeout = ctx.timeout_of(&persona);
        // Whoever is given the floor (by a handoff, a command, a roster change) is back in the rotation.
        self.unbench(&persona, "given the floor", now, ctx, t);
        // Keeps count in a row: any other turn start ends the row, even one giving the floor back to the same
        // persona (a roster of one, or everyone else benched).
        if template != Template::Kept {
            self.keeps_in_row = 0;
        }
        // Unknown signals count in a row within a turn: a new turn starts a new row, and answers no line of the last.
        if let Some(agent) = self.agents.get_mut(&persona) {
            agent.unknown_signals = 0;
        }
        self.signal_like = None;
        self.turn_progress_extended = false;
        self.signal_held = false; // what was held belonged to the turn that ends here
        self.active_agent = Some(persona.clone());
        // Its messages written before the floor moved to it (a `skip` or `give` given later than they were written,
        // though handled first) belong to an earlier turn, even if none newer had been handled.
        self.turn_began_after = self.last_message_id.max(self.floor_moved_at);
        self.floor_reaches_holder(now);
        self.turn_started_at = Some(now);
        self.turn_timeout_seconds = timeout;
        self.turn_extended_seconds = extended;
        self.turn_paused_ms = 0;
        let length = u64::from(timeout) + extended;
        if self.status == SessionStatus::Paused {
            // The pause began when it was given, not when this turn began within it (a signal handled late).
            self.paused_at = Some(self.paused_at.unwrap_or(now));
            self.paused_remaining_ms = Some(i64::try_from(length * 1000).unwrap_or(i64::MAX));
            self.turn_timeout_at = None;
            self.turn_announced = false;
            self.holder_called_at = None;
        } else {
            self.turn_timeout_at = Some(now + seconds(length));
            self.announce_turn_as(template, extra, ctx, t, now);
        }
    }

    /// The holder is given the floor at `now` (its turn began, or began again at `resume`). A holder whose last
    /// turn timed out and that has not spoken since may still be answering the call it timed out on: what it wrote
    /// before `now`, before it could be told of this turn, is that late reply (spec 5, step 4), not its answer to
    /// this turn, even when it is read only after this turn began (a catch-up, a reordered dispatch).
    pub(super) fn floor_reaches_holder(&mut self, now: DateTime<Utc>) {
        let Some(holder) = &self.active_agent else { return };
        if self.agents.get(holder).is_some_and(|a| a.awaiting_late_reply) {
            self.turn_began_after = self.turn_began_after.max(Some(MessageId::first_at(now)));
        }
    }

    /// The turn-start announcement, which mentions the persona's Discord account (what makes agents answer).
    pub(super) fn announce_turn(&mut self, ctx: Context, t: &mut Transition, now: DateTime<Utc>) {
        self.announce_turn_as(Template::TurnStart, &[], ctx, t, now);
    }

    fn announce_turn_as(
        &mut self,
        template: Template,
        extra: &[(&'static str, String)],
        ctx: Context,
        t: &mut Transition,
        now: DateTime<Utc>,
    ) {
        let Some(persona) = self.active_agent.clone() else { return };
        let user = ctx.personas.get(&persona).map(|p| p.discord_user_id);
        let mut values = self.common_values(ctx, &persona);
        values.push(("userId", user.map(|u| u.to_string()).unwrap_or_default()));
        // With what `extend` added before it was announced (during a pause), as `status` and the deadline count it.
        let timeout = u64::from(self.turn_timeout_seconds) + self.turn_extended_seconds;
        values.push(("timeout", timeout.to_string()));
        values.push(("signal", ctx.config.signals.turn_end_hint(&persona)));
        values.extend(extra.iter().cloned());
        let text = ctx.config.templates.render(template, &values);
        self.turn_announced = true;
        // No later than this on Discord's clock: our present, or what Discord told of its own (the newest message
        // handled, the command that moved the floor or resumed the session), should our clock run behind it.
        let known = [self.last_message_id, self.floor_moved_at, self.pause_toggled_at, self.last_announced];
        self.holder_called_at = known.into_iter().flatten().chain([MessageId::first_at(now)]).max();
        self.announce(t, now, text, user);
        if let Some(Effect::Announce(announcement)) = t.effects.last() {
            self.turn_announcement = Some(announcement.nonce.as_str().into());
        }
    }

    /// Placeholder values every announcement about a persona offers.
    pub(super) fn common_values(&self, ctx: Context, persona: &PersonaId) -> Vec<(&'static str, String)> {
        let name = ctx.personas.get(persona).map_or_else(|| persona.to_string(), |p| p.display_name.clone());
        vec![
            ("agent", persona.to_string()),
            ("name", name),
            ("round", self.round.to_string()),
            ("roster", join_ids(&self.roster)),
        ]
    }

    pub(super) fn announce(
        &mut self,
        t: &mut Transition,
        now: DateTime<Utc>,
        text: String,
        mention: Option<crate::core::ids::UserId>,
    ) {
        self.post(t, now, text, mention, None, false);
    }

    /// Posts an announcement; an empty text (a template configured to say nothing) posts nothing.
    pub(super) fn post(
        &mut self,
        t: &mut Transition,
        now: DateTime<Utc>,
        text: String,
        mention: Option<crate::core::ids::UserId>,
        reply_to: Option<MessageId>,
        ping_managers: bool,
    ) {
        if text.trim().is_empty() {
            return;
        }
        self.announcement_seq += 1;
        let nonce = nonce_for(self.channel_id, now, self.announcement_seq);
        let text = fit_message(text);
        t.effects.push(Effect::Announce(Announcement { text, mention, nonce, reply_to, ping_managers }));
    }

    /// A Discord reply to `persona`'s `message`, which pings it: added to the reply this transition makes to that
    /// message already, if any, so that the agent hears everything at once and is pinged once (found by a review: a
    /// refused handoff beside a mistyped line got two replies, each pinging the agent), unless both would not fit in
    /// one message. A message this transition deletes (relayed for its signal) is not replied to: Discord drops the
    /// reference to a deleted message, and its ping with it, so the reply would reach the agent or not by how the
    /// deletion raced it (found by a review); the agent is mentioned instead.
    pub(super) fn reply(
        &mut self,
        t: &mut Transition,
        now: DateTime<Utc>,
        text: String,
        persona: &PersonaId,
        message: MessageId,
        ctx: Context,
    ) {
        if text.trim().is_empty() {
            return;
        }
        let author = ctx.personas.get(persona).map(|p| p.discord_user_id);
        let deleted = t.effects.iter().any(|effect| match effect {
            Effect::Relay { message_id, .. } | Effect::Delete { message_id } => *message_id == message,
            _ => false,
        });
        if deleted {
            let text = match author {
                Some(author) => format!("<@{author}> {text}"),
                None => text,
            };
            return self.post(t, now, text, author, None, false);
        }
        let fits = |made: &Announcement| {
            made.text.chars().count() + 1 + text.chars().count() <= super::effects::MESSAGE_CONTENT_LENGTH_MAX
        };
        let made = t.effects.iter_mut().find_map(|effect| match effect {
            Effect::Announce(announcement) if announcement.reply_to == Some(message) && fits(announcement) => {
                Some(announcement)
            }
            _ => None,
        });
        match made {
            Some(made) => made.text = format!("{}\n{text}", made.text),
            None => self.post(t, now, text, author, Some(message), false),
        }
    }

    pub(super) fn event(&self, now: DateTime<Utc>, agent: Option<&PersonaId>, kind: EventKind) -> HistoryEvent {
        HistoryEvent { at: now, round: self.round, agent_id: agent.cloned(), kind }
    }

    /// Seconds left in the current turn, rounded up.
    pub(super) fn remaining_seconds(&self, now: DateTime<Utc>) -> u64 {
        match (self.status, self.deadline_seen_at(now), self.paused_remaining_ms) {
            (SessionStatus::Paused, _, Some(ms)) => ceil_seconds(ms),
            (_, Some(deadline), _) => ceil_seconds((deadline - now).num_milliseconds()),
            _ => 0,
        }
    }

    /// Records the transition's events in the bounded history.
    pub(super) fn finish(&mut self, mut t: Transition, ctx: Context) -> Transition {
        self.record(&t.events, ctx.config.history_limit);
        t.changed |= !t.events.is_empty() || !t.effects.is_empty();
        t
    }
}
