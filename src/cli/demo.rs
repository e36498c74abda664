//! `turn-manager demo`: runs the demo (or a preset's, with `--preset`) in a fresh state folder that is removed
//! afterwards.

use super::DemoArgs;
use crate::demo::preset::{self, PRESETS_DIR, PresetError};
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &DemoArgs) -> ExitCode {
    let state_dir = std::env::temp_dir().join(format!("turn-manager-demo-{}", std::process::id()));
    let rounds = args.rounds;
    let Some(name) = &args.preset else {
        let Some(personas) = super::personas_of(&args.personas) else { return ExitCode::FAILURE };
        return super::run_async(async move {
            let outcome = crate::demo::run(rounds, personas, &state_dir).await;
            let _ = std::fs::remove_dir_all(&state_dir);
            crate::demo::summarize(&outcome?)
        });
    };
    let preset = match preset::load(Path::new(PRESETS_DIR), name) {
        Ok(preset) => preset,
        Err(PresetError::Invalid { name, problems }) => {
            eprintln!("The preset \"{name}\" cannot be played:");
            super::print_problems(&problems);
            return ExitCode::FAILURE;
        }
        Err(unknown) => {
            eprintln!("error: {unknown}");
            return ExitCode::FAILURE;
        }
    };
    super::run_async(async move {
        let outcome = crate::demo::run_preset(preset, rounds, &state_dir).await;
        let _ = std::fs::remove_dir_all(&state_dir);
        crate::demo::summarize_preset(&outcome?)
    })
}
