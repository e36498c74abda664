//! Watching the bot from outside, through the channel and its state folder only: after a restart, has it caught up
//! with everything written before it started; at the end, is everything consistent. Every wait is bounded.

use super::invariants::{Violation, check_always, check_caught_up, check_settled};
use super::stage::SoakStage;
use super::state_files::{self, StateView};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// How often the state folder is looked at while waiting (the bot is another process: nothing to be woken by).
const POLL: Duration = Duration::from_millis(50);

/// What is still missing for the bot to have caught up with every message up to `upto`, and what is broken for good
/// (returned apart: waiting will not mend it).
pub fn gaps(soak: &SoakStage, view: &StateView, upto: u64) -> (Vec<Violation>, Vec<Violation>) {
    let (mut pending, mut broken) = (Vec::new(), view.problems.clone());
    for &channel in &soak.channels {
        let messages = soak.messages(channel);
        let decided = view.decided(channel);
        let record = soak.record(channel, &messages, &decided);
        broken.extend(check_always(&record));
        for found in check_caught_up(&record, upto) {
            match found {
                Violation::SignalOutOfTurn { .. } => broken.push(found),
                _ => pending.push(found),
            }
        }
        // The newest message it handled (saved within a second even when nothing else changed).
        let handled = view.sessions.get(&channel).and_then(|s| s.last_message_id).map_or(0, |id| id.0);
        pending.extend(
            messages
                .iter()
                .filter(|m| soak.is_agent(m) && m.id <= upto && m.id > handled)
                .map(|m| Violation::MessageUnhandled { channel, message: m.id }),
        );
    }
    (pending, broken)
}

/// Waits until the bot has caught up with every message up to `upto` (or `bound` has passed); records what broke,
/// and what is still missing at the bound, in `found`. Violations already known are not waited for again.
pub async fn caught_up(soak: &SoakStage, upto: u64, bound: Duration, found: &mut BTreeSet<Violation>) {
    let deadline = Instant::now() + bound;
    loop {
        let view = state_files::read(&soak.state_dir);
        let (pending, broken) = gaps(soak, &view, upto);
        found.extend(broken);
        let waiting: Vec<Violation> = pending.into_iter().filter(|v| !found.contains(v)).collect();
        if waiting.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!("the bot did not catch up within {bound:?}: {}", waiting[0]);
            found.extend(waiting);
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until every channel is still: every agent message read, every signal handled and relayed, every outbox
/// empty. False if `bound` passed first.
pub async fn settled(soak: &SoakStage, bound: Duration, found: &BTreeSet<Violation>) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        let view = state_files::read(&soak.state_dir);
        let (pending, _) = gaps(soak, &view, u64::MAX);
        let outboxes_empty = soak.channels.iter().all(|c| view.sessions.get(c).is_some_and(|s| s.outbox.is_empty()));
        if outboxes_empty && pending.iter().all(|v| found.contains(v)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The checks on a still channel and a stopped bot: everything of [`check_settled`], every message read, and no
/// effect left in an outbox.
pub fn final_check(soak: &SoakStage, view: &StateView) -> Vec<Violation> {
    let mut found = view.problems.clone();
    let (pending, broken) = gaps(soak, view, u64::MAX);
    found.extend(pending.into_iter().filter(|v| matches!(v, Violation::MessageUnhandled { .. })));
    found.extend(broken);
    for &channel in &soak.channels {
        let messages = soak.messages(channel);
        let decided = view.decided(channel);
        found.extend(check_settled(&soak.record(channel, &messages, &decided)));
        let left = view.sessions.get(&channel).map_or(0, |s| s.outbox.len());
        if left > 0 {
            found.push(Violation::EffectsLeft { channel, count: left });
        }
    }
    found
}
