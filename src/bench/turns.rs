//! The turn phase: N channels, each session started from the configuration at start-up, agents answering the moment
//! they are mentioned (or after thinking for a while, for a load below what the machine can carry). After a warm-up
//! (every channel two turns in, its webhook made), a window of fixed length is timed: handoffs (agent's signal
//! created → next announcement created, both at the server) and completed turns per second. Then the agents stop
//! answering; once every channel is quiet, each completes exactly one more turn, and the server's log of that
//! stretch gives the REST calls per completed turn with no turn cut by a window's edge.

use super::layout::Layout;
use super::observer::{Counts, Observer, completed, handoffs};
use super::scene::{Bot, BotProcesses, Scene};
use super::stats::{Summary, rate};
use super::{CpuShare, wait_until};
use anyhow::bail;
use local_discord::world::{LogEntry, LogKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Turns are never meant to time out here.
const TURN_SECONDS: u32 = 3600;
/// Turns each channel completes before the window opens.
const WARM_UP_TURNS: u32 = 2;

#[derive(Clone, Copy, Debug)]
pub struct TurnSizes {
    pub channels: usize,
    pub window: Duration,
    /// The most the warm-up, and the drain after the window, may take.
    pub patience: Duration,
    /// How long an agent takes to answer its mention, on average (zero: at once, as many turns as the machine
    /// carries).
    pub think: Duration,
}

#[derive(Clone, Debug)]
pub struct TurnFigures {
    pub channels: usize,
    pub handoff: Option<Summary>,
    pub completed: usize,
    pub window: Duration,
    pub turns_per_s: f64,
    pub rest_per_turn: f64,
    /// REST calls per completed turn by route.
    pub rest_routes: Vec<(String, f64)>,
    pub cpu: CpuShare,
    /// Channels that had not finished the warm-up when the window opened.
    pub cold_channels: usize,
    pub missed: u64,
}

pub async fn run(bot: &Bot, layout: &Layout, dir: &Path, sizes: TurnSizes) -> anyhow::Result<TurnFigures> {
    let scene = Scene::laid_out(dir, sizes.channels, TURN_SECONDS, layout).await?;
    scene.write_config(&scene.channels)?;
    let observer = Observer::start(&scene, u32::MAX, sizes.think);
    let mut process = BotProcesses::spawn(bot, &scene)?;
    process.connected(&scene).await?;
    let tally = observer.tally.clone();
    let all = sizes.channels;
    let warm = |c: &Counts| c.announces > WARM_UP_TURNS;
    wait_until(&mut process, sizes.patience, || tally.channels_where(warm) == all).await?;
    let cold_channels = all - tally.channels_where(warm);

    let cpu = CpuShare::start(&process);
    let t0 = Instant::now();
    wait_until(&mut process, sizes.window, || false).await?;
    let t1 = Instant::now();
    let cpu = cpu.stop(&process);
    observer.stop_answering();
    // Let the handoffs of the window's last signals finish: every answer decided is seen and announced after (the
    // holders read next are then those the bot gave the floor to last).
    let quiet = |c: &Counts| c.quiet();
    if !wait_until(&mut process, sizes.patience, || tally.channels_where(quiet) == all).await? {
        bail!("not every channel was quiet within {:?} once the agents stopped answering", sizes.patience);
    }
    // REST calls per turn, exactly: from quiet to quiet, one more turn in every channel.
    let (log_from, before) = (scene.log_len(), tally.snapshot());
    for (channel, holder) in tally.holders() {
        scene.stage.server.post(channel, holder, "One more answer, for the count.\n\nTURN_COMPLETE");
    }
    let one_more = || {
        let now = tally.snapshot();
        before.iter().all(|(channel, was)| now.get(channel).is_some_and(|c| c.signals > was.signals && quiet(c)))
    };
    if !wait_until(&mut process, sizes.patience, one_more).await? {
        bail!("not every channel completed its counted turn within {:?}", sizes.patience);
    }
    // The last announcement's call is logged just after the message is made.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let log = scene.log_since(log_from);
    process.stop().await?;
    let observed = observer.finish().await;

    let window = (t0, t1);
    let done = completed(&observed.records, window);
    let (rest_calls, rest_routes) = rest_calls_in(&log);
    let per_turn = |n: usize| n as f64 / all as f64;
    Ok(TurnFigures {
        channels: all,
        handoff: Summary::of(&handoffs(&observed.records, window)),
        completed: done,
        window: t1 - t0,
        turns_per_s: rate(done, t1 - t0),
        rest_per_turn: per_turn(rest_calls),
        rest_routes: rest_routes.into_iter().map(|(route, n)| (route, per_turn(n))).collect(),
        cpu,
        cold_channels,
        missed: observed.missed,
    })
}

impl TurnFigures {
    /// The bot's CPU time per completed turn in the window (all its threads, all its processes).
    pub fn cpu_per_turn(&self) -> Option<Duration> {
        (self.completed > 0).then(|| self.cpu.bot / self.completed as u32)
    }
}

/// The round whose turns/s is the median (the lower middle of an even count).
pub fn median_round(rounds: &[TurnFigures]) -> Option<&TurnFigures> {
    let mut sorted: Vec<&TurnFigures> = rounds.iter().collect();
    sorted.sort_by(|a, b| a.turns_per_s.total_cmp(&b.turns_per_s));
    sorted.get(rounds.len().saturating_sub(1) / 2).copied()
}

/// REST calls in a log, in all and by route.
pub fn rest_calls_in(log: &[LogEntry]) -> (usize, BTreeMap<String, usize>) {
    let mut routes = BTreeMap::new();
    let mut total = 0;
    for entry in log {
        if let LogKind::Rest { method, path, .. } = &entry.kind {
            total += 1;
            *routes.entry(route_of(method, path)).or_default() += 1;
        }
    }
    (total, routes)
}

/// A REST call's route as the server logged it (`/api/v10/...`), ids, tokens and query blanked as the bot's own
/// metrics label it: `POST /webhooks/{id}/{token}`.
pub fn route_of(method: &str, path: &str) -> String {
    crate::metrics::route::template(method, path.strip_prefix("/api/v10").unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::CpuShare;

    fn round(turns_per_s: f64, completed: usize, bot_cpu_ms: u64) -> TurnFigures {
        TurnFigures {
            channels: 10,
            handoff: None,
            completed,
            window: Duration::from_secs(1),
            turns_per_s,
            rest_per_turn: 3.0,
            rest_routes: Vec::new(),
            cpu: CpuShare {
                bot: Duration::from_millis(bot_cpu_ms),
                bench: Duration::ZERO,
                others: Duration::ZERO,
                wall: Duration::from_secs(1),
            },
            cold_channels: 0,
            missed: 0,
        }
    }

    #[test]
    fn the_round_shown_is_the_median_by_turns_per_second_and_its_cpu_is_per_completed_turn() {
        let rounds = [round(7_000.0, 7_000, 1_400), round(5_000.0, 5_000, 1_000), round(6_000.0, 6_000, 1_500)];
        let shown = median_round(&rounds).unwrap();
        assert_eq!(shown.turns_per_s, 6_000.0);
        assert_eq!(shown.cpu_per_turn(), Some(Duration::from_micros(250)));
        assert_eq!(median_round(&rounds[..2]).unwrap().turns_per_s, 5_000.0, "the lower middle of an even count");
        assert!(median_round(&[]).is_none());
        assert_eq!(round(0.0, 0, 10).cpu_per_turn(), None, "no turn, no figure");
    }

    #[test]
    fn routes_are_named_without_their_ids_and_tokens() {
        assert_eq!(route_of("POST", "/api/v10/webhooks/123/tokabc"), "POST /webhooks/{id}/{token}");
        assert_eq!(route_of("DELETE", "/api/v10/channels/1/messages/2"), "DELETE /channels/{id}/messages/{id}");
        assert_eq!(route_of("GET", "/api/v10/channels/99/messages?after=1"), "GET /channels/{id}/messages");
        assert_eq!(route_of("GET", "/api/v10/users/@me"), "GET /users/@me");
    }
}
