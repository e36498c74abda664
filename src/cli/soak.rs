//! `turn-manager soak`: the bot as a process, killed with SIGKILL at random instants and started again, while
//! scripted agents talk in three channels of the local Discord-compatible server; prints the figures and every
//! violation, and fails if there is one.

use crate::soak::faults::FaultGroup;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How many times the bot is killed with SIGKILL (and started again)
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub kills: u32,
    /// Seeds the kill instants, the down times and the agents' timing [default: from the clock; printed]
    #[arg(long)]
    pub seed: Option<u64>,
    /// A new or empty folder for the run's files and the bot's log [default: a new folder in the temporary folder]
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Keep the folder even when no violation is found
    #[arg(long)]
    pub keep: bool,
    /// Also inject the local server's faults while the bot is up: gateway, dispatch, rest, slow (comma-separated),
    /// or all
    #[arg(long, value_name = "GROUPS", value_parser = fault_groups)]
    pub faults: Option<FaultGroups>,
}

/// The fault groups of `--faults`, as one value (clap would read a bare `Vec` as a repeated option).
#[derive(Clone, Debug)]
pub struct FaultGroups(Vec<FaultGroup>);

fn fault_groups(text: &str) -> Result<FaultGroups, String> {
    crate::soak::faults::parse_groups(text).map(FaultGroups)
}

/// How many violations are printed one by one (all are counted in the table).
const VIOLATIONS_PRINTED: usize = 40;

pub fn run(args: &SoakArgs) -> ExitCode {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("turn-manager-soak-{}", std::process::id())));
    if std::fs::read_dir(&work).is_ok_and(|mut entries| entries.next().is_some()) {
        eprintln!("error: {} is not empty; give a new or empty folder (--work-dir)", work.display());
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: cannot find this program's own file to run the bot with: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&work) {
        eprintln!("error: cannot create {}: {e}", work.display());
        return ExitCode::FAILURE;
    }
    let faults = args.faults.clone().map(|groups| groups.0).unwrap_or_default();
    let options = crate::soak::Options { kills: args.kills, seed, work: work.clone(), exe, faults };
    println!("soak: {} kill(s), seed {seed}, files in {}", args.kills, work.display());
    let keep = args.keep;
    super::run_async(async move {
        let summary = crate::soak::run(&options, &|line| eprintln!("{line}")).await?;
        println!("\n{}", summary.table());
        for violation in summary.violations.iter().take(VIOLATIONS_PRINTED) {
            println!("violation: {violation}");
        }
        if summary.violations.len() > VIOLATIONS_PRINTED {
            println!("... and {} more", summary.violations.len() - VIOLATIONS_PRINTED);
        }
        if !summary.violations.is_empty() {
            anyhow::bail!(
                "{} violation(s); the files and the bot's log (bot.log) are kept in {}",
                summary.violations.len(),
                work.display()
            );
        }
        if !keep {
            let _ = std::fs::remove_dir_all(&work);
        }
        Ok(())
    })
}
