//! The session's outbox (spec 8, 9): effects are numbered and kept with the state that decided them until the
//! Discord layer reports them done, so a crash between a save and its effects loses none. The report of the
//! announcement that gave the floor also gives the persona back the time the manager took to announce it. While
//! Discord accepts nothing, the outbox stops taking the effects that only tidy the channel, so it stays bounded.

use super::effects::{Effect, Queued};
use super::history::EventKind;
use super::{Context, Session, SessionStatus, Transition, whole_millis};
use crate::core::ids::MessageId;
use chrono::{DateTime, Utc};

/// Effects waiting in the outbox at the most before the channel is no longer tidied. Relays (a signal message
/// reposted without its signal), reactions and deletions of out-of-turn messages only keep the channel readable;
/// while this many effects wait (Discord has accepted nothing for a while) they are not queued, the message stays as
/// written and `effect_failed` is recorded, so that the outbox, saved with every save and mirrored by the sender's
/// queue, stays small. Announcements are always queued: they give the floor. The agents' messages are what could
/// grow it without bound; announcements need turns to end, and no deadline runs before its announcement is accepted.
pub const TIDYING_OUTBOX_MAX: usize = 200;

impl Session {
    /// Puts a transition's effects in the outbox, numbered, to be saved with the state that decided them.
    pub fn enqueue(&mut self, effects: Vec<Effect>) -> Vec<Queued> {
        let queued: Vec<Queued> = effects
            .into_iter()
            .map(|effect| {
                self.outbox_seq += 1;
                Queued { id: self.outbox_seq, effect }
            })
            .collect();
        self.outbox.extend(queued.iter().cloned());
        queued
    }

    /// Effect `id` was carried out; `at` is when Discord accepted it, on the manager's clock, and `posted` the message
    /// an announcement made. If it was the announcement that gave the current holder the floor, the turn begins then:
    /// its start and deadline move by the delay, so a persona never loses time to slow or rate-limited REST calls.
    pub fn effect_done(&mut self, id: u64, at: DateTime<Utc>, posted: Option<MessageId>) -> Transition {
        let Some(done) = self.take_queued(id) else { return Transition::default() };
        if let Effect::Announce(announcement) = &done.effect {
            self.last_announced = self.last_announced.max(posted);
            if self.turn_announcement.as_deref() == Some(announcement.nonce.as_str()) {
                self.turn_announcement = None;
                self.give_back_announcement_delay(whole_millis(at));
                // The mention's own time, on Discord's clock.
                self.holder_called_at = posted.or(self.holder_called_at);
            }
        }
        Transition { changed: true, ..Transition::default() }
    }

    /// Discord refused effect `id` for good (`status`), or it could not be done in time (`None`): it leaves the
    /// outbox and the failure is recorded. If it was the announcement that gave the current holder the floor, the
    /// turn's clock starts now: the persona was never told, and its whole time still lies ahead of it, as when the
    /// announcement is accepted late (it did not run while Discord was failing; a turn whose announcement was given up
    /// after ten minutes of server errors no longer times out at once).
    pub fn effect_failed(&mut self, id: u64, status: Option<u16>, now: DateTime<Utc>, ctx: Context) -> Transition {
        let Some(failed) = self.take_queued(id) else { return Transition::default() };
        if let Effect::Announce(announcement) = &failed.effect {
            if self.turn_announcement.as_deref() == Some(announcement.nonce.as_str()) {
                self.turn_announcement = None;
                self.give_back_announcement_delay(whole_millis(now));
                if self.status == SessionStatus::Paused {
                    // Refused while a pause held the session (a manager's, or the refusal's own): the holder was
                    // never told, so its turn begins, announced, at the `resume`, as one that began paused (found by
                    // a review: only "Resumed" was said, and the holder timed out unheard).
                    self.turn_announced = false;
                }
            }
        }
        let mut t = Transition::default();
        let effect = failed.effect.kind_name().into();
        t.events.push(self.event(whole_millis(now), None, EventKind::EffectFailed { effect, status }));
        self.finish(t, ctx)
    }

    /// Whether the outbox is too full to take effects that only tidy the channel (see [`TIDYING_OUTBOX_MAX`]).
    pub(super) fn tidying_backed_up(&self) -> bool {
        self.outbox.len() >= TIDYING_OUTBOX_MAX
    }

    /// While the outbox is backed up, takes the transition's tidying effects out, each recorded as given up.
    pub(super) fn hold_back_tidying(&self, t: &mut Transition, now: DateTime<Utc>) {
        if !self.tidying_backed_up() {
            return;
        }
        let (tidying, kept): (Vec<Effect>, Vec<Effect>) = t.effects.drain(..).partition(Effect::tidies);
        t.effects = kept;
        for effect in tidying {
            let kind = EventKind::EffectFailed { effect: effect.kind_name().into(), status: None };
            t.events.push(self.event(now, None, kind));
        }
    }

    /// Whether the announcement that gives the current holder the floor is still on its way: until Discord accepts
    /// it, the persona does not know it has the floor, so its deadline does not run.
    pub fn awaiting_floor_announcement(&self) -> bool {
        self.turn_announcement.is_some() && self.status == SessionStatus::Running
    }

    /// After a load: an announcement marked as on its way but no longer in the outbox was carried out before the
    /// process stopped (its report was not saved); it no longer holds the deadline.
    pub fn forget_delivered_announcement(&mut self) {
        let pending = self.outbox.iter().any(
            |q| matches!(&q.effect, Effect::Announce(a) if Some(a.nonce.as_str()) == self.turn_announcement.as_deref()),
        );
        if !pending {
            self.turn_announcement = None;
        }
    }

    fn take_queued(&mut self, id: u64) -> Option<Queued> {
        let position = self.outbox.iter().position(|q| q.id == id)?;
        self.outbox.remove(position)
    }

    fn give_back_announcement_delay(&mut self, accepted: DateTime<Utc>) {
        let (Some(started), Some(deadline)) = (self.turn_started_at, self.turn_timeout_at) else { return };
        if self.status != SessionStatus::Running || accepted <= started {
            return;
        }
        let delay = accepted - started;
        self.turn_started_at = Some(accepted);
        self.turn_timeout_at = Some(deadline + delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::Config;
    use crate::core::ids::ChannelId;
    use crate::core::persona::PersonaCatalog;
    use crate::core::session::Command;
    use chrono::TimeDelta;

    fn catalog() -> PersonaCatalog {
        crate::core::persona::two_personas(60)
    }

    fn t0() -> DateTime<Utc> {
        "2026-03-01T10:00:00Z".parse().unwrap()
    }

    /// A session just started: its effects (start line, pm's floor) queued as the actor does.
    fn started(personas: &PersonaCatalog, config: &Config) -> (Session, Vec<Queued>) {
        let mut session = Session::new(ChannelId(9));
        let ctx = Context { personas, config };
        let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
        let queued = session.enqueue(t.effects);
        (session, queued)
    }

    #[test]
    fn effects_stay_in_the_outbox_until_reported_done_and_survive_a_save() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        assert_eq!(queued.iter().map(|q| q.id).collect::<Vec<_>>(), vec![1, 2]);
        let saved: Session = serde_json::from_str(&serde_json::to_string(&session).unwrap()).unwrap();
        assert_eq!(saved.outbox, session.outbox, "the outbox is saved with the state");
        assert!(session.effect_done(1, t0(), None).changed);
        assert_eq!(session.outbox.iter().map(|q| q.id).collect::<Vec<_>>(), vec![2]);
        assert!(!session.effect_done(1, t0(), None).changed, "done twice is nothing");
        let more = session.enqueue(vec![Effect::Delete { message_id: crate::core::ids::MessageId(5) }]);
        assert_eq!(more[0].id, 3, "numbers never go back");
    }

    #[test]
    fn the_newest_message_of_the_announcements_done_is_kept_for_a_replay_to_look_after() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        let removal = session.enqueue(vec![Effect::Delete { message_id: MessageId(5) }]);
        session.effect_done(queued[1].id, t0(), Some(MessageId(20)));
        session.effect_done(queued[0].id, t0(), Some(MessageId(10)));
        session.effect_done(removal[0].id, t0(), None);
        assert_eq!(session.last_announced, Some(MessageId(20)), "the newest, whatever the order of the reports");
        let ctx = Context { personas: &personas, config: &config };
        session.handle_command(&Command::Stop, None, t0(), ctx).unwrap();
        let given = Some(MessageId(MessageId::first_at(t0()).0 + 1)); // a manager's, just after the stop
        session.handle_command(&Command::Start { roster: vec![] }, given, t0(), ctx).unwrap();
        assert_eq!(session.last_announced, Some(MessageId(20)), "kept by a new session, as the nonces are");
    }

    #[test]
    fn a_late_accepted_floor_announcement_gives_the_persona_its_time_back_once() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        let deadline = session.turn_timeout_at.unwrap();
        let floor = queued.last().unwrap().id;
        // Rate-limited: Discord accepted pm's announcement 3.5 s after the turn began.
        session.effect_done(floor, t0() + TimeDelta::milliseconds(3500), None);
        assert_eq!(session.turn_timeout_at, Some(deadline + TimeDelta::milliseconds(3500)));
        assert_eq!(session.turn_started_at, Some(t0() + TimeDelta::milliseconds(3500)));
        assert_eq!(session.turn_announcement, None);
    }

    #[test]
    fn a_floor_announcement_given_up_starts_the_turns_clock_then_so_the_persona_keeps_its_whole_time() {
        let (personas, config) = (catalog(), Config::default());
        let ctx = Context { personas: &personas, config: &config };
        for status in [None, Some(400)] {
            let (mut session, queued) = started(&personas, &config);
            let deadline = session.turn_timeout_at.unwrap();
            // Discord answered 5xx for the ten minutes the sender retries (or refused the announcement for good).
            let given_up = t0() + TimeDelta::seconds(600);
            session.effect_failed(queued[1].id, status, given_up, ctx);
            assert!(!session.awaiting_floor_announcement(), "{status:?}: the deadline runs again");
            assert_eq!(session.turn_started_at, Some(given_up), "{status:?}");
            assert_eq!(session.turn_timeout_at, Some(deadline + TimeDelta::seconds(600)), "{status:?}");
            let t = session.tick(given_up + TimeDelta::seconds(1), ctx);
            assert!(t.events.is_empty(), "{status:?}: pm's turn does not time out at once: {:?}", t.events);
        }
    }

    #[test]
    fn only_the_current_turns_announcement_moves_the_deadline() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        let deadline = session.turn_timeout_at.unwrap();
        session.effect_done(queued[0].id, t0() + TimeDelta::seconds(2), None); // the "started" line, not the floor
        assert_eq!(session.turn_timeout_at, Some(deadline));
        let ctx = Context { personas: &personas, config: &config };
        let t = session.handle_command(&Command::Skip, None, t0() + TimeDelta::seconds(1), ctx).unwrap();
        session.enqueue(t.effects);
        let after_skip = session.turn_timeout_at.unwrap();
        // pm's floor, accepted after pm's turn ended.
        session.effect_done(queued[1].id, t0() + TimeDelta::seconds(5), None);
        assert_eq!(session.turn_timeout_at, Some(after_skip), "dev's turn keeps its deadline");
    }

    #[test]
    fn the_deadline_waits_for_the_floor_announcement_and_a_stale_mark_is_forgotten_after_a_load() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        assert!(session.awaiting_floor_announcement());
        let mut loaded = session.clone();
        loaded.forget_delivered_announcement();
        assert!(loaded.awaiting_floor_announcement(), "still in the outbox: still on its way");
        loaded.outbox.clear();
        loaded.forget_delivered_announcement();
        assert!(!loaded.awaiting_floor_announcement(), "done before the crash: the deadline runs");
        session.effect_done(queued[1].id, t0(), None);
        assert!(!session.awaiting_floor_announcement());
    }

    #[test]
    fn a_start_after_stop_keeps_the_outbox_and_its_numbering_so_a_late_report_removes_only_its_own_effect() {
        let (personas, config) = (catalog(), Config::default());
        let ctx = Context { personas: &personas, config: &config };
        let (mut session, _) = started(&personas, &config);
        let t = session.handle_command(&Command::Stop, None, t0() + TimeDelta::seconds(1), ctx).unwrap();
        let stop_line = session.enqueue(t.effects)[0].id;
        assert_eq!(stop_line, 3);
        // Started again before the old session's effects were reported done.
        let given = Some(MessageId::first_at(t0() + TimeDelta::seconds(2))); // a manager's
        let t = session.handle_command(&Command::Start { roster: vec![] }, given, t0() + TimeDelta::seconds(2), ctx);
        let restarted = session.enqueue(t.unwrap().effects);
        assert_eq!(restarted.iter().map(|q| q.id).collect::<Vec<_>>(), vec![4, 5], "numbers go on");
        assert_eq!(session.outbox.iter().map(|q| q.id).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5], "nothing lost");
        // The old session's "stopped" line is reported done: the new session's announcements stay.
        session.effect_done(stop_line, t0() + TimeDelta::seconds(3), None);
        assert_eq!(session.outbox.iter().map(|q| q.id).collect::<Vec<_>>(), vec![1, 2, 4, 5]);
        assert!(session.awaiting_floor_announcement(), "the new floor's announcement is still on its way");
    }

    #[test]
    fn a_refused_effect_leaves_the_outbox_and_is_recorded() {
        let (personas, config) = (catalog(), Config::default());
        let (mut session, queued) = started(&personas, &config);
        let ctx = Context { personas: &personas, config: &config };
        let t = session.effect_failed(queued[0].id, Some(403), t0(), ctx);
        assert!(t.durable());
        assert!(
            matches!(&t.events[0].kind, EventKind::EffectFailed { effect, status: Some(403) } if effect == "announce")
        );
        assert_eq!(session.outbox.len(), 1);
    }
}
