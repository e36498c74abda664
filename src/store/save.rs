//! Saving from the calling thread, for tools and tests (the running bot saves through the [`Writer`] thread):
//! one session ([`Store::save`]) or many in one group commit ([`Store::save_many`]), each through the journal with
//! one fdatasync, their checkpoints written before it returns; a journal grown past its bound is replaced on the
//! way, its checkpoints synced here.
//!
//! [`Writer`]: super::Writer

use super::commit::SaveItem;
use super::{Store, StoreError};
use crate::core::session::Session;
use crate::core::session::history::HistoryEvent;

impl Store {
    /// Saves a session after a transition, with its new events: durable (in the journal) when this returns, the
    /// session file and the log written.
    pub fn save(&self, session: &Session, new_events: &[HistoryEvent]) -> Result<(), StoreError> {
        self.save_items(&[SaveItem { session, events: new_events }])
    }

    /// Saves many channels (each at most once) in one group commit; the first error, if any.
    pub fn save_many(&self, saves: &[(Session, Vec<HistoryEvent>)]) -> Result<(), StoreError> {
        let items: Vec<SaveItem<'_>> = saves.iter().map(|(session, events)| SaveItem { session, events }).collect();
        self.save_items(&items)
    }

    fn save_items(&self, items: &[SaveItem<'_>]) -> Result<(), StoreError> {
        let mut outcome = Ok(());
        self.commit(items, |results| outcome = results.into_iter().collect());
        self.write_checkpoints(std::time::Duration::MAX, std::time::Duration::ZERO);
        if let Some(retired) = self.rotate_if_due() {
            if let Err(e) = retired.finish() {
                tracing::error!("could not make the checkpoints durable; their journal is kept: {e}");
            }
        }
        outcome
    }
}
