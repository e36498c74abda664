//! `turn-manager soak`: the bot as a process against the local Discord-compatible server, with scripted agents in
//! three channels, killed with SIGKILL at random instants and started again, checked after every start and at the
//! end against the promises of spec 5, 8 and 9. Only 127.0.0.1 is used.
//!
//! Layout:
//! - [`invariants`]: the checks, pure functions over a channel's messages and its history (the fault tests use them
//!   too).
//! - [`state_files`]: the state folder read from outside (torn files, logs, the outbox).
//! - [`stage`]: the server, its three managed channels, the files the bot reads, the agents.
//! - [`process`]: starting, killing and stopping `turn-manager run`.
//! - [`faults`]: the local server's faults injected between kills (`--faults`).
//! - [`watch`]: waiting (bounded) for the bot to catch up or the channels to be still, and the final checks.
//! - `run`: the kill loop.
//! - [`summary`]: the figures and their table.

pub mod faults;
pub mod invariants;
pub mod process;
mod run;
pub mod stage;
pub mod state_files;
pub mod summary;
pub mod watch;

use std::path::PathBuf;
pub use summary::Summary;

/// What a soak does.
#[derive(Clone, Debug)]
pub struct Options {
    /// SIGKILLs, each followed by a start.
    pub kills: u32,
    /// Seeds the kill instants, the down times and the agents' thinking times: the same seed, the same plan.
    pub seed: u64,
    /// Where the personas, configuration, state and the bot's log go.
    pub work: PathBuf,
    /// The `turn-manager` binary to run as the bot.
    pub exe: PathBuf,
    /// The fault groups injected while the bot is up (none: kills only).
    pub faults: Vec<faults::FaultGroup>,
}

/// Runs a soak; `progress` is told how it goes every ten kills.
pub async fn run(options: &Options, progress: &dyn Fn(&str)) -> anyhow::Result<Summary> {
    run::run(options, progress).await
}
