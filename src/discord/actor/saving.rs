//! Saving before telling (spec 9): a transition's effects reach the sender only once the state that decided them is
//! on disk. A durable save that fails (a full disk, a read-only folder, an I/O error, the writer thread gone) keeps
//! its effects in the outbox and is tried again on a timer, so the channel goes on by itself once the disk does,
//! with no other input needed; the channel and the log are told once that saving fails. Activity alone is saved
//! lazily, one copy of the session for a burst of it. With a store shared by several processes, an actor first claims
//! its channel, and a save refused because another process took the channel over stops it without a word.

use super::{Actor, Env};
use crate::core::ids::ChannelId;
use crate::core::session::Transition;
use crate::discord::persist::{Claim, SessionStoreError};
use crate::store::writer::LAZY_SAVE_DELAY;
use std::time::Duration;
use tokio::time::Instant;

/// How many times a session is read before the actor leaves the channel (some 30 s of waits, 1 s doubling).
const READ_TRIES: u32 = 6;

/// The first wait before trying a failed durable save again; it doubles each time, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// An activity-only change waits this long in the actor, so that a burst of them (an agent streaming its answer)
/// costs one copy of the session, not one per message; the writer's lazy delay is the rest of the second spec 9
/// allows before activity is on disk.
pub(super) const ACTIVITY_SAVE_AFTER: Duration = Duration::from_millis(250);
const _: () = assert!(ACTIVITY_SAVE_AFTER.as_millis() + LAZY_SAVE_DELAY.as_millis() <= 1000);

/// Said once in the channel when saving starts failing: a plain line that pings nobody.
const SAVE_FAILING_NOTICE: &str = "⚠️ I cannot save this channel's session right now (see my log), so turn changes \
                                   are held back: they will be announced as soon as saving works again.";

/// A durable save that failed, and when to try it again. Boxed in the actor: rare, and an idle channel's task keeps
/// room for it.
#[derive(Debug)]
pub(super) struct SaveRetry {
    pub(super) at: Instant,
    wait: Duration,
    /// Notices about what the failed saves decided (a display-mode switch), given once one works.
    pub(super) notices: Vec<String>,
    /// The notice that saving fails was not given (this process was not sure to hold the channel then): it is at
    /// the next failure once it is.
    notice_owed: bool,
}

impl Actor {
    /// Saves the transition, then hands its effects to the sender: nothing is announced that is not on disk. A change
    /// of the turn or the settings is saved durably first; activity alone is saved lazily, a little later, with
    /// whatever activity follows it. False when the save failed (the effects wait in the outbox for a save that
    /// works).
    pub(super) async fn commit(&mut self, mut t: Transition) -> bool {
        if !t.changed {
            return true;
        }
        self.drop_relays_of_held_deletions(&mut t.effects);
        if !t.durable() {
            self.activity_save_at.get_or_insert_with(|| Instant::now() + ACTIVITY_SAVE_AFTER);
            return true;
        }
        crate::metrics::turns_ended(&t.events);
        // The effects go in the outbox, saved in the same write as the state that decided them.
        self.session.enqueue(t.effects);
        self.unsaved_events.extend(t.events);
        self.save_durably().await
    }

    /// Writes the session and every event not yet on disk; once it is written, hands the sender every effect of the
    /// outbox it does not have yet (those held back by failed saves too).
    pub(super) async fn save_durably(&mut self) -> bool {
        let events = self.unsaved_events.clone();
        if let Err(e) = self.env.saver.save_durable(self.session.clone(), events).await {
            if e.is_fenced() {
                self.stop_acting(&e);
            } else {
                self.save_failed(&e);
            }
            return false;
        }
        self.unsaved_events.clear();
        self.activity_save_at = None; // The session written carries the activity too.
        self.lazy_handed = false;
        let retried = self.save_retry.take();
        if retried.is_some() {
            tracing::info!(channel = %self.channel, "saving works again; carrying out what was held back");
        }
        self.hand_outbox();
        for notice in retried.map(|retry| retry.notices).unwrap_or_default() {
            self.sender().notice(notice);
        }
        true
    }

    /// The last activity of a retiring actor, saved for good rather than lazily: an actor started at once after
    /// this one (a new `start`) reads the store, which shows no lazy save before it is written, and would carry out
    /// again what the outbox held. That includes activity already handed to the writer lazily, which may still wait
    /// there (found by a review). Nothing is held back by it (the outbox is empty), so a failure is not told in the
    /// channel nor retried: the activity goes lazily then, as before.
    pub(super) async fn save_on_retiring(&mut self) {
        let unsaved = self.activity_save_at.take().is_some();
        if !(unsaved || std::mem::take(&mut self.lazy_handed)) {
            return;
        }
        match self.env.saver.save_durable(self.session.clone(), Vec::new()).await {
            Ok(()) => {}
            // Another process acts for the channel now, from what it read.
            Err(e) if e.is_fenced() => tracing::debug!(channel = %self.channel, "{e}"),
            Err(e) => {
                tracing::warn!(channel = %self.channel, "could not save a stopped session for good ({e}); lazily then");
                self.env.saver.save_lazy(self.session.clone());
            }
        }
    }

    /// Hands the writer the activity not saved yet, if any (its timer is due, or the actor is about to stop). Not
    /// while a failed durable save waits for its retry: the session holds that save's change (a turn ended, effects
    /// in the outbox) whose events only the retry writes, and a lazy copy would put the one in the store without the
    /// other; the retry carries the activity too.
    pub(super) fn save_activity(&mut self) {
        if self.activity_save_at.take().is_some() && self.save_retry.is_none() {
            self.env.saver.save_lazy(self.session.clone());
            self.lazy_handed = true;
        }
    }

    /// Hands the sender the outbox's effects after the last one handed (ids only grow).
    pub(super) fn hand_outbox(&mut self) {
        let handed = self.handed;
        let due: Vec<_> = self.session.outbox.iter().filter(|q| q.id > handed).cloned().collect();
        if let Some(last) = due.last() {
            self.handed = last.id;
            self.sender().effects(due, false);
        }
    }

    /// Another process acts for the channel now: its effects are not handed to the sender, what the sender still
    /// had is abandoned, no notice is given, and the save is not tried again. The other process carries on from the
    /// session it read after taking the channel (what this one saved before is in it, its outbox included).
    fn stop_acting(&mut self, e: &SessionStoreError) {
        self.abandon_sender();
        if !std::mem::replace(&mut self.taken_over, true) {
            crate::metrics::fenced_save_rejected();
            tracing::warn!(channel = %self.channel, "{e}: this channel's actor stops here");
        }
        self.save_retry = None;
    }

    fn save_failed(&mut self, e: &SessionStoreError) {
        let now = Instant::now();
        // Said in a channel whose lease may have run out, it would confuse the people there if another process runs
        // it now: owed until this process is sure of the channel again.
        let may_tell = self.env.saver.surely_held(self.channel);
        let first = self.save_retry.is_none();
        let retry = match &mut self.save_retry {
            Some(retry) => {
                retry.wait = (retry.wait * 2).min(RETRY_MAX);
                retry.at = now + retry.wait;
                tracing::debug!(channel = %self.channel, "saving still fails, trying again in {:?}: {e}", retry.wait);
                retry
            }
            None => {
                tracing::error!(
                    channel = %self.channel,
                    "could not save the session, so its announcements are held back until saving works again: {e}"
                );
                let retry =
                    SaveRetry { at: now + RETRY_FIRST, wait: RETRY_FIRST, notices: Vec::new(), notice_owed: true };
                self.save_retry.insert(Box::new(retry))
            }
        };
        if !retry.notice_owed {
            return;
        }
        if may_tell {
            retry.notice_owed = false;
            self.sender().notice(SAVE_FAILING_NOTICE.to_owned());
        } else if first {
            tracing::warn!(
                channel = %self.channel,
                "not said in the channel yet: this process's lease of it may have run out, and another process may \
                 act for it now"
            );
        }
    }
}

impl Actor {
    /// The channel's session as saved (a new one where none is). A store that fails to answer (a database out or
    /// busy, a disk error) is asked again, after 1 s doubling, [`READ_TRIES`] times while the lease is held: a blank
    /// session in its place would leave a running one without its deadline and be saved over it. `None` when the
    /// lease was lost meanwhile, when every try failed, or when the saved session cannot be used by this build (a
    /// newer build's, or edited by hand: it is left as it is); then the lease is let go, for a later round or input
    /// (or a process that can read it), and the commands waiting are told why.
    pub(super) async fn read_saved(&mut self) -> Option<crate::core::session::Session> {
        let mut wait = RETRY_FIRST;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let e = match self.env.saver.load(self.channel).await {
                Ok(saved) => return Some(saved.unwrap_or_else(|| crate::core::session::Session::new(self.channel))),
                Err(e) => e,
            };
            if let SessionStoreError::Unreadable { .. } = e {
                tracing::error!(channel = %self.channel, "{e}: it is left as it is, and this process does not act on the channel");
                self.give_up_reading(&format!(
                    "This channel's saved session cannot be read by this version of turn-manager ({e}); nothing was \
                     changed. Check my logs."
                ));
                return None;
            }
            if attempt == READ_TRIES {
                tracing::error!(channel = %self.channel, "could not read this channel's session in {READ_TRIES} tries, so this process leaves it for now: {e}");
                self.give_up_reading(&format!(
                    "I could not read this channel's saved session ({e}); nothing was changed. Try again in a moment."
                ));
                return None;
            }
            tracing::warn!(channel = %self.channel, "could not read this channel's session (trying again in {wait:?}): {e}");
            tokio::time::sleep(wait).await;
            if !self.env.saver.holds(self.channel) {
                return None;
            }
            wait = (wait * 2).min(RETRY_MAX);
        }
    }

    /// This actor will not run the channel: its lease is let go (another process, or a later lease round or input,
    /// starts it again) and the commands in the inbox are answered with `why`.
    fn give_up_reading(&mut self, why: &str) {
        self.env.saver.let_go(self.channel);
        self.inbox.close();
        while let Some(input) = self.inbox.try_recv() {
            if let super::Input::Command(command) = input
                && let Some(reply) = command.reply
            {
                let _ = reply.send(Err(crate::core::session::Refusal(why.to_owned())));
            }
        }
    }
}

/// Whether this process may act for the channel: always with the state folder; with a shared store, once it holds
/// the channel's lease. Said in the log when it may not.
pub(super) async fn claimed(env: &Env, channel: ChannelId) -> bool {
    match env.saver.claim(channel).await {
        Ok(Claim::Held) => {
            env.elsewhere.held_here(channel);
            true
        }
        Ok(Claim::Busy { owner, expires_in }) => {
            env.elsewhere.found(channel, expires_in);
            tracing::info!(
                %channel,
                "process {owner} acts for this channel (its lease runs {expires_in:.0?} more unless renewed): not here"
            );
            false
        }
        Err(e) => {
            // A mark that another process holds it stays until that lease would run out: that process still runs a
            // `!turn` message, and "try again" here would have it run twice.
            tracing::error!(%channel, "could not claim this channel, so this process does not act on it: {e}");
            false
        }
    }
}
