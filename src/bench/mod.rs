//! `turn-manager bench`: the real bot, as a separate process (`turn-manager run --api-base ...`) or one per shard,
//! driven through local-discord running in the bench process by in-process scripted agents, and measured from
//! outside: the server's creation times of messages, its log of REST calls and gateway frames, the bot's saved
//! sessions (state files or database rows) and `/proc/<pid>`. The floor (what the machine itself takes) is measured
//! in the same run and printed beside it.
//!
//! Parts:
//! - [`floor`]: loopback round trip, durable write, parallel durable writes, tokio timer lateness, a burst of messages.
//! - [`layout`]: where the bot keeps its sessions (`--store`) and in how many processes (`--processes`).
//! - [`scene`]: a phase's local-discord world, the files `run` reads, and the bot's processes.
//! - [`phase_store`], [`database`]: a phase's store (its state folder or a database of its own), filled with saved
//!   sessions and read from outside.
//! - [`observer`]: the feed reader that records every created message and plays the agents.
//! - [`saved`]: saved sessions made by the real engine and store.
//! - [`turns`], [`messages`], [`timeouts`], [`startup`]: the phases.
//! - [`report`]: the table and the details; [`stats`], [`state`], [`procfs`], [`http`]: small pure helpers.
//!
//! Every phase is bounded in count and in time, and talks only to 127.0.0.1. Each runs on its own tokio runtime
//! with its own server, dropped when it ends.

pub mod database;
pub mod floor;
pub mod http;
pub mod layout;
pub mod messages;
pub mod observer;
pub mod phase_store;
pub mod procfs;
pub mod report;
pub mod saved;
pub mod scene;
pub mod startup;
pub mod state;
pub mod stats;
pub mod timeouts;
pub mod turns;

use layout::{Layout, StoreChoice};
use scene::{Bot, BotProcesses};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often waits look at what they wait for (the figures come from the server's own instants, not from this).
const POLL: Duration = Duration::from_millis(5);

/// The parts of the bench that can be run alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Loopback, durable writes, timers, 1,000 messages asked for at one instant.
    Floor,
    /// Handoffs with 1 and with `--active` channels.
    Handoff,
    /// Completed turns/s, REST calls per turn, handoffs, over `--channels` channels.
    Turns,
    /// Messages without the signal per second over `--channels` channels.
    Messages,
    /// Timeout lateness over `--channels` channels.
    Timeouts,
    /// Start-up time and memory with `--sessions` saved sessions.
    Startup,
}

pub const ALL_PHASES: [Phase; 6] =
    [Phase::Floor, Phase::Handoff, Phase::Turns, Phase::Messages, Phase::Timeouts, Phase::Startup];

/// How long the agents of the paced handoff figure take to answer, on average (each answer between half and one and
/// a half times this): the active channels then carry a load well below what the machine can (about 100 ÷ 50 ms =
/// 2,000 turns/s for 100 channels), as busy channels whose agents think do, so the figure is the bot's handoff
/// beside that load rather than the queue of a saturated machine.
pub const PACED_THINK: Duration = Duration::from_millis(50);

#[derive(Clone, Debug)]
pub struct Options {
    pub binaries: Vec<PathBuf>,
    /// `RUST_LOG` of the bots.
    pub bot_log: String,
    pub phases: Vec<Phase>,
    pub channels: usize,
    pub active: usize,
    pub sessions: usize,
    pub messages_per_channel: usize,
    pub turn_seconds: u32,
    /// Times the timeouts phase runs for each binary (see [`Run::timeout_rounds`]).
    pub timeout_rounds: usize,
    /// Times the turns phase runs for each binary (see [`Run::turn_rounds`]).
    pub turn_rounds: usize,
    pub window: Duration,
    /// The most any wait of a phase may take.
    pub patience: Duration,
    pub floor: floor::FloorSizes,
    pub work_dir: PathBuf,
    /// The store and the process count of every bot started.
    pub layout: Layout,
}

/// Everything measured for one bot binary.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub binary: PathBuf,
    pub one: Option<turns::TurnFigures>,
    pub active: Option<turns::TurnFigures>,
    /// The active channels again, with agents that take [`PACED_THINK`] to answer.
    pub paced: Option<turns::TurnFigures>,
    /// Every round of the turns phase over all the channels, in the order run.
    pub turn_rounds: Vec<turns::TurnFigures>,
    pub messages: Option<messages::MessageFigures>,
    /// Every round of the timeouts phase, in the order run.
    pub timeout_rounds: Vec<timeouts::TimeoutFigures>,
    pub startup: Option<startup::StartupFigures>,
}

impl Run {
    /// The round of the turns phase shown: the one whose turns/s is the median.
    pub fn all(&self) -> Option<&turns::TurnFigures> {
        turns::median_round(&self.turn_rounds)
    }

    /// The round of the timeouts phase shown: the one whose notice p99 is the median.
    pub fn timeouts(&self) -> Option<&timeouts::TimeoutFigures> {
        timeouts::median_round(&self.timeout_rounds)
    }
}

pub struct Report {
    pub options: Options,
    pub floor: Option<floor::Floor>,
    pub saved: Option<saved::Saved>,
    pub runs: Vec<Run>,
    pub took: Duration,
}

/// Runs the chosen phases, each for every binary in turn (so the figures compared are taken close together).
pub fn run(options: Options) -> anyhow::Result<Report> {
    let started = Instant::now();
    let wants = |phase| options.phases.contains(&phase);
    let dir = &options.work_dir;
    let mut runs: Vec<Run> = options.binaries.iter().map(|b| Run { binary: b.clone(), ..Run::default() }).collect();
    if let StoreChoice::Postgres(server) = &options.layout.store {
        phase(database::check_server(server))?;
    }
    let layout = &options.layout;
    let floor = if wants(Phase::Floor) {
        eprintln!("bench: floor");
        Some(floor::measure(&dir.join("floor"), options.floor)?)
    } else {
        None
    };
    let bots: Vec<Bot> =
        options.binaries.iter().map(|b| Bot { binary: b.clone(), log_filter: options.bot_log.clone() }).collect();
    let turn_sizes =
        |channels, think| turns::TurnSizes { channels, window: options.window, patience: options.patience, think };
    let paced = |bot: &Bot, dir: &Path, channels: usize, think| {
        phase(turns::run(bot, layout, dir, turn_sizes(channels, think)))
    };
    let turns = |bot: &Bot, dir: &Path, channels: usize| paced(bot, dir, channels, Duration::ZERO);
    let (channels, patience) = (options.channels, options.patience);
    let rounds = |part| match part {
        Phase::Timeouts => options.timeout_rounds,
        Phase::Turns => options.turn_rounds,
        _ => 1,
    };
    let round_dir = |name: &str, round: usize| if round == 0 { name.to_owned() } else { format!("{name}-{round}") };
    let phases = [Phase::Handoff, Phase::Turns, Phase::Messages, Phase::Timeouts].into_iter().filter(|p| wants(*p));
    for (part, round) in phases.flat_map(|part| (0..rounds(part)).map(move |round| (part, round))) {
        for (i, (run, bot)) in runs.iter_mut().zip(&bots).enumerate() {
            let dir = dir.join(format!("bot-{i}"));
            let of_rounds =
                if rounds(part) > 1 { format!(", round {} of {}", round + 1, rounds(part)) } else { String::new() };
            eprintln!("bench: [{}] {part:?}{of_rounds}", label(i));
            match part {
                Phase::Handoff => {
                    run.one = Some(turns(bot, &dir.join("one"), 1)?);
                    run.active = Some(turns(bot, &dir.join("active"), options.active)?);
                    run.paced = Some(paced(bot, &dir.join("paced"), options.active, PACED_THINK)?);
                }
                Phase::Turns => run.turn_rounds.push(turns(bot, &dir.join(round_dir("turns", round)), channels)?),
                Phase::Messages => {
                    let per_channel = options.messages_per_channel;
                    let sizes = messages::MessageSizes { channels, per_channel, patience };
                    run.messages = Some(phase(messages::run(bot, layout, &dir.join("messages"), sizes))?);
                }
                Phase::Timeouts => {
                    let sizes = timeouts::TimeoutSizes { channels, turn_seconds: options.turn_seconds, patience };
                    let dir = dir.join(round_dir("timeouts", round));
                    run.timeout_rounds.push(phase(timeouts::run(bot, layout, &dir, sizes))?);
                }
                Phase::Floor | Phase::Startup => unreachable!("not in this loop"),
            }
        }
    }
    let mut saved = None;
    if wants(Phase::Startup) {
        eprintln!("bench: start-up, {} saved sessions", options.sessions);
        let sizes = startup::StartupSizes { sessions: options.sessions, patience };
        let (made, figures) = phase(startup::run(&bots, layout, &dir.join("startup"), sizes))?;
        saved = Some(made);
        for (run, figure) in runs.iter_mut().zip(figures) {
            run.startup = Some(figure);
        }
    }
    Ok(Report { options, floor, saved, runs, took: started.elapsed() })
}

/// Runs one phase on a runtime of its own (one worker per core), dropped with its server when the phase ends.
fn phase<T>(job: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Runtime::new()?.block_on(job)
}

/// `A`, `B`, ... for the binaries' columns.
pub fn label(i: usize) -> String {
    char::from(b'A' + (i % 26) as u8).to_string()
}

/// Waits until `done`, checking that the bot's processes are alive; false when `limit` passed first.
pub async fn wait_until(
    bot: &mut BotProcesses,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<bool> {
    let until = Instant::now() + limit;
    loop {
        if done() {
            return Ok(true);
        }
        bot.check_alive()?;
        let now = Instant::now();
        if now >= until {
            return Ok(false);
        }
        tokio::time::sleep(POLL.min(until - now)).await;
    }
}

/// CPU time the bot (all its processes) and the bench (local-discord and the agents) used during a stretch of wall
/// time.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuShare {
    pub bot: Duration,
    pub bench: Duration,
    /// Everything else the machine ran meanwhile (other people's builds on a shared machine).
    pub others: Duration,
    pub wall: Duration,
}

pub struct CpuMark {
    bot: Duration,
    bench: Duration,
    machine: Duration,
    at: Instant,
}

impl CpuShare {
    pub fn start(bot: &BotProcesses) -> CpuMark {
        CpuMark {
            bot: bot.cpu_time(),
            bench: procfs::own_cpu_time().unwrap_or_default(),
            machine: procfs::machine_busy_time().unwrap_or_default(),
            at: Instant::now(),
        }
    }

    /// `bot 0.95, bench 0.60, others 0.10 cores`.
    pub fn cores(&self) -> String {
        let share = |cpu: Duration| cpu.as_secs_f64() / self.wall.as_secs_f64().max(1e-9);
        format!("bot {:.2}, bench {:.2}, others {:.2} cores", share(self.bot), share(self.bench), share(self.others))
    }
}

impl CpuMark {
    pub fn stop(self, bot: &BotProcesses) -> CpuShare {
        let bot = bot.cpu_time().saturating_sub(self.bot);
        let bench = procfs::own_cpu_time().unwrap_or_default().saturating_sub(self.bench);
        let machine = procfs::machine_busy_time().unwrap_or_default().saturating_sub(self.machine);
        CpuShare { bot, bench, others: machine.saturating_sub(bot + bench), wall: self.at.elapsed() }
    }
}

/// Whether `binary` is the running executable itself.
pub fn is_this_build(binary: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    std::env::current_exe().ok().and_then(|me| canonical(&me)).is_some_and(|me| canonical(binary) == Some(me))
}
