//! The command line (spec 11): subcommands and their options.

mod bench;
mod check;
mod convert;
mod demo;
mod health;
mod invite;
mod run;
mod sandbox;
mod soak;

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
    /// The folder of persona files [default: the configuration's personasDir (relative to its file), else personas]
    #[arg(long, value_name = "DIR")]
    pub personas: Option<PathBuf>,
    /// The folder sessions are saved in [default: the configuration's stateDir (relative to its file), else state]
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
    /// Run the bot (needs DISCORD_TOKEN).
    Run(RunArgs),
    /// The whole bot against a built-in local Discord-compatible server, with scripted agents: no account needed.
    Demo(DemoArgs),
    /// Validate the personas and configuration and print what was found, or every error.
    Check(SourceArgs),
    /// Print the OAuth2 URL that invites the bot with exactly the permissions it uses.
    Invite(InviteArgs),
    /// The local Discord-compatible server on its own, for rehearsing with real agents: accounts, tokens, the
    /// channel printed live, standard input posted as the operator.
    Sandbox(sandbox::SandboxArgs),
    /// Kill the bot (SIGKILL) at random instants and start it again, N times, against a local server with scripted
    /// agents; check that nothing is lost or doubled.
    Soak(soak::SoakArgs),
    /// Measure a bot binary through the local server, beside the machine's floor (see the README's figures).
    Bench(bench::BenchArgs),
    /// Copy every session and its whole history from one store to another (a state folder or a postgres:// URL).
    Convert(convert::ConvertArgs),
    /// Whether the bot serving its metrics at --metrics has every gateway shard connected: exit 0 if so, 1 if not
    /// (a container's HEALTHCHECK, a readiness probe; not a liveness one: a restart cannot end a Discord outage).
    Health(HealthArgs),
}

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// Where the bot serves its metrics (its `run --metrics`); one listening on every interface (0.0.0.0) is asked
    /// on the loopback
    #[arg(long, value_name = "ADDR", env = "TM_METRICS", default_value = "127.0.0.1:9184")]
    pub metrics: std::net::SocketAddr,
}

/// The environment `run` reads besides its token and log filter: a harness that starts bots of its own (`bench`,
/// `soak`) removes it, so that only what the harness says counts, not the shell it was started in (found by a review:
/// a soak started where `TM_STORE` named the production database ran its bots on it).
pub const RUN_ENVIRONMENT: &[&str] =
    &["DISCORD_API_BASE", "TM_SHARDS", "TM_TOTAL_SHARDS", "TM_METRICS", "TM_STORE", "TM_LEASE_SECONDS", "TM_NODE"];

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Send every REST call to this base URL instead of discord.com (a rate-limiting proxy, a local server); the
    /// gateway address comes from its /api/v10/gateway
    #[arg(long, value_name = "URL", env = "DISCORD_API_BASE", hide_env_values = true)]
    pub api_base: Option<String>,
    /// The gateway shards this process runs, A-B with both ends included (e.g. 0-3), of --total-shards; it keeps
    /// only the sessions of servers on them [default: every shard]
    #[arg(long, value_name = "A-B", env = "TM_SHARDS", requires = "total_shards")]
    pub shards: Option<String>,
    /// How many gateway shards the bot runs on, over all its processes (a server's shard is (server id >> 22) mod
    /// this) [default: one connection, no sharding]
    #[arg(long, value_name = "N", env = "TM_TOTAL_SHARDS")]
    pub total_shards: Option<u32>,
    /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9184 (nothing listens without it)
    #[arg(long, value_name = "ADDR", env = "TM_METRICS")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Where sessions are kept: a state folder (one process only), or a postgres://user@host/database URL that every
    /// process of the bot shares [default: the state folder]. Prefer TM_STORE (or PGPASSWORD) to a password on the
    /// command line
    #[arg(long, value_name = "FOLDER|URL", env = "TM_STORE", hide_env_values = true)]
    pub store: Option<String>,
    /// With a database: how long a process's claim on a channel lasts unless renewed (every third of it); after a
    /// crash, another process takes the channel over once it expires. Its last third is the margin for a Discord call
    /// already on its way (10 s each): keep 30 or more in production
    #[arg(long, value_name = "SECONDS", env = "TM_LEASE_SECONDS", default_value_t = crate::sessions::LEASE_TTL_DEFAULT.as_secs(),
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub lease_seconds: u64,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// How many full rounds of the roster to run before stopping (a preset with a script ends when its task is done
    /// instead)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// The folder of persona files to play
    #[arg(long, value_name = "DIR", default_value = "personas")]
    pub personas: PathBuf,
    /// Play a preset of examples/presets/ (its turn-manager.json and personas/), with agents that speak its
    /// protocol, e.g. review-workflow
    #[arg(long, value_name = "NAME", conflicts_with = "personas")]
    pub preset: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct InviteArgs {
    /// Your application's id (the developer portal's General Information page)
    #[arg(long, value_name = "ID")]
    pub client_id: String,
}

/// The command line, or the process ends with clap's message, which names the option: when the value it rejects
/// came from an environment variable (`TM_METRICS`, not `--metrics`), that variable is named too.
pub fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    Cli::try_parse_from(&args).unwrap_or_else(|error| {
        if !error.use_stderr() {
            error.exit(); // --help, --version
        }
        let set = |name: &str| std::env::var_os(name).is_some();
        let notes = environment_notes(&error.render().to_string(), &args, set);
        let _ = error.print();
        for note in notes {
            eprintln!("{note}");
        }
        std::process::exit(error.exit_code())
    })
}

/// For each option `message` names that was not on the command line but whose environment variable is set: a line
/// saying the value came from that variable.
fn environment_notes(message: &str, args: &[std::ffi::OsString], set: impl Fn(&str) -> bool) -> Vec<String> {
    use clap::CommandFactory;
    let given = |long: &str| {
        args.iter().filter_map(|a| a.to_str()).any(|a| a == format!("--{long}") || a.starts_with(&format!("--{long}=")))
    };
    let mut notes = Vec::new();
    for command in Cli::command().get_subcommands() {
        for arg in command.get_arguments() {
            let (Some(long), Some(env)) = (arg.get_long(), arg.get_env().and_then(|e| e.to_str())) else { continue };
            let named = message.contains(&format!("--{long} ")) || message.contains(&format!("--{long}>"));
            let note = format!("note: --{long} was given by the environment variable {env}");
            if named && !given(long) && set(env) && !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    notes
}

/// Runs the chosen subcommand and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        CliCommand::Run(args) => run::run(&args),
        CliCommand::Demo(args) => demo::run(&args),
        CliCommand::Check(args) => check::run(&args),
        CliCommand::Invite(args) => invite::run(&args),
        CliCommand::Sandbox(args) => sandbox::run(&args),
        CliCommand::Soak(args) => soak::run(&args),
        CliCommand::Bench(args) => bench::run(&args),
        CliCommand::Convert(args) => convert::run(&args),
        CliCommand::Health(args) => health::run(&args),
    }
}

/// The personas of a folder (with the default configuration), for `command`s that bring their own server (the demo,
/// the sandbox); every problem is printed and `None` returned when a file is bad.
fn personas_of(dir: &std::path::Path, command: &str) -> Option<Vec<crate::core::persona::Persona>> {
    let sources = crate::files::Sources { personas_dir: Some(dir.to_owned()), ..crate::files::Sources::default() };
    match crate::files::load_setup(&sources) {
        Ok(setup) => Some(setup.personas.all().to_vec()),
        Err(problems) => {
            print_problems(&problems, command);
            None
        }
    }
}

/// Prints every problem found in the set-up, then how many errors stop `what` (the bot, the demo, the sandbox).
fn print_problems(problems: &crate::core::problems::Problems, what: &str) {
    for problem in &problems.0 {
        eprintln!("{problem}");
    }
    let errors = problems.errors().count();
    eprintln!("\n{errors} error{} found; {what} will not start until they are fixed.", check::plural(errors));
}

/// Runs an async subcommand on a new runtime; an error is printed with its causes and fails the process (exit status
/// 2 for a [`crate::errors::SetupError`], 1 for any other).
fn run_async(job: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let result = tokio::runtime::Runtime::new()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
        .and_then(|runtime| runtime.block_on(job));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", crate::errors::with_causes(e.as_ref()));
            ExitCode::from(crate::errors::exit_status_of(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::environment_notes;
    use std::ffi::OsString;

    #[test]
    fn a_rejected_value_that_came_from_the_environment_names_its_variable() {
        let message = "error: invalid value 'localhost:9' for '--metrics <ADDR>': invalid socket address syntax";
        let args = |line: &str| line.split(' ').map(OsString::from).collect::<Vec<_>>();
        let only = |name: &'static str| move |env: &str| env == name;
        let notes = environment_notes(message, &args("turn-manager run"), only("TM_METRICS"));
        assert_eq!(notes, ["note: --metrics was given by the environment variable TM_METRICS"]);
        let typed = environment_notes(message, &args("turn-manager run --metrics localhost:9"), only("TM_METRICS"));
        assert!(typed.is_empty(), "typed on the command line: {typed:?}");
        assert!(environment_notes(message, &args("turn-manager run"), only("TM_SHARDS")).is_empty());
    }
}
