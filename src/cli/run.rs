//! `turn-manager run`: the bot on Discord. Reads the token from `DISCORD_TOKEN` (never printed), the set-up from
//! disk, connects, and shuts down gracefully on Ctrl-C or SIGTERM.

use super::RunArgs;
use crate::core::shards::ShardRange;
use crate::discord::{self, BotOptions};
use crate::files::load_setup;
use crate::sessions::location::StoreLocation;
use crate::sessions::{self, LeaseOptions};
use std::process::ExitCode;
use std::time::Duration;

pub fn run(args: &RunArgs) -> ExitCode {
    let missing = |what: &str, example: &str| {
        eprintln!(
            "error: DISCORD_TOKEN {what}. Put your bot's token in it (developer portal → your application → Bot → \
             Reset Token){example}."
        );
        ExitCode::from(crate::errors::EXIT_SETUP)
    };
    let token = match std::env::var("DISCORD_TOKEN") {
        Ok(token) if !token.trim().is_empty() => token,
        Ok(_) => return missing("is empty", ""),
        _ => return missing("is not set", ", e.g. `DISCORD_TOKEN=... turn-manager run`"),
    };
    let token = match discord::clean_token(&token) {
        Ok(token) => token,
        Err(e) => {
            eprintln!("error: DISCORD_TOKEN: {e}");
            return ExitCode::from(crate::errors::EXIT_SETUP);
        }
    };
    let shards = match (&args.shards, args.total_shards) {
        (None, None) => None,
        (None, Some(total)) => Some(ShardRange::parse(&format!("0-{}", total.saturating_sub(1)), total)),
        (Some(range), Some(total)) => Some(ShardRange::parse(range, total)),
        (Some(_), None) => unreachable!("clap requires --total-shards with --shards"),
    };
    let shards = match shards.transpose() {
        Ok(shards) => shards,
        Err(e) => {
            eprintln!("error: --shards/--total-shards (TM_SHARDS/TM_TOTAL_SHARDS): {e}");
            return ExitCode::from(crate::errors::EXIT_SETUP);
        }
    };
    let store = match store_of(args.store.as_deref()) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("error: --store (TM_STORE): {e}");
            return ExitCode::from(crate::errors::EXIT_SETUP);
        }
    };
    let setup = match load_setup(&args.sources.sources()) {
        Ok(setup) => setup,
        Err(problems) => {
            super::print_problems(&problems, "the bot");
            return ExitCode::from(crate::errors::EXIT_SETUP);
        }
    };
    for warning in &setup.warnings.0 {
        eprintln!("{warning}");
    }
    let api_base = match args.api_base.as_deref().map(api_base_of).transpose() {
        Ok(base) => base.flatten(),
        Err(e) => {
            eprintln!("error: --api-base (DISCORD_API_BASE): {e}");
            return ExitCode::from(crate::errors::EXIT_SETUP);
        }
    };
    let metrics = args.metrics;
    let location = store.unwrap_or_else(|| StoreLocation::Folder(setup.config.state_dir.clone()));
    let leases = LeaseOptions { ttl: Duration::from_secs(args.lease_seconds), ..LeaseOptions::default() };
    super::run_async(async move {
        // Listened for from the first instant: a stop asked for during start-up (a database or Discord slow to
        // answer) ends it (found by a review: until the start was done the signal killed the process, and a
        // container's first process, which the kernel gives no default action, ignored it until SIGKILL).
        let mut signal = std::pin::pin!(shutdown_signal());
        let starting = async {
            let store = sessions::open(&location, leases).await?;
            if let Some(range) = shards {
                tracing::info!("running {range}");
            }
            let options =
                BotOptions { token, api_base, config: setup.config, personas: setup.personas, store, shards, metrics };
            discord::start(options).await
        };
        let bot = tokio::select! {
            biased; // the signal's handler is installed at its first poll
            signal = &mut signal => {
                // What the start did so far is durable, as at any instant: the next start goes on from it.
                tracing::info!("{signal} during start-up: stopping");
                return Ok(());
            }
            bot = starting => bot?,
        };
        serve(bot, signal).await
    })
}

/// Runs the bot until a shutdown `signal`, or until the gateway refuses it.
async fn serve(
    mut bot: discord::RunningBot,
    signal: std::pin::Pin<&mut impl std::future::Future<Output = &'static str>>,
) -> anyhow::Result<()> {
    let signal = tokio::select! {
        signal = signal => signal,
        ended = bot.finished() => return ended,
    };
    tracing::info!("{signal}: shutting down");
    bot.shutdown().await;
    Ok(())
}

/// Waits for Ctrl-C or SIGTERM and says which came.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return ctrl_c().await,
        };
        tokio::select! {
            name = ctrl_c() => name,
            _ = term.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    ctrl_c().await
}

async fn ctrl_c() -> &'static str {
    match tokio::signal::ctrl_c().await {
        Ok(()) => "Ctrl-C",
        Err(_) => std::future::pending().await,
    }
}

/// The store `--store` (`TM_STORE`) names; `None` for the state folder. An empty one is unset, as `check` takes it
/// (found by a review: `TM_STORE=` left in an env file passed `check` and was refused by `run`). Quotes an env file
/// kept are taken off, as the token's are (Docker's `--env-file` keeps them, systemd's `EnvironmentFile` does not:
/// found by a review, `"postgres://…"` became a folder of that name, password and all).
pub(super) fn store_of(given: Option<&str>) -> Result<Option<StoreLocation>, String> {
    let unquoted = |text: &str| {
        let text = text.trim();
        ['"', '\''].iter().find_map(|q| text.strip_prefix(*q)?.strip_suffix(*q)).unwrap_or(text).to_owned()
    };
    given.map(unquoted).filter(|text| !text.trim().is_empty()).map(|text| StoreLocation::parse(&text)).transpose()
}

/// The API base as given, checked: empty is none (an unset variable in an env file); an http(s) address, with a
/// path up to `/api/v10` taken off (what `sandbox.json` calls `apiUrl`, the agents' base, is accepted too).
fn api_base_of(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let shown = crate::sessions::location::redact(text);
    let url = reqwest::Url::parse(text).map_err(|e| {
        format!("`{shown}` is not a URL ({e}); give the server's address, e.g. http://127.0.0.1:3710 (the sandbox)")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!("`{shown}` is not an http(s) address, e.g. http://127.0.0.1:3710 (the sandbox)"));
    }
    let base = text.trim_end_matches('/');
    let base = base.strip_suffix("/api/v10").or_else(|| base.strip_suffix("/api")).unwrap_or(base);
    Ok(Some(base.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::{api_base_of, store_of};
    use crate::sessions::location::StoreLocation;

    #[test]
    fn a_store_from_an_env_file_empty_or_quoted_is_read_as_meant() {
        for empty in [None, Some(""), Some("  ")] {
            assert!(matches!(store_of(empty), Ok(None)), "{empty:?}");
        }
        assert!(matches!(store_of(Some("/srv/state")), Ok(Some(StoreLocation::Folder(_)))));
        assert!(store_of(Some("postgress://x")).is_err(), "a mistyped scheme is still refused");
        for quoted in ["\"postgres://u:pw@h/d\"", "'postgres://u:pw@h/d'"] {
            assert!(matches!(store_of(Some(quoted)), Ok(Some(StoreLocation::Postgres(_)))), "{quoted}");
        }
        assert!(matches!(store_of(Some("\"\"")), Ok(None)), "quotes around nothing");
    }

    #[test]
    fn an_api_base_is_an_http_address_taken_without_its_api_path() {
        for given in [
            "http://127.0.0.1:3799",
            "http://127.0.0.1:3799/",
            "http://127.0.0.1:3799/api/v10",
            " http://127.0.0.1:3799/api/ ",
        ] {
            assert_eq!(api_base_of(given), Ok(Some("http://127.0.0.1:3799".into())), "{given}");
        }
        assert_eq!(api_base_of("https://proxy.example/discord"), Ok(Some("https://proxy.example/discord".into())));
        assert_eq!(api_base_of("  "), Ok(None), "an empty variable is no base");
        let error = api_base_of("ftp://proxyuser:s3cretpw@127.0.0.1:9").unwrap_err();
        assert!(!error.contains("s3cretpw"), "a password never shows: {error}");
        for bad in ["not a url", "127.0.0.1:3799", "ftp://host", "unix:/tmp/sock"] {
            let error = api_base_of(bad).unwrap_err();
            assert!(error.contains(bad) && error.contains("http://127.0.0.1:3710"), "{bad}: {error}");
        }
    }
}
