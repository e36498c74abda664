//! The floor, measured in the same run as the bot: what the machine itself takes for the steps a handoff cannot
//! avoid (a loopback HTTP round trip to local-discord, one durable 4 KiB write), how many durable writes it does per
//! second in parallel, how late tokio's timers fire when many fall due at one instant, and how soon local-discord
//! creates a message in each of many channels asked for at one instant (what 1,000 timeout notices cannot beat).

use super::http::Client;
use super::stats::Summary;
use anyhow::Context as _;
use local_discord::LocalDiscord;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A session file's typical size: what one durable write of the floor writes.
const WRITE_SIZE: usize = 4096;
/// Requests and writes made before timing, so connections and files exist.
const WARM_UP: usize = 20;
/// Timers that fall due at one instant, per round.
pub const TIMERS_PER_ROUND: usize = 1000;
/// Channels of the message burst: one message each, all asked for at one instant.
pub const BURST_CHANNELS: usize = 1000;
/// Kept-alive connections the burst's messages are sent over: on the 2-core machine 1 to 64 connections gave p99 24
/// to 31 ms, 16 and more within 3 ms of each other.
pub const BURST_CONNECTIONS: usize = 16;

#[derive(Clone, Copy, Debug)]
pub struct FloorSizes {
    /// Timed round trips and durable writes, each.
    pub iterations: usize,
    pub parallel_threads: usize,
    pub parallel_for: Duration,
    pub timer_rounds: usize,
}

#[derive(Clone, Debug)]
pub struct Floor {
    pub loopback: Summary,
    pub durable: Summary,
    /// One round trip followed by one durable write, timed together: the least a handoff can take.
    pub handoff: Summary,
    pub parallel_writes_per_s: f64,
    pub parallel_threads: usize,
    pub timers: Summary,
    /// When each message of the burst was created, from the instant all were asked for.
    pub burst: Summary,
    /// Messages the local server created per second in the burst.
    pub burst_per_s: f64,
}

pub fn measure(dir: &Path, sizes: FloorSizes) -> anyhow::Result<Floor> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (loopback, durable, handoff) = round_trips_and_writes(dir, sizes.iterations)?;
    let parallel_writes_per_s = parallel_writes(dir, sizes.parallel_threads, sizes.parallel_for)?;
    let timers = timer_lateness(sizes.timer_rounds)?;
    let (burst, burst_per_s) = message_burst(&dir.join("burst"))?;
    let parallel_threads = sizes.parallel_threads;
    Ok(Floor { loopback, durable, handoff, parallel_writes_per_s, parallel_threads, timers, burst, burst_per_s })
}

/// Alternates a loopback round trip to a fresh local-discord with a durable write, timing each and their sum.
fn round_trips_and_writes(dir: &Path, iterations: usize) -> anyhow::Result<(Summary, Summary, Summary)> {
    let runtime = tokio::runtime::Runtime::new()?;
    let server = runtime.block_on(LocalDiscord::start())?;
    let mut client = Client::connect(&server.base_url())?;
    let data = vec![b'x'; WRITE_SIZE];
    let (mut trips, mut writes, mut both) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..WARM_UP + iterations {
        let started = Instant::now();
        let status = client.get("/api/v10/gateway")?;
        anyhow::ensure!(status == 200, "local-discord answered {status} to GET /api/v10/gateway");
        let between = Instant::now();
        durable_write(dir, "floor.json", &data)?;
        let done = Instant::now();
        if i >= WARM_UP {
            trips.push(between - started);
            writes.push(done - between);
            both.push(done - started);
        }
    }
    drop(runtime);
    let summary = |samples: &[Duration]| Summary::of(samples).context("no floor samples");
    Ok((summary(&trips)?, summary(&writes)?, summary(&both)?))
}

/// What the store does for one session file: a temporary file written and synced, renamed over the old one, and
/// the folder synced.
pub fn durable_write(dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(data)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()
}

/// Durable writes per second with `threads` threads, each rewriting its own file in one folder.
fn parallel_writes(dir: &Path, threads: usize, duration: Duration) -> anyhow::Result<f64> {
    let data = vec![b'y'; WRITE_SIZE];
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let until = started + duration;
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (data, done) = (&data, &done);
                scope.spawn(move || -> std::io::Result<()> {
                    let name = format!("parallel-{i}.json");
                    while Instant::now() < until {
                        durable_write(dir, &name, data)?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
        }
        Ok(())
    })?;
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// How late `TIMERS_PER_ROUND` sleeps due at one instant wake, on a runtime shaped like the bot's (one worker per
/// core), over several rounds.
fn timer_lateness(rounds: usize) -> anyhow::Result<Summary> {
    let runtime = tokio::runtime::Runtime::new()?;
    let samples = runtime.block_on(async {
        let mut samples = Vec::with_capacity(rounds * TIMERS_PER_ROUND);
        for _ in 0..rounds {
            let due = tokio::time::Instant::now() + Duration::from_millis(50);
            let sleepers: Vec<_> = (0..TIMERS_PER_ROUND)
                .map(|_| {
                    tokio::spawn(async move {
                        tokio::time::sleep_until(due).await;
                        tokio::time::Instant::now() - due
                    })
                })
                .collect();
            for sleeper in sleepers {
                samples.push(sleeper.await.expect("a sleeper task"));
            }
        }
        samples
    });
    Summary::of(&samples).context("no timer samples")
}

/// One message in each of `BURST_CHANNELS` channels of a fresh local-discord, all asked for at one instant over
/// `BURST_CONNECTIONS` kept-alive connections by the smallest client: how soon each is created (its answer read),
/// and the rate. No gateway client is connected, so the server dispatches to nobody: a floor, not what the bot meets.
fn message_burst(dir: &Path) -> anyhow::Result<(Summary, f64)> {
    let runtime = tokio::runtime::Runtime::new()?;
    let scene = runtime.block_on(super::scene::Scene::new(dir, BURST_CHANNELS, 60))?;
    let (base, token) = (scene.stage.server.base_url(), scene.stage.bot_token.clone());
    let body = r#"{"content":"\u23f1\ufe0f pm turn timed out after 90s"}"#;
    let next = AtomicUsize::new(0);
    let start = std::sync::Barrier::new(BURST_CONNECTIONS + 1);
    let samples = std::thread::scope(|scope| -> anyhow::Result<Vec<Duration>> {
        let workers: Vec<_> = (0..BURST_CONNECTIONS)
            .map(|_| {
                let (channels, next, start, base, token) = (&scene.channels, &next, &start, &base, &token);
                scope.spawn(move || -> anyhow::Result<Vec<Instant>> {
                    // The connection is up before the instant; a thread that could not connect still meets the
                    // others there, so that none waits for it forever.
                    let client = Client::connect(base).and_then(|mut c| c.get("/api/v10/gateway").map(|_| c));
                    start.wait();
                    let mut client = client?;
                    let mut done = Vec::new();
                    while let Some(channel) = channels.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let status = client.post_json(&format!("/api/v10/channels/{channel}/messages"), token, body)?;
                        anyhow::ensure!(status == 200, "local-discord answered {status} to a message in {channel}");
                        done.push(Instant::now());
                    }
                    Ok(done)
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let mut samples = Vec::with_capacity(BURST_CHANNELS);
        for worker in workers {
            let done = worker.join().map_err(|_| anyhow::anyhow!("a burst thread panicked"))??;
            samples.extend(done.into_iter().map(|at| at - began));
        }
        Ok(samples)
    })?;
    drop(scene);
    drop(runtime);
    let last = samples.iter().max().copied().unwrap_or_default();
    let per_s = samples.len() as f64 / last.as_secs_f64().max(f64::EPSILON);
    Ok((Summary::of(&samples).context("no burst samples")?, per_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_burst_creates_one_message_in_every_channel_and_times_each() {
        let dir = tempfile::tempdir().unwrap();
        let (burst, _) = message_burst(dir.path()).unwrap();
        assert_eq!(burst.count, BURST_CHANNELS, "every message answered 200 and timed");
        assert!(burst.p50 <= burst.p99 && burst.p99 <= burst.max && burst.max > Duration::ZERO, "{burst:?}");
    }
}
