//! The `turn-manager` binary: parses the command line, sets up logging, and runs the chosen subcommand.

use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    turn_manager::cli::run(turn_manager::cli::Cli::parse())
}
