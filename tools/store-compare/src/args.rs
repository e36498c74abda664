//! Command-line options (plain arguments, no parser crate).

use crate::store::{Kind, Result};
use std::path::PathBuf;

pub const USAGE: &str = "\
store-compare [options]
  --dir PATH          where the stores are written (a new folder inside it, removed at the end);
                      default: the current folder. Put it on the disk of the bot's state folder.
  --stores LIST       comma-separated, default floor,journal,sqlite-full,sqlite-normal,redb,files-today;
                      also journal+checkpointer (the journal with its checkpoint thread beside it: use
                      it with --sequential, its thread would disturb the stores interleaved with it)
  --batches LIST      saves per batch, default 1,10,100,1000
  --channels N        default 1000
  --seconds S         commit time per configuration, default 3
  --count N           batches per configuration instead of --seconds (for strace)
  --sequential        one store at a time; by default the stores of a batch size are interleaved, batch by
                      batch, each with the same saves, so that the machine's other work falls on all alike
  --rounds N          default 2; odd rounds run the stores and batch sizes in reverse order
  --rotate-mb N       the journal (and floor) file starts anew past this size, default 16: what start-up
                      replays (the bot cuts its journal at each checkpoint instead)
  --crash-ms N        how long the crash child commits before it is killed, default 1500
  --no-raw --no-checkpoint --no-recovery --no-crash   skip a part
  --keep              keep the folder";

#[derive(Clone, Debug)]
pub struct Options {
    pub dir: PathBuf,
    pub stores: Vec<Kind>,
    pub batches: Vec<usize>,
    pub channels: usize,
    pub seconds: f64,
    pub count: Option<usize>,
    pub interleave: bool,
    pub rounds: usize,
    pub rotate_mb: u64,
    pub crash_ms: u64,
    pub raw: bool,
    pub checkpoint: bool,
    pub recovery: bool,
    pub crash: bool,
    pub keep: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dir: PathBuf::from("."),
            stores: Kind::DEFAULT.to_vec(),
            batches: vec![1, 10, 100, 1000],
            channels: 1000,
            seconds: 3.0,
            count: None,
            interleave: true,
            rounds: 2,
            rotate_mb: 16,
            crash_ms: 1500,
            raw: true,
            checkpoint: true,
            recovery: true,
            crash: true,
            keep: false,
        }
    }
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"));
            match arg.as_str() {
                "--dir" => options.dir = PathBuf::from(value()?),
                "--stores" => {
                    options.stores = value()?
                        .split(',')
                        .map(|name| Kind::parse(name).ok_or_else(|| format!("unknown store {name}")))
                        .collect::<std::result::Result<_, _>>()?;
                }
                "--batches" => {
                    options.batches = value()?.split(',').map(str::parse).collect::<std::result::Result<_, _>>()?
                }
                "--channels" => options.channels = value()?.parse()?,
                "--seconds" => options.seconds = value()?.parse()?,
                "--count" => options.count = Some(value()?.parse()?),
                "--rounds" => options.rounds = value()?.parse()?,
                "--rotate-mb" => options.rotate_mb = value()?.parse()?,
                "--crash-ms" => options.crash_ms = value()?.parse()?,
                "--sequential" => options.interleave = false,
                "--no-raw" => options.raw = false,
                "--no-checkpoint" => options.checkpoint = false,
                "--no-recovery" => options.recovery = false,
                "--no-crash" => options.crash = false,
                "--keep" => options.keep = true,
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown option {other}\n{USAGE}").into()),
            }
        }
        if options.batches.iter().any(|&b| b == 0 || b > options.channels) {
            return Err("a batch holds 1 to --channels saves".into());
        }
        Ok(options)
    }
}
