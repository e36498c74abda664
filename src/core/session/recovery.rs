//! The recovery rules (spec 4.2): unknown signals, strikes and the bench, loops, silence, and pausing by itself.

use super::effects::Effect;
use super::history::EventKind;
use super::{Context, IncomingMessage, Repeats, Session, SessionStatus, Transition};
use crate::core::ids::{MessageId, PersonaId};
use crate::core::templates::Template;
use chrono::{DateTime, Utc};

impl Session {
    /// A line that looks like a signal but matches no rule (seed 000): a reply naming the valid signals, and at the
    /// `limit`-th in a row the turn ends as a timeout would. Whether the turn goes on (only answered).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unknown_signal(
        &mut self,
        message: MessageId,
        turn_ends: MessageId,
        persona: &PersonaId,
        line: String,
        limit: u32,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) -> bool {
        let agent = self.agents.entry(persona.clone()).or_default();
        agent.unknown_signals += 1;
        let count = agent.unknown_signals;
        if count < limit {
            let kind = EventKind::UnknownSignal { message_id: message, line: line.clone(), count };
            t.events.push(self.event(now, Some(persona), kind));
            let mut values = self.common_values(ctx, persona);
            let names = ctx.config.signals.names_for(persona).join(", ");
            values.extend([
                ("line", crate::core::templates::quotable(&line)),
                ("signals", names),
                ("count", count.to_string()),
                ("limit", limit.to_string()),
            ]);
            let text = ctx.config.templates.render(Template::UnknownSignal, &values);
            self.reply(t, now, text, persona, message, ctx);
            self.answered_signal_like(message, &line);
            return true;
        }
        self.agents.entry(persona.clone()).or_default().unknown_signals = 0;
        // A reply this transition made to the message already (a refused handoff beside the line) is taken back: it
        // would tell the agent that it keeps the floor, and ping it, as its turn ends and the next persona is called.
        t.effects.retain(|effect| !matches!(effect, Effect::Announce(a) if a.reply_to == Some(message)));
        let extra = [("count", count.to_string())];
        self.announce_about(t, ctx, Template::SignalFailure, persona, now, &extra);
        let at = t.events.len();
        self.strike(persona, now, ctx, t);
        let next = self.following(persona);
        t.events.insert(at, self.event(now, Some(persona), EventKind::AgentSignalFailure { count, next_agent: next }));
        // Ended by one of its messages: what it wrote before that one, handled later, is still of this turn.
        self.end_turn(turn_ends);
        self.advance(now, ctx, t);
        false
    }

    /// A turn lost by the holder (a timeout, or too many unknown signals): its next message is a late reply, and
    /// after `benchAfter` in a row it is benched, as long as someone else is left to take turns.
    pub(super) fn strike(&mut self, persona: &PersonaId, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        let bench_after = ctx.config.signals.recovery.bench_after;
        let others_left = self.roster.iter().any(|p| p != persona && !self.agents.get(p).is_some_and(|a| a.benched));
        let agent = self.agents.entry(persona.clone()).or_default();
        agent.awaiting_late_reply = true;
        agent.consecutive_timeouts += 1;
        let timeouts = agent.consecutive_timeouts;
        if bench_after == 0 || timeouts < bench_after || agent.benched || !others_left {
            return;
        }
        agent.benched = true;
        t.events.push(self.event(now, Some(persona), EventKind::Benched { timeouts }));
        let extra = [("count", timeouts.to_string())];
        self.announce_about(t, ctx, Template::Benched, persona, now, &extra);
    }

    /// A benched persona is back in the rotation; `by` says why, for history.
    pub(super) fn unbench(
        &mut self,
        persona: &PersonaId,
        by: &str,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let agent = self.agents.entry(persona.clone()).or_default();
        if !agent.benched {
            return;
        }
        agent.benched = false;
        agent.consecutive_timeouts = 0;
        t.events.push(self.event(now, Some(persona), EventKind::Unbenched { by: by.to_owned() }));
        self.announce_about(t, ctx, Template::Unbenched, persona, now, &[]);
    }

    /// Counts `said` against what was said before it (spec 4.2, loops); at `loopAfter` in a row the session pauses
    /// and the managers are called. Empty text (a bare signal) neither counts nor breaks the chain.
    pub(super) fn repeated(
        &mut self,
        said: String,
        persona: &PersonaId,
        message: &IncomingMessage,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) -> bool {
        let limit = ctx.config.signals.recovery.loop_after;
        if limit == 0 {
            return false;
        }
        if message.edited {
            // Each message counts once (found by reviews: a message and the edit adding its signal counted twice,
            // two messages making a loop of three; yet not counting edits counted a streaming agent's placeholder,
            // "Thinking…", in every turn): an edit takes its message's place, if that was the last counted.
            let Some(r) = self.repeats.as_deref_mut().filter(|r| r.message == message.id.0) else { return false };
            (r.digest, r.count) = (r.before_digest, r.before_count);
        }
        if said.is_empty() {
            return false; // A bare signal: an edit to one gave its message's place back, and that is all.
        }
        let digest = Repeats::digest_of(&said);
        let r = self.repeats.get_or_insert_with(Box::default);
        let before = (r.digest, r.count);
        if r.count > 0 && r.digest == digest {
            r.count += 1;
        } else {
            (r.digest, r.count) = (digest, 1);
        }
        (r.before_digest, r.before_count, r.message) = (before.0, before.1, message.id.0);
        let count = r.count;
        if count < limit {
            return false;
        }
        self.repeats = None;
        let text = said;
        t.events.push(self.event(now, Some(persona), EventKind::LoopDetected { count, text: text.clone() }));
        self.freeze(now, message.written_at, format!("the same message came {count} times in a row"), ctx);
        let mut values = self.common_values(ctx, persona);
        values.extend([("count", count.to_string()), ("text", text)]);
        let message = ctx.config.templates.render(Template::LoopDetected, &values);
        self.post(t, now, message, None, None, true);
        true
    }

    /// Auto-detection: the holder spoke and then stayed silent until `silence_at`; its turn ends there, like a
    /// signal, not counted as a timeout, and said in one short line like every recovery rule (spec 4.2).
    pub(super) fn end_by_silence(
        &mut self,
        holder: &PersonaId,
        silence_at: DateTime<Utc>,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let silent_seconds = u64::from(ctx.config.signals.recovery.silence_seconds.unwrap_or_default());
        let next = self.following(holder);
        t.events.push(self.event(now, Some(holder), EventKind::TurnSilent { silent_seconds, next_agent: next }));
        self.announce_about(t, ctx, Template::Silent, holder, now, &[("seconds", silent_seconds.to_string())]);
        self.agents.entry(holder.clone()).or_default().consecutive_timeouts = 0;
        self.end_turn(MessageId::first_at(silence_at));
        self.advance(now, ctx, t);
    }

    /// Pauses the session by itself (an escalation, a loop), keeping the turn's remaining time, with `reason` for
    /// `status`. A manager's `resume` gives the holder a fresh turn. Paused during the grace period (past the
    /// deadline), the remaining time is negative, down to minus the grace: `resume` puts the deadline back where it
    /// was, and the grace goes on. What the holder wrote from `from` on (when the message that paused it was
    /// written) is held, also when handled after the `resume`.
    pub(super) fn freeze(&mut self, now: DateTime<Utc>, from: DateTime<Utc>, reason: String, ctx: Context) {
        self.stop_clock(now, from.min(now), ctx);
        self.pause_reason = Some(reason.into());
        self.pause_toggled_at = self.pause_toggled_at.max(Some(MessageId::first_at(now)));
    }

    /// Pauses a running session from `now`, keeping the turn's remaining time (see [`Session::freeze`]); messages
    /// written from `from` on are held.
    pub(super) fn stop_clock(&mut self, now: DateTime<Utc>, from: DateTime<Utc>, ctx: Context) {
        if self.status == SessionStatus::Running {
            let grace_ms = i64::from(ctx.config.signals.recovery.grace_seconds) * 1000;
            // A turn whose announcement is still on its way has not begun: it keeps all of its time.
            let deadline = self.deadline_seen_at(now).unwrap_or_else(|| self.deadline_or_rebuilt(now));
            let remaining_ms = (deadline - now).num_milliseconds().max(-grace_ms);
            self.status = SessionStatus::Paused;
            self.paused_at = Some(now);
            self.paused_remaining_ms = Some(remaining_ms);
            self.turn_timeout_at = None;
            self.pause_begins(from);
        }
    }
}
