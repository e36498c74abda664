//! SQLite in WAL mode, one transaction a batch with prepared statements: an UPSERT into
//! `sessions(channel PRIMARY KEY, json TEXT)` and an INSERT into `history(channel, seq, json)` per event.
//!
//! With `synchronous=FULL` a commit fsyncs the WAL before returning: durable at commit. With `NORMAL` in WAL mode
//! the WAL is synced only at checkpoints: a commit survives a crash of the process but not a power cut.

use super::{Result, Store, parse_session};
use crate::workload::Save;
use rusqlite::{Connection, TransactionBehavior, params};
use std::path::Path;

const FILE: &str = "store.sqlite";
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS sessions(channel INTEGER PRIMARY KEY, json TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS history(
        channel INTEGER NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY(channel, seq)
    ) WITHOUT ROWID;";
const UPSERT: &str =
    "INSERT INTO sessions(channel, json) VALUES(?1, ?2) ON CONFLICT(channel) DO UPDATE SET json = excluded.json";
const INSERT_EVENT: &str = "INSERT INTO history(channel, seq, json) VALUES(?1, ?2, ?3)";

#[derive(Clone, Copy, Debug)]
pub enum Sync {
    Full,
    Normal,
}

pub struct Sqlite {
    connection: Connection,
}

impl Sqlite {
    pub fn open(dir: &Path, sync: Sync) -> Result<Sqlite> {
        let connection = connect(dir)?;
        let sync = match sync {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        };
        connection.execute_batch(&format!("PRAGMA synchronous = {sync};{SCHEMA}"))?;
        Ok(Sqlite { connection })
    }
}

/// Opens the database in WAL mode (the mode is kept in the file; asking again costs nothing).
fn connect(dir: &Path) -> Result<Connection> {
    let connection = Connection::open(dir.join(FILE))?;
    let mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if mode != "wal" {
        return Err(format!("SQLite refused WAL mode (it is in {mode})").into());
    }
    Ok(connection)
}

impl Store for Sqlite {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        let transaction = self.connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut upsert = transaction.prepare_cached(UPSERT)?;
            let mut insert = transaction.prepare_cached(INSERT_EVENT)?;
            for save in batch {
                let channel = save.channel as i64;
                upsert.execute(params![channel, save.session])?;
                for (seq, event) in &save.events {
                    insert.execute(params![channel, *seq as i64, event])?;
                }
            }
        }
        transaction.commit()?;
        Ok(())
    }
}

/// Opens the database (replaying its WAL if the last process did not close it) and reads every session.
pub fn recover(dir: &Path) -> Result<usize> {
    let connection = connect(dir)?;
    let mut select = connection.prepare("SELECT json FROM sessions")?;
    let mut rows = select.query([])?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        parse_session(row.get_ref(0)?.as_bytes()?)?;
        count += 1;
    }
    Ok(count)
}
