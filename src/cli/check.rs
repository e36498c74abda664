//! `turn-manager check`: validates the personas and configuration, prints them, or prints every error.

use super::SourceArgs;
use crate::core::config::{Config, DisplayModeSetting, OutOfTurnPolicy};
use crate::files::{Setup, load_setup};
use std::fmt::Write as _;
use std::process::ExitCode;

pub fn run(args: &SourceArgs) -> ExitCode {
    match load_setup(&args.sources()) {
        Ok(setup) => {
            // Found by a review: `check` said OK to a state folder that is a file, which `run` then refused. (Only
            // here: the other commands that read the setup keep no sessions in it; not with `TM_STORE`, the store
            // `run` uses instead.)
            let state = &setup.config.state_dir;
            let given = std::env::var("TM_STORE").ok();
            let elsewhere = matches!(super::run::store_of(given.as_deref()), Ok(Some(_)) | Err(_));
            if !elsewhere && std::fs::symlink_metadata(state).is_ok() && !state.is_dir() {
                eprintln!(
                    "error: {}: is not a folder (or a link to one): the state folder (stateDir, or --state) must be a \
                     folder, or not exist yet",
                    state.display()
                );
                return ExitCode::FAILURE;
            }
            print!("{}", report(&setup));
            ExitCode::SUCCESS
        }
        Err(problems) => {
            super::print_problems(&problems, "the bot");
            ExitCode::FAILURE
        }
    }
}

/// The report printed for a valid setup: the personas as a table, then the effective settings.
pub fn report(setup: &Setup) -> String {
    let config = &setup.config;
    let mut out = String::new();
    let source = setup
        .config_file
        .as_ref()
        .map_or_else(|| "none found, using defaults".to_owned(), |path| path.display().to_string());
    let _ = writeln!(out, "Configuration: {source}");
    let count = setup.personas.all().len();
    let _ = writeln!(out, "Personas in {}: {count}", setup.personas_dir.display());

    let rows: Vec<[String; 4]> = setup
        .personas
        .all()
        .iter()
        .map(|p| {
            let timeout = match p.timeout_seconds {
                Some(s) => format!("{s}s"),
                None => format!("{}s (default)", config.default_timeout_seconds),
            };
            [p.id.to_string(), p.display_name.clone(), p.discord_user_id.to_string(), timeout]
        })
        .collect();
    let header = ["ID", "DISPLAY NAME", "DISCORD USER", "TIMEOUT"].map(String::from);
    let widths: Vec<usize> =
        (0..4).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }

    let _ = writeln!(out, "Settings:");
    for (name, value) in settings(config) {
        let _ = writeln!(out, "  {name:<18} {value}");
    }
    let warnings: Vec<_> = setup.warnings.warnings().collect();
    if !warnings.is_empty() {
        let _ = writeln!(out, "Warnings:");
        for warning in &warnings {
            let _ = writeln!(out, "  {warning}");
        }
    }
    let _ = writeln!(out, "OK: {count} persona{} ready.", plural(count));
    out
}

fn settings(config: &Config) -> Vec<(&'static str, String)> {
    let channels = if config.channels.is_empty() {
        "none".to_owned()
    } else {
        config
            .channels
            .iter()
            .map(|c| {
                let roster = if c.roster.is_empty() {
                    "all personas".to_owned()
                } else {
                    c.roster.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" ")
                };
                format!("{} ({roster})", c.channel_id)
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    vec![
        ("signals", describe_signals(&config.signals)),
        ("default timeout", format!("{}s", config.default_timeout_seconds)),
        ("announce timeouts", if config.announce_timeouts { "yes" } else { "no" }.to_owned()),
        (
            "display mode",
            match config.display_mode {
                DisplayModeSetting::Auto => "auto (relay where permitted, else observe)",
                DisplayModeSetting::Relay => "relay",
                DisplayModeSetting::Observe => "observe",
            }
            .to_owned(),
        ),
        (
            "out of turn",
            match config.out_of_turn {
                OutOfTurnPolicy::Remove => "remove (deleted in relay mode, text kept in history)",
                OutOfTurnPolicy::Allow => "allow (left alone, recorded)",
            }
            .to_owned(),
        ),
        (
            "control roles",
            if config.control_roles.is_empty() {
                "none (administrators and Manage Channels only)".to_owned()
            } else {
                config.control_roles.join(", ")
            },
        ),
        ("channels at start", channels),
        ("history limit", format!("{} events per session file (full log kept beside it)", config.history_limit)),
        ("personas folder", config.personas_dir.display().to_string()),
        ("state folder", config.state_dir.display().to_string()),
    ]
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What becomes of unknown signals. Either setting turns them off (neither answered nor counted): an `unknownPattern`
/// null or empty too, whatever `unknownLimit` says (found by a newcomer: "3 in a row end the turn" was said then).
fn describe_unknown(signals: &crate::core::signals::SignalRules) -> String {
    match signals.recovery.unknown_limit {
        _ if !signals.detects_unknown() => "off (unknownPattern is null or empty)".to_owned(),
        0 => "off (unknownLimit is 0)".to_owned(),
        limit => format!("{limit} in a row end the turn"),
    }
}

/// One line per rule (`name: action at end, from dev`), then the recovery settings.
fn describe_signals(signals: &crate::core::signals::SignalRules) -> String {
    let mut lines: Vec<String> = signals
        .rules()
        .iter()
        .map(|rule| {
            let at = match rule.at {
                crate::core::signals::At::End => "at the end",
                crate::core::signals::At::Line => "at a line start",
                crate::core::signals::At::Anywhere => "anywhere",
            };
            let to = rule.action.target().map(|p| format!(" to {p}")).unwrap_or_default();
            let from = if rule.from.is_empty() {
                String::new()
            } else {
                format!(", from {}", rule.from.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" "))
            };
            let priority = if rule.priority == 0 { String::new() } else { format!(", priority {}", rule.priority) };
            format!("{}: {}{to} {at}{from}{priority}", rule.name, rule.action.name())
        })
        .collect();
    let r = &signals.recovery;
    let off = |n: u32| if n == 0 { "off".to_owned() } else { n.to_string() };
    let mut recovery = format!(
        "unknown signals: {}; bench after {} timeouts; loop after {}",
        describe_unknown(signals),
        off(r.bench_after),
        off(r.loop_after)
    );
    if let Some(max) = r.max_rounds {
        recovery.push_str(&format!("; at most {max} rounds"));
    }
    if r.grace_seconds > 0 {
        recovery.push_str(&format!("; {}s grace", r.grace_seconds));
    }
    if let Some(silence) = r.silence_seconds {
        recovery.push_str(&format!("; a turn ends after {silence}s of silence"));
    }
    if !r.completion_phrases.is_empty() {
        recovery.push_str(&format!("; completion phrases: {}", r.completion_phrases.join(", ")));
    }
    lines.push(recovery);
    // Continuation lines line up under the value column of `settings`' table.
    lines.join(&format!("\n{:21}", ""))
}
