//! The stores compared, behind one interface: open a folder, commit a batch of saves durably, read every session
//! back as a bot starting up would.
//!
//! - [`floor`]: the batch's bytes in one append and one `fdatasync` (no format, nothing to read back).
//! - [`journal`]: `crc32 json` lines appended in one write and one `fdatasync`; recovery reads the checkpoint files
//!   and replays the journal.
//! - [`journal_checkpointed`]: the journal with its checkpointer writing the files beside it, every second.
//! - [`sqlite`]: SQLite in WAL mode, one transaction a batch, `synchronous=FULL` or `NORMAL`.
//! - [`files`]: what the bot does today, a file per session and per history log, each synced (for reference).
//! - [`redb_store`]: redb, one write transaction a batch with `Durability::Immediate`.

pub mod files;
pub mod floor;
pub mod journal;
pub mod journal_checkpointed;
pub mod redb_store;
pub mod sqlite;

use crate::workload::Save;
use std::path::Path;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// An open store.
pub trait Store {
    /// Writes the batch and returns once it is durable (or as durable as the store makes it).
    fn commit(&mut self, batch: &[Save]) -> Result<()>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Floor,
    Journal,
    JournalCheckpointed,
    SqliteFull,
    SqliteNormal,
    Redb,
    Files,
}

impl Kind {
    /// Measured by default (the checkpointer's thread would disturb the other stores when they are interleaved).
    pub const DEFAULT: [Kind; 6] =
        [Kind::Floor, Kind::Journal, Kind::SqliteFull, Kind::SqliteNormal, Kind::Redb, Kind::Files];
    pub const ALL: [Kind; 7] = [
        Kind::Floor,
        Kind::Journal,
        Kind::JournalCheckpointed,
        Kind::SqliteFull,
        Kind::SqliteNormal,
        Kind::Redb,
        Kind::Files,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Floor => "floor",
            Kind::Journal => "journal",
            Kind::JournalCheckpointed => "journal+checkpointer",
            Kind::SqliteFull => "sqlite-full",
            Kind::SqliteNormal => "sqlite-normal",
            Kind::Redb => "redb",
            Kind::Files => "files-today",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Opens (creating) the store in `dir`; the append-only files start a new generation past `rotate_bytes`.
    pub fn open(self, dir: &Path, rotate_bytes: u64) -> Result<Box<dyn Store>> {
        Ok(match self {
            Kind::Floor => Box::new(floor::Floor::open(dir, rotate_bytes)?),
            Kind::Journal => Box::new(journal::Journal::open(dir, rotate_bytes)?),
            Kind::JournalCheckpointed => Box::new(journal_checkpointed::JournalCheckpointed::open(dir, rotate_bytes)?),
            Kind::SqliteFull => Box::new(sqlite::Sqlite::open(dir, sqlite::Sync::Full)?),
            Kind::SqliteNormal => Box::new(sqlite::Sqlite::open(dir, sqlite::Sync::Normal)?),
            Kind::Redb => Box::new(redb_store::Redb::open(dir)?),
            Kind::Files => Box::new(files::Files::open(dir)?),
        })
    }

    /// Start-up: opens the store in `dir` and reads (and parses) every session; how many there were. `None` for
    /// the floor, which keeps nothing readable.
    pub fn recover(self, dir: &Path) -> Result<Option<usize>> {
        Ok(Some(match self {
            Kind::Floor => return Ok(None),
            Kind::Journal | Kind::JournalCheckpointed => journal::recover(dir)?.sessions,
            Kind::SqliteFull | Kind::SqliteNormal => sqlite::recover(dir)?,
            Kind::Redb => redb_store::recover(dir)?,
            Kind::Files => files::recover(dir)?,
        }))
    }
}

/// Parses a session as the bot would on start-up (into a JSON tree: the bot's own types cost about the same).
pub fn parse_session(json: &[u8]) -> Result<serde_json::Value> {
    let session: serde_json::Value = serde_json::from_slice(json)?;
    if session.get("channelId").is_none() {
        return Err("a session without channelId".into());
    }
    Ok(session)
}
