//! The figures of every round, printed at the end as Markdown tables: one row per configuration, the rounds'
//! values side by side (`round 1 / round 2`), with the one-minute load average when each was measured.

use crate::crash::Crashed;
use crate::run::Outcome;
use crate::stats::{Summary, ms};
use std::time::Duration;

/// Values of one configuration over the rounds, in the order first seen.
struct Series<T> {
    rows: Vec<(String, Vec<(String, T)>)>,
}

impl<T> Default for Series<T> {
    fn default() -> Self {
        Series { rows: Vec::new() }
    }
}

impl<T> Series<T> {
    fn add(&mut self, key: String, load: String, value: T) {
        match self.rows.iter_mut().find(|(k, _)| *k == key) {
            Some((_, values)) => values.push((load, value)),
            None => self.rows.push((key, vec![(load, value)])),
        }
    }
}

#[derive(Default)]
pub struct Report {
    raw: Series<Summary>,
    commits: Series<(usize, Outcome)>,
    crashes: Series<Crashed>,
    checkpoints: Series<(usize, Summary)>,
    syncs: Series<Duration>,
}

impl Report {
    pub fn raw(&mut self, name: &str, load: String, summary: Summary) {
        self.raw.add(name.to_owned(), load, summary);
    }

    pub fn commit(&mut self, store: &str, batch: usize, load: String, outcome: Outcome) {
        self.commits.add(format!("{store} | {batch}"), load, (batch, outcome));
    }

    pub fn crash(&mut self, store: &str, batch: usize, load: String, crashed: Crashed) {
        self.crashes.add(format!("{store} | {batch}"), load, crashed);
    }

    pub fn checkpoint(&mut self, batch: usize, load: String, summary: Summary) {
        self.checkpoints.add(batch.to_string(), load, (batch, summary));
    }

    pub fn sync(&mut self, name: &str, load: String, took: Duration) {
        self.syncs.add(name.to_owned(), load, took);
    }

    pub fn print(&self) {
        if !self.raw.rows.is_empty() {
            println!("\n### Raw fdatasync (one 4 KiB write + fdatasync)\n");
            header(&["test", "ops/s", "p50 ms", "p99 ms", "max ms", "load"]);
            for (key, values) in &self.raw.rows {
                let cells = [
                    key.clone(),
                    join(values, |s| num(s.rate())),
                    join(values, |s| num(ms(s.p50))),
                    join(values, |s| num(ms(s.p99))),
                    join(values, |s| num(ms(s.max))),
                    loads(values),
                ];
                row(&cells);
            }
        }
        if !self.commits.rows.is_empty() {
            println!("\n### Batch commits (latency: start of writing the batch to durable)\n");
            header(&[
                "store",
                "B",
                "batches",
                "batches/s",
                "saves/s",
                "p50 ms",
                "p99 ms",
                "max ms",
                "size MiB",
                "start-up warm ms",
                "start-up cold ms",
                "sessions read",
                "load",
            ]);
            for (key, values) in &self.commits.rows {
                let recovery = |f: fn(&crate::run::Recovery) -> Duration| {
                    join(values, |(_, o)| o.recovery.as_ref().map_or("-".to_owned(), |r| num(ms(f(r)))))
                };
                let cells = [
                    key.clone(),
                    join(values, |(_, o)| o.commits.count.to_string()),
                    join(values, |(_, o)| num(o.commits.rate())),
                    join(values, |(b, o)| num(o.commits.rate() * *b as f64)),
                    join(values, |(_, o)| num(ms(o.commits.p50))),
                    join(values, |(_, o)| num(ms(o.commits.p99))),
                    join(values, |(_, o)| num(ms(o.commits.max))),
                    join(values, |(_, o)| num(o.size as f64 / (1 << 20) as f64)),
                    recovery(|r| r.warm),
                    recovery(|r| r.cold),
                    join(values, |(_, o)| o.recovery.as_ref().map_or("-".to_owned(), |r| r.sessions.to_string())),
                    loads(values),
                ];
                row(&cells);
            }
        }
        let replays: Vec<_> = self
            .commits
            .rows
            .iter()
            .filter(|(_, values)| values.iter().any(|(_, (_, o))| o.replay.is_some()))
            .collect();
        if !replays.is_empty() {
            println!("\n### Journal start-up in parts, files out of the page cache\n");
            header(&["store", "B", "checkpoint files ms", "journal MiB", "replay ms", "replay MiB/s", "sessions"]);
            for (key, values) in replays {
                let part = |f: fn(&crate::store::journal::Replay) -> String| {
                    join(values, |(_, o)| o.replay.as_ref().map_or("-".to_owned(), f))
                };
                let cells = [
                    key.clone(),
                    part(|r| num(ms(r.checkpoint))),
                    part(|r| num(r.journal_bytes as f64 / (1 << 20) as f64)),
                    part(|r| num(ms(r.journal))),
                    part(|r| num(r.journal_bytes as f64 / (1 << 20) as f64 / r.journal.as_secs_f64())),
                    part(|r| r.sessions.to_string()),
                ];
                row(&cells);
            }
        }
        if !self.crashes.rows.is_empty() {
            println!("\n### Start-up after the writer was killed (SIGKILL) mid-run, files out of the page cache\n");
            header(&["store", "B", "start-up ms", "sessions", "load"]);
            for (key, values) in &self.crashes.rows {
                let cells = [
                    key.clone(),
                    join(values, |c| num(ms(c.recovery))),
                    join(values, |c| c.sessions.to_string()),
                    loads(values),
                ];
                row(&cells);
            }
        }
        if !self.checkpoints.rows.is_empty() {
            println!(
                "\n### Journal checkpoints, off the hot path: B session files (temp + rename) + events, no fsync\n"
            );
            header(&["B", "batches", "p50 ms", "p99 ms", "max ms", "saves/s", "load"]);
            for (key, values) in &self.checkpoints.rows {
                let cells = [
                    key.clone(),
                    join(values, |(_, s)| s.count.to_string()),
                    join(values, |(_, s)| num(ms(s.p50))),
                    join(values, |(_, s)| num(ms(s.p99))),
                    join(values, |(_, s)| num(ms(s.max))),
                    join(values, |(b, s)| num(s.rate() * *b as f64)),
                    loads(values),
                ];
                row(&cells);
            }
        }
        if !self.syncs.rows.is_empty() {
            println!("\n### Making a checkpoint of every channel durable (after writing all of them)\n");
            header(&["method", "ms (each try)", "load"]);
            for (key, values) in &self.syncs.rows {
                row(&[key.clone(), join(values, |d| num(ms(*d))), loads(values)]);
            }
        }
    }
}

fn header(names: &[&str]) {
    println!("| {} |", names.join(" | "));
    println!("|{}", "---|".repeat(names.len()));
}

fn row(cells: &[String]) {
    println!("| {} |", cells.join(" | "));
}

fn join<T>(values: &[(String, T)], f: impl Fn(&T) -> String) -> String {
    values.iter().map(|(_, v)| f(v)).collect::<Vec<_>>().join(" / ")
}

fn loads<T>(values: &[(String, T)]) -> String {
    values.iter().map(|(load, _)| load.as_str()).collect::<Vec<_>>().join(" / ")
}

/// Three significant figures or so, no more decimals than useful.
pub fn num(x: f64) -> String {
    match x.abs() {
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}
