//! `turn-manager demo`: runs the demo in a fresh state folder that is removed afterwards.

use super::DemoArgs;
use crate::files::{Sources, load_setup};
use std::process::ExitCode;

pub fn run(args: &DemoArgs) -> ExitCode {
    let sources = Sources { personas_dir: Some(args.personas.clone()), ..Sources::default() };
    let setup = match load_setup(&sources) {
        Ok(setup) => setup,
        Err(problems) => {
            super::print_problems(&problems);
            return ExitCode::FAILURE;
        }
    };
    let state_dir = std::env::temp_dir().join(format!("turn-manager-demo-{}", std::process::id()));
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let personas = setup.personas.all().to_vec();
    let result = runtime.block_on(crate::demo::run(args.rounds, personas, &state_dir));
    let _ = std::fs::remove_dir_all(&state_dir);
    match result.and_then(|outcome| crate::demo::summarize(&outcome)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
