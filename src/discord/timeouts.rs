//! The timeout task: sleeps until the earliest deadline of all sessions (woken early when deadlines change), then
//! ends the turns that are due through the engine. No polling: nothing runs while nothing is due.

use super::bot::Bot;
use chrono::Utc;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// How far ahead to sleep when no turn is running: any deadline change wakes the task sooner.
const IDLE_SLEEP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Runs until `stop` turns true.
pub async fn run(bot: Arc<Bot>, mut stop: watch::Receiver<bool>) {
    loop {
        let changed = bot.deadlines_changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let wake = match bot.earliest_deadline() {
            Some(deadline) => Instant::now() + (deadline - Utc::now()).to_std().unwrap_or_default(),
            None => Instant::now() + IDLE_SLEEP,
        };
        tokio::select! {
            () = tokio::time::sleep_until(wake) => end_due_turns(&bot).await,
            () = &mut changed => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// Ends every turn whose deadline has passed, and records how late each was ended.
async fn end_due_turns(bot: &Bot) {
    let now = Utc::now();
    for slot in bot.slots() {
        if slot.deadline().is_none_or(|deadline| deadline > now) {
            continue;
        }
        let mut session = slot.session.lock().await;
        let Some(deadline) = session.next_deadline() else { continue };
        let now = Utc::now();
        let t = session.tick(now, bot.context());
        if !t.events.is_empty() {
            let lateness_ms = (now - deadline).num_milliseconds();
            bot.record_timeout(lateness_ms);
            tracing::info!(channel = %slot.id, lateness_ms, "turn timed out");
        }
        slot.commit(bot, &session, t).await;
    }
}
