//! The floor, measured in the same run as the bot: what the machine itself takes for the steps a handoff cannot
//! avoid (a loopback HTTP round trip to local-discord, one durable 4 KiB write), how many durable writes it does per
//! second in parallel, and how late tokio's timers fire when many fall due at one instant.

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
}

pub fn measure(dir: &Path, sizes: FloorSizes) -> anyhow::Result<Floor> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (loopback, durable, handoff) = round_trips_and_writes(dir, sizes.iterations)?;
    let parallel_writes_per_s = parallel_writes(dir, sizes.parallel_threads, sizes.parallel_for)?;
    let timers = timer_lateness(sizes.timer_rounds)?;
    Ok(Floor { loopback, durable, handoff, parallel_writes_per_s, parallel_threads: sizes.parallel_threads, timers })
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
