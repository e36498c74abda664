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
    let personas = setup.personas.all().to_vec();
    let rounds = args.rounds;
    super::run_async(async move {
        let outcome = crate::demo::run(rounds, personas, &state_dir).await;
        let _ = std::fs::remove_dir_all(&state_dir);
        crate::demo::summarize(&outcome?)
    })
}
