//! store-compare: measures durable group commits of turn-manager sessions (issue 16) in a JSON-lines journal,
//! SQLite (WAL) and redb, against the floor of one append and one `fdatasync`; see README.md.

mod args;
mod checkpoint;
mod crash;
mod disk;
mod report;
mod round;
mod run;
mod stats;
mod store;
mod workload;

use args::Options;
use report::Report;
use std::path::Path;
use std::process::ExitCode;
use store::Result;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some(crash::CHILD) => crash::child(&args[1..]),
        _ => Options::parse(&args).and_then(|options| measure_all(&options)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs every round in a new folder under `--dir`, removes it (unless `--keep`), prints the tables.
fn measure_all(options: &Options) -> Result<()> {
    let base = options.dir.join(format!("store-compare-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    let base = base.canonicalize()?;
    describe(options, &base);
    let mut report = Report::default();
    let outcome = (0..options.rounds).try_for_each(|round| round::measure(options, &base, round, &mut report));
    if !options.keep {
        std::fs::remove_dir_all(&base)?;
    }
    report.print();
    outcome
}

fn describe(options: &Options, base: &Path) {
    let sample = workload::Workload::new(options.channels.min(100)).batch(options.channels.min(100));
    let sessions = sample.iter().map(|s| s.session.len()).sum::<usize>() / sample.len();
    let events: Vec<usize> = sample.iter().flat_map(|s| s.events.iter().map(|(_, e)| e.len())).collect();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    println!("## store-compare\n");
    println!("- folder: {} ({cores} cores)", base.display());
    println!(
        "- a save: a session of {sessions} bytes on average and {} events of {} bytes",
        events.len() / sample.len(),
        events.iter().sum::<usize>() / events.len().max(1)
    );
    match options.count {
        Some(count) => println!("- {count} batches per configuration, {} channels", options.channels),
        None => println!("- {} s of commits per configuration, {} channels", options.seconds, options.channels),
    }
}
