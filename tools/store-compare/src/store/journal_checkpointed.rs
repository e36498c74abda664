//! The journal with its checkpointer running beside it, as the bot would run them: each committed batch is handed
//! to a thread that keeps the latest save of each channel and, every [`INTERVAL`], writes those channels' files
//! (temporary file and rename, events appended) and makes them durable with one `syncfs`. The commit timed is
//! still the journal's append and `fdatasync` (and the hand-over): what the checkpoints cost the hot path.

use super::journal::Journal;
use super::{Result, Store};
use crate::checkpoint::Checkpoint;
use crate::workload::Save;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const INTERVAL: Duration = Duration::from_secs(1);

pub struct JournalCheckpointed {
    journal: Journal,
    batches: Option<mpsc::Sender<Vec<Save>>>,
    checkpointer: Option<JoinHandle<std::io::Result<()>>>,
}

impl JournalCheckpointed {
    pub fn open(dir: &Path, rotate_bytes: u64) -> Result<JournalCheckpointed> {
        let journal = Journal::open(dir, rotate_bytes)?;
        let checkpoint = Checkpoint::open(dir)?;
        let (batches, inbox) = mpsc::channel();
        let checkpointer = std::thread::spawn(move || checkpoint_loop(&checkpoint, &inbox));
        Ok(JournalCheckpointed { journal, batches: Some(batches), checkpointer: Some(checkpointer) })
    }
}

impl Store for JournalCheckpointed {
    fn commit(&mut self, batch: &[Save]) -> Result<()> {
        self.journal.commit(batch)?;
        let batches = self.batches.as_ref().ok_or("the checkpointer has stopped")?;
        batches.send(batch.to_vec()).map_err(|_| "the checkpointer has stopped")?;
        Ok(())
    }
}

impl Drop for JournalCheckpointed {
    /// Stops the checkpointer after a last checkpoint.
    fn drop(&mut self) {
        self.batches = None;
        if let Some(thread) = self.checkpointer.take() {
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => eprintln!("the checkpointer failed: {e}"),
                Err(_) => eprintln!("the checkpointer panicked"),
            }
        }
    }
}

fn checkpoint_loop(checkpoint: &Checkpoint, inbox: &mpsc::Receiver<Vec<Save>>) -> std::io::Result<()> {
    let mut dirty: HashMap<u64, Save> = HashMap::new();
    let mut due = Instant::now() + INTERVAL;
    loop {
        let open = match inbox.recv_timeout(due.saturating_duration_since(Instant::now())) {
            Ok(batch) => {
                for save in batch {
                    match dirty.entry(save.channel) {
                        Entry::Occupied(mut older) => {
                            let mut events = std::mem::take(&mut older.get_mut().events);
                            events.extend(save.events.iter().cloned());
                            *older.get_mut() = Save { events, ..save };
                        }
                        Entry::Vacant(slot) => {
                            slot.insert(save);
                        }
                    }
                }
                true
            }
            Err(RecvTimeoutError::Timeout) => true,
            Err(RecvTimeoutError::Disconnected) => false,
        };
        if !open || Instant::now() >= due {
            let saves: Vec<Save> = dirty.drain().map(|(_, save)| save).collect();
            checkpoint.write(&saves)?;
            checkpoint.sync_fs()?;
            // The journal could be cut here; the run rotates it by size instead.
            due = Instant::now() + INTERVAL;
        }
        if !open {
            return Ok(());
        }
    }
}
