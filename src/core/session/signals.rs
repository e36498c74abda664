//! What the floor holder's message does (spec 4.2): the winning rule's action, or, without a signal, auto-detection;
//! and unknown-signal recovery, without a signal or beside one that leaves the turn going.

use super::history::{EventKind, Kept, Routed, TaskFinished};
use super::{Context, IncomingMessage, ProgressMark, Session, SessionStatus, TASKS_KEPT, TaskState, Transition};
use crate::core::ids::PersonaId;
use crate::core::signals::{Action, Detected, percent, text::trim_blank};
use crate::core::templates::Template;
use chrono::{DateTime, Utc};

impl Session {
    /// A message written by the floor holder during its turn (`written`, on Discord's clock: an edit's own time).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn turn_message(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        detected: Option<Detected>,
        written: DateTime<Utc>,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let held = match self.status {
            SessionStatus::Paused => !self.ends_turn_before_the_pause(message, &detected, ctx),
            _ => self.written_while_paused(message),
        };
        if held {
            self.hold(message, persona, detected, now, ctx, t);
            if self.status == SessionStatus::Running && std::mem::take(&mut self.signal_held) {
                // Written while paused, handled after the `resume` (a reordered dispatch): asked again now, as that
                // `resume` would have asked it.
                self.ask_again(persona.clone(), now, ctx, t);
            }
            return;
        }
        let said = |d: &Option<Detected>| match d {
            Some(d) if matches!(d.rule.action, Action::Keep { .. } | Action::Escalate) => {
                format!("{}: {}", d.rule.name, d.payload.as_deref().unwrap_or_default())
            }
            Some(d) => d.display.clone().unwrap_or_default(),
            None => trim_blank(&message.text).to_owned(),
        };
        let watch_loops = ctx.config.signals.recovery.loop_after > 0;
        if watch_loops && self.repeated(said(&detected), persona, message, now, ctx, t) {
            // The session is paused; the message is shown as a signal would be, but does nothing.
            match detected {
                Some(d) => self.show_stripped(t, message, persona, d.display, d.stripped, false),
                None => self.remember_editable(message.id),
            }
            return;
        }
        let Some(d) = detected else {
            self.plain_message(message, persona, now, ctx, t);
            return;
        };
        self.agents.entry(persona.clone()).or_default().unknown_signals = 0;
        let started = self.turn_started_at;
        self.act_on_signal(message, persona, d, now, ctx, t);
        if !self.turn_goes_on(persona, started) {
            return;
        }
        if message.edited && self.editable_messages.contains(&message.id) {
            // Its edits are still followed (it stays as written): a streaming agent's edits pass through such lines
            // on their way to the next signal, so the line waits until the message is quiet, as any line an edit
            // leaves.
            self.edited_signal_like(message, persona, written, ctx, t);
        } else {
            // A new message, or an edit that leaves nothing to follow (relayed, or its handoff refused): no later
            // edit can take the line away.
            self.answer_a_mistyped_line_beside_the_signal(message, persona, now, ctx, t);
        }
    }

    /// The winning rule's action (spec 4.2's table).
    fn act_on_signal(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        d: Detected,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let signal = d.rule.name.clone();
        let task = d.task.clone().or_else(|| d.payload.clone());
        match d.rule.action.clone() {
            Action::Complete => self.complete(message, persona, signal, d.display, d.stripped, now, ctx, t),
            Action::Pass => {
                self.show_stripped(t, message, persona, None, true, true);
                let next = self.following(persona);
                let kind = EventKind::Passed { message_id: message.id, signal: signal.into(), next_agent: next };
                t.events.push(self.event(now, Some(persona), kind));
                self.announce_about(t, ctx, Template::Passed, persona, now, &[]);
                self.end_turn(message.turn_ends_at());
                self.advance(now, ctx, t);
            }
            Action::Handoff { to } => {
                // The persona the payload names, or else the rule's `to` (spec 4.2): a payload naming nobody in the
                // session goes to `to` when there is one (it may be a reason), else it is refused. Before, `to` won
                // over a payload naming another persona (found by a review).
                let payload_names = d.payload.as_deref().is_some_and(|p| self.roster_member_named(p, ctx).is_some());
                let named = match (to, d.payload) {
                    (Some(to), _) if !payload_names => to.to_string(),
                    (_, payload) => payload.unwrap_or_default(),
                };
                let target = match self.roster_member_named(&named, ctx) {
                    Some(target) if target != *persona => target,
                    found => {
                        // A handoff to oneself would be a fresh deadline as often as asked: `keep` (with its
                        // `maxKeeps`) is the way to more time.
                        let (template, named) = match found {
                            Some(holder) => (Template::HandoffToSelf, holder.to_string()),
                            None => (Template::HandoffRefused, named),
                        };
                        return self.refuse_transfer(message, persona, signal, named, template, now, ctx, t);
                    }
                };
                self.show_stripped(t, message, persona, d.display, d.stripped, true);
                let kind =
                    EventKind::HandedOff { message_id: message.id, signal: signal.into(), next_agent: target.clone() };
                t.events.push(self.event(now, Some(persona), kind));
                let extra = [("target", target.to_string())];
                self.announce_about(t, ctx, Template::HandedOff, persona, now, &extra);
                self.end_turn(message.turn_ends_at());
                self.transfer(persona, target, now, ctx, t);
            }
            Action::Route { to, stage } => {
                if !self.roster.contains(&to) {
                    let to = to.to_string();
                    return self.refuse_transfer(message, persona, signal, to, Template::HandoffRefused, now, ctx, t);
                }
                self.show_stripped(t, message, persona, d.display, d.stripped, true);
                if let Some(task) = &task {
                    let state = TaskState { stage: stage.clone(), holder: Some(to.clone()), updated_at: now };
                    self.set_task(task, state);
                }
                let kind = EventKind::Routed(Box::new(Routed {
                    message_id: message.id,
                    signal,
                    task: task.clone(),
                    stage: stage.clone(),
                    next_agent: to.clone(),
                }));
                t.events.push(self.event(now, Some(persona), kind));
                let extra =
                    [("task", task.unwrap_or_else(|| "?".into())), ("stage", stage), ("target", to.to_string())];
                self.announce_about(t, ctx, Template::Routed, persona, now, &extra);
                self.end_turn(message.turn_ends_at());
                self.transfer(persona, to, now, ctx, t);
            }
            Action::FinishTask { to } => {
                self.show_stripped(t, message, persona, d.display, d.stripped, true);
                let task = task.unwrap_or_else(|| "?".into());
                self.set_task(&task, TaskState { stage: "done".into(), holder: None, updated_at: now });
                let target = to.filter(|p| self.roster.contains(p));
                let next = target.clone().unwrap_or_else(|| self.following(persona));
                let kind = EventKind::TaskFinished(Box::new(TaskFinished {
                    message_id: message.id,
                    signal,
                    task: task.clone(),
                    next_agent: next.clone(),
                }));
                t.events.push(self.event(now, Some(persona), kind));
                let extra = [("task", task), ("target", next.to_string())];
                self.announce_about(t, ctx, Template::TaskFinished, persona, now, &extra);
                self.end_turn(message.turn_ends_at());
                match target {
                    Some(target) => self.transfer(persona, target, now, ctx, t),
                    None => self.advance(now, ctx, t),
                }
            }
            Action::Keep { max_keeps } => {
                if self.keeps_in_row >= max_keeps {
                    let extra = [("maxKeeps", max_keeps.to_string())];
                    self.announce_about(t, ctx, Template::KeepsUsed, persona, now, &extra);
                    return self.complete(message, persona, signal, d.display, d.stripped, now, ctx, t);
                }
                self.keeps_in_row += 1;
                let count = self.keeps_in_row;
                self.show_stripped(t, message, persona, d.display, d.stripped, false);
                let kind = EventKind::Kept(Box::new(Kept {
                    message_id: message.id,
                    signal,
                    reason: d.payload.clone(),
                    count,
                }));
                t.events.push(self.event(now, Some(persona), kind));
                self.end_turn(message.turn_ends_at());
                let extra = [
                    ("count", count.to_string()),
                    ("maxKeeps", max_keeps.to_string()),
                    ("reason", d.payload.unwrap_or_default()),
                ];
                self.begin_turn_as(persona.clone(), Template::Kept, &extra, 0, now, ctx, t);
            }
            Action::Progress { extend_seconds } => {
                self.show_stripped(t, message, persona, d.display, d.stripped, false);
                self.remember_editable_after_signal(message, persona, d.stripped, ctx);
                let figure = d.payload.as_deref().and_then(percent);
                if let Some(figure) = figure {
                    self.progress = Some(Box::new(ProgressMark { agent: persona.clone(), percent: figure, at: now }));
                }
                let extended = if extend_seconds > 0 && !self.turn_progress_extended {
                    self.turn_progress_extended = true;
                    self.extend_turn(extend_seconds);
                    extend_seconds
                } else {
                    0
                };
                let kind =
                    EventKind::Progress { message_id: message.id, signal, percent: figure, extended_seconds: extended };
                t.events.push(self.event(now, Some(persona), kind));
                if let Some(figure) = figure {
                    let extra =
                        [("percent", figure.to_string()), ("remaining", self.remaining_seconds(now).to_string())];
                    self.announce_about(t, ctx, Template::Progress, persona, now, &extra);
                }
            }
            Action::Escalate => {
                self.show_stripped(t, message, persona, d.display, d.stripped, false);
                let reason = d.payload.clone().unwrap_or_else(|| signal.clone());
                let kind =
                    EventKind::Escalated { message_id: message.id, signal: signal.as_str().into(), reason: d.payload };
                t.events.push(self.event(now, Some(persona), kind));
                self.freeze(now, message.written_at, format!("{persona} escalated ({signal}): {reason}"), ctx);
                let mut values = self.common_values(ctx, persona);
                values.extend([("reason", reason), ("signal", signal)]);
                let text = ctx.config.templates.render(Template::Escalated, &values);
                self.post(t, now, text, None, None, true);
            }
            Action::Record => {
                self.show_stripped(t, message, persona, d.display, d.stripped, false);
                self.remember_editable_after_signal(message, persona, d.stripped, ctx);
                let kind = EventKind::Recorded {
                    message_id: message.id,
                    signal: signal.as_str().into(),
                    payload: d.payload.clone(),
                };
                t.events.push(self.event(now, Some(persona), kind));
                let extra = [("signal", signal), ("payload", d.payload.unwrap_or_default())];
                self.announce_about(t, ctx, Template::Recorded, persona, now, &extra);
            }
            Action::End => {
                self.show_stripped(t, message, persona, d.display, d.stripped, true);
                let kind = EventKind::SessionEnded { reason: format!("{signal} from {persona}") };
                t.events.push(self.event(now, Some(persona), kind));
                let extra = [("signal", signal)];
                self.announce_about(t, ctx, Template::SessionEnded, persona, now, &extra);
                self.end_turn(message.turn_ends_at());
                self.close();
                self.ended_on_purpose = true;
            }
        }
    }

    /// Whether `persona`'s turn that began at `started` still runs: its signal left it going (a record, a progress,
    /// a refused handoff), rather than ending or keeping it, or pausing the session (an escalation).
    fn turn_goes_on(&self, persona: &PersonaId, started: Option<DateTime<Utc>>) -> bool {
        self.status == SessionStatus::Running
            && self.active_agent.as_ref() == Some(persona)
            && self.turn_started_at == started
    }

    /// A line beside the signal just acted on that looks like a signal and is none (`CHECKPOINT: step-1` then
    /// `READY_FOR_REVEIW: task-1`) is an unknown signal as in a message with no signal (spec 4.2): answered, and
    /// counted toward `unknownLimit` from the row the signal broke, so the reply says "1 of 3" (found by a review: it
    /// went unanswered and the turn timed out). Beside a refused handoff it is said in the refusal's reply, so that
    /// the agent is pinged once. A line beside a signal that ended the turn is not answered: the reply would mention
    /// the agent while another persona holds the floor.
    fn answer_a_mistyped_line_beside_the_signal(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let signals = &ctx.config.signals;
        let limit = signals.recovery.unknown_limit;
        let Some(line) = signals.signal_like(&message.text, persona).filter(|_| limit > 0) else { return };
        // An edit that adds the signal keeps a line answered for the message before: not answered, nor counted,
        // again (found by a review).
        if self.answered_already(message.id, &line) {
            return;
        }
        // Not remembered as editable: the signal acted on decided that already (a relayed one's message is gone).
        self.unknown_signal(message.id, message.turn_ends_at(), persona, line, limit, now, ctx, t);
    }

    /// Whether a message handled while a manager's pause holds ends the turn all the same: it was written before the
    /// pause was given (spec 5.7: judged by when it was written) and its signal (or completion phrase) ends the turn.
    /// The floor then moves, and the next turn waits, unannounced, for `resume`. What would go on within the turn
    /// (a keep, progress, an escalation, a record) is held as any signal during a pause. A pause the session took by
    /// itself (an escalation, a loop, a refused announcement) followed the messages it was decided on: it holds all.
    fn ends_turn_before_the_pause(&self, message: &IncomingMessage, detected: &Option<Detected>, ctx: Context) -> bool {
        // Before this pause, and not during an earlier one that a `resume` ended since (held as it was written).
        let before = self.pause_reason.is_none()
            && self.paused_at.is_some_and(|paused| message.written_at < paused)
            && !self.written_while_paused(message);
        let ends = match detected {
            Some(d) => d.rule.action.ends_the_turn(),
            None => ctx.config.signals.completion_phrase(&message.text).is_some(),
        };
        before && ends
    }

    /// The holder's message while the session is paused (by a manager, an escalation or a loop): nothing acts on
    /// it, whatever it says: no turn end, no task moved, no keep, progress, escalation or end, no unknown-signal
    /// reply, no loop counting. A signal is shown as any signal is (stripped, so none stays visible in relay mode)
    /// and recorded as held; `resume` then asks the holder again.
    #[allow(clippy::too_many_arguments)]
    fn hold(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        detected: Option<Detected>,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let signal = match detected {
            Some(d) => {
                self.show_stripped(t, message, persona, d.display, d.stripped, false);
                d.rule.name.clone()
            }
            None => match ctx.config.signals.completion_phrase(&message.text) {
                Some(phrase) => phrase.to_owned(),
                None => return self.remember_editable(message.id),
            },
        };
        // Asked again (at `resume`, or now if the session runs) unless it was called on since it wrote this.
        self.signal_held |= !self.called_since(message);
        let kind = EventKind::SignalHeld { message_id: message.id, signal: signal.into() };
        t.events.push(self.event(now, Some(persona), kind));
    }

    /// The turn ends by the holder's signal (a `complete` rule, a completion phrase, or keeps used up).
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        keyword: String,
        display: Option<String>,
        stripped: bool,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        self.show_stripped(t, message, persona, display, stripped, true);
        let next = self.following(persona);
        let kind = EventKind::TurnComplete { message_id: message.id, keyword, next_agent: next };
        t.events.push(self.event(now, Some(persona), kind));
        self.end_turn(message.turn_ends_at());
        self.advance(now, ctx, t);
    }

    /// A holder's message with no signal: a completion phrase ends the turn (auto-detection); a line that looks like
    /// a signal gets a reply (unknown-signal recovery); anything else is the turn going on.
    fn plain_message(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let signals = &ctx.config.signals;
        if let Some(phrase) = signals.completion_phrase(&message.text) {
            self.agents.entry(persona.clone()).or_default().consecutive_timeouts = 0;
            return self.complete(message, persona, phrase.to_owned(), None, false, now, ctx, t);
        }
        let limit = signals.recovery.unknown_limit;
        match signals.signal_like(&message.text, persona).filter(|_| limit > 0) {
            Some(line) => {
                if self.unknown_signal(message.id, message.id, persona, line, limit, now, ctx, t) {
                    self.remember_editable(message.id);
                }
            }
            None => {
                // A message with no line that looks like a signal breaks the row of unknown ones.
                if let Some(agent) = self.agents.get_mut(persona) {
                    agent.unknown_signals = 0;
                }
                self.remember_editable(message.id);
            }
        }
    }

    /// A handoff or route to a persona not in the session, or a handoff to the holder itself: a reply to the agent
    /// (`template`), and its turn goes on.
    #[allow(clippy::too_many_arguments)]
    fn refuse_transfer(
        &mut self,
        message: &IncomingMessage,
        persona: &PersonaId,
        signal: String,
        target: String,
        template: Template,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        let kind = EventKind::HandoffRefused { message_id: message.id, signal: signal.into(), target: target.clone() };
        t.events.push(self.event(now, Some(persona), kind));
        let mut values = self.common_values(ctx, persona);
        values.push(("target", if target.is_empty() { "persona named".into() } else { target }));
        let text = ctx.config.templates.render(template, &values);
        self.reply(t, now, text, persona, message.id, ctx);
    }

    /// Hands the floor straight to `target` (a handoff or a route): a new round when it comes before the holder in
    /// the roster's order. A benched target is back in the rotation: someone chose it.
    fn transfer(
        &mut self,
        holder: &PersonaId,
        target: PersonaId,
        now: DateTime<Utc>,
        ctx: Context,
        t: &mut Transition,
    ) {
        if self.agents.get(&target).is_some_and(|a| a.benched) {
            self.unbench(&target, "handed the floor", now, ctx, t);
        }
        let position = |p: &PersonaId| self.roster.iter().position(|q| q == p);
        let wraps = matches!((position(holder), position(&target)), (Some(h), Some(n)) if n < h);
        self.move_floor(target, wraps, now, ctx, t);
    }

    /// The roster member a handoff names, by id or display name (any case; a display name two members share names
    /// neither).
    fn roster_member_named(&self, named: &str, ctx: Context) -> Option<PersonaId> {
        let named = named.trim().trim_start_matches('@');
        if let Ok(persona) = ctx.personas.resolve(named) {
            return self.roster.contains(&persona.id).then(|| persona.id.clone());
        }
        // In any case, accented letters too (found by a review: `élodie` did not name `Élodie`), and spaced as
        // display names are kept (as Discord shows them).
        let named = crate::core::persona::as_discord_shows(named).to_lowercase();
        let mut by_name = self
            .roster
            .iter()
            .filter(|member| ctx.personas.get(member).is_some_and(|p| p.display_name.to_lowercase() == named));
        match (by_name.next(), by_name.next()) {
            (Some(member), None) => Some(member.clone()),
            _ => None,
        }
    }

    /// Records a task's new state, keeping at most [`TASKS_KEPT`]: the oldest finished tasks go first.
    fn set_task(&mut self, task: &str, state: TaskState) {
        self.tasks.insert(task.to_owned(), state);
        while self.tasks.len() > TASKS_KEPT {
            let oldest = self
                .tasks
                .iter()
                .min_by_key(|(_, s)| (s.holder.is_some(), s.updated_at))
                .map(|(id, _)| id.clone())
                .expect("not empty");
            self.tasks.remove(&oldest);
        }
    }

    /// Moves the running turn's deadline (or the paused remaining time) by `added` seconds.
    pub(super) fn extend_turn(&mut self, added: u32) {
        self.turn_extended_seconds += u64::from(added);
        match self.status {
            SessionStatus::Paused => *self.paused_remaining_ms.get_or_insert(0) += i64::from(added) * 1000,
            _ => self.turn_timeout_at = self.turn_timeout_at.map(|d| d + super::seconds(u64::from(added))),
        }
    }
}
