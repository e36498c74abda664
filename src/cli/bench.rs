//! `turn-manager bench`: measures a bot binary (this one by default, or older builds to compare) through the local
//! Discord-compatible server and prints the figures beside the floor of the same run. See `crate::bench`.

use crate::bench::layout::{Layout, PROCESSES_MAX};
use crate::bench::{self, ALL_PHASES, Options, floor::FloorSizes};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The turn-manager binary to measure (it is run as `run --api-base ...`); repeat to compare builds side by side
    /// [default: this executable]
    #[arg(long, value_name = "PATH")]
    pub bot_binary: Vec<PathBuf>,
    /// Smaller and shorter, for a first look: 100 channels, 1,000 saved sessions, 1 s windows
    #[arg(long)]
    pub quick: bool,
    /// Run only these parts (comma-separated)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PART")]
    pub only: Vec<bench::Phase>,
    /// Channels of the turns, messages and timeouts parts [default: 1000; --quick 100]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub channels: Option<u32>,
    /// Active channels of the second handoff figure [default: 100, at most --channels]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub active: Option<u32>,
    /// Saved sessions of the start-up part [default: 10000; --quick 1000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub sessions: Option<u32>,
    /// Messages without the signal each channel's agent posts in the messages part [default: 50; --quick 20]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub messages: Option<u32>,
    /// Times the timeouts part is run for each binary, the binaries taking turns; the round with the median notice p99
    /// is shown, every round's p99 in the details (one burst of deadlines is one sample of the machine's mood: one
    /// binary against itself differed by up to 44 ms at p99) [default: 3; --quick 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub timeout_rounds: Option<u32>,
    /// Times the turns part is run for each binary, the binaries taking turns; the round with the median turns/s is
    /// shown, every round's turns/s and bot CPU per turn in the details (one 3 s window is one sample: one binary
    /// against itself differed by 4 to 14% in turns/s). 3 or more to compare builds [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub turn_rounds: Option<u32>,
    /// Turn length of the timeouts part, in seconds
    #[arg(long, value_name = "S", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub turn_seconds: u32,
    /// Length of each timed window of turns, in milliseconds [default: 3000; --quick 1000]
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub window_ms: Option<u64>,
    /// Where the phases' files go [default: a new folder in the system's temporary folder, removed after]
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// RUST_LOG of the bots (their logs go to the work folder; keep it with --keep)
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub bot_log: String,
    /// Keep the work folder (the bots' logs and state files)
    #[arg(long)]
    pub keep: bool,
    /// Where the bots keep their sessions: a postgres://user@host/database URL of a server where the bench may
    /// create databases (one for each phase and each bot start, dropped after; `postgres://` alone takes PGHOST,
    /// PGUSER, PGPASSWORD... from the environment) [default: each phase's own state folder]
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Run each bot as this many processes, one gateway shard each (`run --shards i-i --total-shards N`), on one
    /// database (needs --store), the channels spread over one server per shard
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(PROCESSES_MAX)))]
    pub processes: u32,
}

pub fn run(args: &BenchArgs) -> ExitCode {
    let options = match options(args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("error: {}", crate::errors::with_causes(e.as_ref()));
            return ExitCode::from(2);
        }
    };
    let work_dir = options.work_dir.clone();
    let outcome = bench::run(options);
    let keep = args.keep || outcome.is_err();
    match outcome {
        Ok(report) => print!("{}", bench::report::render(&report)),
        Err(e) => eprintln!("error: {}", crate::errors::with_causes(e.as_ref())),
    }
    if keep {
        eprintln!("bench: the bots' logs and state files are in {}", work_dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    if keep && !args.keep { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn options(args: &BenchArgs) -> anyhow::Result<Options> {
    let pick = |value: Option<u32>, full: usize, quick: usize| -> usize {
        value.map_or(if args.quick { quick } else { full }, |v| v as usize)
    };
    let binaries = if args.bot_binary.is_empty() {
        vec![std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find this executable: {e}"))?]
    } else {
        args.bot_binary.clone()
    };
    for binary in &binaries {
        anyhow::ensure!(binary.is_file(), "--bot-binary {}: no such file", binary.display());
    }
    let layout = Layout::parse(args.store.as_deref(), args.processes).map_err(|e| anyhow::anyhow!(e))?;
    let channels = pick(args.channels, 1000, 100);
    let work_dir = match &args.work_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("turn-manager-bench-{}", std::process::id())),
    };
    Ok(Options {
        binaries,
        bot_log: args.bot_log.clone(),
        phases: if args.only.is_empty() { ALL_PHASES.to_vec() } else { args.only.clone() },
        channels,
        active: pick(args.active, 100, 100).min(channels),
        sessions: pick(args.sessions, 10_000, 1_000),
        messages_per_channel: pick(args.messages, 50, 20),
        turn_seconds: args.turn_seconds,
        timeout_rounds: pick(args.timeout_rounds, 3, 1),
        turn_rounds: pick(args.turn_rounds, 1, 1),
        window: Duration::from_millis(args.window_ms.unwrap_or(if args.quick { 1000 } else { 3000 })),
        patience: Duration::from_secs(if args.quick { 30 } else { 120 }),
        floor: if args.quick {
            FloorSizes {
                iterations: 200,
                parallel_threads: 100,
                parallel_for: Duration::from_millis(500),
                timer_rounds: 2,
            }
        } else {
            FloorSizes {
                iterations: 1000,
                parallel_threads: 100,
                parallel_for: Duration::from_secs(2),
                timer_rounds: 5,
            }
        },
        work_dir,
        layout,
    })
}
