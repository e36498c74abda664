//! redb, one write transaction a batch with `Durability::Immediate` (its default: the commit is durable when it
//! returns): a `sessions` table channel → JSON bytes and a `history` table (channel, seq) → JSON bytes.

use super::{Result, Store, parse_session};
use crate::workload::Save;
use redb::{Database, Durability, ReadableTable, TableDefinition};
use std::path::Path;

const FILE: &str = "store.redb";
const SESSIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("sessions");
const HISTORY: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("history");

pub struct Redb {
    database: Database,
}

impl Redb {
    pub fn open(dir: &Path) -> Result<Redb> {
        Ok(Redb { database: Database::create(dir.join(FILE))? })
    }
}

impl Store for Redb {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        let mut transaction = self.database.begin_write()?;
        transaction.set_durability(Durability::Immediate);
        {
            let mut sessions = transaction.open_table(SESSIONS)?;
            let mut history = transaction.open_table(HISTORY)?;
            for save in batch {
                sessions.insert(save.channel, save.session.as_bytes())?;
                for (seq, event) in &save.events {
                    history.insert((save.channel, *seq), event.as_bytes())?;
                }
            }
        }
        transaction.commit()?;
        Ok(())
    }
}

/// Opens the database (repairing it if the last process did not close it) and reads every session.
pub fn recover(dir: &Path) -> Result<usize> {
    let database = Database::create(dir.join(FILE))?;
    let transaction = database.begin_read()?;
    let sessions = transaction.open_table(SESSIONS)?;
    let mut count = 0;
    for entry in sessions.iter()? {
        let (_, json) = entry?;
        parse_session(json.value())?;
        count += 1;
    }
    Ok(count)
}
