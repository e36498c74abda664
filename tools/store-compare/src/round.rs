//! One round of measurements, each in fresh folders removed after it: the raw `fdatasync` tests, every store at
//! every batch size (all stores interleaved, or one after another; with a crash at one size), the journal's
//! checkpoints and their syncs. Odd rounds go through the lists backwards, so that no configuration always runs
//! first or last.

use crate::args::Options;
use crate::report::Report;
use crate::run::{self, Settings};
use crate::store::floor::{self, RawTest};
use crate::store::{Kind, Result};
use crate::{crash, disk};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn measure(options: &Options, base: &Path, round: usize, report: &mut Report) -> Result<()> {
    let settings = Settings {
        channels: options.channels,
        seconds: options.seconds,
        count: options.count,
        rotate_bytes: options.rotate_mb << 20,
        recovery: options.recovery,
    };
    if options.raw {
        let tests: [(&str, RawTest); 2] =
            [("append", floor::append_4k), ("overwrite, preallocated", floor::overwrite_4k)];
        for (name, test) in in_order(tests.to_vec(), round) {
            let dir = base.join(format!("raw-r{round}"));
            std::fs::create_dir_all(&dir)?;
            let load = disk::load();
            eprintln!("round {round}: raw 4 KiB {name} (load {load})");
            report.raw(name, load, test(&dir, options.seconds, options.count)?);
            std::fs::remove_dir_all(&dir)?;
        }
    }
    let crash_batch = if options.batches.contains(&100) { 100 } else { options.batches[0] };
    for batch in in_order(options.batches.clone(), round) {
        let stores = in_order(options.stores.clone(), round);
        // Interleaved: all the stores in one run; otherwise one run per store.
        let runs: Vec<Vec<Kind>> =
            if options.interleave { vec![stores] } else { stores.into_iter().map(|kind| vec![kind]).collect() };
        for kinds in runs {
            let dirs: Vec<PathBuf> =
                kinds.iter().map(|kind| base.join(format!("{}-{batch}-r{round}", kind.name()))).collect();
            let load = disk::load();
            let names: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
            eprintln!("round {round}: B={batch} {} (load {load})", names.join(", "));
            for (kind, outcome) in kinds.iter().zip(run::commits(&kinds, batch, &dirs, &settings)?) {
                report.commit(kind.name(), batch, load.clone(), outcome);
            }
            for (&kind, dir) in kinds.iter().zip(&dirs) {
                if options.crash && batch == crash_batch && kind != Kind::Floor {
                    let load = disk::load();
                    let run_for = Duration::from_millis(options.crash_ms);
                    let crashed = crash::crash_and_recover(kind, dir, batch, &settings, run_for)?;
                    report.crash(kind.name(), batch, load, crashed);
                }
                std::fs::remove_dir_all(dir)?;
            }
        }
        if options.checkpoint {
            let dir = base.join(format!("checkpoint-{batch}-r{round}"));
            let load = disk::load();
            eprintln!("round {round}: checkpoint B={batch} (load {load})");
            report.checkpoint(batch, load, run::checkpoints(batch, &dir, &settings)?);
            std::fs::remove_dir_all(&dir)?;
        }
    }
    if options.checkpoint {
        let dir = base.join(format!("checkpoint-sync-r{round}"));
        let load = disk::load();
        eprintln!("round {round}: checkpoint sync (load {load})");
        for (name, took) in run::checkpoint_sync(&dir, &settings, 3)? {
            report.sync(name, load.clone(), took);
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// The list as given in even rounds, reversed in odd ones, so that no configuration always runs first or last.
fn in_order<T>(mut list: Vec<T>, round: usize) -> Vec<T> {
    if round % 2 == 1 {
        list.reverse();
    }
    list
}
