//! `turn-manager demo`: runs the demo in a fresh state folder that is removed afterwards.

use super::DemoArgs;
use std::process::ExitCode;

pub fn run(args: &DemoArgs) -> ExitCode {
    let Some(personas) = super::personas_of(&args.personas) else { return ExitCode::FAILURE };
    let state_dir = std::env::temp_dir().join(format!("turn-manager-demo-{}", std::process::id()));
    let rounds = args.rounds;
    super::run_async(async move {
        let outcome = crate::demo::run(rounds, personas, &state_dir).await;
        let _ = std::fs::remove_dir_all(&state_dir);
        crate::demo::summarize(&outcome?)
    })
}
