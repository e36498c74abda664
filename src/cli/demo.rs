//! `turn-manager demo`: runs the demo (or a preset's, with `--preset`) in a fresh state folder that is removed
//! afterwards, also when Ctrl-C stops it.

use super::DemoArgs;
use crate::demo::preset::{self, PRESETS_DIR, PresetError};
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &DemoArgs) -> ExitCode {
    let state_dir = std::env::temp_dir().join(format!("turn-manager-demo-{}", std::process::id()));
    let code = play(args, &state_dir);
    // Once the runtime is gone and the store's writer has written what was queued, so that nothing writes there
    // any more.
    if !crate::store::writer::writers_ended_within(std::time::Duration::from_secs(5)) {
        eprintln!("warning: the store was still writing after 5 s; {} may be left behind", state_dir.display());
    }
    let _ = std::fs::remove_dir_all(&state_dir);
    code
}

/// Ends the demo at Ctrl-C, rather than letting the signal kill the process, which left the state folder behind
/// (found by a review).
async fn until_interrupted<T>(demo: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::select! {
        outcome = demo => outcome,
        _ = tokio::signal::ctrl_c() => anyhow::bail!("stopped by Ctrl-C"),
    }
}

fn play(args: &DemoArgs, state_dir: &Path) -> ExitCode {
    let rounds = args.rounds;
    let Some(name) = &args.preset else {
        let Some(personas) = super::personas_of(&args.personas, "the demo") else { return ExitCode::FAILURE };
        return super::run_async(async move {
            crate::demo::summarize(&until_interrupted(crate::demo::run(rounds, personas, state_dir)).await?)
        });
    };
    let preset = match preset::load(Path::new(PRESETS_DIR), name) {
        Ok(preset) => preset,
        Err(PresetError::Invalid { name, problems }) => {
            eprintln!("The preset \"{name}\" cannot be played:");
            super::print_problems(&problems, "the demo");
            return ExitCode::FAILURE;
        }
        Err(unknown) => {
            eprintln!("error: {unknown}");
            return ExitCode::FAILURE;
        }
    };
    super::run_async(async move {
        crate::demo::summarize_preset(&until_interrupted(crate::demo::run_preset(preset, rounds, state_dir)).await?)
    })
}
