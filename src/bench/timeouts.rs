//! The timeout phase: N channels whose sessions start together (managed from start-up by the configuration), with
//! agents that never answer. Each channel's deadline is read from its state file (`turnTimeoutAt`) once every
//! session has started; lateness = when the server created the channel's timeout notice − that deadline.

use super::observer::{Kind, Observer};
use super::scene::{Bot, BotProcess, Scene};
use super::stats::Summary;
use super::{CpuShare, wait_until};
use anyhow::bail;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
pub struct TimeoutSizes {
    pub channels: usize,
    pub turn_seconds: u32,
    pub patience: Duration,
}

#[derive(Clone, Debug)]
pub struct TimeoutFigures {
    pub channels: usize,
    pub turn_seconds: u32,
    pub lateness: Option<Summary>,
    /// The earliest deadline to the latest: how close together they fell.
    pub deadline_spread: Duration,
    /// Channels whose deadline could not be read before their turn ended, or that never timed out.
    pub unmeasured: usize,
    /// Notices created before their deadline (counted as 0 ms late).
    pub early: usize,
    pub cpu: CpuShare,
    pub missed: u64,
}

/// The server's instants as Unix time: one reading of both clocks, taken before the bot starts.
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
        self.unix_ms + at.saturating_duration_since(self.instant).as_secs_f64() * 1000.0
    }
}

pub async fn run(bot: &Bot, dir: &Path, sizes: TimeoutSizes) -> anyhow::Result<TimeoutFigures> {
    let scene = Scene::new(dir, sizes.channels, sizes.turn_seconds).await?;
    scene.write_config(&scene.channels)?;
    let observer = Observer::start(&scene, 0);
    let clock = WallClock::now();
    let mut process = BotProcess::spawn(bot, &scene)?;
    process.connected(&scene).await?;
    let (tally, all) = (observer.tally.clone(), sizes.channels);
    let turn = Duration::from_secs(u64::from(sizes.turn_seconds));
    if !wait_until(&mut process, turn + sizes.patience, || tally.channels_where(|c| c.announces >= 1) == all).await? {
        bail!("not every session started within {:?}", turn + sizes.patience);
    }
    let read_at = Instant::now();
    let deadlines = read_deadlines(&scene).await?;
    let cpu = CpuShare::start(&process);
    wait_until(&mut process, turn + sizes.patience, || tally.channels_where(|c| c.timeouts >= 1) == all).await?;
    let cpu = cpu.stop(&process);
    process.stop().await?;
    let observed = observer.finish().await;

    let mut first_notice: HashMap<u64, Instant> = HashMap::new();
    for rec in observed.records.iter().filter(|r| r.kind == Kind::TimeoutNotice) {
        first_notice.entry(rec.channel).or_insert(rec.at);
    }
    let (mut samples, mut early) = (Vec::new(), 0);
    for (channel, deadline) in &deadlines {
        // A notice created before the files were read may have moved the deadline in the file to the next turn.
        let Some(notice) = first_notice.get(channel).filter(|at| **at > read_at) else { continue };
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
    Ok(TimeoutFigures {
        channels: all,
        turn_seconds: sizes.turn_seconds,
        lateness: Summary::of(&samples),
        deadline_spread: spread,
        unmeasured: all - samples.len(),
        early,
        cpu,
        missed: observed.missed,
    })
}

/// Each channel's deadline in Unix milliseconds, from the bot's state files.
async fn read_deadlines(scene: &Scene) -> anyhow::Result<HashMap<u64, i64>> {
    let files: Vec<(u64, std::path::PathBuf)> = scene.channels.iter().map(|c| (*c, scene.session_file(*c))).collect();
    let deadlines = tokio::task::spawn_blocking(move || {
        files
            .into_iter()
            .filter_map(|(channel, path)| {
                let text = std::fs::read_to_string(path).ok()?;
                Some((channel, super::state::turn_timeout_at_ms(&text)?))
            })
            .collect()
    })
    .await?;
    Ok(deadlines)
}
