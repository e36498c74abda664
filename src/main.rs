//! The `turn-manager` binary: parses the command line, sets up logging, and runs the chosen subcommand.

use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;
use turn_manager::cli::{Cli, CliCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo prints the channel on stdout; only problems go to the log there, unless RUST_LOG asks for more.
    let default = match cli.command {
        CliCommand::Demo(_) => "warn,serenity=error",
        // serenity logs every request and event at INFO: a sixth of the bot's CPU under load, for nothing a person reads.
        _ => "info,serenity=warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)))
        .with_writer(std::io::stderr)
        .init();
    turn_manager::cli::run(cli)
}
