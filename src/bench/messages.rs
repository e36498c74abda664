//! The message phase: N channels where the agent holding the floor posts many messages without the signal
//! (interleaved across channels), then one message with the signal. The bot is frozen (SIGSTOP) while they are
//! posted, so it meets them as a backlog and what is timed is its own pace, not the bench's: from the moment it is let
//! go (SIGCONT) to the announcement that follows the last channel's final signal (each channel's messages are handled
//! in order, so that announcement says its backlog is drained). The final signals' turns are inside the time, so the
//! figure is a little low. If the backlog is not drained in time, the bot's saved `lastMessageId` of each channel
//! (its file or its row) says how far it got.

use super::layout::Layout;
use super::observer::{Kind, Observer};
use super::scene::{Bot, BotProcesses, Scene};
use super::stats::{Summary, rate};
use super::{CpuShare, wait_until};
use anyhow::bail;
use std::path::Path;
use std::time::{Duration, Instant};

const TURN_SECONDS: u32 = 3600;
/// How long the bot has to write a lazily saved session (its lazy save delay is one second).
const LAZY_SAVE_WAIT: Duration = Duration::from_millis(1500);

#[derive(Clone, Copy, Debug)]
pub struct MessageSizes {
    pub channels: usize,
    pub per_channel: usize,
    pub patience: Duration,
}

#[derive(Clone, Debug)]
pub struct MessageFigures {
    pub channels: usize,
    /// Messages without the signal posted, and how many of them the bot handled.
    pub posted: usize,
    pub handled: usize,
    pub drained: bool,
    /// First post → the last channel's announcement after its final signal (or → the count, when not drained).
    pub elapsed: Duration,
    pub per_s: f64,
    /// How fast the bench posted them (while the bot was frozen).
    pub offered_per_s: f64,
    /// From the release to each channel's announcement after its final signal: when its backlog was drained.
    pub drained_after: Option<Summary>,
    pub cpu: CpuShare,
    pub missed: u64,
}

pub async fn run(bot: &Bot, layout: &Layout, dir: &Path, sizes: MessageSizes) -> anyhow::Result<MessageFigures> {
    let scene = Scene::laid_out(dir, sizes.channels, TURN_SECONDS, layout).await?;
    scene.write_config(&scene.channels)?;
    // pm answers its first turn, so dev holds the floor and each channel's webhook exists before the burst.
    let observer = Observer::start(&scene, 1, Duration::ZERO);
    let mut process = BotProcesses::spawn(bot, &scene)?;
    process.connected(&scene).await?;
    let (tally, all) = (observer.tally.clone(), sizes.channels);
    if !wait_until(&mut process, sizes.patience, || tally.channels_where(|c| c.announces >= 2) == all).await? {
        bail!("dev did not get the floor in every channel within {:?}", sizes.patience);
    }

    process.pause()?;
    let posting = Instant::now();
    let (server, channels, dev) = (scene.stage.server.clone(), scene.channels.clone(), scene.agent_users()[1]);
    let per_channel = sizes.per_channel;
    let (ids, posted_at) = tokio::task::spawn_blocking(move || {
        let mut ids: Vec<Vec<u64>> = vec![Vec::with_capacity(per_channel); channels.len()];
        for part in 1..=per_channel {
            for (i, channel) in channels.iter().enumerate() {
                let text = format!("dev: part {part} of {per_channel}, thinking out loud before answering.");
                ids[i].push(server.post(*channel, dev, &text));
            }
        }
        let posted_at = Instant::now();
        for channel in &channels {
            server.post(*channel, dev, "dev: that is all from me. TURN_COMPLETE");
        }
        (ids, posted_at)
    })
    .await?;
    let posted = per_channel * all;
    let cpu = CpuShare::start(&process);
    let started = Instant::now();
    process.resume()?;
    let drained =
        wait_until(&mut process, sizes.patience, || tally.channels_where(|c| c.announces >= 3) == all).await?;
    let mut until = Instant::now();
    let cpu = cpu.stop(&process);
    let handled = if drained {
        posted
    } else {
        tokio::time::sleep(LAZY_SAVE_WAIT).await;
        until = Instant::now();
        handled_per_saved_sessions(&scene, &ids).await?
    };
    process.stop().await?;
    let observed = observer.finish().await;
    // When each channel's backlog was drained: the announcement after its final signal, counted from the release.
    let drained_after: Vec<Duration> = observed
        .records
        .iter()
        .filter(|r| r.kind == Kind::Announce && r.at > started)
        .map(|r| r.at - started)
        .collect();
    if drained {
        until = started + drained_after.iter().max().copied().unwrap_or_default();
    }
    Ok(MessageFigures {
        channels: all,
        posted,
        handled,
        drained,
        elapsed: until - started,
        per_s: rate(handled, until - started),
        offered_per_s: rate(posted, posted_at - posting),
        drained_after: Summary::of(&drained_after),
        cpu,
        missed: observed.missed,
    })
}

/// How many of the posted messages the bot has handled, by each channel's saved `lastMessageId`.
async fn handled_per_saved_sessions(scene: &Scene, ids: &[Vec<u64>]) -> anyhow::Result<usize> {
    let saved = scene.store.session_texts(&scene.channels).await?;
    let handled = scene
        .channels
        .iter()
        .zip(ids)
        .map(|(channel, posted)| {
            let last = saved.get(channel).and_then(|text| super::state::last_message_id(text)).unwrap_or(0);
            posted.iter().filter(|id| **id <= last).count()
        })
        .sum();
    Ok(handled)
}
