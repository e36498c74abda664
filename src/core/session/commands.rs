//! Commands that people steer a session with (spec 7): start, stop, pause, resume, skip, give, extend and roster
//! changes. Who may run them is the Discord layer's concern; this file decides what they do.

use super::effects;
use super::history::{EventKind, join_ids};
use super::{Context, DisplayMode, Refusal, Session, SessionStatus, Transition, seconds, whole_millis};
use crate::core::ids::{GuildId, MessageId, PersonaId};
use crate::core::persona::{TIMEOUT_SECONDS_MAX, TIMEOUT_SECONDS_MIN};
use crate::core::templates::Template;
use chrono::{DateTime, Utc};

/// A command as a person gave it; persona names are resolved (and refused when unknown) here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Start a session; an empty roster means every persona in default order.
    Start {
        roster: Vec<String>,
    },
    Stop,
    Pause,
    Resume,
    Skip,
    Give {
        persona: String,
    },
    Extend {
        seconds: i64,
    },
    Order {
        roster: Vec<String>,
    },
    Add {
        persona: String,
    },
    Remove {
        persona: String,
    },
}

impl Command {
    /// The command's word, as a person types it.
    pub fn word(&self) -> &'static str {
        match self {
            Command::Start { .. } => "start",
            Command::Stop => "stop",
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Skip => "skip",
            Command::Give { .. } => "give",
            Command::Extend { .. } => "extend",
            Command::Order { .. } => "order",
            Command::Add { .. } => "add",
            Command::Remove { .. } => "remove",
        }
    }
}

impl Session {
    /// Runs a command. A refusal says why, for the person who gave the command.
    ///
    /// `origin` is the snowflake of the command message or interaction: when the command ends a turn (`skip`,
    /// `give`, a roster change that moves the floor), it marks that end in Discord's clock, so the holder's messages
    /// written before it stay in turn however late they are handled. `None` marks the end at `now`. A command
    /// delivered twice is the Discord layer's to drop: the core runs what it is given.
    ///
    /// All or nothing: the command runs on a copy, kept only if it is accepted (a refused `pause` or `resume` is
    /// still noted as given, see `pause_toggled_at`). A refusal may come after the
    /// command has begun (an overdue turn is timed out first, then a typo is found), and a session changed by a
    /// refused command would be neither saved nor announced: a timeout nobody hears of, a deadline never armed.
    pub fn handle_command(
        &mut self,
        command: &Command,
        origin: Option<MessageId>,
        now: DateTime<Utc>,
        ctx: Context,
    ) -> Result<Transition, Refusal> {
        let mut next = self.clone();
        let outcome = next.apply_command(command, origin, now, ctx);
        if outcome.is_ok() {
            *self = next;
        }
        if matches!(command, Command::Pause | Command::Resume) {
            // Refused too: a `resume` refused as the session was not paused yet still outranks the `pause` given
            // before it that is handled after it.
            self.pause_toggled_at = self.pause_toggled_at.max(origin);
        }
        outcome
    }

    fn apply_command(
        &mut self,
        command: &Command,
        origin: Option<MessageId>,
        now: DateTime<Utc>,
        ctx: Context,
    ) -> Result<Transition, Refusal> {
        let now = whole_millis(now);
        let mut t = Transition::default();
        let turn_end = origin.unwrap_or_else(|| MessageId::first_at(now));
        // Judged by when it was given, like a message: a turn whose deadline had passed by then ends first, and the
        // command applies to the turn that follows; one given in time finds the turn still running, however late
        // it is handled. Discord's clock running ahead of ours must not put it after our present.
        let given = origin.map_or(now, |id| whole_millis(id.created_at()).min(now));
        if let Command::Start { roster } = command {
            if let Some(refusal) = self.given_before_the_session_ended(origin) {
                return Err(refusal);
            }
            // A session whose last round ran out before the `start` was given had ended by then, though its
            // deadline's tick is not handled yet (a catch-up holding it): the `start` finds it ended (found by a
            // review). Any other overdue turn ends too, and the `start` is refused as the session runs on.
            if self.is_active() {
                self.expire_if_due(given, now, ctx, &mut t);
            }
            let started = self.start(roster, turn_end, now, ctx, t)?;
            // Only a `start` given in Discord (its own snowflake) dates the session on Discord's clock: one from the
            // configuration, dated by ours, would refuse commands given just after it if ours ran ahead.
            self.bounded_by = origin;
            return Ok(started);
        }
        if !self.is_active() {
            // Both forms: the core does not know which one the command came in.
            return Err(refuse("No session is running here. Start one with `/turn start` or `!turn start`."));
        }
        if let Some(refusal) = self.given_before_the_session_began(command, origin) {
            return Err(refusal);
        }
        self.expire_if_due(given, now, ctx, &mut t);
        if !self.is_active() {
            // That turn's end ended the session (`maxRounds`) before the command was given: it finds nothing to act
            // on, and is not answered "Done." (a typo would go unnoticed). The turn's end is the deadline's, which
            // the actor's timer carries out at once, the copy ended here being dropped (found by a review).
            return Err(refuse(
                "The session had ended before this command was given: its last round was over. Start a new one with \
                 `start`.",
            ));
        }
        let active = self.active_agent.clone().expect("an active session has an active persona");
        if let Some(refusal) = self.given_in_an_earlier_turn(command, origin, &active) {
            return Err(refusal);
        }
        if let Some(refusal) = self.overtaken_by_a_later_pause_or_resume(command, origin) {
            return Err(refusal);
        }
        match command {
            Command::Start { .. } => unreachable!("handled above"),
            Command::Stop => {
                self.stop(now, ctx, &mut t);
                self.ended_on_purpose = true;
            }
            Command::Pause => {
                if self.status == SessionStatus::Paused {
                    return Err(refuse("The session is already paused. Use `resume` to go on."));
                }
                // The turn stopped running when the pause was given, not when it was handled (possibly past the
                // deadline); a turn begun after that was paused from its start (not from a start ahead of our
                // clock, when Discord's runs ahead).
                let paused_from = given.max(self.turn_started_at.unwrap_or(given)).min(now);
                self.stop_clock(paused_from, paused_from, ctx);
                // Noted as given (its snowflake), not as from when the turn it froze began: a `resume` given after
                // it, though before that turn began, is later and is not refused as overtaken.
                self.pause_toggled_at = self.pause_toggled_at.max(Some(turn_end));
                self.pause_reason = None;
                self.announce_about(&mut t, ctx, Template::Paused, &active, now, &[]);
                let kind = EventKind::Paused { remaining_seconds: self.remaining_seconds(now) };
                t.events.push(self.event(now, Some(&active), kind));
            }
            Command::Resume => {
                if self.status != SessionStatus::Paused {
                    return Err(refuse("The session is not paused."));
                }
                // Noted now, not only once the command is kept: an announcement of this resume is no earlier than it
                // on Discord's clock (see `holder_called_at`).
                self.pause_toggled_at = self.pause_toggled_at.max(Some(turn_end));
                let called_for_people = self.pause_reason.take().is_some();
                // A signal held during the pause was not acted on: the holder is asked again.
                let asked_again = std::mem::take(&mut self.signal_held);
                let paused_at = self.paused_at.take().unwrap_or(now);
                let remaining_ms = self.paused_remaining_ms.take().unwrap_or(0);
                self.status = SessionStatus::Running;
                self.agents.entry(active.clone()).or_default().silence_from = Some(now);
                if self.turn_announced && !self.awaiting_floor_announcement() {
                    self.turn_paused_ms += (now - paused_at).num_milliseconds();
                } else {
                    // The turn began during the pause, or its announcement is still on its way (its time was kept
                    // whole at the pause): it begins now, and moves again to when Discord accepts the announcement.
                    self.turn_started_at = Some(now);
                    self.turn_paused_ms = 0;
                    if !self.turn_announced {
                        self.floor_reaches_holder(now);
                    }
                }
                self.turn_timeout_at = Some(now + chrono::TimeDelta::milliseconds(remaining_ms));
                let fresh = called_for_people || asked_again;
                if fresh {
                    // The holder paused the session to ask for a person (or looped), or signalled while paused: a
                    // fresh turn, announced with a mention so that it reads the answer (or signals again) and goes
                    // on; that announcement says all a resume would.
                    self.ask_again(active.clone(), now, ctx, &mut t);
                }
                let kind = EventKind::Resumed { remaining_seconds: self.remaining_seconds(now) };
                t.events.push(self.event(now, Some(&active), kind));
                if !fresh {
                    self.announce_about(&mut t, ctx, Template::Resumed, &active, now, &[]);
                    if !self.turn_announced {
                        self.announce_turn(ctx, &mut t, now);
                    }
                }
                self.pause_ends(turn_end);
            }
            Command::Skip => {
                let next = self.following(&active);
                t.events.push(self.event(now, Some(&active), EventKind::Skipped { next_agent: next }));
                self.announce_about(&mut t, ctx, Template::Skipped, &active, now, &[]);
                self.end_turn_by_command(turn_end);
                self.advance(now, ctx, &mut t);
            }
            Command::Give { persona } => {
                let persona = self.roster_member(persona, ctx)?;
                if persona == active {
                    return Err(refuse(&format!("{persona} already has the floor.")));
                }
                let kind = EventKind::FloorGiven { from: Some(active) };
                t.events.push(self.event(now, Some(&persona), kind));
                self.announce_about(&mut t, ctx, Template::FloorGiven, &persona, now, &[]);
                self.end_turn_by_command(turn_end);
                self.begin_turn(persona, now, ctx, &mut t);
            }
            Command::Extend { seconds: added } => {
                if !(TIMEOUT_SECONDS_MIN..=TIMEOUT_SECONDS_MAX).contains(added) {
                    return Err(refuse(&format!(
                        "Extend by {TIMEOUT_SECONDS_MIN} to {TIMEOUT_SECONDS_MAX} seconds, not {added}."
                    )));
                }
                let added = *added as u32;
                self.extend_turn(added);
                t.events.push(self.event(now, Some(&active), EventKind::Extended { seconds: added }));
                let extra = [("seconds", added.to_string())];
                self.announce_about(&mut t, ctx, Template::Extended, &active, now, &extra);
            }
            Command::Order { roster } => {
                let roster = resolve_roster(roster, ctx)?;
                if roster.is_empty() {
                    return Err(refuse("Name the personas in their new order, e.g. `order pm dev critic`."));
                }
                self.roster = roster;
                self.roster_changed(now, ctx, &mut t);
                if !self.roster.contains(&active) {
                    self.end_turn_by_command(turn_end);
                    // The first of the new order still in the rotation: a benched persona waits to speak or be added.
                    let (first, _) = self.first_in_rotation_from(0);
                    self.begin_turn(first, now, ctx, &mut t);
                }
            }
            Command::Add { persona } => {
                let persona = ctx.personas.resolve(persona).map_err(|e| refuse(&e))?.id.clone();
                if self.agents.get(&persona).is_some_and(|a| a.benched) && self.roster.contains(&persona) {
                    self.unbench(&persona, "added back", now, ctx, &mut t);
                    return Ok(self.finish(t, ctx));
                }
                if self.roster.contains(&persona) {
                    return Err(refuse(&format!("{persona} is already in the roster ({}).", join_ids(&self.roster))));
                }
                self.roster.push(persona.clone());
                self.roster_changed(now, ctx, &mut t);
                // Benched before it was removed: adding it back brings it back into the rotation.
                self.unbench(&persona, "added back", now, ctx, &mut t);
            }
            Command::Remove { persona } => {
                let persona = self.roster_member(persona, ctx)?;
                if self.roster.len() == 1 {
                    return Err(refuse(&format!("{persona} is the only persona left; use `stop` to end the session.")));
                }
                let index = self.roster.iter().position(|p| *p == persona).expect("checked membership");
                self.roster.remove(index);
                self.roster_changed(now, ctx, &mut t);
                if persona == active {
                    // The floor goes to whoever came after the removed persona, the benched skipped as in any turn.
                    self.end_turn_by_command(turn_end);
                    // Past the end of the roster the floor wraps: a new round, which `maxRounds` may not allow.
                    let (next, wraps) = self.first_in_rotation_from(index);
                    self.move_floor(next, wraps, now, ctx, &mut t);
                }
            }
        }
        if !self.is_active() {
            // Ended by this command (a `stop`, or a `skip`, `give` or `remove` that finished the last round): marks
            // the end for a `start` given before it (see `given_before_the_session_ended`).
            self.bounded_by = origin;
        }
        Ok(self.finish(t, ctx))
    }

    /// Ends the holder's turn by a manager's command (`skip`, `give`, an `order` or `remove` moving the floor, its
    /// persona file gone). That turn did not time out, so it breaks the holder's row of timeouts (spec 4.2, strikes:
    /// benched after `benchAfter` timeouts *in a row*; found by a review: timeout, timeout, skipped, timeout benched
    /// it). Not in `end_turn`, which the unknown-signal failure calls right after the strike that counts its turn.
    fn end_turn_by_command(&mut self, turn_end: MessageId) {
        if let Some(holder) = self.active_agent.as_ref().and_then(|a| self.agents.get_mut(a)) {
            holder.consecutive_timeouts = 0;
        }
        self.end_turn(turn_end);
    }

    /// A command about the current turn (`skip`, `extend`) given before the floor last moved was about a turn that
    /// is over: a signal, another command or a deadline ended it first (spec 8: racing turn ends are one, never two).
    /// It is refused rather than applied to a turn its author had not seen begin.
    fn given_in_an_earlier_turn(
        &self,
        command: &Command,
        origin: Option<MessageId>,
        active: &PersonaId,
    ) -> Option<Refusal> {
        let what = match command {
            Command::Skip | Command::Extend { .. } => command.word(),
            _ => return None,
        };
        let (given, moved) = (origin?, self.floor_moved_at?);
        (given < moved).then(|| {
            refuse(&format!(
                "Not done: the turn that `{what}` was given in had already ended when it reached me, and {active} \
                 has the floor now. Give it again to {what} {active}'s turn."
            ))
        })
    }

    /// A command given before the `start` of the running session, handled after it (delivered late: poise took
    /// longer over it, or the gateway delivered it again after a reconnect), was about the session before: a `stop`
    /// would end the new session its author had not seen begin.
    fn given_before_the_session_began(&self, command: &Command, origin: Option<MessageId>) -> Option<Refusal> {
        let (given, began) = (origin?, self.bounded_by?);
        (given < began).then(|| {
            refuse(&format!(
                "Not done: this `{}` was given before the session running now was started. Give it again if you \
                 still want it.",
                command.word()
            ))
        })
    }

    /// A `start` given while the session before was running, handled after the command given after it that ended
    /// it (a `stop`, or one that finished the last round): given in order, it would have been refused as the session
    /// was running, and it must not start a session nobody asked for after that (found by a review; the mirror of
    /// `given_before_the_session_began`).
    fn given_before_the_session_ended(&self, origin: Option<MessageId>) -> Option<Refusal> {
        if self.is_active() {
            return None;
        }
        // A start from the configuration (no message gave it) of a session ended on purpose: a restart must not undo
        // a manager's `stop` (found by a review: every restart started it again and called its agents).
        if origin.is_none() && self.stays_stopped() {
            return Some(refuse(
                "The session here was ended on purpose (a stop, an end signal or maxRounds): the configuration does not \
                 start it again; `start` in the channel does.",
            ));
        }
        let (given, stopped) = (origin?, self.bounded_by?);
        (given < stopped).then(|| {
            refuse(
                "Not done: this `start` was given while the session before was still running, and that session has \
                 ended since. Give it again to start a new one.",
            )
        })
    }

    /// A `pause` or `resume` given before the session was last paused or resumed, or before another `pause` or
    /// `resume` was given, was overtaken on its way (poise took longer over it than the actor waits, 3 s): it is
    /// refused, so that the session is left as the later change left it. Applied late, a `pause` would pause a
    /// session that the `resume` given after it set going, with the time left from before that `resume`; a `resume`
    /// would end an escalation's pause that its author had not seen.
    fn overtaken_by_a_later_pause_or_resume(&self, command: &Command, origin: Option<MessageId>) -> Option<Refusal> {
        let what = match command {
            Command::Pause | Command::Resume => command.word(),
            _ => return None,
        };
        let (given, newest) = (origin?, self.pause_toggled_at?);
        let state = if self.status == SessionStatus::Paused { "paused" } else { "running" };
        (given < newest).then(|| {
            refuse(&format!(
                "Not done: the session was paused or resumed after this `{what}` was given, and it is {state} now. \
                 Give `{what}` again if you still want it."
            ))
        })
    }

    /// Records the channel's server, as the Discord layer found it (saved with the next save: it is found again if
    /// lost).
    pub fn set_guild(&mut self, guild: GuildId) -> Transition {
        let changed = self.guild_id.replace(guild) != Some(guild);
        Transition { changed, ..Transition::default() }
    }

    /// Sets how messages are shown, as the Discord layer found from its permissions.
    pub fn set_display_mode(&mut self, mode: DisplayMode, now: DateTime<Utc>, ctx: Context) -> Transition {
        if self.display_mode == mode {
            return Transition::default();
        }
        self.display_mode = mode;
        let t = Transition {
            events: vec![self.event(whole_millis(now), None, EventKind::DisplayModeChanged { mode })],
            ..Transition::default()
        };
        self.finish(t, ctx)
    }

    /// After the personas changed (a restart with other persona files): drops roster members that no longer exist
    /// and, if the holder is gone, passes the floor as `remove` does: to the first after it not benched, a new round
    /// past the roster's end (which `maxRounds` may not allow). A roster left empty stops the session, said as a
    /// `stop` is. (Found by a review: the floor could go to a benched persona, no round was counted, and an emptied
    /// session stopped without a word, its pause left set.)
    pub fn reconcile(&mut self, now: DateTime<Utc>, ctx: Context) -> Transition {
        let now = whole_millis(now);
        let mut t = Transition::default();
        let known = |p: &PersonaId| ctx.personas.get(p).is_some();
        if !self.is_active() || self.roster.iter().all(known) {
            return t;
        }
        let active = self.active_agent.clone().expect("an active session has an active persona");
        let holder_at = self.roster.iter().position(|p| *p == active).unwrap_or(0);
        // Where the one after the holder stands once the others gone are dropped.
        let after_holder = self.roster[..holder_at].iter().filter(|p| known(p)).count();
        self.roster.retain(known);
        if self.roster.is_empty() {
            self.stop(now, ctx, &mut t);
            return self.finish(t, ctx);
        }
        self.roster_changed(now, ctx, &mut t);
        if !known(&active) {
            self.end_turn_by_command(MessageId::first_at(now));
            let (next, wraps) = self.first_in_rotation_from(after_holder);
            self.move_floor(next, wraps, now, ctx, &mut t);
        }
        self.finish(t, ctx)
    }

    /// Starts a session; `begins` is the start's own id (the command's snowflake, or the first id of `now`).
    fn start(
        &mut self,
        names: &[String],
        begins: MessageId,
        now: DateTime<Utc>,
        ctx: Context,
        mut t: Transition,
    ) -> Result<Transition, Refusal> {
        if self.is_active() {
            let who = self.active_agent.as_ref().map(|a| format!(" ({a} has the floor)")).unwrap_or_default();
            return Err(refuse(&format!(
                "A session is already running here{who}. Use `stop` first, or `order` to change the roster."
            )));
        }
        if ctx.personas.is_empty() {
            return Err(refuse("No personas are configured: add persona files to the personas folder first."));
        }
        let roster = if names.is_empty() { ctx.personas.default_roster() } else { resolve_roster(names, ctx)? };
        // A new session, keeping what outlives one: the channel's settings, nonces, history, and the outbox with its
        // numbering (the old session's effects may not be done yet, and a report names its effect by number). Its
        // messages begin at its start: what was written before it (while the channel was not managed, or in an
        // older session) is never judged, and catch-up reads from there. A fresh `recent_ids` takes that as floor.
        *self = Session {
            display_mode: self.display_mode,
            guild_id: self.guild_id,
            last_message_id: self.last_message_id.max(Some(begins)),
            announcement_seq: self.announcement_seq,
            last_announced: self.last_announced,
            outbox: std::mem::take(&mut self.outbox),
            outbox_seq: self.outbox_seq,
            history: std::mem::take(&mut self.history),
            ..Session::new(self.channel_id)
        };
        self.status = SessionStatus::Running;
        self.round = 1;
        self.roster = roster.clone();
        self.floor_moved_at = Some(begins);
        self.pause_toggled_at = Some(begins);
        t.events.push(self.event(now, None, EventKind::SessionStarted { roster: roster.clone() }));
        let values = [("roster", join_ids(&roster)), ("round", "1".to_owned())];
        let text = ctx.config.templates.render(Template::SessionStart, &values);
        self.announce(&mut t, now, text, None);
        self.begin_turn(roster[0].clone(), now, ctx, &mut t);
        Ok(self.finish(t, ctx))
    }

    /// The running turn's deadline; a session saved without one (never written so, but files can be edited) gets
    /// it back from when the turn started, rather than a panic.
    pub(super) fn deadline_or_rebuilt(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        self.turn_timeout_at.unwrap_or_else(|| {
            let length = seconds(u64::from(self.turn_timeout_seconds) + self.turn_extended_seconds);
            self.turn_started_at.unwrap_or(now) + length + chrono::TimeDelta::milliseconds(self.turn_paused_ms)
        })
    }

    /// Ends the session as `stop` does: recorded, its line said, nobody holding the floor.
    fn stop(&mut self, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        t.events.push(self.event(now, None, EventKind::SessionStopped {}));
        let values = [("roster", join_ids(&self.roster)), ("round", self.round.to_string())];
        let text = ctx.config.templates.render(Template::SessionStop, &values);
        self.announce(t, now, text, None);
        self.close();
    }

    fn roster_changed(&mut self, now: DateTime<Utc>, ctx: Context, t: &mut Transition) {
        t.events.push(self.event(now, None, EventKind::RosterChanged { roster: self.roster.clone() }));
        let values = [("roster", join_ids(&self.roster)), ("round", self.round.to_string())];
        let text = ctx.config.templates.render(Template::RosterChanged, &values);
        self.announce(t, now, text, None);
    }

    fn roster_member(&self, typed: &str, ctx: Context) -> Result<PersonaId, Refusal> {
        let persona = ctx.personas.resolve(typed).map_err(|e| refuse(&e))?.id.clone();
        if !self.roster.contains(&persona) {
            return Err(refuse(&format!(
                "{persona} is not in this session's roster ({}); add it with `add {persona}`.",
                join_ids(&self.roster)
            )));
        }
        Ok(persona)
    }

    /// An announcement about `persona`: its values, the turn's remaining time, and `extra`.
    pub(super) fn announce_about(
        &mut self,
        t: &mut Transition,
        ctx: Context,
        template: Template,
        persona: &PersonaId,
        now: DateTime<Utc>,
        extra: &[(&'static str, String)],
    ) {
        let mut values = self.common_values(ctx, persona);
        values.push(("remaining", self.remaining_seconds(now).to_string()));
        values.extend(extra.iter().cloned());
        let text = ctx.config.templates.render(template, &values);
        self.announce(t, now, text, None);
    }
}

fn resolve_roster(names: &[String], ctx: Context) -> Result<Vec<PersonaId>, Refusal> {
    let mut roster: Vec<PersonaId> = Vec::new();
    let mut at = 0;
    while at < names.len() {
        // A display name with spaces typed without quotes arrives as several words (`Product Manager, dev`): the
        // longest run of words (none in quotes) that names a persona is read together. A run that names one while its
        // first word names another is refused: which was meant cannot be told (found by a review).
        let unquoted = names[at..].iter().take_while(|name| !name.starts_with('"')).count();
        let joined =
            (2..=unquoted).rev().find_map(|n| ctx.personas.resolve(&names[at..at + n].join(" ")).ok().map(|p| (p, n)));
        let (persona, words) = match (ctx.personas.resolve(&names[at]), joined) {
            (Ok(persona), None) => (persona, 1),
            // Words that alone name no persona: read together only.
            (Err(_), Some(joined)) => joined,
            (Err(unknown), None) => return Err(refuse(&unknown)),
            // Its own id first (id `claude`, display name "Claude Opus") is one persona either way, unless a later
            // word names another (found by a review: `start lead dev critic`, lead's display name "Lead Dev", left
            // dev out without a word).
            (Ok(_), Some((persona, n))) => {
                let other = names[at..at + n].iter().find_map(|word| {
                    ctx.personas.resolve(word).ok().filter(|other| other.id != persona.id).map(|other| (word, other))
                });
                if let Some((word, other)) = other {
                    let (run, word) = (effects::clip(&names[at..at + n].join(" "), 64), effects::clip(word, 64));
                    let (persona, other) = (&persona.id, &other.id);
                    return Err(refuse(&format!(
                        "\"{run}\" is the display name of {persona}, and \"{word}\" names {other}: put a name in \
                         double quotes to have it read alone (\"{run}\" for {persona}, \"{word}\" for {other})."
                    )));
                }
                (persona, n)
            }
        };
        let id = persona.id.clone();
        if roster.contains(&id) {
            return Err(refuse(&format!("{id} is named twice; each persona takes one place in the roster.")));
        }
        roster.push(id);
        at += words;
    }
    Ok(roster)
}

fn refuse(text: &str) -> Refusal {
    Refusal(text.to_owned())
}
