//! A channel the bot can no longer speak in: deleted, left with its server, or closed to the bot's messages. Its
//! session must stop timing out (each timeout would post into the void, and Discord bans a bot that earns 10,000
//! refusals in 10 minutes). Decided here from what Discord answered; the Discord layer reports it.

use super::effects::Effect;
use super::history::EventKind;
use super::{Context, Session, SessionStatus, Transition, whole_millis};
use chrono::{DateTime, Utc};

/// Why the channel can no longer be spoken in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// The channel was deleted: Discord said so (CHANNEL_DELETE, THREAD_DELETE), or answered 404 (Unknown Channel)
    /// to a message posted there or to a read of its history.
    ChannelDeleted,
    /// The bot was removed from the channel's server (kicked or banned; not an outage).
    LeftServer,
    /// A message posted there was refused with 403 (Missing Access, or Missing Permissions to send).
    MayNotPost,
}

impl Unreachable {
    /// What a refusal of `effect` with `status` says about the channel. Only an announcement (a plain message to the
    /// channel) speaks for the channel itself: a refused relay or deletion is about one message or about Manage
    /// Messages / Manage Webhooks (observe mode handles that).
    pub fn from_refusal(effect: &Effect, status: u16) -> Option<Self> {
        match (effect, status) {
            (Effect::Announce(_), 404) => Some(Unreachable::ChannelDeleted),
            (Effect::Announce(_), 403) => Some(Unreachable::MayNotPost),
            _ => None,
        }
    }

    /// Why, in a few words, for history, `status` and the log.
    pub fn reason(self) -> &'static str {
        match self {
            Unreachable::ChannelDeleted => "the channel was deleted",
            Unreachable::LeftServer => "the bot was removed from this server",
            Unreachable::MayNotPost => {
                "Discord refused my announcements here (403: I lack access or Send Messages); once my permissions \
                 are fixed, a manager's `resume` goes on"
            }
        }
    }
}

impl Session {
    /// The channel can no longer be spoken in. Gone (deleted, or its server left): the session ends, with nothing
    /// left to carry out. Closed to the bot's messages: the session pauses with the reason, keeping the turn's time,
    /// until a manager's `resume` (which gives the holder a fresh, announced turn). Nothing is announced: it would be
    /// refused too. Said once: a session already ended, or already paused, is left as it is.
    pub fn unreachable(&mut self, why: Unreachable, now: DateTime<Utc>, ctx: Context) -> Transition {
        let now = whole_millis(now);
        let mut t = Transition::default();
        match why {
            Unreachable::ChannelDeleted | Unreachable::LeftServer => {
                if !self.is_active() {
                    return t;
                }
                t.events.push(self.event(now, None, EventKind::SessionEnded { reason: why.reason().into() }));
                self.close();
                self.outbox.clear();
                self.turn_announcement = None;
            }
            Unreachable::MayNotPost => {
                if self.status != SessionStatus::Running {
                    return t;
                }
                self.freeze(now, now, why.reason().into(), ctx);
                let kind = EventKind::PostingRefused { status: 403, remaining_seconds: self.remaining_seconds(now) };
                let holder = self.active_agent.clone();
                t.events.push(self.event(now, holder.as_ref(), kind));
            }
        }
        self.finish(t, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::Config;
    use crate::core::ids::ChannelId;
    use crate::core::persona::PersonaCatalog;
    use crate::core::session::Command;
    use crate::core::session::effects::Announcement;
    use crate::core::session::history::HistoryEvent;
    use chrono::TimeDelta;

    fn t0() -> DateTime<Utc> {
        "2026-03-01T10:00:00Z".parse().unwrap()
    }

    fn started(personas: &PersonaCatalog, config: &Config) -> Session {
        let mut session = Session::new(ChannelId(9));
        let ctx = Context { personas, config };
        let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
        session.enqueue(t.effects);
        session
    }

    #[test]
    fn only_an_announcement_refused_with_404_or_403_speaks_for_the_channel() {
        let announce = Effect::Announce(Announcement {
            text: "x".into(),
            mention: None,
            nonce: "n".into(),
            reply_to: None,
            ping_managers: false,
        });
        let delete = Effect::Delete { message_id: crate::core::ids::MessageId(5) };
        assert_eq!(Unreachable::from_refusal(&announce, 404), Some(Unreachable::ChannelDeleted));
        assert_eq!(Unreachable::from_refusal(&announce, 403), Some(Unreachable::MayNotPost));
        assert_eq!(Unreachable::from_refusal(&announce, 400), None);
        assert_eq!(Unreachable::from_refusal(&delete, 403), None, "relay permissions: observe mode, not a pause");
        assert_eq!(Unreachable::from_refusal(&delete, 404), None, "one message gone, not the channel");
    }

    #[test]
    fn a_deleted_channel_ends_the_session_once_with_nothing_left_to_send() {
        let (personas, config) = (crate::core::persona::two_personas(60), Config::default());
        let ctx = Context { personas: &personas, config: &config };
        let mut session = started(&personas, &config);
        let t = session.unreachable(Unreachable::ChannelDeleted, t0() + TimeDelta::seconds(5), ctx);
        assert!(t.effects.is_empty(), "nothing can be said in a deleted channel");
        let ended =
            |e: &HistoryEvent| matches!(&e.kind, EventKind::SessionEnded { reason } if reason.contains("deleted"));
        assert!(matches!(&t.events[..], [e] if ended(e)), "{:?}", t.events);
        assert!(!session.is_active() && session.next_deadline().is_none());
        assert!(session.outbox.is_empty() && !session.awaiting_floor_announcement());
        let again = session.unreachable(Unreachable::LeftServer, t0() + TimeDelta::seconds(6), ctx);
        assert!(again.events.is_empty() && !again.changed, "ended once");
    }

    #[test]
    fn a_channel_closed_to_the_bot_pauses_the_session_once_keeping_the_time_left() {
        let (personas, config) = (crate::core::persona::two_personas(60), Config::default());
        let ctx = Context { personas: &personas, config: &config };
        let mut session = started(&personas, &config);
        session.turn_announcement = None; // pm's floor was posted
        let t = session.unreachable(Unreachable::MayNotPost, t0() + TimeDelta::seconds(20), ctx);
        assert!(t.effects.is_empty(), "a notice would be refused too");
        assert!(matches!(
            &t.events[..],
            [e] if e.kind == EventKind::PostingRefused { status: 403, remaining_seconds: 40 }
        ));
        assert_eq!(session.status, SessionStatus::Paused);
        assert_eq!(session.next_deadline(), None, "no more timeouts");
        assert!(session.pause_reason.as_deref().is_some_and(|r| r.contains("resume")));
        let again = session.unreachable(Unreachable::MayNotPost, t0() + TimeDelta::seconds(21), ctx);
        assert!(again.events.is_empty() && !again.changed, "paused once");

        let resumed = session.handle_command(&Command::Resume, None, t0() + TimeDelta::seconds(90), ctx).unwrap();
        assert_eq!(session.status, SessionStatus::Running);
        assert!(
            resumed.effects.iter().any(|e| matches!(e, Effect::Announce(a) if a.text.contains("(pm) has the floor"))),
            "pm is told again that it has the floor: {:?}",
            resumed.effects
        );
    }
}
