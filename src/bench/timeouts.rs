//! The timeout phase: N channels whose deadlines fall at one instant, nobody answering. Their sessions are made by
//! the engine and saved by the store ([`super::saved`]) as started together at one instant, each turn due a few
//! seconds later; the bot starts on them and reads what it missed, then the deadlines fall together, whatever way
//! each build starts its sessions. Each deadline is read back from the saved session (`turnTimeoutAt`, in its file or
//! its row); lateness = when the server created the channel's timeout notice − that deadline.

use super::layout::Layout;
use super::observer::{Kind, Observer};
use super::saved::{Plan, generate};
use super::scene::{Bot, BotProcesses, Scene};
use super::stats::Summary;
use super::turns::route_of;
use super::{CpuShare, wait_until};
use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use local_discord::world::LogKind;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time for the bot to start and read what its channels missed before the deadlines fall.
const LEAD_SECONDS: u32 = 3;
/// CPU use is counted from this long before the deadlines.
const CPU_MARK_BEFORE_MS: f64 = 50.0;

#[derive(Clone, Copy, Debug)]
pub struct TimeoutSizes {
    pub channels: usize,
    /// Turn length of the turns after the timed ones.
    pub turn_seconds: u32,
    pub patience: Duration,
}

#[derive(Clone, Debug)]
pub struct TimeoutFigures {
    pub channels: usize,
    pub lateness: Option<Summary>,
    /// When each channel's actor ended its turn (its history event's time) − the deadline: the bot's own part.
    pub ended: Option<Summary>,
    /// The earliest deadline to the latest, as read from the saved sessions.
    pub deadline_spread: Duration,
    /// How long before the deadlines the bot had read what every channel missed (negative: after).
    pub ready_before: Option<f64>,
    /// Channels whose deadline could not be read, or that never timed out.
    pub unmeasured: usize,
    /// Notices created before their deadline (counted as 0 ms late).
    pub early: usize,
    pub cpu: CpuShare,
    pub missed: u64,
}

/// The server's instants as Unix time: one reading of both clocks.
struct WallClock {
    instant: Instant,
    unix_ms: f64,
}

impl WallClock {
    fn now() -> Self {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Self { instant: Instant::now(), unix_ms: unix.as_secs_f64() * 1000.0 }
    }

    fn unix_ms(&self, at: Instant) -> f64 {
        let since = at.saturating_duration_since(self.instant).as_secs_f64();
        let before = self.instant.saturating_duration_since(at).as_secs_f64();
        self.unix_ms + (since - before) * 1000.0
    }
}

pub async fn run(bot: &Bot, layout: &Layout, dir: &Path, sizes: TimeoutSizes) -> anyhow::Result<TimeoutFigures> {
    let scene = Scene::laid_out(dir, sizes.channels, sizes.turn_seconds, layout).await?;
    let all = sizes.channels;
    // The saved turns began now and last LEAD_SECONDS longer than the later ones, all the same.
    let lead = sizes.turn_seconds + LEAD_SECONDS;
    let mut catalog = scene.catalog().all().to_vec();
    catalog.iter_mut().for_each(|p| p.timeout_seconds = Some(lead));
    let catalog = crate::core::persona::PersonaCatalog::new(catalog);
    let start = DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).context("the clock")?;
    let folder = scene.store.saved_folder(&dir.join("saved"));
    let (written, channels) = (folder.clone(), scene.channels_with_guilds());
    tokio::task::spawn_blocking(move || generate(&written, &channels, &catalog, Plan { start, turns: 0 })).await??;
    scene.store.take_saved(&folder).await?;
    let deadlines = read_deadlines(&scene).await?;

    let observer = Observer::start(&scene, 0, Duration::ZERO);
    let clock = WallClock::now();
    let log_from = scene.log_len();
    let mut process = BotProcesses::spawn(bot, &scene)?;
    process.connected(&scene).await?;
    let catch_up_reads = || {
        let log = scene.log_since(log_from);
        log.iter()
            .filter(|e| match &e.kind {
                LogKind::Rest { method, path, .. } => route_of(method, path) == "GET /channels/{id}/messages",
                _ => false,
            })
            .count()
    };
    let (tally, lead_time) = (observer.tally.clone(), Duration::from_secs(u64::from(lead)));
    let ready = wait_until(&mut process, lead_time, || catch_up_reads() >= all).await?;
    let first_deadline = deadlines.values().min().copied().unwrap_or_default();
    let ready_before = ready.then(|| first_deadline as f64 - clock.unix_ms(Instant::now()));
    // CPU is counted from just before the deadlines.
    if let Some(ms) = ready_before.filter(|ms| *ms > CPU_MARK_BEFORE_MS) {
        wait_until(&mut process, Duration::from_secs_f64((ms - CPU_MARK_BEFORE_MS) / 1000.0), || false).await?;
    }
    let cpu = CpuShare::start(&process);
    let limit = lead_time + sizes.patience;
    wait_until(&mut process, limit, || tally.channels_where(|c| c.timeouts >= 1) == all).await?;
    let cpu = cpu.stop(&process);
    process.stop().await?;
    let observed = observer.finish().await;
    let saved = scene.store.session_texts(&scene.channels).await?;
    let ended: Vec<Duration> = deadlines
        .iter()
        .filter_map(|(channel, deadline)| {
            let at = super::state::first_timeout_ms(saved.get(channel)?)?;
            Some(Duration::from_secs_f64((at - *deadline as f64).max(0.0) / 1000.0))
        })
        .collect();

    let mut first_notice: HashMap<u64, Instant> = HashMap::new();
    for rec in observed.records.iter().filter(|r| r.kind == Kind::TimeoutNotice) {
        first_notice.entry(rec.channel).or_insert(rec.at);
    }
    let (mut samples, mut early) = (Vec::new(), 0);
    for (channel, deadline) in &deadlines {
        let Some(notice) = first_notice.get(channel) else { continue };
        let late_ms = clock.unix_ms(*notice) - *deadline as f64;
        if late_ms < 0.0 {
            early += 1;
        }
        samples.push(Duration::from_secs_f64(late_ms.max(0.0) / 1000.0));
    }
    let spread = match (deadlines.values().min(), deadlines.values().max()) {
        (Some(first), Some(last)) => Duration::from_millis((last - first) as u64),
        _ => Duration::ZERO,
    };
    if samples.is_empty() && all > 0 {
        bail!("no channel timed out within {limit:?}");
    }
    Ok(TimeoutFigures {
        channels: all,
        lateness: Summary::of(&samples),
        ended: Summary::of(&ended),
        deadline_spread: spread,
        ready_before,
        unmeasured: all - samples.len(),
        early,
        cpu,
        missed: observed.missed,
    })
}

/// The round whose notice p99 is the median (the lower middle of an even count); rounds with no notice come last.
pub fn median_round(rounds: &[TimeoutFigures]) -> Option<&TimeoutFigures> {
    let mut sorted: Vec<&TimeoutFigures> = rounds.iter().collect();
    sorted.sort_by_key(|round| round.lateness.as_ref().map_or(Duration::MAX, |l| l.p99));
    sorted.get(rounds.len().saturating_sub(1) / 2).copied()
}

/// Each channel's deadline in Unix milliseconds, from the saved sessions.
async fn read_deadlines(scene: &Scene) -> anyhow::Result<HashMap<u64, i64>> {
    let saved = scene.store.session_texts(&scene.channels).await?;
    Ok(saved.iter().filter_map(|(channel, text)| Some((*channel, super::state::turn_timeout_at_ms(text)?))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(p99_ms: Option<u64>) -> TimeoutFigures {
        let at = |ms| Duration::from_millis(ms);
        TimeoutFigures {
            channels: 1,
            lateness: p99_ms.map(|ms| Summary { count: 1, p50: at(ms), p99: at(ms), max: at(ms) }),
            ended: None,
            deadline_spread: Duration::ZERO,
            ready_before: None,
            unmeasured: 0,
            early: 0,
            cpu: CpuShare::default(),
            missed: 0,
        }
    }

    #[test]
    fn the_round_shown_is_the_median_by_notice_p99_and_a_round_without_notices_counts_as_the_worst() {
        let p99 = |rounds: &[TimeoutFigures]| median_round(rounds).and_then(|r| r.lateness.as_ref()).map(|l| l.p99);
        let ms = |ms| Some(Duration::from_millis(ms));
        assert_eq!(p99(&[round(Some(90)), round(Some(50)), round(Some(70))]), ms(70));
        assert_eq!(p99(&[round(Some(90)), round(Some(50))]), ms(50), "the lower middle of two");
        assert_eq!(p99(&[round(None), round(Some(50)), round(Some(70))]), ms(70));
        assert!(median_round(&[]).is_none());
    }
}
