//! Store tests, on real files in temporary folders: saving and loading (`load`), the history log (`log`), the
//! writer thread's group commit (`writer`), recovery from the journal (`recover`) and replacing the journal
//! (`rotation`). This file holds what they share.

mod load;
mod log;
mod recover;
mod rotation;
mod writer;

use super::*;
use crate::core::config::Config;
use crate::core::ids::{PersonaId, UserId};
use crate::core::persona::PersonaCatalog;
use crate::core::session::history::HistoryEvent;
use crate::core::session::{Command, Context, Session};
use chrono::{DateTime, TimeDelta, Utc};

const CHANNEL: ChannelId = ChannelId(42);

fn catalog() -> PersonaCatalog {
    crate::core::persona::two_personas(90)
}

fn t0() -> DateTime<Utc> {
    "2026-03-01T10:00:00Z".parse().unwrap()
}

/// A started session of `channel` and the events of its start.
fn started_in(channel: ChannelId) -> (Session, Vec<HistoryEvent>) {
    let (config, personas) = (Config::default(), catalog());
    let mut session = Session::new(channel);
    let ctx = Context { personas: &personas, config: &config };
    let t = session.handle_command(&Command::Start { roster: vec![] }, None, t0(), ctx).unwrap();
    (session, t.events)
}

/// A started session of [`CHANNEL`] and the events of its start.
fn started() -> (Session, Vec<HistoryEvent>) {
    started_in(CHANNEL)
}

/// Skips the turn of `session` (started at [`t0`]) `n` times, one second apart: the events of each skip.
fn skips(session: &mut Session, config: &Config, n: i64) -> Vec<Vec<HistoryEvent>> {
    let personas = catalog();
    let ctx = Context { personas: &personas, config };
    (1..=n)
        .map(|i| session.handle_command(&Command::Skip, None, t0() + TimeDelta::seconds(i), ctx).unwrap().events)
        .collect()
}

fn open_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_at(dir.path());
    (dir, store)
}

/// The store of a state folder, its journal never replaced by size or age: a test that replaces it says so, and a
/// slow machine cannot replace it in the middle of another test.
fn open_at(state: &std::path::Path) -> Store {
    Store::open(state)
        .unwrap()
        .rotating(crate::store::rotation::Rotation { bytes: u64::MAX, age: std::time::Duration::from_secs(3600) })
}

/// The journal files in a state folder, oldest first.
fn journal_files(state: &std::path::Path) -> Vec<std::path::PathBuf> {
    journal::list_journals(state).unwrap().into_iter().map(|(_, path)| path).collect()
}
