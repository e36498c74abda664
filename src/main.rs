//! The `turn-manager` binary: parses the command line, sets up logging, and runs the chosen subcommand.

use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;
use turn_manager::cli::CliCommand;

/// mimalloc rather than glibc's malloc: in a profile of `turn-manager bench`'s turns phase the bot spent about a
/// fifth of its CPU in glibc's malloc and free (`malloc_consolidate` alone 4%: larger allocations make it sort the
/// small chunks freed meanwhile); with mimalloc it needs 15-25% less CPU per turn and per message and keeps less
/// memory per idle session (README, Performance). What it keeps once freed is handed back in quiet spells
/// (`discord/memory.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = turn_manager::cli::parse();
    // The demo prints the channel on stdout; only problems go to the log there, unless RUST_LOG asks for more.
    let default = match cli.command {
        CliCommand::Demo(_) => "warn,serenity=error",
        _ => "info,serenity=warn",
    };
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours(std::io::stderr().is_terminal(), std::env::var("NO_COLOR").ok()))
        .with_filter(log_filter(std::env::var("RUST_LOG").ok(), default));
    // Not a log: how the bot sees serenity begin to reconnect a shard, whatever RUST_LOG says.
    tracing_subscriber::registry().with(log).with(turn_manager::discord::reconnecting::layer()).init();
    turn_manager::cli::run(cli)
}

/// Whether the log is coloured: on a terminal only, and not when `NO_COLOR` is set (no-color.org). journald, `docker
/// logs` and a file would keep the escape codes as text (found by a review).
fn colours(stderr_is_terminal: bool, no_color: Option<String>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// RUST_LOG if it is set and valid, else `default`. serenity stays at WARN unless RUST_LOG names it: at INFO it logs
/// every request and event, and the span of `#[instrument]` on its `Shard::handle_event` formats each gateway event
/// (a whole message, with `Debug`); with `RUST_LOG=info` that was 15 to 20% of the bot's CPU in the messages bench,
/// for nothing a person reads.
fn log_filter(rust_log: Option<String>, default: &str) -> EnvFilter {
    let Some(spec) = rust_log.filter(|spec| !spec.trim().is_empty()) else { return EnvFilter::new(default) };
    let spec = if spec.contains("serenity") { spec } else { format!("{spec},serenity=warn") };
    EnvFilter::try_new(spec).unwrap_or_else(|_| EnvFilter::new(default))
}

#[cfg(test)]
mod tests {
    use super::{colours, log_filter};

    #[test]
    fn the_log_is_coloured_on_a_terminal_only_and_never_with_no_color() {
        assert!(colours(true, None) && colours(true, Some(String::new())));
        assert!(!colours(false, None), "a pipe or a file (journald, docker logs)");
        assert!(!colours(true, Some("1".into())));
    }

    #[test]
    fn serenity_stays_at_warn_unless_rust_log_names_it() {
        let filter = |rust_log: Option<&str>| log_filter(rust_log.map(str::to_owned), "info,serenity=warn").to_string();
        assert!(filter(Some("info")).contains("serenity=warn"), "{}", filter(Some("info")));
        assert!(filter(Some("debug,turn_manager=trace")).contains("serenity=warn"));
        let named = filter(Some("info,serenity::client::dispatch=debug"));
        assert!(named.contains("serenity::client::dispatch=debug") && !named.contains("serenity=warn"), "{named}");
        assert!(filter(None).contains("serenity=warn") && filter(Some(" ")).contains("serenity=warn"));
    }
}
