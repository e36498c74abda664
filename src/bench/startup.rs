//! The start-up phase: S saved active sessions, made by the real engine and store ([`super::saved`]: thirty turns of
//! an agent's message and its signal each), in the guilds where their S channels exist, put in the store of each
//! start afresh (a copy of the state folder, or a new database copied from one filled once).
//! For each bot: start-up time (processes spawned → the server receives IDENTIFY from each) and resident memory once
//! idle (all the processes together), with no saved session and with the S sessions; memory per idle session is the
//! difference over S.

use super::layout::Layout;
use super::phase_store::SavedSessions;
use super::saved::{Plan, Saved, generate};
use super::scene::{Bot, BotProcesses, Scene, identified_at};
use super::turns::route_of;
use super::wait_until;
use chrono::Utc;
use local_discord::world::LogKind;
use std::path::Path;
use std::time::{Duration, Instant};

/// Saved turns are never due during the bench.
const TURN_SECONDS: u32 = 3600;
/// Turns each saved session has been through.
const SAVED_TURNS: i64 = 30;
/// Idle means: no REST call and almost no CPU for this long.
const QUIET: Duration = Duration::from_secs(1);
const QUIET_CPU: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, Debug)]
pub struct StartupSizes {
    pub sessions: usize,
    pub patience: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct Boot {
    pub identify: Option<Duration>,
    /// Resident memory just after IDENTIFY (sessions loaded, nothing read from Discord yet), and once idle.
    pub rss_at_identify_kib: Option<u64>,
    pub rss_kib: Option<u64>,
    /// The bot was still busy when memory was read.
    pub busy: bool,
    /// Pages of channel history it read (at least one per session it resumed: what it missed).
    pub catch_up_reads: usize,
}

#[derive(Clone, Debug)]
pub struct StartupFigures {
    pub sessions: usize,
    pub empty: Boot,
    pub full: Boot,
    pub per_session_kib: Option<f64>,
}

/// Runs the phase for every binary on one scene, with the same saved sessions.
pub async fn run(
    bots: &[Bot],
    layout: &Layout,
    dir: &Path,
    sizes: StartupSizes,
) -> anyhow::Result<(Saved, Vec<StartupFigures>)> {
    let mut scene = Scene::laid_out(dir, sizes.sessions, TURN_SECONDS, layout).await?;
    let folder = dir.join("saved");
    let (catalog, channels) = (scene.catalog(), scene.channels_with_guilds());
    let written = folder.clone();
    let plan = Plan { start: Utc::now() - chrono::TimeDelta::seconds(SAVED_TURNS * 30 + 30), turns: SAVED_TURNS };
    let saved = tokio::task::spawn_blocking(move || generate(&written, &channels, &catalog, plan)).await??;
    let template = SavedSessions::from_folder(&layout.store, &folder).await?;
    let mut figures = Vec::new();
    for bot in bots {
        let empty = boot(bot, &mut scene, None, sizes.patience).await?;
        let full = boot(bot, &mut scene, Some(&template), sizes.patience).await?;
        let per_session_kib = match (empty.rss_kib, full.rss_kib) {
            (Some(e), Some(f)) if sizes.sessions > 0 => Some((f as f64 - e as f64) / sizes.sessions as f64),
            _ => None,
        };
        figures.push(StartupFigures { sessions: sizes.sessions, empty, full, per_session_kib });
    }
    Ok((saved, figures))
}

/// Starts the bot on a copy of `saved` (or no session), times it to IDENTIFY, and reads its memory once idle.
async fn boot(bot: &Bot, scene: &mut Scene, saved: Option<&SavedSessions>, patience: Duration) -> anyhow::Result<Boot> {
    scene.store.reset(saved).await?;
    let scene = &*scene;
    let log_from = scene.log_len();
    let mut process = BotProcesses::spawn(bot, scene)?;
    let mut identified = None;
    let processes = process.count();
    wait_until(&mut process, patience, || {
        identified = identified_at(&scene.log_since(log_from), processes);
        identified.is_some()
    })
    .await?;
    let identify = identified.map(|at| at.saturating_duration_since(process.spawned));
    let rss_at_identify_kib = process.rss_kib();
    process.connected(scene).await?;
    let busy = !settle(&mut process, scene, patience).await?;
    let rss_kib = process.rss_kib();
    let catch_up_reads = scene
        .log_since(log_from)
        .iter()
        .filter(|e| match &e.kind {
            LogKind::Rest { method, path, .. } => route_of(method, path) == "GET /channels/{id}/messages",
            _ => false,
        })
        .count();
    process.stop().await?;
    Ok(Boot { identify, rss_at_identify_kib, rss_kib, busy, catch_up_reads })
}

/// Waits until the bot is idle: no REST call and next to no CPU for [`QUIET`]. False if it never was.
async fn settle(bot: &mut BotProcesses, scene: &Scene, patience: Duration) -> anyhow::Result<bool> {
    let until = Instant::now() + patience;
    let mut mark = (scene.log_len(), bot.cpu_time(), Instant::now());
    while Instant::now() < until {
        wait_until(bot, QUIET / 4, || false).await?;
        let now = (scene.log_len(), bot.cpu_time(), Instant::now());
        let rest_calls = scene.log_since(mark.0).iter().filter(|e| matches!(e.kind, LogKind::Rest { .. })).count();
        if rest_calls > 0 || now.1.saturating_sub(mark.1) > QUIET_CPU {
            mark = now;
        } else if now.2 - mark.2 >= QUIET {
            return Ok(true);
        }
    }
    Ok(false)
}
