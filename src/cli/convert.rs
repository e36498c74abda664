//! `turn-manager convert --from <store> --to <store>`: copies every session and its whole history between a state
//! folder and a Postgres database (either way), and says what it did.

use crate::sessions::convert::{Before, convert};
use crate::sessions::location::StoreLocation;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The store to copy from: a state folder, or a postgres://user@host/database URL
    #[arg(long, value_name = "FOLDER|URL")]
    pub from: String,
    /// The store to copy to: a state folder, or a postgres://user@host/database URL
    #[arg(long, value_name = "FOLDER|URL")]
    pub to: String,
    /// Replace a destination that already holds other sessions (a folder is moved aside, not deleted)
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &ConvertArgs) -> ExitCode {
    let parse = |flag: &str, text: &str| StoreLocation::parse(text).map_err(|e| format!("error: --{flag}: {e}"));
    let (from, to) = match (parse("from", &args.from), parse("to", &args.to)) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let force = args.force;
    super::run_async(async move {
        let converted = convert(&from, &to, force).await?;
        for problem in &converted.problems {
            eprintln!("warning: {problem}");
        }
        match &converted.before {
            Before::Identical => println!(
                "{to} already holds the same {} session(s) and {} history event(s) as {from}: nothing to do.",
                converted.sessions, converted.events
            ),
            before => {
                println!(
                    "Copied {} session(s) and {} history event(s) from {from} to {to}.",
                    converted.sessions, converted.events
                );
                match before {
                    Before::MovedAside(aside) => println!("What the folder held before is in {}.", aside.display()),
                    Before::Replaced { sessions, events } => {
                        println!("It replaced the {sessions} session(s) and {events} history event(s) it held before.")
                    }
                    Before::Empty | Before::Identical => {}
                }
            }
        }
        // Not a success for a script that goes on to delete the source (found by a review: it exited 0).
        if converted.left_behind > 0 {
            anyhow::bail!(
                "{} channel(s) of {from} had no readable session, or history lines this build cannot read, and were \
                 not copied whole (see the warnings above)",
                converted.left_behind
            );
        }
        Ok(())
    })
}
