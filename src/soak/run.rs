//! The kill loop: start the bot, let it catch up and check it, let it work, kill it at a random instant, check its
//! files, leave it down while the agents go on talking, again; then a last start, a graceful stop and the final
//! checks. Bounded in count (the kills) and in time (every wait).

use super::invariants::{SignalFate, Violation};
use super::process::{BotProcess, log_path};
use super::stage::SoakStage;
use super::summary::Summary;
use super::{Options, faults, state_files, watch};
use local_discord::world::now_ms;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// How long the bot has, after a start, to connect.
const CONNECT_BOUND: Duration = Duration::from_secs(20);
/// How long the bot has, after connecting, to catch up with what was written before it started.
const CATCH_UP_BOUND: Duration = Duration::from_secs(20);
/// The share of kills that fall in start-up, before the bot has caught up (its outbox replay, its catch-up).
const START_UP_KILL_SHARE: f64 = 0.15;
/// A start-up kill comes this long after the start, in milliseconds.
const START_UP_KILL_MS: std::ops::RangeInclusive<u64> = 0..=400;
/// Of the other kills, the share aimed just after an agent's signal (the bot saving, relaying, announcing).
const AFTER_SIGNAL_KILL_SHARE: f64 = 0.5;
const AFTER_SIGNAL_KILL_MS: std::ops::RangeInclusive<u64> = 0..=30;
/// How long to wait for the next signal to aim at.
const SIGNAL_BOUND: Duration = Duration::from_secs(6);
/// A random kill comes this long after the bot caught up, in milliseconds.
const RANDOM_KILL_MS: std::ops::RangeInclusive<u64> = 100..=2500;
/// How long the bot stays down, in milliseconds, while the agents go on.
const DOWN_MS: std::ops::RangeInclusive<u64> = 50..=1500;
/// At the end, how long the channels have to become still, and the bot to stop gracefully.
const SETTLE_BOUND: Duration = Duration::from_secs(30);
const STOP_BOUND: Duration = Duration::from_secs(20);

pub async fn run(options: &Options, progress: &dyn Fn(&str)) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let soak = SoakStage::new(&options.work).await?;
    let agents = soak.spawn_agents(&mut rng);
    let log = log_path(&options.work);
    let mut summary = Summary { seed: options.seed, ..Summary::default() };
    let mut found: BTreeSet<Violation> = BTreeSet::new();
    // When the bot was down, in Unix milliseconds (Discord's clock here).
    let mut down: Vec<(u64, u64)> = Vec::new();

    for kill in 1..=options.kills {
        let upto = soak.newest_message();
        let mut bot = BotProcess::spawn(&options.exe, &soak, &log)?;
        summary.restarts += 1;
        if let Some(last) = down.last_mut() {
            last.1 = now_ms();
        }
        if rng.f64() < START_UP_KILL_SHARE {
            summary.kills_in_start_up += 1;
            tokio::time::sleep(Duration::from_millis(rng.u64(START_UP_KILL_MS))).await;
        } else {
            if !connected(&soak, &mut bot, &mut found).await {
                bot.kill().await?;
                break;
            }
            watch::caught_up(&soak, upto, CATCH_UP_BOUND, &mut found).await;
            faults::maybe_inject(&soak, &options.faults, &mut rng, &mut summary.faults);
            if rng.f64() < AFTER_SIGNAL_KILL_SHARE && next_signal(&soak).await {
                summary.kills_after_signal += 1;
                tokio::time::sleep(Duration::from_millis(rng.u64(AFTER_SIGNAL_KILL_MS))).await;
            } else {
                tokio::time::sleep(Duration::from_millis(rng.u64(RANDOM_KILL_MS))).await;
            }
        }
        bot.kill().await?;
        summary.kills += 1;
        down.push((now_ms(), u64::MAX));
        // The dead process's gateway session would buffer every dispatch for a RESUME that never comes.
        soak.stage.server.close_gateway(soak.stage.bot_user, false);
        found.extend(state_files::read(&soak.state_dir).problems);
        if kill % 10 == 0 || kill == options.kills {
            progress(&format!(
                "kill {kill}/{}: {} violation(s) so far, {:.0} s",
                options.kills,
                found.len(),
                started.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(DOWN_MS))).await;
    }

    // The last start: catch up, the agents stop, the channels become still, a graceful stop.
    let upto = soak.newest_message();
    let mut bot = BotProcess::spawn(&options.exe, &soak, &log)?;
    summary.restarts += 1;
    if let Some(last) = down.last_mut() {
        last.1 = now_ms();
    }
    if connected(&soak, &mut bot, &mut found).await {
        watch::caught_up(&soak, upto, CATCH_UP_BOUND, &mut found).await;
    }
    // The final checks judge the bot, not a fault still armed: what was not spent is disarmed.
    soak.stage.server.faults(|f| f.clear());
    for agent in &agents {
        agent.abort();
    }
    if !watch::settled(&soak, SETTLE_BOUND, &found).await {
        found.insert(Violation::Stalled { what: format!("the channels were not still within {SETTLE_BOUND:?}") });
    }
    if !bot.terminate(STOP_BOUND).await? {
        found.insert(Violation::Stalled { what: format!("the bot did not stop within {STOP_BOUND:?} of SIGTERM") });
    }
    let view = state_files::read(&soak.state_dir);
    found.extend(watch::final_check(&soak, &view));

    count(&soak, &view, &down, &mut summary);
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    summary.outbox_replays = log_text.matches("carrying out what was left undone").count();
    summary.log_catch_ups = log_text.matches("the history log lacks events").count();
    summary.torn_log_tails_cut = log_text.matches("ends with a torn line").count();
    summary.sessions_from_journal = log_text.matches("the session file is behind the journal").count();
    summary.torn_journal_tails = log_text.matches("the journal ends with a torn record").count();
    summary.violations = found;
    summary.wall = started.elapsed();
    Ok(summary)
}

/// Waits until the bot is connected to the gateway; a bot that exits or never connects is a violation.
async fn connected(soak: &SoakStage, bot: &mut BotProcess, found: &mut BTreeSet<Violation>) -> bool {
    let me = soak.stage.bot_user;
    let deadline = Instant::now() + CONNECT_BOUND;
    loop {
        let wait = soak
            .stage
            .server
            .wait_for("the bot to connect", Duration::from_millis(200), |w| w.is_connected(me).then_some(()));
        if wait.await.is_ok() {
            return true;
        }
        if let Some(status) = bot.exited() {
            found.insert(Violation::Stalled { what: format!("the bot exited by itself ({status})") });
            return false;
        }
        if Instant::now() >= deadline {
            found.insert(Violation::Stalled { what: format!("the bot did not connect within {CONNECT_BOUND:?}") });
            return false;
        }
    }
}

/// Waits (bounded) until an agent posts a message ending with the signal; false if none came.
async fn next_signal(soak: &SoakStage) -> bool {
    let after = soak.newest_message();
    let agents: Vec<u64> = soak.personas.values().copied().collect();
    let matcher = crate::core::signals::SignalRules::default();
    let wait = soak.stage.server.wait_for("an agent's signal", SIGNAL_BOUND, |w| {
        w.messages
            .range(after + 1..)
            .any(|(_, m)| {
                matches!(m.author, local_discord::world::Author::User(u) if agents.contains(&u))
                    && matcher.has_any_signal(&m.content)
            })
            .then_some(())
    });
    wait.await.is_ok()
}

/// The figures of the run, from the channels and the final state.
fn count(soak: &SoakStage, view: &state_files::StateView, down: &[(u64, u64)], summary: &mut Summary) {
    let while_down = |ms: u64| down.iter().any(|(from, to)| (*from..*to).contains(&ms));
    for &channel in &soak.channels {
        let messages = soak.messages(channel);
        let decided = view.decided(channel);
        let record = soak.record(channel, &messages, &decided);
        let fates = record.fates();
        let signals: Vec<_> = record.signals().collect();
        summary.agent_signals += signals.len();
        summary.signals_while_down += signals.iter().filter(|m| while_down(m.created_ms)).count();
        summary.late_signals +=
            signals.iter().filter(|m| fates.get(&m.id).is_some_and(|f: &SignalFate| f.late > 0)).count();
        summary.messages_while_down += messages.iter().filter(|m| soak.is_agent(m) && while_down(m.created_ms)).count();
        summary.floor_announcements += record.announced().len();
        summary.timeout_announcements +=
            messages.iter().filter(|m| m.author == Some(soak.stage.bot_user) && m.content.starts_with("⏱️")).count();
        for event in &decided {
            match event.kind.name() {
                "turn_complete" => summary.turns_completed += 1,
                "turn_timeout" => summary.turns_timed_out += 1,
                _ => {}
            }
        }
    }
}
