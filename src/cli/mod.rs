//! The command line (spec 11): subcommands and their options.

mod check;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "turn-manager",
    version,
    about = "Gives the floor to one AI agent persona at a time in a Discord channel."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: CliCommand,
}

/// Where the configuration, personas and state live; shared by the subcommands that read them.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// The configuration file [default: turn-manager.json, optional]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The folder of persona files [default: the configuration's personasDir, else personas]
    #[arg(long, value_name = "DIR")]
    pub personas: Option<PathBuf>,
    /// The folder sessions are saved in [default: the configuration's stateDir, else state]
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
}

impl SourceArgs {
    pub fn sources(&self) -> crate::files::Sources {
        crate::files::Sources {
            config_file: self.config.clone(),
            personas_dir: self.personas.clone(),
            state_dir: self.state.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Validate the personas and configuration and print what was found, or every error.
    Check(SourceArgs),
}

/// Runs the chosen subcommand and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        CliCommand::Check(args) => check::run(&args),
    }
}
